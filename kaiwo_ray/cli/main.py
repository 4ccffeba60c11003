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
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kaiwo-ray", description="Kaiwo on Ray: queue and run AI workloads.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text) in SUBCOMMANDS.items():
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


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    run = getattr(args, "_run", None)
    if run is None:
        parser.print_help(sys.stderr)
        return 2
    result: int = run(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
