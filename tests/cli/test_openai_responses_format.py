"""``agentlog import openai-responses`` and ``export --format openai-responses``: CLI, subprocess, SDK."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest
from click.testing import CliRunner, Result

from agentlog.cli.main import cli
from tests.integrations.server import Provider, serve, sse
from tests.io.importers.helpers import FIXTURES

SMALL = FIXTURES / "openai-responses" / "small.json"
KEY = "AKIAIOSFODNN7EXAMPLE"


def invoke(store: str, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--store", store, *args], catch_exceptions=False)


def imported(store: str, path: Path) -> str:
    """Import ``path`` as openai-responses and return the session id."""
    result = invoke(store, "import", "openai-responses", str(path), "--json")
    assert result.exit_code == 0, result.output
    (row,) = [json.loads(line) for line in result.stdout.splitlines()]
    assert row["outcome"] == "imported"
    return str(row["session"])


@pytest.fixture
def provider() -> Iterator[Provider]:
    yield from serve()


@pytest.mark.parametrize("view", ["--surface", "--log"])
def test_import_then_export_gives_the_body_back(tmp_path: Path, view: str) -> None:
    store = f"sqlite://{tmp_path / 's.db'}"
    session_id = imported(store, SMALL)
    assert invoke(store, "verify", session_id).exit_code == 0
    result = invoke(store, "export", session_id, "--format", "openai-responses", view)
    assert result.exit_code == 0, result.output
    body = json.loads(SMALL.read_bytes())
    assert json.loads(result.stdout) == {key: body[key] for key in ("input", "instructions", "tools")}


def test_redaction_reaches_call_arguments_and_reasoning(tmp_path: Path) -> None:
    items = [{"role": "user", "content": "deploy"},
             {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": f"use {KEY}"}],
              "encrypted_content": "opaque"},
             {"type": "function_call", "call_id": "c1", "name": "sh", "arguments": json.dumps({"env": KEY})},
             {"type": "function_call_output", "call_id": "c1", "output": "ok"}]
    path = tmp_path / "secret.json"
    path.write_text(json.dumps(items))
    store = f"jsonl://{tmp_path / 'store'}"
    session_id = imported(store, path)
    plain = invoke(store, "export", session_id, "--format", "openai-responses")
    assert plain.stdout.count(KEY) == 2
    result = invoke(store, "export", session_id, "--format", "openai-responses", "--redact")
    body = json.loads(result.stdout)
    assert KEY not in result.stdout
    assert "[REDACTED:aws-access-key]" in body["input"][1]["summary"][0]["text"]
    assert "[REDACTED:aws-access-key]" in json.loads(body["input"][2]["arguments"])["env"]
    assert body["input"][1]["encrypted_content"] == "opaque"


def test_a_malformed_file_is_named_without_a_traceback(tmp_path: Path) -> None:
    path = tmp_path / "chat.json"
    path.write_text(json.dumps([{"role": "user", "content": "hi"}, {"role": "tool", "content": "x"}]))
    result = invoke(f"jsonl://{tmp_path / 'store'}", "import", "openai-responses", str(path))
    assert result.exit_code == 1
    assert "item 1 is a message with role 'tool'" in result.output and "Traceback" not in result.output


def test_a_subprocess_import_and_export_is_what_the_sdk_sends(tmp_path: Path, provider: Provider) -> None:
    env = {**os.environ, "AGENTLOG_STORE": f"jsonl://{tmp_path / 'store'}", "COLUMNS": "200"}
    agentlog = [sys.executable, "-m", "agentlog.cli"]
    done = subprocess.run([*agentlog, "import", "openai-responses", str(SMALL), "--json"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    session_id = json.loads(done.stdout)["session"]
    out = tmp_path / "body.json"
    done = subprocess.run([*agentlog, "export", session_id, "--format", "openai-responses", "-o", str(out)],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    body = json.loads(out.read_bytes())
    provider.queue(sse("responses_final_text"))
    client = openai.OpenAI(base_url=provider.base_url, api_key="k", max_retries=0, timeout=10)
    assert list(client.responses.create(model="gpt-5", stream=True, **body))
    sent = provider.requests[0]
    source = json.loads(SMALL.read_bytes())
    assert {key: sent[key] for key in body} == body == {key: source[key] for key in body}
