"""Storm's reliability model: the acker's ledger, the spout's offsets, ids, records,
retries, timeouts' clock, and reading a partition in order."""
