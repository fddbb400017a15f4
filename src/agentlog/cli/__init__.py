"""The ``agentlog`` command line."""

from agentlog.cli.main import main

__all__ = ["main"]
