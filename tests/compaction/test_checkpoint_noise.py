"""Environment noise, harness preambles and the user's answers given through tools (issue 31)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from agentlog.compaction.checkpoint_facts import file_purpose, removed_notes
from agentlog.compaction.fidelity import extract_facts
from agentlog.compaction.noise import Noise, environment_fields, typed_request
from tests.compaction.test_checkpoint import section
from tests.compaction.test_checkpoint_shell import shell, summary
from tests.compaction.test_summarizers import assistant, call, result, text, user

BREW = ("/opt/homebrew/Library/Homebrew/brew.sh: line 60: cannot create temp file for here document: "
        "Operation not permitted")
SANDBOX = ("failed in sandbox MacosSeatbelt with execution error: sandbox denied exec error, exit code: 1, "
           "stdout: , stderr: ")


def noisy_session() -> list[object]:
    programs = ["ls", "cat package.json", "rg label src", "sed -n '1,20p' src/db.ts", "find . -name x"]
    messages: list[object] = [user("Plan the metrics page")]
    for index, command in enumerate(programs):
        messages += [assistant(shell(f"c{index}", command)), result(f"c{index}", f"{BREW}\nfile{index}.ts")]
    messages += [assistant(shell("bad", "sed -n '1,9p' src/app/(protected)/page.tsx")),
                 result("bad", SANDBOX + BREW + "\nzsh:1: no matches found: src/app/(protected)/page.tsx",
                        error=True)]
    return messages


def test_a_line_many_programs_print_first_is_noise_and_the_real_error_surfaces() -> None:
    messages = noisy_session()
    noise = Noise(messages)
    assert list(noise.counts) == [BREW]
    assert noise.strip(SANDBOX + BREW + "\nnext") == SANDBOX.rstrip() + "\nnext"
    errors = section(summary(*messages), "Errors and Fixes")
    assert "zsh:1: no matches found: src/app/(protected)/page.tsx" in errors
    assert errors.count("cannot create temp file") == 1  # listed once, as the environment's
    assert "the environment, not their error" in errors


def test_the_same_program_repeating_its_output_is_not_noise() -> None:
    messages: list[object] = [user("run the tests")]
    for index in range(5):
        messages += [assistant(shell(f"t{index}", f"cargo test --lib {index}")),
                     result(f"t{index}", "test result: ok. 29 passed; 0 failed; 0 ignored")]
    assert not Noise(messages)
    assert "29 passed" in summary(*messages)


def test_a_codex_ide_preamble_and_environment_block_are_not_the_users_words() -> None:
    ide = ("# Context from my IDE setup:\n\n## Open tabs:\n- a.ts: src/a.ts\n\n"
           "## My request for Codex:\nPresent the plan")
    assert typed_request(ide) == "Present the plan"
    assert typed_request("no preamble here") == "no preamble here"
    env = ("<environment_context>\n  <cwd>/w</cwd>\n  <sandbox_mode>read-only</sandbox_mode>\n"
           "</environment_context>")
    assert environment_fields(env) == {"cwd": "/w", "sandbox_mode": "read-only"}
    text_ = summary(user(env), user(ide))
    primary = section(text_, "Primary Request and Intent")
    assert 'User: "Present the plan"' in primary and "Open tabs" not in primary and "<cwd>" not in primary
    assert "Environment: cwd /w, sandbox_mode read-only" in section(text_, "Critical Context")
    assert extract_facts([user(ide)]).pending_request == "Present the plan"


def test_an_answer_to_a_question_tool_and_an_approved_plan_are_kept() -> None:
    question = call("q1", "AskUserQuestion", {"questions": [{"question": "Where?"}]})
    plan = call("p1", "ExitPlanMode", {"plan": "Move the + button outside the search bar.\n\n1. edit"})
    text_ = summary(
        user("move the + button"),
        assistant(question), result("q1", 'User has answered your questions: "Where?"="Right of the kbd". '
                                          "You can now continue with the user's answers in mind."),
        assistant(plan), result("p1", "User has approved your plan. You can now start coding."),
    )
    assert 'User answered: ""Where?"="Right of the kbd""' in section(text_, "Primary Request and Intent")
    critical = section(text_, "Critical Context")
    assert 'approved the plan: "Move the + button outside the search bar."' in critical


def test_route_group_and_dynamic_segments_stay_in_a_path() -> None:
    facts = extract_facts([user("see apps/web/src/app/(protected)/teams/[id]/page.tsx please")])
    assert "apps/web/src/app/(protected)/teams/[id]/page.tsx" in facts.paths


def test_a_banner_comment_is_not_what_a_file_is_for() -> None:
    assert file_purpose("// ==================== TYPES ====================\nconst x = 1\n") is None
    assert file_purpose("// ===== TYPES =====\n/** Global service role client for the server */\n") == (
        "Global service role client for the server")


def test_one_error_from_several_commands_is_listed_once_with_its_count() -> None:
    messages: list[object] = [user("look around")]
    for index, command in enumerate(["rg a", "rg b", "grep -r c ."]):
        messages += [assistant(shell(f"e{index}", command)),
                     result(f"e{index}", "Permission denied", error=True)]
    errors = section(summary(*messages), "Errors and Fixes")
    assert errors.count("Permission denied") == 1 and "from 3 commands" in errors


_FILLER = st.lists(st.sampled_from(["ls src", "cat README.md", "rg todo", "git status"]),
                   min_size=20, max_size=60)


@settings(max_examples=25, deadline=None)
@given(_FILLER, st.integers(1, 40), st.integers(1, 9))
def test_an_early_negative_constraint_and_a_test_count_survive_a_long_history(
        commands: list[str], passed: int, failed: int) -> None:
    early = "Build the export. Never touch migrations/0001_init.sql, keep the API as is."
    messages: list[object] = [user(early)]
    for index, command in enumerate(commands):
        messages += [assistant(text(f"Step {index}."), shell(f"f{index}", command)),
                     result(f"f{index}", f"output line {index}\n" * 20)]
    messages += [assistant(shell("t", "pytest -q")), result("t", f"{passed} passed, {failed} failed in 1.2s")]
    text_ = summary(*messages, budget=2_500)
    assert len(text_) <= 2_500
    assert "Never touch migrations/0001_init.sql" in text_
    assert f"{passed} passed, {failed} failed" in text_


def test_an_edit_notes_the_names_and_imports_it_removed() -> None:
    old = "import pytest\nimport json\n\ndef type_color(kind):\n    return 'red'\n\ndef keep():\n    pass\n"
    new = "import json\n\ndef keep():\n    pass\n"
    assert removed_notes({"old_string": old, "new_string": new}) == ["type_color", "import pytest"]
    assert removed_notes({"old_string": "a = 1", "new_string": "a = 1\nb = 2"}) == []
    assert removed_notes({"content": old}) == []
    edit = call("e1", "Edit", {"file_path": "/p/tests/test_x.py", "old_string": old, "new_string": new})
    files = section(summary(user("tidy the tests"), assistant(edit), result("e1", "ok")), "Files and Code")
    assert "removes `type_color`, `import pytest`" in files
