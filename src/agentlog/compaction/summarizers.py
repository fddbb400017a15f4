"""The summarizers a ``Compactor`` can use: ``ExtractiveSummarizer`` and ``OpenAICompatibleSummarizer``.

Both answer a ``SummaryRequest`` with the eight-section checkpoint of spec compaction S3.
"""

from agentlog.compaction.summarizer_extractive import ExtractiveSummarizer
from agentlog.compaction.summarizer_openai import SUMMARY_INSTRUCTION, OpenAICompatibleSummarizer
from agentlog.compaction.summary import SECTIONS
from agentlog.core.openai_wire import to_openai_messages, to_openai_tools

__all__ = [
    "SECTIONS",
    "SUMMARY_INSTRUCTION",
    "ExtractiveSummarizer",
    "OpenAICompatibleSummarizer",
    "to_openai_messages",
    "to_openai_tools",
]
