"""Wire formats: tuple batches on the edge topics, the internal topics' records, source
messages' schemes, Arrow columns."""
