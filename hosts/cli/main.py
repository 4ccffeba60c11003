"""Entry point of the `kaiwo-ray` console script: the library's commands (`kaiwo_ray.cli.main`) with
the hosting commands added, each imported only when it runs."""

from __future__ import annotations

import argparse
import sys

from kaiwo_ray.cli.main import SUBCOMMANDS, USER_COMMANDS
from kaiwo_ray.cli.main import build_parser as build_any_parser
from kaiwo_ray.cli.main import main as run_command

HOST_COMMANDS: dict[str, tuple[str, str]] = {
    "sandbox": ("hosts.cli.sandbox", "run the Kubernetes API sandbox (a simulated cluster)"),
    "dev": ("hosts.cli.dev", "start sandbox + local Ray + operator in one command"),
    "up": ("hosts.cli.up", "run the operator against a real cluster"),
    "simulate": ("hosts.cli.simulate", "replay a workload trace against a queue configuration, in virtual time"),
    "trace": ("hosts.cli.trace", "make workload traces for `simulate` (generate, export from a cluster)"),
}
# In the order `kaiwo-ray --help` lists them: building and running the operator, then checking it.
ALL_COMMANDS: dict[str, tuple[str, str]] = {
    "render": SUBCOMMANDS["render"], "crds": SUBCOMMANDS["crds"], **HOST_COMMANDS, **SUBCOMMANDS,
    **USER_COMMANDS,
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    return build_any_parser(command, commands=ALL_COMMANDS)


def main(argv: list[str] | None = None) -> int:
    return run_command(argv, commands=ALL_COMMANDS)


if __name__ == "__main__":
    sys.exit(main())
