"""Errors that the CLI turns into a message and exit code 2, never a traceback."""

from __future__ import annotations


class DatalintError(Exception):
    """A problem the user can fix: bad flag, bad config, bad spec, bad file. Exit code 2."""

    exit_code = 2


class UsageError(DatalintError):
    """A command-line or configuration value that cannot be used as given."""
