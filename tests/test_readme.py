"""The README stays true: its Python example runs as written, its command table is complete."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_blocks_run() -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)
    assert blocks, "README has no python example"
    for block in blocks:
        exec(compile(block, str(README), "exec"), {})


def test_readme_command_table_lists_every_command() -> None:
    from agentlog.cli.main import cli

    listed = set(re.findall(r"^\| `agentlog ([\w-]+)", README.read_text(), flags=re.MULTILINE))
    assert listed == set(cli.commands)
