"""Spout service: reads source partitions, keeps each offset pending until its tree completes.

Built in issue #4 on :class:`squall.core.offsets.OffsetManager` and
:class:`squall.core.retry.RetrySchedule`.
"""
