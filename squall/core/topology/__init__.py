"""The topology: its model, builder, checks and schema, groupings and routing, fused
chains, and the names of its topics."""
