"""Spout service: reads source partitions, keeps each offset pending until its tree completes.

Built on :class:`squall.core.reliability.offsets.OffsetManager` and
:class:`squall.core.reliability.retry.RetrySchedule`.
"""
