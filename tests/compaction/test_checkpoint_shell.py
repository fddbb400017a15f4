"""The checkpoint's reading of agents that work through a shell (Codex's ``apply_patch``, ``sed -n``
reads, ``rg`` searches, ``git status``, JSON command output) and the generic extraction rules added
with the cut probe sets: each rule on a small hand-made history."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentlog.compaction.checkpoint_draft import KEEP, Draft
from agentlog.compaction.checkpoint_facts import added_lines, change_notes, file_purpose
from agentlog.compaction.checkpoint_shell import (
    branch_of,
    json_fields,
    patched_files,
    read_file_path,
    removed_files,
    resolve,
    search_hits,
)
from agentlog.compaction.fidelity import result_lines
from agentlog.compaction.summarizer_extractive import ExtractiveSummarizer
from tests.compaction.test_checkpoint import section
from tests.compaction.test_summarizers import assistant, call, result, text, user

ROOT = "/home/dev/app"
PATCH = """apply_patch <<'PATCH'
*** Begin Patch
*** Add File: src/hooks/useTeam.ts
+export function useTeam(id: string) {
+  return fetchTeam(id);
+}
*** Update File: src/api/route.ts
@@
-export const GET = old;
+export const PATCH = createHandler({
+  onMutate: async (vars) => rollback(vars),
+});
*** End Patch
PATCH
"""


def shell(call_id: str, command: str, **extra: str) -> dict[str, object]:
    return call(call_id, "shell", {"command": ["bash", "-lc", command], "workdir": ROOT, **extra})


def summary(*messages: object, budget: int = 16_000) -> str:
    return ExtractiveSummarizer(budget_chars=budget, max_ratio=None).summarize_text(list(messages))


# -- the pure parsers ------------------------------------------------------------------------------


def test_a_patch_envelope_names_each_file_with_the_lines_it_adds() -> None:
    files = patched_files(PATCH)
    assert [(f.action, f.path) for f in files] == [("add", "src/hooks/useTeam.ts"),
                                                   ("update", "src/api/route.ts")]
    assert files[0].added.startswith("export function useTeam")
    assert "export const GET" not in files[1].added and "onMutate" in files[1].added
    diff = "git apply <<'EOF'\n--- a/x.py\n+++ b/x.py\n@@\n+def added():\n-def gone():\nEOF"
    assert [(f.path, f.added) for f in patched_files(diff)] == [("x.py", "def added():")]
    assert patched_files("echo '+++ nothing'") == []


@settings(max_examples=60)
@given(st.lists(st.tuples(st.sampled_from(["Add", "Update", "Delete"]),
                          st.from_regex(r"[a-z]{1,8}(/[a-z]{1,8}){0,2}\.(ts|py|rs)", fullmatch=True),
                          st.lists(st.from_regex(r"[A-Za-z0-9 _(){}=;]{0,30}", fullmatch=True), max_size=4)),
                min_size=1, max_size=4))
def test_patched_files_round_trips_any_envelope(files: list[tuple[str, str, list[str]]]) -> None:
    body = "".join(f"*** {action} File: {path}\n@@\n" + "".join(f"+{line}\n" for line in lines)
                   for action, path, lines in files)
    parsed = patched_files(f"apply_patch <<'P'\n*** Begin Patch\n{body}*** End Patch\nP")
    assert [(p.action, p.path, p.added) for p in parsed] == [
        (action.lower(), path, "\n".join(lines)) for action, path, lines in files]


def test_a_read_only_viewer_names_the_file_it_prints() -> None:
    quoted = "app/(protected)/teams/Sheet.tsx"
    assert read_file_path(f"sed -n '1,200p' '{quoted}'") == quoted
    assert read_file_path("cat package.json") == "package.json"
    assert read_file_path("head -n 40 src/lib.rs") == "src/lib.rs"
    assert read_file_path("sed -i 's/a/b/' x.py") is None  # an in-place edit, not a read
    assert read_file_path("cat a.py | grep x") is None
    assert read_file_path("ls src") is None
    assert resolve("src/a.ts", "/w") == "/w/src/a.ts" and resolve("/abs/a.ts", "/w") == "/abs/a.ts"
    assert resolve("../b.ts", "/w/sub") == "/w/b.ts"


def test_search_hits_rm_operands_and_json_fields() -> None:
    out = "src/a.ts:3:import x\nsrc/a.ts:9:y\napp/(p)/b.tsx:1:z\nnot a path line\n"
    assert search_hits('rg "import"', out) == ["src/a.ts", "app/(p)/b.tsx"]
    assert search_hits("cat x", out) == []
    assert removed_files("rm /t/pyproject.toml /t/uv.lock") == ["/t/pyproject.toml", "/t/uv.lock"]
    assert removed_files("rm -r /t/tests/") == [] and removed_files("git rm src/old.py") == ["src/old.py"]
    printed = ('Found .impl/\n'
               '{"success": true, "plan_number": 8156, "plan_url": "https://x/8156", "notes": "long"}')
    assert json_fields(printed) == ["plan_number=8156", "plan_url=https://x/8156"]
    assert json_fields("no json here") == []


def test_the_branch_comes_from_git_status_show_current_or_a_new_branch() -> None:
    assert branch_of("git status -sb", "## fix/team-v2...origin/fix/team-v2 [ahead 1]\n M a") == "fix/team-v2"
    assert branch_of("git status", "On branch master\nnothing to commit") == "master"
    assert branch_of("git branch --show-current", "plnd/O7911-migrate\n") == "plnd/O7911-migrate"
    assert branch_of("git checkout -b feat/x", "") == "feat/x"
    assert branch_of("git log --oneline", "## not a status") is None


def test_declarations_of_more_languages_and_short_config_edits() -> None:
    rust = ("pub struct NegativeInputError;\npub fn factorial(n: i64) {}\n"
            "mod tests {\n    fn test_factorial() {}\n}")
    assert change_notes({"content": rust}) == ["NegativeInputError", "factorial"]
    ts = "export type DatabaseClient = SupabaseClient<Database>;\nexport interface Team {\n"
    assert change_notes({"content": ts}) == ["DatabaseClient", "Team"]
    assert change_notes({"content": "func (s *Server) Serve() {}"}) == ["Serve"]
    assert change_notes({"content": "  onMutate: async (vars) => {"}) == ["onMutate"]
    toml = {"old_string": "[dependencies]",
            "new_string": '[dependencies]\n\n[lints.rust]\nmissing_docs = "warn"'}
    assert added_lines(toml) == ["[lints.rust]", 'missing_docs = "warn"']
    recipe = {"content": "# checks\ncheck:\n    cargo test\nlint:\n    cargo clippy -- -D warnings\n"}
    assert added_lines(recipe) == ["cargo test", "cargo clippy -- -D warnings"]
    assert added_lines({"content": "x = 1\n" * 200}) == []  # a long file is not a setting


def test_a_failed_exit_line_and_a_rejected_call_are_errors() -> None:
    sandbox = ("failed in sandbox with execution error: exit code: 2, "
               "stderr: syntax error near unexpected token")
    errors, outcomes = result_lines(sandbox, is_error=False)
    assert errors == [sandbox] and outcomes == [sandbox]
    assert result_lines("Process exited with code 0", is_error=False)[0] == []
    assert result_lines("patch rejected by user", is_error=False)[0] == ["patch rejected by user"]


# -- the checkpoint on hand-made histories -------------------------------------------------------


def test_a_patch_in_a_shell_command_is_an_edit_of_each_file() -> None:
    out = summary(user("Make the team sheet fast."), assistant(shell("c1", PATCH)), result("c1", "Success."))
    files = section(out, "Files and Code")
    assert "`src/hooks/useTeam.ts` (patch add): adds `useTeam`" in files
    assert "`src/api/route.ts` (patch update): adds `onMutate`" in files
    assert ROOT not in files  # shown relative to the working directory the calls gave


def test_a_read_notes_what_the_file_defines_and_its_code_is_not_an_error() -> None:
    source = ("export type DatabaseClient = SupabaseClient<Database>;\n  error: error,\n"
              "export function get() {}")
    out = summary(user("Review the data layer."),
                  assistant(shell("c1", "sed -n '1,200p' 'src/(core)/types.ts'")), result("c1", source),
                  assistant(shell("c2", "sed -n '1,80p' src/missing.ts")),
                  result("c2", "sed: src/missing.ts: No such file or directory"))
    assert "`src/(core)/types.ts` (read): defines `DatabaseClient`, `get`" in section(out, "Files and Code")
    errors = section(out, "Errors and Fixes")
    assert "error: error" not in errors and "No such file or directory" in errors


def test_searches_deletions_branch_json_and_justifications_reach_the_checkpoint() -> None:
    out = summary(
        user("Port it and clean up."),
        assistant(shell("c1", 'rg "\\.sql" -n')), result("c1", "db/migrations/002_orgs.sql:6:-- note"),
        assistant(shell("c2", "rm pyproject.toml uv.lock")), result("c2", ""),
        assistant(shell("c3", "git status -sb")), result("c3", "## fix/team-v2\n M a.ts"),
        assistant(shell("c4", "tool setup-impl")), result("c4", '{"success": true, "plan_number": 8156}'),
        assistant(shell("c5", "npm test",
                        justification="Run the suite outside the sandbox to see the failure")),
        result("c5", "ok"),
    )
    files = section(out, "Files and Code")
    assert '`rg "\\.sql" -n` found: `db/migrations/002_orgs.sql`' in files
    assert "`pyproject.toml` (deleted)" in files and "`uv.lock` (deleted)" in files
    critical = section(out, "Critical Context")
    assert "On branch `fix/team-v2`" in critical
    assert "`tool setup-impl` reported: plan_number=8156" in critical
    assert "Decision: Run the suite outside the sandbox to see the failure" in critical


def test_a_delegated_report_keeps_its_failing_tests_and_counts() -> None:
    report = ("I looked at the TUI tests.\nMost of it is fine.\nThe layout is standard.\n"
              "The broader suite has a failing `objective_head_plans` test.\n"
              "**Summary:** 1 failed, 112 passed")
    out = summary(user("Check the TUI tests."),
                  assistant(call("t1", "Task", {"description": "Run TUI tests", "prompt": "run them"})),
                  result("t1", report))
    reported = next(line for line in section(out, "Critical Context").splitlines() if "Delegated" in line)
    assert "failing `objective_head_plans` test" in reported and "1 failed, 112 passed" in reported


def test_a_coverage_total_and_finished_todos_are_kept() -> None:
    llvm = ("running 29 tests\ntest result: ok. 29 passed; 0 failed\n"
            "TOTAL    346    1    99.71%    37    0   100.00%")
    todos = [{"content": "Port math_utils module", "status": "completed"},
             {"content": "Update the Justfile", "status": "in_progress"}]
    out = summary(user("Port it to Rust with full coverage."),
                  assistant(call("w", "TodoWrite", {"todos": todos})), result("w", "ok"),
                  assistant(call("b", "Bash", {"command": "cargo llvm-cov"})), result("b", llvm))
    assert "`cargo llvm-cov` → `TOTAL 346 1 99.71% 37 0 100.00%`" in section(out, "Critical Context")
    pending = section(out, "Pending Jobs")
    assert "[ ] Update the Justfile" in pending and "[done] Port math_utils module" in pending


@pytest.mark.parametrize("budget", [1_200, 3_000])
def test_the_new_bullets_respect_the_budget_and_are_deterministic(budget: int) -> None:
    history = [user("Make the team sheet fast."), assistant(shell("c1", PATCH)), result("c1", "Success."),
               assistant(shell("c2", 'rg "x"')),
               result("c2", "\n".join(f"src/f{i}.ts:1:x" for i in range(40))),
               assistant(text("Done with the first pass."))]
    first = summary(*history, budget=budget)
    assert len(first) <= budget and first == summary(*history, budget=budget)


def test_a_file_says_what_it_is_for_in_its_first_comment_block() -> None:
    ts = ('import x from "y";\n\n/**\n * Global service role database client\n *\n'
          ' * It bypasses Row Level Security.\n */')
    assert file_purpose(ts) == "Global service role database client It bypasses Row Level Security."
    assert file_purpose('"""The fetcher: retries GET requests with backoff."""\nimport os') == (
        "The fetcher: retries GET requests with backoff.")
    assert file_purpose("#!/usr/bin/env python\n# -*- coding: utf-8 -*-\nimport os") is None
    out = summary(user("Review the data layer."), assistant(shell("c1", "cat src/db.ts")), result("c1", ts))
    assert '`src/db.ts` says: "Global service role database client It bypasses Row Level Security."' in out


def test_a_harness_reminder_inside_a_tool_result_is_not_a_constraint() -> None:
    listing = ("1\tprint('x')\n<system-reminder>\nYou MUST refuse to improve or augment the code.\n"
               "</system-reminder>\nYou must never push to main.")
    out = summary(user("Look at the script."), assistant(call("r", "Read", {"file_path": "/w/a.py"})),
                  result("r", listing))
    critical = section(out, "Critical Context")
    assert "refuse to improve" not in critical and "You must never push to main." in critical


def test_the_fit_puts_back_what_still_fits_after_dropping_by_estimate() -> None:
    draft = Draft()
    draft.add(0, KEEP, "the request")
    draft.add(7, 50, "x" * 900)  # dropped first: the lowest priority
    draft.add(7, 60, "y" * 300)
    draft.add(7, 70, "z" * 150)
    skeleton = len(Draft().render())
    budget = skeleton + len("- the request\n") + 800
    text = draft.fit(budget)
    assert len(text) <= budget
    assert "z" * 150 in text and "y" * 300 in text  # both fit once the long one is gone
    assert "x" * 300 in text and "x" * 900 not in text  # the long one, cut to the room left
