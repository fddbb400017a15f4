"""The reviewability checklist on real sessions: the demo, a SIGKILLed recorder, forks, compactions, drift."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest

from agentlog import Compactor, ExtractiveSummarizer, Replace, Session, SessionHeader, open_store
from agentlog.audit import AuditReport, Environment, audit_log, audit_session
from agentlog.cli.demo import run_demo
from tests.audit.sessions import crash_recorder, recorded
from tests.io.exporters.sessions import sample_session


def problems(report: AuditReport) -> dict[str, list[str]]:
    return {check.name: [item.text for item in check.items if item.problem]
            for check in report.checks if check.status == "problem"}


def files_of(root: Path) -> dict[str, str]:
    return {str(path): hashlib.sha256(path.read_bytes()).hexdigest() for path in sorted(root.rglob("*"))
            if path.is_file()}


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str, str]:
    root = tmp_path_factory.mktemp("demo") / "store"
    report = run_demo(f"jsonl://{root}", log=lambda _: None)
    return f"jsonl://{root}", report.session_id, report.child_id


def test_the_demo_is_reviewable_and_its_crash_closed_turn_is_marked(demo: tuple[str, str, str]) -> None:
    url, parent, _ = demo
    report = audit_session(open_store(url, create=False), parent)
    assert report.clean, problems(report)
    statuses = {check.name: check.status for check in report.checks}
    assert statuses == {"order": "ok", "tool-results": "ok", "turns": "ok", "restore-drift": "ok",
                        "fork-lineage": "skipped", "compaction": "skipped", "secrets": "ok"}
    turns = [item.text for item in report.check("turns").items]
    assert "turn 3 ended interrupted" in turns
    assert any("interrupted: outcome unknown" in item.text for item in report.check("tool-results").items)
    kinds = [entry.kind for entry in report.timeline]
    assert kinds[:4] == ["input", "model result", "tool call", "tool result"]
    assert "interrupted" in kinds and kinds[-1] == "turn end"


def test_the_demo_fork_starts_at_a_stable_prefix_of_its_parent(demo: tuple[str, str, str]) -> None:
    url, parent, child = demo
    report = audit_session(open_store(url, create=False), child)
    assert report.clean, problems(report)
    assert report.check("fork-lineage").status == "ok"
    assert report.check("fork-lineage").summary == f"a stable prefix of {parent}"


def test_a_sigkilled_recorder_is_reviewable_before_and_after_the_repair(tmp_path: Path) -> None:
    url = f"jsonl://{tmp_path / 'store'}"
    recorded(url, "crashed").close()
    crash_recorder(url, "crashed")
    before = files_of(tmp_path / "store")
    report = audit_session(open_store(url, create=False), "crashed")
    assert files_of(tmp_path / "store") == before  # the audit never commits the repair
    assert report.clean, problems(report)
    assert any("left open by a crash" in item.text for item in report.check("turns").items)
    pending = [item.text for item in report.check("tool-results").items]
    assert pending == ["call call-3-1 interrupted: outcome unknown (by the repair that loading commits)"]
    open_store(url).load("crashed")  # commits the repair
    after = audit_session(open_store(url, create=False), "crashed")
    assert after.clean and [i.text for i in after.check("tool-results").items] == [
        "call call-3-1 interrupted: outcome unknown"]
    assert "turn 3 ended interrupted" in [item.text for item in after.check("turns").items]


def test_a_fork_whose_parent_is_gone_or_differs_is_a_problem(tmp_path: Path) -> None:
    url = f"jsonl://{tmp_path / 'store'}"
    store = recorded(url, "parent")
    store.fork("parent", None, "child").close()
    store.materialize("child")
    store.delete("parent")
    report = audit_session(open_store(url, create=False), "child")
    assert "parent parent is not in the store" in problems(report)["fork-lineage"][0]
    inspection = store.inspect("child")
    other = Session.create("parent")
    other.append("turn/start", {"turn": 1})
    other.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    mismatch = audit_log(inspection.header, inspection.events, parent=list(other.events))
    assert problems(mismatch)["fork-lineage"] == [
        f"parent has 2 events, fewer than the seed length {inspection.header.seed_length}"]


def test_compaction_keeps_tool_pairs_and_a_split_pair_is_found(tmp_path: Path) -> None:
    url = f"jsonl://{tmp_path / 'store'}"
    store = recorded(url, "long", turns=2)
    with store.open("long") as live:
        assert Compactor(ExtractiveSummarizer()).compact_now(live) is not None
    report = audit_session(open_store(url, create=False), "long")
    assert report.clean, problems(report)
    assert report.check("compaction").status == "ok"
    assert "summary" in [entry.kind for entry in report.timeline]

    session = sample_session(compact=False)
    call, result = (e.seq for e in session.events if e.type in ("assistant/message", "tool/result")
                    and e.data["message"]["id"] in ("a1", "result-call-1"))
    checkpoint = {"id": "bad", "role": "user", "source": {"kind": "plugin", "plugin": "compact"},
                  "content": [{"type": "text", "text": "s"}]}
    session.append("user/message", checkpoint, surface_op=Replace(2, call), source_event_seqs=[2, call])
    split = audit_log(session.header, session.events)
    found = problems(split)["compaction"]
    assert found[0] == (f"the replacement of seqs 2..{call} takes its call of tool call call-1 "
                        "but leaves the other")
    assert found[1] == "the surface holds a result for call-1 without its call"
    assert result > call


def test_secrets_are_named_by_kind_and_place_never_shown() -> None:
    key = "AKIAIOSFODNN7EXAMPLE"
    session = sample_session(text=f" {key} sk-proj-Ab3dEfGh1jKlMnOpQrStUvWxYz0123456789")
    report = audit_log(session.header, session.events)
    secrets = report.check("secrets")
    assert secrets.status == "problem"
    assert secrets.summary.startswith("22 found: 11 aws-access-key, 11 openai-key")
    located = {(item.seq, item.path) for item in secrets.items}
    assert (2, "data.content[0].text") in located and (6, "data.arguments") in located
    assert (4, "data.chunk") in located  # the streamed delta
    text = str(report.to_json())
    assert key not in text and "sk-proj-Ab3dEf" not in text  # not in the findings, not in the timeline


def test_secrets_in_the_header_are_found_by_place() -> None:
    from tests.io.exporters.test_hostile import HEADER_SECRETS, leaky_header

    session = sample_session()
    report = audit_log(leaky_header(session.header.id), session.events)
    found = {item.path: item.text.split(" ", 1)[0] for item in report.check("secrets").items}
    assert found == {
        "header.cwd": "huggingface-token",
        "header.importedFrom.git.repository_url": "github-token",
        "header.importedFrom.info.config.model.model_kwargs.api_key": "env-secret",
        "header.importedFrom.environment": "aws-access-key",
        "header.deployNote": "gitlab-token",
    }
    text = str(report.to_json())
    assert not any(secret in text for secret in HEADER_SECRETS.values())


def test_restore_drift_compares_cwd_git_route_preset_and_tools(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run([*git, "init", "-q"], check=True)
    (repo / "a.txt").write_text("1")
    subprocess.run([*git, "add", "a.txt"], check=True)
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True)
    head = head.stdout.strip()
    url = f"jsonl://{tmp_path / 'store'}"
    store = recorded(url, "git", turns=1, cwd=str(repo), git={"head": head, "dirty": False})
    assert audit_session(store, "git").clean
    (repo / "a.txt").write_text("2")
    assert problems(audit_session(store, "git"))["restore-drift"] == ["work tree was clean, now dirty"]
    subprocess.run([*git, "commit", "-qam", "two"], check=True)
    moved = problems(audit_session(store, "git"))["restore-drift"]
    assert moved[0].startswith(f"git HEAD moved from {head} to ")
    tools = [{"name": "read_file", "description": "Read a text file.",
              "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}},
             {"type": "function", "function": {"name": "grep", "parameters": {}}}]
    drift = problems(audit_session(store, "git", tools=tools, model="openai/gpt-4o", preset="fast"))
    assert drift["restore-drift"][1:] == [
        "model route deepseek/deepseek-chat, now openai/gpt-4o", "agent preset None, now fast",
        "tool grep is new", "tool run was recorded but is gone", "tool write_file was recorded but is gone"]


def test_a_missing_cwd_is_drift_and_a_fsmonitor_hook_never_runs(tmp_path: Path) -> None:
    session = Session.create("gone", header=SessionHeader(id="gone", cwd=str(tmp_path / "deleted")))
    report = audit_log(session.header, session.events, environment=Environment(cwd_exists=False))
    assert problems(report)["restore-drift"] == [f"working directory {tmp_path / 'deleted'} no longer exists"]
    repo = tmp_path / "evil"
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "a.txt").write_text("1")
    subprocess.run([*git, "add", "a.txt"], check=True)
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    marker = tmp_path / "ran"
    subprocess.run([*git, "config", "core.fsmonitor", f"touch {marker}; false"], check=True)
    subprocess.run([*git, "status", "--porcelain"], capture_output=True, check=False)
    assert marker.exists()  # the repository's own config runs it for a plain git status
    marker.unlink()
    url = f"jsonl://{tmp_path / 'store'}"
    store = recorded(url, "evil", turns=1, cwd=str(repo), git={"head": "0" * 40, "dirty": False})
    report = audit_session(store, "evil")
    assert problems(report)["restore-drift"][0].startswith("git HEAD moved from 0000")  # git did run
    assert not marker.exists()


def test_an_imported_claude_code_session_with_a_compaction_is_audited(
    tmp_path: Path, shared_data: Path,
) -> None:
    """The seed's checklist on a real transcript brought in by ``agentlog import claude-code``."""
    from agentlog.io.importers import save_imported
    from tests.io.importers.helpers import import_file

    path = next((shared_data / "transcripts/claude-code/marot__spotter").rglob("4d5611e5-*.jsonl"))
    (imported,) = import_file("claude-code", path)
    url = f"jsonl://{tmp_path / 'store'}"
    with open_store(url) as store:
        assert save_imported(store, imported) == "imported"
    before = files_of(tmp_path / "store")
    report = audit_session(open_store(url, create=False), imported.header.id)
    statuses = {check.name: check.status for check in report.checks}
    assert statuses["compaction"] == "ok"  # Claude's compaction kept every call with its result
    assert statuses["order"] == "ok" and statuses["turns"] == "ok" and statuses["tool-results"] == "ok"
    assert statuses["fork-lineage"] == "skipped"
    assert report.check("compaction").summary == "1 replacements, tool pairs intact"
    compaction = [item.text for item in report.check("compaction").items]
    assert compaction == ["seqs 1..325 replaced, tool pairs intact"]
    assert report.check("turns").summary == "4 turns ended"
    drift = [item.text for item in report.check("restore-drift").items if item.problem]
    assert drift == ["working directory /home/USER/projects/spotter-worktrees/spotter-dov no longer exists"]
    assert not report.clean  # the recorded cwd is gone (and the transcript holds .env-style secrets)
    assert files_of(tmp_path / "store") == before  # auditing never writes


def test_an_output_logged_after_its_call_was_popped_still_answers_the_call() -> None:
    """The Agents SDK adapter logs such an output as a tool-sourced user/message; the call has its result."""
    import asyncio

    from agentlog.integrations.openai_agents import AgentlogSession

    session = AgentlogSession("popped", "memory:")
    call = {"type": "function_call", "call_id": "call_1", "name": "ls", "arguments": "{}"}
    asyncio.run(session.add_items([{"role": "user", "content": "list"}, call]))
    asyncio.run(session.pop_item())
    asyncio.run(session.add_items([{"type": "function_call_output", "call_id": "call_1", "output": "a.py"}]))
    live = session.live.session
    report = audit_log(live.header, live.events)
    session.close()
    assert report.check("tool-results").status == "ok", problems(report)


def test_a_pop_by_the_agents_adapter_is_not_judged_as_a_compaction(tmp_path: Path) -> None:
    """pop_item replaces a call's result (then the call) on the surface: an SDK edit, not a compaction."""
    import asyncio

    from click.testing import CliRunner

    from agentlog.cli.main import cli
    from agentlog.integrations.openai_agents import AgentlogSession

    url = f"sqlite://{tmp_path / 'agents.db'}"
    session = AgentlogSession("popped", url)
    call = {"type": "function_call", "call_id": "call_1", "name": "ls", "arguments": "{}"}
    output = {"type": "function_call_output", "call_id": "call_1", "output": "a.py"}
    asyncio.run(session.add_items([{"role": "user", "content": "list"}, call, output,
                                   {"role": "assistant", "content": "a.py"}]))
    for _ in range(3):  # the answer, the output, then the call: the SDK's undo of the last exchange
        asyncio.run(session.pop_item())
    session.close()
    report = audit_session(open_store(url, create=False), "popped")
    check = report.check("compaction")
    assert check.status == "skipped", problems(report)
    assert check.summary == "no compaction (3 other surface edits)"
    assert report.clean, problems(report)
    cli_json = CliRunner().invoke(cli, ["--store", url, "audit", "popped", "--json"])
    assert cli_json.exit_code == 0, cli_json.output
    statuses = {item["name"]: item["status"] for item in json.loads(cli_json.stdout)["checks"]}
    assert statuses["compaction"] == "skipped"

    session = AgentlogSession("popped", url)  # a real compaction afterwards is judged, and only it
    long = "".join(f"line {n}: a listing the summary will not repeat\n" for n in range(200))
    asyncio.run(session.add_items([{"role": "user", "content": "again"},
                                   {"role": "assistant", "content": long},
                                   {"role": "user", "content": "thanks"},
                                   {"role": "assistant", "content": "ok"}]))
    session.close()
    with open_store(url) as store, store.open("popped") as live:
        done = Compactor(ExtractiveSummarizer()).compact_now(live)
    assert done is not None and done.compacted
    report = audit_session(open_store(url, create=False), "popped")
    check = report.check("compaction")
    assert check.status == "ok" and check.summary == "1 replacements, tool pairs intact", problems(report)
    last = check.items[-1].text
    assert last == "3 surface edits not made by compaction (not judged here)"


def test_a_pruned_tool_result_keeps_its_pair() -> None:
    """The pruner's replace puts the call's shortened result back: no pair is split."""
    from agentlog.compaction.pruner import ToolResultPruner
    from agentlog.compaction.tokens import TokenMeter
    from agentlog.recording.recorder import Recorder
    from tests.compaction.helpers import answer_step, new_session, tool_step

    session = new_session()
    with Recorder(session).turn() as turn:
        tool_step(turn, "call-1", result="x" * 20_000, prompt="go")
        pruned = ToolResultPruner().prune_session(session, TokenMeter()).pruned
        answer_step(turn)
    check = audit_log(session.header, session.events).check("compaction")
    assert check.status == "ok", [item.text for item in check.items]
    seq = pruned[0].original_seq
    assert [item.text for item in check.items] == [f"seqs {seq}..{seq} replaced, tool pairs intact"]
