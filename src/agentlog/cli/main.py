"""Entry point of the ``agentlog`` command: each command is one library call plus rendering."""

from __future__ import annotations

import click

from agentlog import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="agentlog")
def cli() -> None:
    """Crash-safe, event-sourced sessions for LLM agents."""


def main() -> None:
    """Run the command line."""
    cli()
