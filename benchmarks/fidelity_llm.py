"""The model summarizer as one more fidelity candidate, against any OpenAI-compatible endpoint.

Off unless ``AGENTLOG_FIDELITY_LLM_URL`` names an endpoint (``https://host/v1``);
``AGENTLOG_FIDELITY_LLM_MODEL`` names the model it serves and ``AGENTLOG_FIDELITY_LLM_KEY_ENV``
the variable holding its key (default ``OPENAI_API_KEY``; the key itself is never read here).
``OpenAICompatibleSummarizer`` is called once per session, asked for at most Claude's size in
tokens; the equal-characters and equal-tokens rows cut that one answer, so the token fit's search
costs no further calls and the candidate is scored on the same probes and budgets as the others.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from typing import Final

from agentlog.compaction.summarizer_openai import OpenAICompatibleSummarizer
from agentlog.compaction.summary import SummaryRequest
from agentlog.core.messages import Message
from benchmarks.fidelity import Candidate

__all__ = ["CHARS_PER_TOKEN", "KEY_ENV", "MODEL_ENV", "URL_ENV", "llm_candidate"]

URL_ENV: Final = "AGENTLOG_FIDELITY_LLM_URL"
MODEL_ENV: Final = "AGENTLOG_FIDELITY_LLM_MODEL"
KEY_ENV: Final = "AGENTLOG_FIDELITY_LLM_KEY_ENV"
CHARS_PER_TOKEN: Final = 3.88
"""Claude's summaries' characters per token: the first budget asked for, in tokens, is chars / this."""
_MIN_TOKENS = 256


class _CachedSummaries:
    """One model answer per history, asked at the first (largest: Claude's) budget, then cut."""

    def __init__(self, summarizer: OpenAICompatibleSummarizer) -> None:
        self.summarizer = summarizer
        self.answers: dict[int, str] = {}
        self.calls = 0

    def __call__(self, messages: Sequence[Message], budget: int) -> str:
        key = id(messages)
        if key not in self.answers:
            tokens = max(_MIN_TOKENS, int(budget / CHARS_PER_TOKEN))
            request = SummaryRequest(session_id=f"fidelity-{len(self.answers)}", messages=tuple(messages),
                                     max_tokens=tokens)
            result = asyncio.run(self.summarizer.summarize(request))
            self.calls += 1
            self.answers[key] = "\n".join(str(block.get("text", "")) for block in result.summary)
        return self.answers[key][:max(0, budget)]


def llm_candidate(environ: Mapping[str, str] | None = None) -> Candidate | None:
    """The model summarizer as a candidate when ``AGENTLOG_FIDELITY_LLM_URL`` is set, else None;
    a URL without ``AGENTLOG_FIDELITY_LLM_MODEL`` is a ValueError naming the variable."""
    env = os.environ if environ is None else environ
    url = env.get(URL_ENV, "").strip()
    if not url:
        return None
    model = env.get(MODEL_ENV, "").strip()
    if not model:
        raise ValueError(f"{URL_ENV} is set ({url}) but {MODEL_ENV} is not: name the model it serves")
    key_env = env.get(KEY_ENV, "").strip() or "OPENAI_API_KEY"
    summarizer = OpenAICompatibleSummarizer(url, model, api_key_env=key_env)
    return Candidate(f"LLM summarizer ({model})", _CachedSummaries(summarizer))
