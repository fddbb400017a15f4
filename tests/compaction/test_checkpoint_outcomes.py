"""What the checkpoint keeps of outcomes and standing rules: every test result, each error once,
and the prohibitions of tasks already closed (issue 31)."""

from __future__ import annotations

from typing import Any

from agentlog.compaction.checkpoint_facts import is_prohibition
from agentlog.compaction.checkpoint_walk import Walk, outcome_history
from agentlog.compaction.summarizer_extractive import ExtractiveSummarizer
from tests.compaction.test_checkpoint import SHOW, section
from tests.compaction.test_summarizers import assistant, call, result, text, user


def runs(*outcomes: str) -> list[Any]:
    messages: list[Any] = []
    for index, outcome in enumerate(outcomes):
        messages += [assistant(call(f"t{index}", "Bash", {"command": "mix test"})),
                     result(f"t{index}", outcome)]
    return messages


def test_every_test_outcome_is_kept_oldest_first_not_only_the_latest() -> None:
    messages = [user("Make the review page work."),
                *runs("43 tests, 0 failures", "5 tests, 5 failures", "5 tests, 5 failures",
                      "5 tests, 4 failures", "14 doctests, 73 tests, 0 failures")]
    out = ExtractiveSummarizer(max_ratio=None).summarize_text(messages)
    assert ("Test runs, oldest first: `43 tests, 0 failures` → `5 tests, 5 failures` → "
            "`5 tests, 4 failures` → `14 doctests, 73 tests, 0 failures`") in section(out, "Critical Context")


def test_the_history_skips_counts_quoted_in_prose_and_needs_two_outcomes() -> None:
    walk = Walk()
    walk.run([assistant(call("d1", "Task", {"prompt": "fix the tests"})),
              result("d1", "Removed the unused parameter from 10 test functions"),
              *runs("3 tests, 1 failure", "3 tests, 0 failures")])
    assert outcome_history(walk.test_runs) == (
        "Test runs, oldest first: `3 tests, 1 failure` → `3 tests, 0 failures`")
    assert outcome_history(walk.test_runs[-1:]) is None


def test_the_history_keeps_the_latest_runs_and_counts_the_earlier_ones() -> None:
    walk = Walk()
    walk.run(runs(*(f"{n} tests, 0 failures" for n in range(1, 21))))
    history = outcome_history(walk.test_runs)
    assert history is not None and history.startswith("Test runs, oldest first: 4 earlier, then `5 tests")
    assert history.endswith("`20 tests, 0 failures`")


def test_an_error_retried_many_times_is_listed_once_with_its_count() -> None:
    failing = "Pre-commit validation failed: dialyzer"
    messages = [user("Commit the work.")]
    for index in range(5):
        messages += [assistant(call(f"c{index}", "Bash", {"command": "git commit -m wip"})),
                     result(f"c{index}", failing, error=True),
                     assistant(text(f"Attempt {index} did not help."))]
    out = section(ExtractiveSummarizer(max_ratio=None).summarize_text(messages), "Errors and Fixes")
    assert out.count(failing) == 1
    assert "(seen 5 times)" in out and "Attempt 4 did not help." in out


def test_negatively_stated_constraints_are_prohibitions() -> None:
    assert is_prohibition("Do not edit `pane_view_live.ex`.")
    assert is_prohibition("Keep current `curl` timeout values unchanged.")
    assert is_prohibition("Never overwrite non-nil timestamps with nil")
    assert not is_prohibition("Add a button labeled `Close review session`.")


CLOSED = """✓ app-y.1 · Wire the hooks   [● P2 · CLOSED]
Owner: someone

DESCRIPTION
Wire the hooks.

Architecture constraints:
- Do not change the existing JSON payload schemas of the hook endpoints: the plugin scripts read every field.
- Add the trace header to every request.
"""


def test_a_closed_tasks_prohibition_outlives_it_under_a_tight_budget() -> None:
    decisions = [assistant(text(f"I kept handler {index} in the controller because the router needs it."))
                 for index in range(10)]
    messages = [user("Work on app-y."), assistant(call("s1", "Bash", {"command": "bd show app-y.1"})),
                result("s1", CLOSED), *decisions]
    out = ExtractiveSummarizer(budget_chars=1_000, max_ratio=None).summarize_text(messages)
    assert "Decision: I kept handler" in out  # a tight budget: decisions compete with the rules
    assert "Do not change the existing JSON payload schemas of the hook endpoints" in out
    assert "Add the trace header to every request." not in out  # a closed task's plain requirement


def test_an_open_tasks_requirement_is_not_repeated_as_a_quoted_constraint() -> None:
    messages = [user("Work on app-x."), assistant(call("s1", "Bash", {"command": "bd show app-x.2"})),
                result("s1", SHOW)]
    critical = section(ExtractiveSummarizer(max_ratio=None).summarize_text(messages), "Critical Context")
    assert critical.count("Do not introduce additional persistence models.") == 1


NO_GOS = """✓ app-z.1 · Render the transcript   [● P2 · CLOSED]
Owner: someone

DESCRIPTION
Render it.

## No-gos
- No new route/page for subagent transcripts in this epic.
- No scope expansion to `PaneViewLive`.
"""


def test_a_finished_tasks_no_gos_stay_in_the_checkpoint() -> None:
    messages = [user("Work on app-z."), assistant(call("s1", "Bash", {"command": "bd show app-z.1"})),
                result("s1", NO_GOS)]
    critical = section(ExtractiveSummarizer(max_ratio=None).summarize_text(messages), "Critical Context")
    assert "app-z.1 (done) required: No new route/page for subagent transcripts in this epic." in critical
    assert "app-z.1 (done) required: No scope expansion to `PaneViewLive`." in critical


def test_a_linters_verdict_is_kept_with_its_command() -> None:
    messages = [user("Lint the renderer."),
                assistant(call("l1", "Bash", {"command": "mix credo lib/renderer.ex"})),
                result("l1", "Checking 1 source file ...\n\n71 mods/funs, found no issues.\n"),
                assistant(call("l2", "Bash", {"command": "ruff check src"})),
                result("l2", "All checks passed!")]
    walk = Walk()
    walk.run(messages)
    assert [(c.outcome, c.failed) for c in walk.checks] == [("71 mods/funs, found no issues.", False),
                                                            ("All checks passed!", False)]
    critical = section(ExtractiveSummarizer(max_ratio=None).summarize_text(messages), "Critical Context")
    assert "Check: `mix credo lib/renderer.ex` → `71 mods/funs, found no issues.`" in critical
