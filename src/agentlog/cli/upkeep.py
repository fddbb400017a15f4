"""Commands that look after stored sessions: ``repair``, ``compact``, ``gc``, ``check-upgrade``."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

from agentlog.cli.app import State, confirm, handled, interrupted, json_option, stop_after_the_current_item
from agentlog.cli.progress import meter
from agentlog.cli.render import columns, console, errors, iso, plural, print_json, visible
from agentlog.cli.sessions import recovery_json, recovery_lines
from agentlog.compaction.summary import Summarizer
from agentlog.errors import UsageError
from agentlog.ops.gc import AGE_BASES, AgeBasis

if TYPE_CHECKING:
    from rich.console import Console

    from agentlog.compaction.fidelity_score import FidelityReport
    from agentlog.compaction.result import CompactionResult, CompactionSkipped
    from agentlog.ops.gc import Collected
    from agentlog.ops.upgrade import UpgradeCheck


@click.command()
@click.argument("session_id")
@click.option("--dry-run", is_flag=True, help="Show the repair and write nothing.")
@click.option("--salvage", is_flag=True,
              help="For damage in the middle of a JSONL transcript: copy what is still readable and "
                   "consistent into a new session, saying exactly what was lost (the original is only read).")
@click.option("--into", "into", metavar="NEW_ID", default=None,
              help="The salvaged session's id (with --salvage; default: ID-salvaged).")
@json_option
@click.pass_obj
@handled
def repair(state: State, session_id: str, dry_run: bool, salvage: bool, into: str | None,
           as_json: bool) -> None:
    """Commit the crash repair a load would do: truncate a torn tail, close an interrupted turn.

    The repair is shown first (as verify shows it), then written under the session's writer
    lock; refused while another process writes the session. A JSONL transcript's cut bytes are
    kept beside it in <transcript>.torn-at-<offset>. Damage in the middle of a log is refused:
    --salvage then writes what can still be read into a new session (docs/crash-artifacts.md).
    """
    if salvage or into is not None:
        if not salvage:
            raise click.UsageError("--into needs --salvage")
        _salvage(state, session_id, into or f"{session_id}-salvaged", dry_run, as_json)
        return
    kept = None
    with state.store(create=not dry_run) as store:
        inspection = store.inspect(session_id)
        where = store.locate(inspection.header)
        recovery = inspection.recovery
        if recovery is not None and not dry_run:
            store.load(session_id)  # re-reads under the writer lock and commits what it finds
            kept = store.kept_tail(session_id)
    if as_json:
        print_json({"id": session_id, "dryRun": dry_run, "repaired": recovery is not None and not dry_run,
                    "recovery": None if recovery is None else recovery_json(recovery, where),
                    "tornCopy": kept})
        return
    if recovery is None:
        console.print(f"{visible(session_id)}: nothing to repair (intact, no open turn)")
        return
    console.print(f"{visible(session_id)}: {'would repair' if dry_run else 'repaired'}")
    for line in recovery_lines(recovery, where, done=not dry_run):
        console.print(f"  {visible(line)}")
    if kept is not None:
        console.print(f"  cut bytes kept in {visible(kept)}")
    if dry_run:
        console.print(f"nothing written; run: agentlog repair {visible(session_id)}")
    else:
        state.name_the_store()


def _salvage(state: State, session_id: str, into: str, dry_run: bool, as_json: bool) -> None:
    """``repair --salvage``: the readable, consistent part of a damaged transcript as a new session."""
    from agentlog.store.jsonl.salvage import salvage_into
    from agentlog.store.jsonl.store import JsonlStore

    with state.store(create=not dry_run) as store:
        if not isinstance(store, JsonlStore):
            raise UsageError(f"--salvage reads JSONL transcripts; the {store.name} store keeps no "
                             "transcript to read past damage", session_id=session_id)
        done = salvage_into(store, session_id, into, dry_run=dry_run)
    found = done.salvage
    if as_json:
        print_json({"id": session_id, "into": into, "dryRun": dry_run, "written": done.written,
                    "events": len(done.events), "closers": len(done.closers), "missingFrom": found.gap_at,
                    "lost": [{"offset": loss.offset, "bytes": loss.size, "what": loss.what}
                             for loss in found.lost],
                    "dropped": [{"offset": drop.offset, "firstSeq": drop.first_seq, "lastSeq": drop.last_seq}
                                for drop in found.dropped], "invalid": done.invalid})
        return
    span = f" (seq 0..{len(done.events) - 1})" if done.events else ""
    verb = "would salvage" if dry_run else "salvaged" if done.written else "nothing to salvage:"
    console.print(f"{visible(session_id)}: {verb} {plural(len(done.events), 'event')}{span}"
                  + (f" into {visible(into)}" if done.events else "")
                  + f"; {visible(session_id)} is left as it was")
    for loss in found.lost:
        console.print(f"  lost: {plural(loss.size, 'byte')} at byte {loss.offset} ({visible(loss.what)})")
    for drop in found.dropped:
        console.print(f"  dropped: seq {drop.first_seq}..{drop.last_seq} at byte {drop.offset} "
                      f"(readable, but seq {found.gap_at} is missing before it)")
    if done.invalid:
        console.print(f"  cut where the restore rules refuse: {visible(done.invalid)}")
    if done.closers:
        console.print(f"  the interrupted turn is closed by {plural(len(done.closers), 'synthetic event')}")
    if not found.lost and not found.dropped and not done.invalid:
        console.print("  nothing was lost")
    if done.written:
        state.name_the_store()


@click.command()
@click.argument("session_id")
@click.option("--llm", "llm_url", metavar="URL", default=None,
              help="Summarize with an OpenAI-compatible endpoint at this base URL (default: offline "
                   "extractive summary).")
@click.option("--model", default=None, metavar="MODEL", help="The model to ask (required with --llm).")
@click.option("--api-key-env", default=None, metavar="NAME",
              help="Environment variable holding the API key (default: OPENAI_API_KEY).")
@click.option("--min-new-tokens", type=click.IntRange(min=0), default=0, show_default=True, metavar="N",
              help="Leave a previous checkpoint alone unless at least N tokens of new material came since.")
@click.option("--report", is_flag=True,
              help="Also say, per category, how many of the shadowed range's facts the checkpoint kept "
                   "(a diagnostic: the facts are those the offline summarizer extracts, so it is no "
                   "measure of quality; see docs/compaction-fidelity.md).")
@json_option
@click.pass_obj
@handled
def compact(state: State, session_id: str, llm_url: str | None, model: str | None, api_key_env: str | None,
            min_new_tokens: int, report: bool, as_json: bool) -> None:
    """Summarize everything but the newest exchange of an idle session (nothing is deleted).

    Writes a compaction bracket whose checkpoint replaces the older part of what the model sees;
    the whole log stays. A session with an interrupted turn needs agentlog repair first. A
    previous checkpoint with nothing new since is left as it is (no summary of a summary).
    """
    from agentlog.compaction.config import CompactionConfig
    from agentlog.compaction.engine import Compactor
    from agentlog.compaction.region import Region
    from agentlog.compaction.result import CompactionSkipped
    from agentlog.core.session import Session

    summarizer = _summarizer(llm_url, model, api_key_env)
    compactor = Compactor(summarizer, config=CompactionConfig(min_new_tokens=min_new_tokens))
    with state.store() as store:
        stored = store.inspect(session_id)
        if stored.recovery is not None:
            raise UsageError("the session has a torn tail or an interrupted turn: run "
                             f"agentlog repair {session_id} first", session_id=session_id)
        plan = compactor.manual_plan(Session.restore(session_id, stored.events, stored.header))
        result: CompactionResult | CompactionSkipped | None = None if isinstance(plan, Region) else plan
        if isinstance(plan, Region):
            with store.open(session_id) as live:  # opening writes: only when there is work to do
                result = compactor.compact_now(live)
        kept = _kept(store, session_id, result) if report else None
    if as_json:
        shape = _compact_json(session_id, result)
        if report:
            shape["report"] = None if kept is None else _kept_json(kept)
        print_json(shape)
        return
    if result is None:
        console.print(f"{visible(session_id)}: nothing to compact")
        return
    if isinstance(result, CompactionSkipped):
        console.print(f"{visible(session_id)}: nothing new to compact: {visible(result.reason)}")
        return
    console.print(f"{visible(session_id)}: compacted {plural(len(result.shadowed_seqs), 'surface event')} "
                  f"(~{result.shadowed_token_count} tokens) into the checkpoint at seq "
                  f"{result.checkpoint_seq} (bracket seq {result.start_seq}..{result.end_seq})")
    if kept is not None:
        console.print("kept of the shadowed range's facts "
                      "(diagnostic: the offline summarizer's own fact list)")
        for category in kept.categories:
            found = category.exact + category.normalized + category.partial
            share = "-" if category.score is None else f"{100 * category.score:.0f}%"
            console.print(f"  {category.category:<12} {found}/{category.total} ({share})")
        overall = "-" if kept.score is None else f"{100 * kept.score:.0f}%"
        console.print(f"  {'overall':<12} {overall} (mean of the categories)")
    state.name_the_store()


def _kept(store: Any, session_id: str,
          result: CompactionResult | CompactionSkipped | None) -> FidelityReport | None:
    """What the new checkpoint kept of its shadowed range's facts (None: no checkpoint written)."""
    from agentlog.compaction.fidelity_score import compaction_fidelity
    from agentlog.compaction.result import CompactionResult
    from agentlog.core.session import Session

    if not isinstance(result, CompactionResult):
        return None
    stored = store.inspect(session_id)
    return compaction_fidelity(Session.restore(session_id, stored.events, stored.header), result)


def _kept_json(kept: FidelityReport) -> dict[str, Any]:
    """``compact --report --json``: per category, facts found (``kept``) of ``total`` and the share."""
    return {"score": kept.score, "categories": [
        {"category": c.category, "total": c.total, "kept": c.exact + c.normalized + c.partial,
         "score": c.score} for c in kept.categories]}


def _compact_json(session_id: str, result: CompactionResult | CompactionSkipped | None) -> dict[str, Any]:
    """``compact --json``: whether a bracket was written, else why not (``reason``, ``newTokens``)."""
    from agentlog.compaction.result import CompactionResult

    if not isinstance(result, CompactionResult):
        return {"id": session_id, "compacted": False,
                "reason": "no compactable history yet" if result is None else result.reason,
                "newTokens": None if result is None else result.new_tokens, "compaction": None}
    return {"id": session_id, "compacted": True, "reason": None, "newTokens": None, "compaction": {
        "id": result.compaction_id, "startSeq": result.start_seq, "checkpointSeq": result.checkpoint_seq,
        "endSeq": result.end_seq, "shadowedSeqs": len(result.shadowed_seqs),
        "shadowedTokens": result.shadowed_token_count}}


def _summarizer(llm_url: str | None, model: str | None, api_key_env: str | None) -> Summarizer:
    from agentlog.compaction.summarizers import ExtractiveSummarizer, OpenAICompatibleSummarizer

    if llm_url is None:
        if model is not None or api_key_env is not None:
            raise click.UsageError("--model and --api-key-env need --llm URL")
        return ExtractiveSummarizer()
    if not model:
        raise click.UsageError("--llm needs --model (the model the endpoint serves)")
    if api_key_env is None:
        return OpenAICompatibleSummarizer(llm_url, model)
    return OpenAICompatibleSummarizer(llm_url, model, api_key_env=api_key_env)


@click.command()
@click.option("--older-than", "age", required=True, metavar="AGE",
              help="Idle for longer than this: a number and s, m, h, d or w (e.g. 30d).")
@click.option("--by", type=click.Choice(AGE_BASES), default="stored", show_default=True,
              help="What the age counts from: when agentlog stored the session (or its last event, if "
                   "later; an import counts from its import), or the last event's own time.")
@click.option("--dry-run", is_flag=True, help="List what would be removed; write nothing.")
@click.option("--yes", is_flag=True,
              help="Delete without asking (for scripts); without it gc lists and asks on a terminal, "
                   "and refuses when stdin is not one.")
@json_option
@click.pass_obj
@handled
def gc(state: State, age: str, by: AgeBasis, dry_run: bool, yes: bool, as_json: bool) -> None:
    """Remove sessions idle for longer than AGE, after listing them and asking.

    Age counts from when agentlog stored a session unless --by last-event. Keeps a session that a
    remaining fork descends from, one a writer holds open, and one that cannot be read (all listed
    with why). Exit status 1 when a session could not be read. Ctrl-C stops it between two
    sessions (never inside one's removal) with status 130 and what was removed; re-run to go on.
    """
    from agentlog.core.header import now_ms
    from agentlog.ops.gc import collect_garbage, parse_age

    older_than, now = parse_age(age), now_ms()
    with state.store(create=False) as store:
        with meter("gc") as shown, stop_after_the_current_item(None) as stopped:
            step = shown.tally("reading sessions", "sessions read")
            collected = collect_garbage(store, older_than, dry_run=True, now=now, by=by, progress=step,
                                        stop=stopped)
        if collected.stopped:
            interrupted(f"gc: interrupted after {step.so_far} sessions read; nothing removed; re-run to "
                        "continue")
        if not dry_run:
            if collected.deleted and not yes:
                _confirm_gc(collected, as_json)  # outside the stop handler: it has its own Ctrl-C
            planned = len(collected.deleted)
            with meter("gc") as shown, stop_after_the_current_item(None) as stopped:
                step = shown.tally("checking sessions again", "sessions read")
                collected = collect_garbage(store, older_than, now=now, by=by, only=collected.deleted,
                                            progress=step, stop=stopped)
            if collected.stopped:
                _gc_interrupted(state, collected, planned, as_json)
    if as_json:
        print_json(collected.to_json())
    else:
        _gc_table(collected, "would be deleted" if dry_run else "deleted")  # what was done
        _gc_summary(collected)
        if not dry_run:
            state.name_the_store()
    if collected.unreadable:
        errors.print(f"error: {_sessions(len(collected.unreadable))} could not be read (kept)")
        sys.exit(1)


def _gc_interrupted(state: State, collected: Collected, planned: int, as_json: bool) -> None:
    """What a gc that Ctrl-C stopped removed (each session whole: it stops between two), and exit 130."""
    if as_json:
        print_json(collected.to_json())
    elif collected.deleted:
        _gc_table(collected, "deleted")
        state.name_the_store()
    interrupted(f"gc: interrupted after {len(collected.deleted):,} of {planned:,} sessions removed "
                "(each removed whole; none was left half-removed); re-run to continue")


def _sessions(count: int) -> str:
    return plural(count, "session")


def _confirm_gc(plan: Collected, as_json: bool) -> None:
    """List what gc will delete and ask; refuse (exit 1) when stdin is no terminal to ask on."""
    if not sys.stdin.isatty():
        errors.print(f"error: gc would delete {_sessions(len(plan.deleted))} and stdin is not a terminal to "
                     "confirm on: nothing deleted (see them with --dry-run, delete them with --yes)",
                     soft_wrap=True)
        sys.exit(1)
    _gc_table(plan, "to delete", to=errors if as_json else console)
    confirm(f"delete {_sessions(len(plan.deleted))}?", err=as_json,
            stopped="gc: stopped at the question (Ctrl-C); nothing removed")


def _gc_table(collected: Collected, verb: str, *, to: Console | None = None) -> None:
    what = "stored or last event" if collected.by == "stored" else "last event"
    rows = [[sid, verb, f"{what} {iso(collected.since[sid])}"] for sid in collected.deleted]
    rows += [[sid, "kept", reason] for sid, reason in collected.kept]
    rows += [[bad.session_id or "?", "unreadable", str(bad.error)] for bad in collected.unreadable]
    if rows:
        columns(("id", "action", "why"), rows, to=to)


def _gc_summary(collected: Collected) -> None:
    verb = "would be deleted" if collected.dry_run else "deleted"
    kept = len(collected.kept)
    console.print(f"{_sessions(len(collected.deleted))} {verb}, "
                  f"{kept} old {'one' if kept == 1 else 'ones'} kept")


@click.command(name="check-upgrade")
@json_option
@click.pass_obj
@handled
def check_upgrade(state: State, as_json: bool) -> None:
    """Check that this agentlog version lists, reads and restores every session, on a copy.

    JSONL and SQLite stores are copied to a private temporary directory first (any crash repair
    is committed to the copy only); PostgreSQL is read in one read-only, repeatable-read
    transaction (a consistent snapshot that cannot write). Every event is validated, whatever a
    JSONL checkpoint vouches for. Exit status 1 when a session would not load; 130 when Ctrl-C
    stopped it (the sessions checked so far are shown; the copy is removed all the same).
    """
    from agentlog.ops.upgrade import check_upgrade as run_check

    with meter("check-upgrade") as shown, stop_after_the_current_item(None) as stopped:
        step = shown.tally("loading sessions", "sessions checked")
        report = run_check(state.store_url, progress=step, stop=stopped)
    if report.stopped:
        if not as_json:
            _upgrade_table(report)
        where = "its copy is removed" if report.copy else "it was read in place, read-only"
        interrupted(f"check-upgrade: interrupted after {step.so_far} sessions; {len(report.failed):,} would "
                    f"not load so far; the store was not changed ({where}); re-run to check them all")
    if as_json:
        print_json(report.to_json())
    else:
        _upgrade_table(report)
        where = "a copy" if report.copy else "the store in place (read-only)"
        console.print(f"{_sessions(len(report.sessions))} read from {where}: "
                      f"{len(report.failed)} would not load")
    if report.failed:
        sys.exit(1)


def _upgrade_table(report: UpgradeCheck) -> None:
    if report.sessions:
        columns(("id", "status", "detail"),
                [[check.session_id or "?", check.status, check.detail] for check in report.sessions])
