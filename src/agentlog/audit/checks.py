"""The reviewability checklist (seed 003, "is this session reviewable"), as pure functions of a log.

Each check answers one question of the checklist with located items; nothing here reads a
file or a store (``environment.py`` and ``audit_session`` do).
"""

from __future__ import annotations

import bisect
import itertools
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from agentlog.audit.environment import Environment, recorded_git
from agentlog.audit.report import AuditCheck, AuditItem, check_of
from agentlog.compaction.events import COMPACTION_END, COMPACTION_PRUNE, COMPACTION_START, is_checkpoint_event
from agentlog.compaction.summarizers import to_openai_tools
from agentlog.core.events import (
    ASSISTANT_CHUNK,
    ASSISTANT_MESSAGE,
    END_SEED,
    TOOL_CALL,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
    Event,
)
from agentlog.core.fork import check_fork_boundary
from agentlog.core.header import SessionHeader
from agentlog.core.invariants import check_invariants
from agentlog.core.jsonvalue import dumps, thaw
from agentlog.core.repair import TOOL_NOT_STARTED, TOOL_OUTCOME_UNKNOWN
from agentlog.core.request_header import fold_request_header
from agentlog.core.surface import Replacement, fold_surface
from agentlog.errors import AgentlogError, InvariantError
from agentlog.io.exporters.jsonl import delta_streams
from agentlog.ops.redact import find_secrets, redact_text, secret_paths
from agentlog.store.records import Recovery

__all__ = ["compaction", "fork_lineage", "order", "restore_drift", "secrets", "tool_results", "turns"]


def _get(value: Any, *keys: str) -> Any:
    for key in keys:
        value = value.get(key) if isinstance(value, Mapping) else None
    return value


def _calls_of(event: Event) -> list[str]:
    """Call ids an ``assistant/message`` requests (its tool-call blocks)."""
    if event.type != ASSISTANT_MESSAGE:
        return []
    return [str(block.get("id")) for block in _get(event.data, "message", "content") or ()
            if isinstance(block, Mapping) and block.get("type") == "tool-call"]


def _result_id(event: Event) -> str | None:
    call_id = _get(event.data, "message", "source", "callId") if event.type == TOOL_RESULT else None
    return call_id if isinstance(call_id, str) else None


def order(events: Sequence[Event]) -> AuditCheck:
    """Inputs, results and tool calls in order: the turn/step/tool invariants hold over the log."""
    counts = Counter(event.type for event in events)
    items: list[AuditItem] = []
    try:
        check_invariants(list(events))
    except InvariantError as exc:
        items.append(AuditItem(f"out of order: {exc.detail}", True, exc.seq, exc.path))
    ok = (f"{counts[USER_MESSAGE]} inputs, {counts[ASSISTANT_MESSAGE]} model results, {counts[TOOL_CALL]} "
          f"tool calls and {counts[TOOL_RESULT]} tool results, in order")
    return check_of("order", "Are inputs, model results and tool calls in order?", items, ok)


def tool_results(events: Sequence[Event], pending: int) -> AuditCheck:
    """Every requested or started tool call has a result, or an explicit interruption.

    A tool-sourced ``user/message`` (an output logged after its call left the surface) is a result too.
    """
    requested: dict[str, int] = {}
    answered: set[str] = set()
    items: list[AuditItem] = []
    for event in events:
        for requested_id in _calls_of(event):
            requested.setdefault(requested_id, event.seq)
        if event.type == TOOL_CALL and isinstance(_get(event.data, "callId"), str):
            requested.setdefault(event.data["callId"], event.seq)
        call_id = _result_id(event)
        if call_id is not None:
            answered.add(call_id)
            code = _get(event.data, "error", "code")
            if code in (TOOL_NOT_STARTED, TOOL_OUTCOME_UNKNOWN):
                what = "never started" if code == TOOL_NOT_STARTED else "outcome unknown"
                later = " (by the repair that loading commits)" if event.seq >= len(events) - pending else ""
                items.append(AuditItem(f"call {call_id} interrupted: {what}{later}", False, event.seq))
        elif event.type == USER_MESSAGE and _get(event.data, "source", "kind") == "tool":
            late = _get(event.data, "source", "callId")  # an output its call had left the surface before
            if isinstance(late, str):
                answered.add(late)
    for call_id, seq in requested.items():
        if call_id not in answered:
            items.append(AuditItem(f"call {call_id} has no result and no interruption", True, seq))
    ok = f"{len(requested)} tool calls, each with a result or an explicit interruption"
    return check_of("tool-results", "Does every tool call have a result or an explicit interruption?",
                    items, ok)


def turns(events: Sequence[Event], recovery: Recovery | None) -> AuditCheck:
    """Every turn ended; one a crash left open is closed ``interrupted`` (or is by the pending repair)."""
    items: list[AuditItem] = []
    open_turn: tuple[Any, int] | None = None
    ended = 0
    for event in events:
        if event.type == TURN_START:
            if open_turn is not None:
                items.append(AuditItem(f"turn {open_turn[0]} never ended", True, open_turn[1]))
            open_turn = (_get(event.data, "turn"), event.seq)
        elif event.type == TURN_END:
            open_turn, ended = None, ended + 1
            kind = _get(event.data, "reason", "kind")
            if kind != "completed":
                items.append(AuditItem(f"turn {_get(event.data, 'turn')} ended {kind}", False, event.seq))
    if open_turn is not None:
        items.append(AuditItem(f"turn {open_turn[0]} never ended", True, open_turn[1]))
    if recovery is not None and recovery.closers:
        items.append(AuditItem(f"turn {recovery.turn} was left open by a crash: loading the session commits "
                               f"its interrupted turn/end ({len(recovery.closers)} synthetic events)", False,
                               recovery.closers[-1].seq))
    if recovery is not None and recovery.torn:
        where = f" after byte {recovery.torn_offset}" if recovery.torn_offset is not None else ""
        items.append(AuditItem(f"torn tail ignored{where} (never made durable)", False, recovery.intact))
    return check_of("turns", "Did every turn end, with crash-closed turns marked interrupted?", items,
                    f"{ended} turns ended")


def _tool_names(tools: Any) -> dict[str, str]:
    """Tool name -> its schema as canonical JSON, from agentlog or Chat Completions form."""
    out: dict[str, str] = {}
    for tool in to_openai_tools(list(tools or ())):
        function = tool.get("function") or {}
        out[str(function.get("name"))] = dumps(thaw(function)).decode()
    return out


def restore_drift(header: SessionHeader, events: Sequence[Event], env: Environment) -> AuditCheck:
    """The recorded cwd, git state, model route, preset and tools against the environment now."""
    items: list[AuditItem] = []
    cwd = redact_text(header.cwd) if header.cwd is not None else None  # a report never shows a secret
    if cwd is None:
        items.append(AuditItem("no working directory recorded"))
    elif env.cwd_exists is False:
        items.append(AuditItem(f"working directory {cwd} no longer exists", True, path="header.cwd"))
    else:
        items.append(AuditItem(f"working directory {cwd} exists"))
    git = recorded_git(header)
    if git is not None:
        if env.git_error is not None or env.git_head is None:
            problem = env.git_error or "no cwd"
            text = f"git state recorded but unreadable now: {problem}"
            items.append(AuditItem(text, True, path="header.git"))
        else:
            moved = env.git_head != git["head"]
            items.append(AuditItem(f"git HEAD {'moved from ' + git['head'] + ' to ' if moved else 'still '}"
                                   f"{env.git_head}", moved, path="header.git.head"))
            if isinstance(git.get("dirty"), bool) and env.git_dirty != git["dirty"]:
                then, now = ("dirty" if git["dirty"] else "clean"), ("dirty" if env.git_dirty else "clean")
                items.append(AuditItem(f"work tree was {then}, now {now}", True, path="header.git.dirty"))
    request = fold_request_header(events)
    config = _get(request, "config") or {}
    route = f"{config.get('provider')}/{config.get('model')}" if request is not None else None
    if route is None:
        items.append(AuditItem("no request header recorded (model route and tools unknown)"))
    else:
        differs = env.model is not None and env.model != route
        items.append(AuditItem(f"model route {route}" + (f", now {env.model}" if differs else ""), differs))
    if header.agent_preset is not None or env.preset is not None:
        differs = env.preset is not None and env.preset != header.agent_preset
        now = f", now {env.preset}" if differs else ""
        text = f"agent preset {redact_text(str(header.agent_preset))}{now}"
        items.append(AuditItem(text, differs, path="header.agentPreset"))
    recorded = _tool_names(_get(request, "tools"))
    if env.tools is None:
        items.append(AuditItem(f"{len(recorded)} tools recorded (pass the current tools to compare)"))
    else:
        current = _tool_names(env.tools)
        for name in sorted(recorded.keys() | current.keys()):
            if name not in current:
                items.append(AuditItem(f"tool {name} was recorded but is gone", True))
            elif name not in recorded:
                items.append(AuditItem(f"tool {name} is new", True))
            elif recorded[name] != current[name]:
                items.append(AuditItem(f"tool {name} changed its schema", True))
    return check_of("restore-drift", "Are the working directory, model route, preset and tools still right?",
                    items, "the recorded environment still holds")


def fork_lineage(header: SessionHeader, events: Sequence[Event],
                 parent: Sequence[Event] | None) -> AuditCheck:
    """A fork names its parent, which holds the same events up to a boundary outside any turn."""
    question = "Does a fork record its parent and start at the expected boundary?"
    if header.parent_session is None:
        return check_of("fork-lineage", question, [], "", skipped="not a fork")
    seed = header.seed_length or 0
    items = [AuditItem(f"forked from {header.parent_session} after {seed} events")]
    if parent is None:
        items.append(AuditItem(f"parent {header.parent_session} is not in the store: the prefix cannot be "
                               "checked", True, path="header.parentSession"))
    elif len(parent) < seed:
        items.append(AuditItem(f"parent has {len(parent)} events, fewer than the seed length {seed}", True))
    else:
        for mine, theirs in zip(events[:seed], parent[:seed], strict=True):
            if mine.to_wire() != theirs.to_wire():
                items.append(AuditItem("the fork's prefix differs from its parent's here", True, mine.seq))
                break
        if seed:
            try:
                check_fork_boundary(parent[:seed], seed - 1, header.parent_session)
            except AgentlogError as exc:
                items.append(AuditItem(f"the boundary is not stable: {exc.detail}", True, seed - 1))
    if len(events) > seed and events[seed].type != END_SEED:
        items.append(AuditItem("no session/end-seed marker after the inherited prefix", True, seed))
    return check_of("fork-lineage", question, items, f"a stable prefix of {header.parent_session}")


def _compaction_replacements(events: Sequence[Event],
                             replacements: Sequence[Replacement]) -> tuple[list[Replacement], int]:
    """The replacements compaction made, and how many others (surface edits such as an SDK's pop) there are.

    Compaction's are the checkpoints (E7), a tool result priced by the ``compaction/prune`` right
    before it (E6), and any replace inside a ``compaction/start`` .. ``compaction/end`` bracket.
    """
    bracketed: set[int] = set()
    open_bracket = False
    for event in events:
        if event.type in (COMPACTION_START, COMPACTION_END):
            open_bracket = event.type == COMPACTION_START
        elif open_bracket:
            bracketed.add(event.seq)
    ours = [replacement for replacement in replacements
            if replacement.seq in bracketed or is_checkpoint_event(events[replacement.seq])
            or (replacement.seq > 0 and events[replacement.seq - 1].type == COMPACTION_PRUNE)]
    return ours, len(replacements) - len(ours)


def compaction(events: Sequence[Event]) -> AuditCheck:
    """No compaction splits a tool call from its result; the surface it leaves has no orphan result.

    Only compaction's replacements are judged: another surface edit (the Agents SDK adapter's
    ``pop_item``/``clear_session``) may drop a call's result on purpose and is only counted.
    """
    question = "Does every compaction keep tool calls and their results together?"
    fold = fold_surface(events)
    replacements, edits = _compaction_replacements(events, fold.replacements)
    others = f" ({edits} other surface edit{'' if edits == 1 else 's'})" if edits else ""
    if not replacements:
        return check_of("compaction", question, [], "", skipped=f"no compaction{others}")
    by_seq = {event.seq: event for event in events}
    items: list[AuditItem] = []
    for replacement in replacements:
        inside = [by_seq[seq] for seq in replacement.shadowed_seqs]
        put = by_seq[replacement.seq]  # a pruned result puts its call's (shortened) result back
        calls = {call for event in inside for call in _calls_of(event)} - set(_calls_of(put))
        results = {call for event in inside if (call := _result_id(event)) is not None} - {_result_id(put)}
        split = sorted(calls ^ results)
        for call_id in split:
            side = "its call" if call_id in calls else "its result"
            span = f"{replacement.start}..{replacement.end}"
            items.append(AuditItem(f"the replacement of seqs {span} takes {side} of tool call {call_id} but "
                                   "leaves the other", True, replacement.seq))
        if not split:
            items.append(AuditItem(f"seqs {replacement.start}..{replacement.end} replaced, tool pairs intact",
                                   False, replacement.seq))
    if edits:
        items.append(AuditItem(f"{edits} surface edit{'' if edits == 1 else 's'} not made by compaction "
                               "(not judged here)", False))
    called: set[str] = set()
    for seq in fold.nodes:
        event = by_seq[seq]
        called.update(_calls_of(event))
        answers = _result_id(event)
        if answers is not None and answers not in called:
            items.append(AuditItem(f"the surface holds a result for {answers} without its call", True, seq))
    ok = f"{len(replacements)} replacements, tool pairs intact"
    return check_of("compaction", question, items, ok)


def secrets(header: SessionHeader, events: Sequence[Event]) -> AuditCheck:
    """Secrets in the log (kind and location only, never the secret): compaction does not remove them."""
    found: list[AuditItem] = []
    for path, kind in secret_paths(header.to_wire(), "header"):
        found.append(AuditItem(f"{kind} at {path}", True, path=path))
    for event in events:
        if event.type != ASSISTANT_CHUNK:
            found += [AuditItem(f"{kind} at seq {event.seq} {path}", True, event.seq, path)
                      for path, kind in secret_paths(event.data)]
    for pieces in delta_streams(events):  # streamed text: a secret may span several chunks
        offsets = list(itertools.accumulate((len(text) for _, _, text in pieces[:-1]), initial=0))
        for finding in find_secrets("".join(text for _, _, text in pieces)):
            seq = pieces[bisect.bisect_right(offsets, finding.start) - 1][0]
            found.append(AuditItem(f"{finding.kind} streamed from seq {seq}", True, seq, "data.chunk"))
    question = "Does the log hold secrets that should not be kept?"
    if not found:
        return check_of("secrets", question, [], "no secrets found")
    kinds = Counter(item.text.split(" ", 1)[0] for item in found)
    summary = ", ".join(f"{count} {kind}" for kind, count in kinds.most_common())
    return AuditCheck("secrets", question, "problem",
                      f"{len(found)} found: {summary} (share it with export --redact)", tuple(found))
