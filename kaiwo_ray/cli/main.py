"""Entry point of the `kaiwo-ray` console script.

Each sub-command lives in its own module under `kaiwo_ray.cli` and exposes
`add_arguments(parser)` and `run(args) -> int`. Modules are imported only when
their sub-command runs, so `kaiwo-ray render` never pays for importing Ray.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# sub-command -> (module, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "render": ("kaiwo_ray.cli.render", "print the objects the operator would create for a manifest"),
    "crds": ("kaiwo_ray.cli.crds", "regenerate the CRD manifests in crds/ from the API models"),
    "sandbox": ("kaiwo_ray.cli.sandbox", "run the Kubernetes API sandbox (a simulated cluster)"),
    "dev": ("kaiwo_ray.cli.dev", "start sandbox + local Ray + operator in one command"),
    "up": ("kaiwo_ray.cli.up", "run the operator against a real cluster"),
    "doctor": ("kaiwo_ray.cli.doctor", "check a cluster for kaiwo-ray: one line per check, with its fix"),
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The top-level parser. Only the module of `command` is imported (to add its arguments): the
    others are listed by name and help text alone, so `kaiwo-ray render` never imports Ray, the
    Kubernetes clients or the sandbox."""
    parser = argparse.ArgumentParser(prog="kaiwo-ray", description="Kaiwo on Ray: queue and run AI workloads.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        if name != command:
            sub.add_parser(name, help=help_text, description=help_text, add_help=False)
            continue
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            continue  # sub-command not built yet
        sub_parser = sub.add_parser(name, help=help_text, description=help_text)
        module.add_arguments(sub_parser)
        sub_parser.set_defaults(_run=module.run)
    return parser


def _command_of(argv: list[str]) -> str | None:
    """The sub-command named in argv: the first word that is not an option."""
    return next((arg for arg in argv if not arg.startswith("-")), None)


def main(argv: list[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else argv
    parser = build_parser(_command_of(words))
    args = parser.parse_args(words)
    run = getattr(args, "_run", None)
    if run is None:
        parser.print_help(sys.stderr)
        return 2
    result: int = run(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
