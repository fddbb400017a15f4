"""Sessions with planted secrets for the scrub tests: in messages, request headers, tool calls and
results, stream chunks split across the secret, a compaction summary and the header's metadata."""

from __future__ import annotations

from agentlog import Recorder, SessionHeader
from agentlog.compaction.engine import Compactor
from agentlog.compaction.summarizers import ExtractiveSummarizer
from agentlog.store.base import Store

SECRET = "sk-proj-Zq8Wm3Xv9Tn2Lp7Rk4Yb6Hc1Jd5Fg0A"
"""An OpenAI-shaped key: what ``--secret-from-audit`` finds and ``--text-file`` names."""
OTHER = "hunter2-corp-vault-pass-77"
"""A password no detector knows: only ``--pattern`` or ``--text-file`` finds it."""


def record(store: Store, session_id: str, *, turns: int = 3, compact: bool = True,
           secret: str = SECRET) -> None:
    """Record a session holding ``secret`` (and ``OTHER``) everywhere a secret can hide."""
    header = SessionHeader(id=session_id, cwd="/work/project",
                           extra={"importedFrom": {"note": f"token {secret}", "by": "tool"}})
    with store.start(header) as live:
        recorder = Recorder(live)
        for turn_no in range(turns):
            with recorder.turn() as turn, turn.step() as step:
                step.user_message(f"turn {turn_no}: use OPENAI_API_KEY={secret} and {OTHER}")
                step.request_header({"config": {"provider": "openai", "model": "gpt-4o",
                                                "headers": {"Authorization": f"Bearer {secret}"}}})
                half = len(secret) // 2
                for delta in ("I will call with ", secret[:5], secret[5:half], secret[half:],
                              f" and {OTHER[:4]}", f"{OTHER[4:]} now."):
                    step.text_delta(delta)
                args = f'{{"cmd": "curl -H key:{secret}"}}'
                step.tool_call_delta("call-1", "run", args[:20])
                step.tool_call_delta("call-1", "run", args[20:])
                step.assistant(usage={"inputTokens": 10, "outputTokens": 5})
                step.tool_call("call-1", "run", args)
                step.tool_result("call-1", f"ok, used {secret} ({OTHER}) " + "output line\n" * 120)
        if compact:
            Compactor(ExtractiveSummarizer()).compact_now(live)
