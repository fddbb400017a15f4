"""Compaction fidelity: fact extraction, matching, scores, and the report on the real Claude Code
compactions."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentlog.compaction.engine import Compactor
from agentlog.compaction.fidelity import constraint_sentences, extract_facts
from agentlog.compaction.fidelity_report import (
    fidelity_table,
    load_claude_code_compaction,
    run,
    spotter_sessions,
)
from agentlog.compaction.fidelity_score import CATEGORIES, compaction_fidelity, match_text
from agentlog.compaction.summarizers import ExtractiveSummarizer
from agentlog.recording.recorder import Recorder
from tests.compaction.helpers import HEADER, new_session
from tests.compaction.test_summarizers import assistant, call, checkpoint, conversation, result, text, user

# -- finding facts -------------------------------------------------------------------------------


def test_user_text_accepts_every_constraint_marker() -> None:
    found = constraint_sentences(
        "Add caching. Keep the old API. Only touch src/. Use tabs instead of spaces. It is sunny.",
        typed_by_user=True)
    assert found == ["Keep the old API.", "Only touch src/.", "Use tabs instead of spaces."]


def test_tool_output_keeps_only_strong_directives_on_prose_lines() -> None:
    spec = "\n".join([
        "## No-gos",
        "- Do not add a second syntax highlighting library; continue with highlight.js.",
        "- Keep `SubagentLive` not-found branch functional.",
        "Results show only 10 lines without an expand control.",     # weak markers only
        "     when defining the variable, you must also pattern match",  # indented explanation
        "warning: you must not shadow variables",                   # a diagnostic
        "```",
        "# must be called before start()",                           # code
        "```",
        "  12→  // never do this",                                    # a line-numbered listing
    ])
    assert constraint_sentences(spec, typed_by_user=False) == [
        "Do not add a second syntax highlighting library; continue with highlight.js.",
        "Keep `SubagentLive` not-found branch functional.",
    ]


def test_facts_cover_requests_paths_commands_errors_outcomes_and_todos() -> None:
    facts = extract_facts(conversation())
    assert facts.requests[0].startswith("Please add retry logic")
    assert facts.constraints == ("You must not change the public API, and never retry POST requests.",)
    assert facts.paths == ("/repo/src/fetch.py", "tests/test_fetch.py")
    assert dict(facts.path_actions)["/repo/src/fetch.py"] == ("Read", "Edit")
    assert facts.commands == ("pytest tests/test_fetch.py -q", "pytest -q")
    assert facts.errors == ("E AssertionError: expected 3 attempts",)
    assert facts.outcomes == ("1 failed, 4 passed", "12 passed in 0.31s")
    assert facts.open_todos == ("Document the backoff in README.md", "Add a test for POST")
    assert facts.pending_request is not None and facts.pending_request.startswith("Please add retry")


def test_constraints_in_tool_errors_and_delegated_reports_are_not_user_constraints() -> None:
    messages = [
        user("Fix the build please, quickly."),
        assistant(call("t1", "Task", {"prompt": "explore"})),
        result("t1", "- Never uses `<pre>` blocks for code."),
        assistant(call("b1", "Bash", {"command": "make"})),
        result("b1", "Ensure your environment has the necessary configuration.", error=True),
        assistant(call("b2", "Bash", {"command": "cat SPEC.md"})),
        result("b2", "- Never break the wire format."),
    ]
    assert extract_facts(messages).constraints == ("Never break the wire format.",)


def test_checklists_and_issue_trackers_give_open_tasks() -> None:
    messages = [
        user("Ship the release and do the remaining items."),
        assistant(text("Plan:\n- [x] tag\n- [ ] publish wheels\n- [ ] announce")),
        assistant(call("b", "Bash", {"command": "bd update rel-1.2 --status in_progress && "
                                                "bd close rel-1.1"})),
    ]
    assert extract_facts(messages).open_todos == ("publish wheels", "announce", "rel-1.2")


def test_a_prior_checkpoint_is_found_and_its_constraints_kept() -> None:
    prior = "## Critical Context\n- \"Never push to main.\""
    facts = extract_facts([checkpoint(prior), user("Carry on with the migration, please.")])
    assert facts.prior_summary == prior
    assert "Never push to main." in facts.constraints[0]


# -- matching ------------------------------------------------------------------------------------


def test_matches_are_exact_normalized_partial_or_missing() -> None:
    summary = "- Constraint: **never retry POST** requests\n- the public API must not change\n- unrelated"
    assert match_text("never retry POST", summary) == "exact"
    assert match_text("Never   retry `POST` requests.", summary) == "normalized"
    assert match_text("You must not change the public API.", summary) == "partial"
    assert match_text("Do not delete the cache directory", summary) is None


def test_paths_match_exactly_project_relative_or_by_suffix() -> None:
    messages = [user("Fix these files now please."),
                assistant(call("r1", "Read", {"file_path": "/home/u/proj/lib/a/one.ex"}),
                          call("r2", "Read", {"file_path": "/home/u/proj/lib/b/two.ex"}),
                          call("r3", "Read", {"file_path": "/home/u/proj/test/three_test.exs"}))]
    report = compaction_fidelity(messages, "Edited /home/u/proj/lib/a/one.ex and `lib/b/two.ex`; "
                                           "also proj/test/three_test.exs", project_root="/home/u/proj")
    matches = {i.text: i.match for i in report.items if i.category == "paths"}
    assert matches == {"/home/u/proj/lib/a/one.ex": "exact", "/home/u/proj/lib/b/two.ex": "normalized",
                       "/home/u/proj/test/three_test.exs": "partial"}


def test_the_project_root_is_guessed_from_touched_paths() -> None:
    paths = ["/w/app/lib/x.ex", "/w/app/lib/y.ex", "/w/app/lib/z.ex", "/w/app/test/x_test.exs",
             "/tmp/out.log"]
    messages = [assistant(*[call(f"c{i}", "Read", {"file_path": p}) for i, p in enumerate(paths)])]
    assert extract_facts(messages).project_root == "/w/app"


# -- scores --------------------------------------------------------------------------------------


def test_scores_count_each_category_and_list_what_is_missing() -> None:
    summary = ('"Please add retry logic to the fetcher. You must not change the public API, and never retry '
               'POST requests." Files: /repo/src/fetch.py. Todo: Document the backoff in README.md. '
               "Result: 12 passed in 0.31s")
    report = compaction_fidelity(conversation(), summary)
    constraints = report.category("constraints")
    assert (constraints.total, constraints.exact, constraints.strict_score) == (1, 1, 1.0)
    tasks = report.category("tasks")
    assert (tasks.total, tasks.exact) == (3, 2)
    assert report.missing("tasks") == ["Add a test for POST"]
    assert report.category("paths").score == 0.5
    assert report.missing("tool_results") == ["E AssertionError: expected 3 attempts", "1 failed, 4 passed"]
    assert [s.category for s in report.categories] == list(CATEGORIES)
    assert report.score == pytest.approx((1.0 + 2 / 3 + 0.5 + 1 / 3) / 4)


def test_a_category_without_facts_has_no_score_and_is_left_out_of_the_overall() -> None:
    report = compaction_fidelity([user("Say hello to everyone in the room.")], "hello")
    assert report.category("paths").score is None
    assert report.score == pytest.approx(report.category("tasks").score or 0.0)


def test_the_extractive_summary_keeps_every_fact_it_has_room_for() -> None:
    summary = ExtractiveSummarizer(max_ratio=None).summarize_text(conversation())
    report = compaction_fidelity(conversation(), summary)
    assert report.strict_score == 1.0


def test_fidelity_of_a_committed_compaction_from_session_and_result() -> None:
    session = new_session("fid")
    recorder = Recorder(session)
    with recorder.turn() as turn:
        with turn.step() as step:
            step.user_message("Rename the config loader. Never change the file format.")
            step.request_header(HEADER)
            step.assistant(content=[text("Reading it."), call("k1", "read", {"path": "/srv/app/config.py"})])
            step.tool_call("k1", "read", '{"path": "/srv/app/config.py"}')
            step.tool_result("k1", "FileNotFoundError: /srv/app/config.py " + "x" * 3000)
        with turn.step() as step:
            step.request_header(HEADER)
            step.assistant(content=[text("done")])
    with recorder.turn() as turn, turn.step() as step:
        step.user_message("Thanks, now summarize what changed.")
        step.request_header(HEADER)
        step.assistant(content=[text("ok")])
    outcome = Compactor(ExtractiveSummarizer(budget_chars=2_000)).compact_now(session)
    assert outcome is not None
    report = compaction_fidelity(session, outcome)
    assert report.category("constraints").exact == 1
    assert report.category("paths").strict_score == 1.0
    assert report.missing() == []
    summary_event = session.events[outcome.summary_seq]
    assert compaction_fidelity(session, summary_event) == report
    assert compaction_fidelity(session, summary_event.data) == report


# -- the real compactions ------------------------------------------------------------------------


def test_claude_code_sessions_split_at_their_compact_boundary(shared_data: Path) -> None:
    paths = spotter_sessions(shared_data / "transcripts")
    assert len(paths) == 5
    compaction = load_claude_code_compaction(paths[0])
    assert compaction.summary.startswith("This session is being continued from a previous conversation")
    assert (compaction.trigger, compaction.pre_tokens) == ("auto", 167_094)
    assert compaction.cwd == "/home/USER/projects/spotter-worktrees/spotter-gqc"
    requests = extract_facts(compaction.messages).requests
    assert requests == ("Implement spotter-gqc", "check again",
                        "new beads for the epic were added. tackle them")


def test_the_fidelity_report_runs_on_the_real_compactions(shared_data: Path) -> None:
    results = run(shared_data / "transcripts")
    assert len(results) == 5
    for session in results:
        assert session.extractive_chars <= session.claude_chars
        for category in CATEGORIES:
            claude = session.claude.category(category)
            extractive = session.extractive.category(category)
            assert claude.total == extractive.total > 0
        extractive_constraints = session.extractive.category("constraints").strict_score
        claude_constraints = session.claude.category("constraints").strict_score
        assert extractive_constraints is not None and claude_constraints is not None
        assert extractive_constraints > claude_constraints  # finished subtasks' constraints are demoted
    table = fidelity_table(results)
    assert table.count("| Claude |") == 5 and "Cross-check" in table
