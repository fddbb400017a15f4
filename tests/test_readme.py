"""The README and its reference pages stay true: Python blocks run, command tables are complete,
relative links resolve."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
RUNNABLE = [README, ROOT / "docs" / "integrations.md", ROOT / "docs" / "stores.md"]
"""Pages whose every Python block runs as written."""


@pytest.mark.parametrize("page", RUNNABLE, ids=lambda page: page.name)
def test_python_blocks_run(page: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.DOTALL)
    assert blocks, f"{page.name} has no python example"
    for block in blocks:
        exec(compile(block, str(page), "exec"), {})


@pytest.mark.parametrize("page", [README, ROOT / "docs" / "cli.md"], ids=lambda page: page.name)
def test_command_table_lists_every_command(page: Path) -> None:
    from agentlog.cli.main import cli

    listed = set(re.findall(r"^\| `agentlog ([\w-]+)", page.read_text(), flags=re.MULTILINE))
    assert listed == set(cli.commands)


def test_relative_links_resolve() -> None:
    pages = [README, *sorted((ROOT / "docs").glob("*.md"))]
    broken = []
    for page in pages:
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.DOTALL)
        text = re.sub(r"(?<!\[)`[^`\n]*`(?!\])", "", text)  # code spans, not a link's `label`
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
            if "://" in target or target.startswith("mailto:"):
                continue
            path = (page.parent / target).resolve()
            if path.is_relative_to(ROOT) and not path.exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert not broken, broken
