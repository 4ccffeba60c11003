"""`kaiwo manage`: the interactive list-and-act view (a textual TUI, `kaiwo_ray.cli.manage_app`)."""

from __future__ import annotations

import argparse

from kaiwo_ray.cli.access import add_cluster_arguments, connect

EXAMPLES = """examples:
  kaiwo manage                       # every namespace
  kaiwo manage -n research --user jane@example.com
keys: up/down select, l logs, p pods, e explain, m GPUs, d delete (asks first), r refresh, q quit
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("type", nargs="?", choices=("job", "service"), help="only this type")
    parser.add_argument("-u", "--user", help="only workloads whose spec.user is this")
    add_cluster_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from kaiwo_ray.cli.manage_app import ClusterBackend, ManageApp

    api = connect(args)
    api.get("/version")  # fail fast, with the one-line error, before the screen takes over
    app = ManageApp(ClusterBackend(api, namespace=args.namespace, user=args.user, only=args.type))
    app.run()
    return 0
