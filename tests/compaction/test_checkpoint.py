"""The extractive checkpoint's parts: commits, tracker state, change notes, error/fix pairs, budgets,
and the whole summary on a real Claude Code session."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentlog.compaction.checkpoint_draft import KEEP, Draft
from agentlog.compaction.checkpoint_facts import Tracker, change_notes, commits, issue_bodies, spec_lines
from agentlog.compaction.checkpoint_walk import Walk
from agentlog.compaction.fidelity_report import (
    ClaudeCompaction,
    load_claude_code_compaction,
    spotter_sessions,
)
from agentlog.compaction.summarizer_extractive import ExtractiveSummarizer
from agentlog.compaction.summary import SECTIONS
from agentlog.core.jsonvalue import freeze
from tests.compaction.test_summarizers import assistant, call, result, text, user

SHOW = """○ app-x.2 · Add the review page   [● P2 · OPEN]
Owner: someone · Type: task

DESCRIPTION
Add a page.

Architecture constraints:
- Do not introduce additional persistence models.
- Keep the session flow intact.

Edge cases:
- Invalid id renders a not-found state.

PARENT
  ↑ ◐ app-x: (EPIC) Review workflow ● P2
BLOCKS
  ← ○ app-x.3: Close the review session ● P2
===
✓ app-x.1 · Extend the schema   [● P2 · CLOSED]
Owner: someone
"""


def section(text: str, name: str) -> str:
    start = text.index(f"## {name}\n")
    following = [text.index(f"## {n}\n") for n in SECTIONS if text.index(f"## {n}\n") > start]
    return text[start:min(following, default=len(text))]


def test_commits_are_read_from_git_commit_output() -> None:
    text = "[main 1a2b3c4] feat: add the page (x.2)\n 2 files changed\n[fix/y (root-commit) 9f8e7d6c] init"
    assert [(c.branch, c.sha, c.message) for c in commits(text)] == [
        ("main", "1a2b3c4", "feat: add the page (x.2)"), ("fix/y", "9f8e7d6c", "init")]
    assert commits("see [note 12] here") == []


def test_the_tracker_follows_listings_and_commands_of_the_worked_family_only() -> None:
    tracker = Tracker()
    tracker.command("bd ready; bd show app-x.2")
    tracker.output("1. [● P2] [epic] other-y: Unrelated epic\n2. [● P2] [task] app-x.2: Add the review page")
    tracker.output(SHOW)
    tracker.command('bd update app-x.2 --status in_progress && bd close app-x.1 --reason="Done; tests pass"')
    states = {i.id: (i.state, i.title) for i in tracker.in_scope()}
    assert states == {
        "app-x.2": ("in_progress", "Add the review page"),
        "app-x": ("in_progress", "(EPIC) Review workflow"),
        "app-x.3": ("open", "Close the review session"),
        "app-x.1": ("closed", "Extend the schema"),
    }
    assert "other-y" in tracker.issues and "other-y" not in states
    assert tracker.issues["app-x.1"].reason == "Done; tests pass"


def test_a_stale_listing_does_not_reopen_a_closed_issue() -> None:
    tracker = Tracker()
    tracker.command("bd close app-x.1")
    tracker.output("○ app-x.1 [● P2] [task] - Extend the schema")
    assert tracker.issues["app-x.1"].state == "closed"


def test_issue_bodies_split_chained_show_output_and_keep_requirement_bullets() -> None:
    bodies = dict(issue_bodies(SHOW))
    assert set(bodies) == {"app-x.2", "app-x.1"}
    assert spec_lines(bodies["app-x.2"]) == [
        "Do not introduce additional persistence models.", "Keep the session flow intact.",
        "Invalid id renders a not-found state."]


def test_change_notes_name_what_an_edit_introduced() -> None:
    elixir = {"new_string": 'defmodule MyAppWeb.ReviewLive do\n  def mount(_, _, s), do: s\n'
                            '  def handle_event("close_review", _, s), do: s\n  defp load(x), do: x\nend\n'
                            'live("/projects/:id/review", ReviewLive)'}
    assert change_notes(elixir) == ["MyAppWeb.ReviewLive", "mount", "event close_review", "load",
                                    "route /projects/:id/review"]
    python = {"content": "class Store:\n    def append(self):\n        pass\nasync def main():\n    pass\n"}
    assert change_notes(python) == ["Store", "append", "main"]
    assert change_notes({"old_string": "def gone(): pass"}) == []


def test_an_error_is_paired_with_the_remark_edit_and_passing_run_that_fixed_it() -> None:
    walk = Walk()
    walk.run([
        assistant(call("t1", "Bash", {"command": "pytest -q"})),
        result("t1", "E   NameError: name 'x' is not defined\n1 failed, 3 passed", error=True),
        assistant(text("The helper is not imported yet, so I'll import it."),
                  call("e1", "Edit", {"file_path": "/p/src/mod.py", "new_string": "def helper(): ..."})),
        result("e1", "ok"),
        assistant(call("t2", "Bash", {"command": "pytest -q"})),
        result("t2", "4 passed in 0.1s"),
    ])
    (fix,) = [f for f in walk.fixes if "NameError" in f.error]
    assert fix.describe("/p") == (
        "`E NameError: name 'x' is not defined` (from `pytest -q`) → fix: The helper is not imported yet, so "
        "I'll import it.; edited `src/mod.py`; then `pytest -q` → `4 passed in 0.1s`")
    assert [r.describe() for r in walk.test_runs] == ["`pytest -q` → `1 failed, 3 passed`",
                                                       "`pytest -q` → `4 passed in 0.1s`"]


def test_a_successful_retry_of_the_same_command_fixes_its_error() -> None:
    walk = Walk()
    walk.run([
        assistant(call("p1", "Bash", {"command": "git push"})),
        result("p1", "fatal: The current branch b has no upstream branch.", error=True),
        assistant(call("p2", "Bash", {"command": "git push --set-upstream origin b"})),
        result("p2", "branch 'b' set up to track 'origin/b'."),
    ])
    assert walk.fixes[0].passed == "`git push --set-upstream origin b` succeeded"


def test_a_voluminous_section_is_trimmed_before_it_squeezes_out_the_others() -> None:
    draft = Draft()
    for index in range(400):
        draft.add(2, 60, f"`src/module_{index:03}.py` (Read)")
    draft.add(4, 90, "[open] app-x.3: Close the review session")
    draft.add(7, 92, "Commit `1a2b3c4` on main: feat: add the page")
    draft.add(0, KEEP, 'User: "Do the review workflow"')
    text = draft.fit(2_000)
    assert len(text) <= 2_000
    assert "[open] app-x.3" in text and "1a2b3c4" in text and "Do the review workflow" in text
    assert "src/module_399.py" in text and "src/module_000.py" not in text  # the oldest go first


def test_the_tracker_and_commits_reach_the_checkpoint() -> None:
    messages = [
        user("Work on app-x and its subtasks."),
        assistant(call("s1", "Bash", {"command": "bd show app-x.2; echo ===; bd show app-x.1"})),
        result("s1", SHOW),
        assistant(call("u1", "Bash", {"command": "bd update app-x.2 --status in_progress"})),
        result("u1", "✓ Updated issue: app-x.2"),
        assistant(call("c1", "Bash", {"command": "git commit -m 'feat: page'"})),
        result("c1", "[app-x 5e6f7a8] feat: page (app-x.2)\n 1 file changed"),
    ]
    out = ExtractiveSummarizer(max_ratio=None).summarize_text(messages)
    pending = section(out, "Pending Jobs")
    assert "[in progress] app-x.2: Add the review page" in pending
    assert "[open] app-x.3: Close the review session" in pending
    assert "[done] app-x.1: Extend the schema" in pending
    critical = section(out, "Critical Context")
    assert "Commit `5e6f7a8` on app-x: feat: page (app-x.2)" in critical
    assert "app-x.2 requires: Do not introduce additional persistence models." in critical
    assert "Finish app-x.2: Add the review page" in section(out, "Next Step")


# -- a real session -----------------------------------------------------------------------------------


@pytest.fixture
def spotter(shared_data: Path) -> ClaudeCompaction:
    (path,) = [p for p in spotter_sessions(shared_data / "transcripts") if p.name.startswith("258c7280")]
    return load_claude_code_compaction(path)


def test_the_checkpoint_of_a_real_session_has_what_a_successor_needs(spotter: ClaudeCompaction) -> None:
    budget = len(spotter.summary)
    out = ExtractiveSummarizer(budget_chars=budget, max_ratio=None).summarize_text(spotter.messages)
    assert len(out) <= budget
    assert [line[3:] for line in out.splitlines() if line.startswith("## ")] == list(SECTIONS)
    primary = section(out, "Primary Request and Intent")
    assert 'User: "new beads for the epic were added. tackle them"' in primary
    files = section(out, "Files and Code")
    assert ("`lib/spotter_web/live/project_review_live.ex` (Write, Read, Edit): "
            "adds `SpotterWeb.ProjectReviewLive`") in files
    assert "`route /projects/:project_id/review`" in files
    errors = section(out, "Errors and Fixes")
    assert "`** (RuntimeError) Phoenix LiveView requires lazy_html as a test dependency.`" in errors
    assert "→ `5 tests, 0 failures`" in errors
    pending = section(out, "Pending Jobs")
    assert "[in progress] spotter-gqc.6: Close project review session by closing all open" in pending
    assert "[open] spotter-gqc.7: Launch project review conversation" in pending
    assert "[done] spotter-gqc.5" in pending
    assert "spotter-u4u" not in out  # another epic the tracker listed, never worked on
    critical = section(out, "Critical Context")
    for sha in ("99b497c", "ceff8c3", "bb53fb4"):
        assert f"Commit `{sha}` on spotter-gqc" in critical
    assert "Latest test run: `mix test 2>&1 | tail -5` → `14 doctests, 73 tests, 0 failures`" in critical
    assert "spotter-gqc.6 requires: No extra state values, review entities, or reopen workflow." in critical
    assert "Finish spotter-gqc.6" in section(out, "Next Step")


def test_the_real_checkpoint_is_deterministic_and_respects_every_budget(spotter: ClaudeCompaction) -> None:
    messages = spotter.messages
    first = ExtractiveSummarizer(budget_chars=6_000, max_ratio=None).summarize_text(messages)
    assert first == ExtractiveSummarizer(budget_chars=6_000, max_ratio=None).summarize_text(messages)
    for budget in (400, 1_000, 3_000, 6_000, 30_000):
        out = ExtractiveSummarizer(budget_chars=budget, max_ratio=None).summarize_text(messages)
        assert len(out) <= budget
        assert out.startswith("## Primary Request and Intent")
    small = ExtractiveSummarizer(budget_chars=3_000, max_ratio=None).summarize_text(messages)
    assert "spotter-gqc.6" in small and "spotter-gqc.7" in small  # open work survives a small budget


def test_the_agents_own_task_list_and_the_users_slash_command_reach_the_checkpoint() -> None:
    notice = {"kind": "plugin", "plugin": "claude-code", "form": "notice"}
    messages = [
        freeze({"id": "n1", "role": "user", "source": notice, "content": [text(
            "<command-message>erk:plan-implement</command-message>\n<command-name>/erk:plan-implement"
            "</command-name>\n<command-args>8107</command-args>")]}),
        freeze({"id": "n2", "role": "user", "source": notice, "content": [text(
            "# /erk:plan-implement\n\n**Important:** `.impl/plan.md` is immutable - NEVER edit during "
            "implementation")]}),
        freeze({"id": "n3", "role": "user", "source": notice, "content": [text(
            "<command-name>/clear</command-name>")]}),
        assistant(call("k1", "TaskCreate", {"subject": "Add the gateway method", "description": "..."}),
                  call("k2", "TaskCreate", {"subject": "Run the checks", "description": "..."})),
        result("k1", "Task #1 created successfully: Add the gateway method"),
        result("k2", "Task #2 created successfully: Run the checks"),
        assistant(call("u1", "TaskUpdate", {"taskId": "1", "status": "completed"}),
                  call("u2", "TaskUpdate", {"taskId": "2", "status": "in_progress"})),
        result("u1", "Updated task #1 status"),
        result("u2", "Updated task #2 status"),
        assistant(call("d1", "Task", {"description": "Run ruff", "prompt": "run ruff"})),
        result("d1", "ruff check passed: All files are clean\nagentId: a1"),
    ]
    out = ExtractiveSummarizer(max_ratio=None).summarize_text(messages)
    assert "User ran: `/erk:plan-implement 8107`" in section(out, "Primary Request and Intent")
    assert "/clear" not in out
    pending = section(out, "Pending Jobs")
    assert "[in progress] task #2: Run the checks" in pending
    assert "[done] task #1: Add the gateway method" in pending
    assert "Finish task #2: Run the checks" in section(out, "Next Step")
    critical = section(out, "Critical Context")
    assert "Command instructions:" in critical and "NEVER edit during implementation" in critical
    assert "Delegated agent reported: Run ruff: ruff check passed: All files are clean" in critical


TOOL_NAMES = st.sampled_from(["Bash", "Edit", "Write", "Read", "TaskCreate", "TaskUpdate", "Task",
                              "TodoWrite"])
ANY_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=300) | st.sampled_from([
    "[main 1a2b3c4] feat: x", "○ a-b.1 · Title   [● P2 · OPEN]", "✓ Closed a-b.1: done", "Task #1 created",
    "\x1b]0;pwned\x07\x1b[2J", "3 passed, 1 failed", "** (RuntimeError) boom", "1. [● P2] [task] a-b.2: T"])
ARGS = st.dictionaries(st.sampled_from(["command", "file_path", "new_string", "content", "subject", "taskId",
                                        "status", "description", "edits"]),
                       ANY_TEXT | st.integers() | st.lists(ANY_TEXT, max_size=3), max_size=4)


@given(steps=st.lists(st.tuples(TOOL_NAMES, ARGS, ANY_TEXT, st.booleans()), max_size=12),
       budget=st.integers(400, 5_000))
@settings(max_examples=80, deadline=None)
def test_hostile_tool_traffic_never_breaks_the_checkpoint(
        steps: list[tuple[str, dict[str, object], str, bool]], budget: int) -> None:
    messages = [user("Do the thing; never touch prod.")]
    for index, (name, args, output, error) in enumerate(steps):
        messages.append(assistant(call(f"c{index}", name, dict(args))))
        messages.append(result(f"c{index}", output, error=error))
    summarizer = ExtractiveSummarizer(budget_chars=budget, max_ratio=None)
    out = summarizer.summarize_text(messages)
    assert len(out) <= budget and out == summarizer.summarize_text(messages)
    assert out.startswith("## Primary Request and Intent")


def test_a_tool_call_a_crash_interrupted_is_listed_under_errors() -> None:
    from agentlog import Recorder, SessionHeader, open_store
    from agentlog.core.messages import transcript
    from agentlog.core.repair import interrupted_turn_closers

    with open_store("memory:") as store:
        live = store.start(SessionHeader(id="crashed"))
        turn = Recorder(live).turn().__enter__()
        step = turn.step().__enter__()
        step.user_message("Deploy it.")
        step.request_header({"config": {"provider": "p", "model": "m"}})
        step.tool_call_delta("c1", "Bash", '{"command": "make deploy"}')
        step.assistant()
        step.tool_call("c1", "Bash", '{"command": "make deploy"}')  # started; the process died in it
        events = list(live.session.events)
    messages = transcript([*events, *interrupted_turn_closers(events)])
    errors = section(ExtractiveSummarizer(max_ratio=None).summarize_text(messages), "Errors and Fixes")
    assert "make deploy" in errors and "interrupted" in errors and "outcome unknown" in errors
