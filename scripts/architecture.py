"""Draw docs/architecture.png from the package's real imports, or trace the modules one call enters.

    python scripts/architecture.py draw [OUT.png]      # needs Graphviz's `dot` (apt-get install graphviz)
    python scripts/architecture.py trace                # the modules `store.load(id)` enters, in order

The picture groups the packages by the layers of the import contract (pyproject.toml
[tool.importlinter]); an arrow is "imports", labelled with how many module-to-module imports it
stands for (imports of ``errors`` and ``version``, which every layer may make, are not drawn).
Run it from the repository root.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

LAYERS = [["cli"], ["agent"], ["web", "audit"], ["io"], ["integrations"],
          ["compaction", "recording", "ops"], ["store"], ["legacy"], ["core"], ["errors", "version"]]


def package_edges() -> Counter[tuple[str, str]]:
    """Module-to-module imports between the top-level packages of ``agentlog``, counted."""
    import grimp

    graph = grimp.build_graph("agentlog", cache_dir=None)
    edges: Counter[tuple[str, str]] = Counter()
    for module in graph.modules:
        for imported in graph.find_modules_directly_imported_by(module):
            source, target = _top(module), _top(imported)
            if source != target and "agentlog" not in (source, target):
                edges[(source, target)] += 1
    return edges


def _top(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def dot_source(edges: Counter[tuple[str, str]]) -> str:
    lines = ["digraph agentlog {", '  rankdir=TB; nodesep=0.35; ranksep=0.45;',
             '  node [shape=box, style="rounded,filled", fillcolor="#eef3fb", fontname="Helvetica"];',
             '  edge [color="#7a8aa6", fontname="Helvetica", fontsize=9];']
    for rank, layer in enumerate(LAYERS[:-1]):
        names = " ".join(f'"{name}"' for name in layer)
        lines.append(f'  subgraph layer{rank} {{ rank=same; {names} }}')
    lines.append('  note [shape=note, fillcolor="#fff8e6", '
                 'label="every layer may import\\nerrors and version"];')
    for (source, target), count in sorted(edges.items()):
        if target in LAYERS[-1]:
            continue  # every layer may import the errors and the version: drawn once, as a note
        lines.append(f'  "{source}" -> "{target}" [label="{count}"];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def draw(out: Path) -> None:
    subprocess.run(["dot", "-Tpng", "-Gdpi=110", "-o", str(out)], input=dot_source(package_edges()),
                   text=True, check=True)
    print(f"wrote {out}")


def trace() -> None:
    """Record a small standard-workload session in a temporary JSONL store, then list the agentlog
    modules a fresh store's ``load`` calls into, in the order first entered."""
    from benchmarks.workload import record_workload

    from agentlog import JsonlStore, SessionHeader

    root = tempfile.mkdtemp()
    with JsonlStore(root) as store, store.start(SessionHeader(id="walk", cwd="/w")) as live:
        record_workload(live.session, turns=20, flush=lambda: None)
    entered: list[str] = []

    def profile(frame: FrameType, event: str, _arg: Any) -> None:
        module = frame.f_globals.get("__name__", "")
        if event == "call" and module.startswith("agentlog") and module not in entered:
            entered.append(module)

    with JsonlStore(root) as fresh:
        sys.setprofile(profile)
        try:
            fresh.load("walk")
        finally:
            sys.setprofile(None)
    print(f"{len(entered)} modules: " + " -> ".join(name.removeprefix("agentlog.") for name in entered))


if __name__ == "__main__":
    command = sys.argv[1] if len(sys.argv) > 1 else "trace"
    if command == "draw":
        draw(Path(sys.argv[2] if len(sys.argv) > 2 else "docs/architecture.png"))
    else:
        trace()
