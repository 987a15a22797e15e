"""Spout service: reads source partitions, keeps each offset pending until its tree completes.

Built in issue #4 on :class:`squall.offsets.OffsetManager` and :class:`squall.retry.RetrySchedule`.
"""
