"""The control plane, pure: records, lifecycle, assignment and the leader's rounds,
teardown, kept state, restarts, statistics' windows, Kafka client properties."""
