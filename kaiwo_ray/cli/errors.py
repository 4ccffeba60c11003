"""Errors a user command reports as one line: usage errors exit 2, cluster errors exit 1.

Raised anywhere below a command's `run`; `kaiwo_ray.cli.main` prints `error: <message>` and exits
with `exit_code`, so no command ever shows a traceback for a problem the user can fix.
"""

from __future__ import annotations


class CliError(Exception):
    exit_code = 1

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class UsageError(CliError):
    """Something the user typed or handed in (arguments, files, manifests): exit 2."""

    exit_code = 2


class ClusterError(CliError):
    """The cluster could not be reached, refused us, or answered an error: exit 1."""

    exit_code = 1
