"""Text with every control a terminal or a bidi algorithm would act on shown as an escape.

Session content is untrusted: an ESC in tool output must not clear a screen or retitle a
terminal, a U+202E must not reverse what a reader sees. Used by the CLI and the human exports.
"""

from __future__ import annotations

import re

__all__ = ["INVISIBLE", "visible"]

INVISIBLE = {
    code: f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
    for code in [*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0),
                 0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)]
}
"""Terminal controls (C0 but tab and newline, DEL, C1) and bidirectional controls, shown escaped."""


_CONTROLS = re.compile("[" + "".join(re.escape(chr(code)) for code in INVISIBLE) + "]")


def visible(text: str) -> str:
    """``text`` with every control a terminal or a bidi algorithm would act on shown as an escape."""
    if _CONTROLS.search(text) is None:  # the usual case, and far cheaper than translate on non-ASCII text
        return text
    return text.translate(INVISIBLE)
