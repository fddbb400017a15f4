"""The reference agent, its ``list_dir`` first waiting on a FIFO: a SIGKILL then lands mid-tool.

Run as ``python blocking_agent.py ARGS...`` (the example's arguments). The test opens the FIFO
``<root>/.block`` for writing once the tool is waiting on it, so it knows the ``tool/call`` is
durable and the tool has not finished, then kills this process.
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

from agentlog.agent.tools import FileTools

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "coding_agent.py"
BLOCK = ".block"
_list_dir = FileTools.list_dir


def blocking_list_dir(self: FileTools, path: str) -> str:
    with open(self.root / BLOCK, "rb") as fifo:  # returns when the test opens the write end
        fifo.read()  # and waits until the test closes it (it kills this process first)
    return _list_dir(self, path)


if __name__ == "__main__":
    FileTools.list_dir = blocking_list_dir  # type: ignore[method-assign]
    sys.argv = [str(EXAMPLE), *sys.argv[1:]]
    runpy.run_path(str(EXAMPLE), run_name="__main__")
