"""The command runner behind the `kaiwo-ray` and `kaiwo` console scripts, and the library's commands.

Each sub-command lives in its own module and exposes `add_arguments(parser)` and
`run(args) -> int`. Modules are imported only when their sub-command runs, so
`kaiwo-ray render` never pays for importing Ray. The hosting commands (`sandbox`,
`dev`, `up`) are the host layer's: `hosts.cli.main` adds them to these and is the
`kaiwo-ray` entry point.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import NoReturn

# The operator's tools: sub-command -> (module, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "render": ("kaiwo_ray.cli.render", "print the objects the operator would create for a manifest"),
    "crds": ("kaiwo_ray.cli.crds", "regenerate the CRD manifests in crds/ from the API models"),
    "doctor": ("kaiwo_ray.cli.doctor", "check a cluster for kaiwo-ray: one line per check, with its fix"),
}

# The user's commands: `kaiwo COMMAND` and `kaiwo-ray COMMAND` alike.
USER_COMMANDS: dict[str, tuple[str, str]] = {
    "version": ("kaiwo_ray.cli.version", "print the client version (--server: the cluster's too)"),
    "submit": ("kaiwo_ray.cli.submit", "create or update a KaiwoJob/KaiwoService from a manifest"),
    "list": ("kaiwo_ray.cli.get", "list workloads (jobs and services) in kubectl's table style"),
    "get": ("kaiwo_ray.cli.get", "the same as list"),
    "logs": ("kaiwo_ray.cli.logs", "print or follow the logs of a workload's pod"),
    "delete": ("kaiwo_ray.cli.delete", "delete a workload"),
    "status": ("kaiwo_ray.cli.status", "queues, GPU nodes and their usage"),
    "explain": ("kaiwo_ray.cli.explain", "why a workload is not running"),
    "exec": ("kaiwo_ray.cli.exec_cmd", "run a command in a workload's pod"),
    "port-forward": ("kaiwo_ray.cli.portforward", "forward local ports to a workload's pod"),
    "monitor": ("kaiwo_ray.cli.monitor", "GPU view of a workload's pods"),
    "manage": ("kaiwo_ray.cli.manage", "interactive list-and-act view of your workloads"),
    "completion": ("kaiwo_ray.cli.completion", "shell completion script for bash, zsh or fish"),
}
ALL_COMMANDS = {**SUBCOMMANDS, **USER_COMMANDS}


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (plus where to get help) and exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {message} (see `{self.prog} --help`)\n")


def build_parser(command: str | None = None, *, prog: str = "kaiwo-ray",
                 commands: dict[str, tuple[str, str]] | None = None) -> argparse.ArgumentParser:
    """The top-level parser. Only the module of `command` is imported (to add its arguments): the
    others are listed by name and help text alone, so `kaiwo-ray render` never imports Ray, the
    Kubernetes clients or the sandbox."""
    commands = ALL_COMMANDS if commands is None else commands
    parser = _Parser(prog=prog, description="Kaiwo on Ray: queue and run AI workloads.",
                     epilog=f"Run `{prog} COMMAND --help` for a command's options and examples.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, (module_name, help_text) in commands.items():
        if name != command:
            sub.add_parser(name, help=help_text, description=help_text, add_help=False)
            continue
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            continue  # sub-command not built yet
        sub_parser = sub.add_parser(name, help=help_text, description=help_text,
                                    epilog=getattr(module, "EXAMPLES", None),
                                    formatter_class=argparse.RawDescriptionHelpFormatter)
        module.add_arguments(sub_parser)
        sub_parser.set_defaults(_run=module.run)
    return parser


def _command_of(argv: list[str]) -> str | None:
    """The sub-command named in argv: the first word that is not an option."""
    return next((arg for arg in argv if not arg.startswith("-")), None)


def _stdin_dash(words: list[str]) -> list[str]:
    """`-f --` means stdin (as upstream's submit takes it), but argparse reads `--` as the end of
    options: spell it `-` before parsing."""
    out = list(words)
    for i, word in enumerate(out[:-1]):
        if word in ("-f", "--file") and out[i + 1] == "--":
            out[i + 1] = "-"
    return [("--file=-" if w == "--file=--" else w) for w in out]


def main(argv: list[str] | None = None, *, prog: str = "kaiwo-ray",
         commands: dict[str, tuple[str, str]] | None = None) -> int:
    """Run one command. Errors a user can fix are one line on stderr (exit 2: usage, 1: cluster);
    Ctrl-C exits 130 without a traceback."""
    from kaiwo_ray.cli.errors import CliError

    words = sys.argv[1:] if argv is None else list(argv)
    try:
        command = _command_of(words)
        if command == "submit":
            words = _stdin_dash(words)
        tail: list[str] | None = None
        if command == "exec" and "--" in words:  # the command after `--` is not parsed (kubectl's way)
            cut = words.index("--")
            words, tail = words[:cut], words[cut + 1:]
        parser = build_parser(command, prog=prog, commands=commands)
        args = parser.parse_args(words)
        if tail is not None:
            args.argv = tail
        run = getattr(args, "_run", None)
        if run is None:
            parser.print_help(sys.stderr)
            return 2
        result: int = run(args)
        return result
    except CliError as err:
        sys.stderr.write(f"error: {err.message}\n")
        return err.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("\ninterrupted\n")
        return 130
    except BrokenPipeError:  # `kaiwo list | head`
        sys.stderr.close()
        return 0
