from datalint.cli import entry

entry()
