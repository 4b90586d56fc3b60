"""`python -m regraph_cli` is the `regraph` command."""

from regraph_cli.main import run

run()
