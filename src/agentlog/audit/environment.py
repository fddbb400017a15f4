"""The environment a session would be restored into, gathered at the edge: its cwd, git, the caller's tools.

The only I/O of an audit besides reading the store. git runs only when the session header
recorded git facts (``extra.git = {"head", "dirty"}``), with the repository's fsmonitor hook
disabled: auditing a session must not run code that its working directory configures.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agentlog.core.header import SessionHeader

__all__ = ["Environment", "probe_environment", "recorded_git"]

_GIT = ("git", "-c", "core.fsmonitor=false", "-c", "core.untrackedCache=false")


@dataclass(frozen=True, slots=True)
class Environment:
    """Current facts to compare with what the session recorded; None where unknown or not asked."""

    cwd_exists: bool | None = None
    git_head: str | None = None
    git_dirty: bool | None = None
    git_error: str | None = None
    tools: tuple[Any, ...] | None = None
    """The tool schemas the caller will send now (agentlog or Chat Completions form)."""
    model: str | None = None
    """The ``provider/model`` the caller will use now."""
    preset: str | None = None
    """The agent preset the caller will use now."""


def recorded_git(header: SessionHeader) -> dict[str, Any] | None:
    """``{"head": str, "dirty": bool}`` from the header's ``extra.git``, when it recorded one."""
    git = header.extra.get("git")
    if not isinstance(git, dict) or not isinstance(git.get("head"), str):
        return None
    return {"head": git["head"], "dirty": git.get("dirty")}


def _git(cwd: str, *args: str) -> str:
    done = subprocess.run([*_GIT, "-C", cwd, *args], capture_output=True, text=True, timeout=30,
                          env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"}, check=False)
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        raise OSError(lines[-1] if lines else f"git {args[0]} failed")
    return done.stdout


def probe_environment(header: SessionHeader, *, tools: Sequence[Any] | None = None, model: str | None = None,
                      preset: str | None = None) -> Environment:
    """What the recorded cwd is now (exists; git HEAD and dirty state when the header recorded git)."""
    cwd = header.cwd
    exists = os.path.isdir(cwd) if cwd else None
    head = dirty = error = None
    if cwd and exists and recorded_git(header) is not None:
        try:
            head = _git(cwd, "rev-parse", "HEAD").strip()
            dirty = bool(_git(cwd, "status", "--porcelain", "--untracked-files=no").strip())
        except (OSError, subprocess.SubprocessError) as exc:
            error = str(exc)
    return Environment(cwd_exists=exists, git_head=head, git_dirty=dirty, git_error=error,
                       tools=None if tools is None else tuple(tools), model=model, preset=preset)
