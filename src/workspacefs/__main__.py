"""``python -m workspacefs``: the ``workspacefs`` command."""

from workspacefs.cli import main

main()
