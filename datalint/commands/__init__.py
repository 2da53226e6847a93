"""Subcommands of the datalint CLI: one module each, registered in datalint.cli.COMMANDS."""
