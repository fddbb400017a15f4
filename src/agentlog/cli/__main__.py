"""``python -m agentlog.cli``: the same as the ``agentlog`` command."""

from agentlog.cli.main import main

main()
