"""Lossless JSON values: one pass that validates and deep-freezes.

A lossless value is ``None``, ``bool``, ``str`` (valid Unicode, no lone surrogates),
``int`` within ±(2**53 - 1) (JavaScript's safe range, so DSH reads it exactly), a
finite ``float`` other than ``-0.0``, a ``list`` or ``tuple`` of lossless values, or a
``dict`` with ``str`` keys and lossless values. Exact types only: subclasses are
refused, except agentlog's own frozen containers.

Frozen values are ``FrozenDict`` and ``tuple`` (``FrozenList`` beyond 48 levels, so
that orjson's depth guard still applies); all serialize natively with orjson. A
``FrozenDict`` can only be built from a valid value, so freezing reuses one in O(1).
Nothing here recurses more than 48 levels: 20,000-deep values work.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any, Final, NoReturn

import orjson

from agentlog.errors import InvalidEventError

__all__ = [
    "MAX_SAFE_INTEGER",
    "as_text",
    "FrozenDict",
    "FrozenList",
    "JsonValue",
    "dumps",
    "dumps_indented",
    "freeze",
    "is_safe_int_tuple",
    "frozen_dict",
    "frozen_object",
    "is_json_value",
    "json_equal",
    "loads",
    "thaw",
    "valid_text",
]

MAX_SAFE_INTEGER = 2**53 - 1

JsonValue = Any
"""A lossless JSON value (plain or frozen); typed loosely because JSON is recursive."""

_SHALLOW = 48
"""Levels frozen by the fast recursive path; deeper containers use the iterative one."""

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _immutable(self: object, *args: object, **kwargs: object) -> NoReturn:
    raise TypeError("frozen JSON value is immutable")


class FrozenDict(dict[str, Any]):
    """An immutable ``dict`` holding a lossless JSON object.

    ``FrozenDict(...)`` validates and deep-freezes its argument like ``freeze``; every
    mutating method raises ``TypeError``.
    """

    __slots__ = ()

    def __new__(cls, *args: Any, **kwargs: Any) -> FrozenDict:
        frozen: FrozenDict = freeze(dict(*args, **kwargs))
        return frozen

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """Contents were set by ``__new__``."""

    __setitem__ = _immutable
    __delitem__ = _immutable
    __ior__ = _immutable
    clear = _immutable
    pop = _immutable
    popitem = _immutable
    setdefault = _immutable
    update = _immutable

    def __copy__(self) -> FrozenDict:
        return self

    def __deepcopy__(self, memo: object) -> FrozenDict:
        return self

    def __reduce__(self) -> tuple[type[FrozenDict], tuple[dict[str, Any]]]:
        return (FrozenDict, (dict(self),))

    def __repr__(self) -> str:
        return f"FrozenDict({dict.__repr__(self)})"


class FrozenList(list[Any]):
    """An immutable ``list``: the frozen form of arrays nested beyond 48 levels."""

    __slots__ = ()

    def __init__(self, *args: Any) -> None:
        raise TypeError("FrozenList is built by freeze(), not directly")

    __setitem__ = _immutable
    __delitem__ = _immutable
    __iadd__ = _immutable
    __imul__ = _immutable
    append = _immutable
    extend = _immutable
    insert = _immutable
    pop = _immutable
    remove = _immutable
    clear = _immutable
    sort = _immutable
    reverse = _immutable

    def __copy__(self) -> FrozenList:
        return self

    def __deepcopy__(self, memo: object) -> FrozenList:
        return self

    def __reduce__(self) -> tuple[Any, tuple[tuple[Any, ...]]]:
        return (_frozen_list, (tuple(self),))


def frozen_dict(items: Iterable[tuple[str, Any]] | dict[str, Any]) -> FrozenDict:
    """Build a ``FrozenDict`` from values the caller has already validated and frozen.

    For agentlog's own hot paths (the recorder, the storage codec); skips validation.
    """
    result = dict.__new__(FrozenDict)
    dict.update(result, items)
    return result


def _frozen_list(items: Iterable[Any]) -> FrozenList:
    result = list.__new__(FrozenList)
    list.extend(result, items)
    return result


class _Refusal(Exception):  # noqa: N818 - internal control flow, never escapes
    """Internal: a value was refused; ``parts`` (path text) and ``keys`` grow from the inside out."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem
        self.parts: list[str] = []
        self.keys: list[Any] = []

    def step(self, key: Any, part: str) -> None:
        """Record one more enclosing member (``key`` in its container, ``part`` as path text)."""
        self.keys.append(key)
        self.parts.append(part)

    def path(self, root: str, value: Any) -> str:
        """The path from ``root``; for a cycle, cut where the path first revisits a container."""
        parts = self.parts[::-1]
        if self.problem == "cycle":
            seen = {id(value)}
            node = value
            for depth, key in enumerate(reversed(self.keys), 1):
                node = node[key]
                if id(node) in seen:
                    parts = parts[:depth]
                    break
                seen.add(id(node))
        return root + "".join(parts)


def _key_part(key: object) -> str:
    if type(key) is not str:
        return f"[{key!r}]"
    if _IDENT.match(key):
        return f".{key}"
    return f"[{json.dumps(key, ensure_ascii=not valid_text(key))}]"


def valid_text(value: str) -> bool:
    """No lone surrogates: the string can be encoded as UTF-8 (and so written as JSON)."""
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def as_text(value: str) -> str:
    """``value`` with its lone surrogates as U+FFFD: a file name ``os.fsdecode`` made of bytes that
    are not UTF-8 (``\\xff`` -> ``\\udcff``) as text a JSON string can hold."""
    if valid_text(value):
        return value
    try:
        return value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    except UnicodeEncodeError:  # a surrogate no file system decoding makes
        return value.encode("utf-8", "replace").decode("utf-8")


def _scalar_problem(value: Any) -> str | None:
    """Why a non-container value is not lossless JSON, or None when it is."""
    kind = type(value)
    if kind is str:
        return None if valid_text(value) else "string contains a lone surrogate"
    if kind is int:
        if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            return None
        return f"integer {value} is outside ±(2**53 - 1)"
    if kind is float:
        if value - value != 0.0:
            return f"{value!r} is not a finite number"
        if value == 0.0 and math.copysign(1.0, value) < 0:
            return "-0.0 is not representable"
        return None
    if value is None or kind is bool:
        return None
    return f"{kind.__name__} is not a JSON type"


def freeze(value: Any, *, root: str = "value", what: str = "not losslessly JSON-serializable") -> Any:
    """Validate ``value`` as lossless JSON and return a deep-frozen copy.

    Frozen sub-values are reused, not copied. On refusal raises ``InvalidEventError``
    whose message starts with ``what`` and whose ``path`` names the offending member
    (``data.message.content[2].text``).
    """
    kind = type(value)
    try:
        if kind is FrozenDict:
            return value
        if kind is dict:
            return _freeze_dict(value, 0)
        if kind is list or kind is tuple:
            return _freeze_list(value, 0)
        if kind is FrozenList:
            return value
        problem = _scalar_problem(value)
    except _Refusal as refusal:
        raise InvalidEventError(f"{what}: {refusal.problem}", path=refusal.path(root, value)) from None
    if problem is not None:
        raise InvalidEventError(f"{what}: {problem}", path=root)
    return value


def is_safe_int_tuple(value: Any) -> bool:
    """True when ``freeze(value)`` is ``value`` itself because it is a tuple of safe ints: the
    check in C (``set``, ``min``, ``max``) instead of member by member."""
    return value.__class__ is tuple and (not value or (
        set(map(type, value)) == _INT and min(value) >= -MAX_SAFE_INTEGER and max(value) <= MAX_SAFE_INTEGER))


_INT: Final = {int}


def _freeze_dict(value: dict[str, Any], depth: int) -> FrozenDict:
    changed: list[tuple[str, Any]] | None = None
    for key, child in value.items():
        kind = type(child)
        try:
            if type(key) is not str or (not key.isascii() and not valid_text(key)):
                raise _Refusal("object key is not a valid string")
            if kind is str:
                if not child.isascii() and not valid_text(child):
                    raise _Refusal("string contains a lone surrogate")
            elif kind is int:
                if not -MAX_SAFE_INTEGER <= child <= MAX_SAFE_INTEGER:
                    raise _Refusal(f"integer {child} is outside ±(2**53 - 1)")
            elif kind is dict or kind is list or kind is tuple:
                frozen = _freeze_child(child, depth)
                if changed is None:
                    changed = []
                changed.append((key, frozen))
            elif child is not None and kind not in (bool, FrozenDict, FrozenList):
                problem = _scalar_problem(child)
                if problem is not None:
                    raise _Refusal(problem)
        except _Refusal as refusal:
            refusal.step(key, _key_part(key))
            raise
    result = dict.__new__(FrozenDict)
    dict.update(result, value)
    if changed is not None:
        for key, frozen in changed:
            dict.__setitem__(result, key, frozen)
    return result


def _freeze_list(value: list[Any] | tuple[Any, ...], depth: int) -> Any:
    items: list[Any] | None = None
    for index, child in enumerate(value):
        kind = type(child)
        try:
            if kind is dict or kind is list or kind is tuple:
                frozen = _freeze_child(child, depth)
                if frozen is not child:
                    if items is None:
                        items = list(value)
                    items[index] = frozen
            elif kind is not FrozenDict and kind is not FrozenList and (
                kind is not str or not child.isascii()
            ):
                problem = _scalar_problem(child)
                if problem is not None:
                    raise _Refusal(problem)
        except _Refusal as refusal:
            refusal.step(index, f"[{index}]")
            raise
    if items is None and type(value) is tuple:
        return value
    return tuple(value if items is None else items)


def _freeze_child(child: Any, depth: int) -> Any:
    if depth >= _SHALLOW:
        return _freeze_deep(child)
    if type(child) is dict:
        return _freeze_dict(child, depth + 1)
    return _freeze_list(child, depth + 1)


class _Frame:
    """One container on the iterative freezer's stack."""

    __slots__ = ("is_dict", "items", "key", "out", "source")

    def __init__(self, source: Any) -> None:
        self.source = source
        self.is_dict = type(source) is dict
        self.items = iter(source.items() if self.is_dict else source)
        self.out: list[Any] = []
        self.key: Any = None


def _freeze_deep(value: Any) -> Any:
    """Freeze without recursion; arrays become ``FrozenList``. Raises ``_Refusal``."""
    stack = [_Frame(value)]
    active = {id(value)}
    while True:
        frame = stack[-1]
        descended = False
        for item in frame.items:
            if frame.is_dict:
                frame.key, child = item
                key = frame.key
                if type(key) is not str or not valid_text(key):
                    raise _refusal_at(stack, "object key is not a valid string")
            else:
                child = item
            kind = type(child)
            if kind is dict or kind is list or kind is tuple:
                if id(child) in active:
                    raise _refusal_at(stack, "cycle")
                active.add(id(child))
                stack.append(_Frame(child))
                descended = True
                break
            if kind is not FrozenDict and kind is not FrozenList:
                problem = _scalar_problem(child)
                if problem is not None:
                    raise _refusal_at(stack, problem)
            frame.out.append((frame.key, child) if frame.is_dict else child)
        if descended:
            continue
        stack.pop()
        active.discard(id(frame.source))
        built = frozen_dict(frame.out) if frame.is_dict else _frozen_list(frame.out)
        if not stack:
            return built
        parent = stack[-1]
        parent.out.append((parent.key, built) if parent.is_dict else built)


def _refusal_at(stack: list[_Frame], problem: str) -> _Refusal:
    refusal = _Refusal(problem)
    for frame in reversed(stack):
        if frame.is_dict:
            refusal.step(frame.key, _key_part(frame.key))
        else:
            refusal.step(len(frame.out), f"[{len(frame.out)}]")
    return refusal


def is_json_value(value: Any) -> bool:
    """True when ``value`` passes the same rules as ``freeze``."""
    try:
        freeze(value)
    except InvalidEventError:
        return False
    return True


def json_equal(a: Any, b: Any) -> bool:
    """Structural JSON equality without recursion (frozen or plain values of any depth).

    Arrays compare element-wise whatever their container (tuple, list), objects by key set
    regardless of order, numbers by value; as in JavaScript, ``True`` never equals ``1``.
    """
    pending = [(a, b)]
    while pending:
        x, y = pending.pop()
        if x is y:
            continue
        if isinstance(x, dict):
            if not isinstance(y, dict) or len(x) != len(y):
                return False
            for key, member in x.items():
                if key not in y:
                    return False
                pending.append((member, y[key]))
        elif isinstance(x, (list, tuple)):
            if not isinstance(y, (list, tuple)) or len(x) != len(y):
                return False
            pending.extend(zip(x, y, strict=True))
        elif type(x) is bool or type(y) is bool or isinstance(y, (dict, list, tuple)) or x != y:
            return False
    return True


def thaw(value: Any) -> Any:
    """Return a plain, mutable deep copy (``dict``/``list``) of a JSON value."""
    if not isinstance(value, (dict, list, tuple)):
        return value
    root: Any = {} if isinstance(value, dict) else []
    pending: list[tuple[Any, Any]] = [(value, root)]
    while pending:
        source, target = pending.pop()
        pairs = source.items() if isinstance(source, dict) else enumerate(source)
        for key, child in pairs:
            if isinstance(child, (dict, list, tuple)):
                copy: Any = {} if isinstance(child, dict) else []
                pending.append((child, copy))
                child = copy
            if isinstance(target, dict):
                target[key] = child
            else:
                target.append(child)
    return root


def dumps(value: Any) -> bytes:
    """Compact UTF-8 JSON in orjson's formatting, for frozen or plain values of any depth."""
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError as exc:
        if "recursion" not in str(exc).lower():
            raise
    return _dumps_iterative(value)


def dumps_indented(value: Any) -> bytes:
    """Indented JSON for people to read; past orjson's depth limit, compact JSON (any depth)."""
    try:
        return orjson.dumps(value, option=orjson.OPT_INDENT_2)
    except orjson.JSONEncodeError as exc:
        if "recursion" not in str(exc).lower():
            raise
    return _dumps_iterative(value)


class _Deferred:
    """A child value waiting to be encoded (distinguishes it from literal bytes)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def _dumps_iterative(value: Any) -> bytes:
    out: list[bytes] = []
    work: list[Any] = [_Deferred(value)]
    while work:
        item = work.pop()
        if type(item) is bytes:
            out.append(item)
            continue
        child = item.value
        if isinstance(child, dict):
            parts: list[Any] = [b"{"]
            for index, (key, member) in enumerate(child.items()):
                parts.append((b"," if index else b"") + orjson.dumps(key) + b":")
                parts.append(_Deferred(member))
            parts.append(b"}")
            work.extend(reversed(parts))
        elif isinstance(child, (list, tuple)):
            parts = [b"["]
            for index, member in enumerate(child):
                if index:
                    parts.append(b",")
                parts.append(_Deferred(member))
            parts.append(b"]")
            work.extend(reversed(parts))
        else:
            out.append(orjson.dumps(child))
    return b"".join(out)


def loads(raw: bytes | bytearray | memoryview | str) -> Any:
    """Parse JSON with orjson; documents nested deeper than orjson allows still parse."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        if "depth" not in str(exc).lower() and "recursion" not in str(exc).lower():
            raise
    text = raw if isinstance(raw, str) else bytes(raw).decode("utf-8")
    return _loads_iterative(text)


_TOKEN = re.compile(
    r'\s*(?:(?P<open>[\[{])|(?P<close>[\]}])|(?P<sep>[,:])'
    r'|(?P<str>"(?:[^"\\]|\\.)*")|(?P<lit>-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null))',
    re.DOTALL,
)


def _loads_iterative(text: str) -> Any:  # noqa: C901, PLR0915
    """A non-recursive JSON parser, used only for documents deeper than orjson's limit.

    A tiny state machine: ``expect`` is what may come next ("value", "key", ":", ",").
    """
    stack: list[Any] = []
    keys: list[Any] = []
    expect = "value"
    result: Any = None
    pos = 0
    while True:
        match = _TOKEN.match(text, pos)
        if match is None:
            if expect == "end" and text[pos:].strip() == "":
                return result
            raise orjson.JSONDecodeError("invalid JSON", text, pos)
        pos = match.end()
        kind = match.lastgroup
        token = match.group(kind or "")
        value: Any
        if kind == "sep":
            if expect != token:
                raise orjson.JSONDecodeError(f"unexpected {token!r}", text, pos)
            expect = "key" if token == "," and isinstance(stack[-1], dict) else "value"
            continue
        if kind == "close":
            container = stack[-1] if stack else None
            closes_dict = token == "}"
            if container is None or isinstance(container, dict) != closes_dict:
                raise orjson.JSONDecodeError("mismatched bracket", text, pos)
            empty_ok = not container and expect == ("key" if closes_dict else "value")
            if expect != "," and not empty_ok:
                raise orjson.JSONDecodeError(f"unexpected {token!r}", text, pos)
            value = stack.pop()
            keys.pop()
        elif expect == "key":
            if kind != "str":
                raise orjson.JSONDecodeError("expected an object key", text, pos)
            keys[-1] = orjson.loads(token)
            expect = ":"
            continue
        elif expect != "value":
            raise orjson.JSONDecodeError(f"expected {expect!r}", text, pos)
        elif kind == "open":
            stack.append({} if token == "{" else [])
            keys.append(None)
            expect = "key" if token == "{" else "value"
            continue
        else:
            value = orjson.loads(token)
        if not stack:
            result = value
            expect = "end"
            continue
        parent = stack[-1]
        if isinstance(parent, dict):
            parent[keys[-1]] = value
        else:
            parent.append(value)
        expect = ","


def frozen_object(value: object, root: str) -> FrozenDict:
    """``value`` (a mapping) validated and frozen as a JSON object."""
    if type(value) is FrozenDict:
        return value
    if isinstance(value, Mapping) and type(value) is not dict:
        value = dict(value)
    frozen = freeze(value, root=root, what="non-JSON-serializable data")
    if type(frozen) is not FrozenDict:
        raise InvalidEventError(f"{root} must be a JSON object, got {type(value).__name__}", path=root)
    return frozen
