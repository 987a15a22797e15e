"""Trident State backends on real databases: SQLite (embedded, the default) and PostgreSQL.

Both store a state's values and its tasks' applied records in two tables, written in one
transaction per batch (:mod:`squall.backends.sql`)."""
