"""The machine a benchmark ran on: CPU, cores, RAM, Python, OS, package versions, load."""

from __future__ import annotations

import os
import platform
from importlib import metadata
from pathlib import Path
from typing import Any, Final

__all__ = ["describe_machine", "load_average"]

PACKAGES: Final = ("agentlog", "orjson", "zstandard", "rich", "click")
"""Packages whose versions change the figures."""


def describe_machine(temp_dir: Path | None = None) -> dict[str, Any]:
    """A JSON-ready description of this machine; ``temp_dir``'s file system is named too."""
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "ram_gb": _ram_gb(),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "os": platform.platform(),
        "packages": {name: _version(name) for name in PACKAGES},
        "temp_filesystem": _filesystem(temp_dir) if temp_dir is not None else None,
        "load_average_start": load_average(),
    }


def load_average() -> list[float] | None:
    """1/5/15-minute load averages: other work on the machine makes figures noisy."""
    try:
        return [round(value, 2) for value in os.getloadavg()]
    except OSError:
        return None


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _ram_gb() -> float | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as info:
            for line in info:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return None


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def _filesystem(path: Path) -> str | None:
    """``<type> on <device>`` of the mount holding ``path`` (fsync cost depends on it)."""
    try:
        with open("/proc/mounts", encoding="utf-8") as mounts:
            entries = [line.split()[:3] for line in mounts]
    except OSError:
        return None
    target = os.path.realpath(path)
    best: list[str] | None = None
    for device, mount, kind in entries:
        inside = target == mount or target.startswith(mount.rstrip("/") + "/")
        if inside and (best is None or len(mount) > len(best[1])):
            best = [device, mount, kind]
    return None if best is None else f"{best[2]} on {best[0]} ({best[1]})"
