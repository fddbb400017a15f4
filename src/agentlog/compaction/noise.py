"""Lines the environment prints into every tool result, and harness preambles around user words.

A shell whose startup fails (``brew.sh: line 60: cannot create temp file``) or a harness that
appends the same reminder to every read puts one line into the results of many unrelated
commands. It is not the error of any of them; left in, it is quoted as each command's error and
as a constraint, and crowds out what the commands did report. A Codex user message can also carry
the IDE's open tabs before the words the user typed (``## My request for Codex:``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from agentlog.compaction.reading import (
    command_text,
    is_tool_result,
    message_texts,
    tool_calls,
    tool_result_call_id,
)

__all__ = ["MIN_COMMANDS", "Noise", "environment_fields", "typed_request"]

MIN_COMMANDS = 3
"""A line is noise when at least this many different programs (``sed``, ``rg``, ``ls``) print it
among the first lines of their output ..."""
_MIN_SHARE = 0.2
"""... and at least this share of all shell results print it."""
_MIN_CHARS = 20
_HEAD_LINES = 3
"""Startup noise comes before a command's own output: only a result's first lines are looked at."""
_WS = re.compile(r"\s+")
_IDE_REQUEST = re.compile(r"^#+\s*My request for \w+:\s*$", re.MULTILINE | re.IGNORECASE)
_ENV_FIELD = re.compile(r"<(\w+)>([^<>\n]{1,200})</\1>")


def _lines(text: str) -> list[str]:
    lines = (_WS.sub(" ", raw).strip() for raw in text.splitlines())
    return [line for line in lines if len(line) >= _MIN_CHARS]


class Noise:
    """The repeated environment lines of one shadowed range, found in one pass over its results."""

    def __init__(self, messages: Iterable[Any]) -> None:
        commands: dict[str, str] = {}
        seen: dict[str, set[str]] = {}
        printed: dict[str, int] = {}
        results = 0
        for message in messages:
            if not isinstance(message, dict):
                continue
            if message.get("role") == "assistant":
                for call in tool_calls(message):
                    command = command_text(call.args)
                    if command is not None:
                        commands[call.id] = command
                continue
            command = commands.get(tool_result_call_id(message) or "") if is_tool_result(message) else None
            if command is None:
                continue  # only shell output: a file tool's results are the file's own lines
            results += 1
            program = next((w for w in command.split() if "=" not in w), command)
            for line in set(_lines("\n".join(message_texts(message)))[:_HEAD_LINES]):
                seen.setdefault(line, set()).add(program)
                printed[line] = printed.get(line, 0) + 1
        self.counts: dict[str, int] = {
            line: printed[line] for line, by in seen.items()
            if len(by) >= MIN_COMMANDS and printed[line] >= _MIN_SHARE * results}
        """Each noise line, with how many results printed it."""

    def __bool__(self) -> bool:
        return bool(self.counts)

    def strip(self, text: str) -> str:
        """``text`` without its noise lines anywhere; a line that ends with one keeps what precedes it
        (``... stderr: <noise>`` -> ``... stderr:``)."""
        if not self.counts:
            return text
        kept: list[str] = []
        for raw in text.splitlines():
            line = _WS.sub(" ", raw).strip()
            if line in self.counts:
                continue
            for noise in self.counts:
                if line.endswith(noise):
                    raw = line[: -len(noise)].rstrip()
                    break
            kept.append(raw)
        return "\n".join(kept)


def typed_request(text: str) -> str:
    """What the user typed, without an IDE preamble (open tabs) before ``## My request for X:``."""
    markers = list(_IDE_REQUEST.finditer(text))
    typed = text[markers[-1].end():].strip() if markers else ""
    return typed or text


def environment_fields(text: str) -> dict[str, str]:
    """The fields of a harness's ``<environment_context>`` block (cwd, sandbox_mode, ...)."""
    return {name: value.strip() for name, value in _ENV_FIELD.findall(text) if value.strip()}
