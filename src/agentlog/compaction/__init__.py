"""Compaction: a locked transaction that replaces an old surface range with a summary.

Nothing is deleted from the log: ``compaction/start`` → ``compaction/summary`` → a checkpoint
``user/message`` that replaces the span → ``compaction/end``.
"""
