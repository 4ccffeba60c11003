"""`kaiwo version`: the client's version (no cluster call unless --server)."""

from __future__ import annotations

import argparse
import platform
import sys

from kaiwo_ray import __version__
from kaiwo_ray.cli.access import add_cluster_arguments, connect

EXAMPLES = """examples:
  kaiwo version
  kaiwo version --server          # also the cluster's Kubernetes version
  kaiwo version -o json
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--server", action="store_true", help="also ask the cluster for its version")
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text")
    add_cluster_arguments(parser, namespace=False)


def run(args: argparse.Namespace) -> int:
    info: dict[str, object] = {"clientVersion": {"kaiwoVersion": __version__,
                                                 "pythonVersion": platform.python_version(),
                                                 "platform": f"{sys.platform}/{platform.machine()}"}}
    if args.server:
        api = connect(args)
        info["serverVersion"] = api.get("/version")
    if args.output == "json":
        import json

        print(json.dumps(info, indent=2))
        return 0
    print(f"Client Version: kaiwo-ray {__version__} (python {platform.python_version()})")
    if args.server:
        server = info["serverVersion"]
        assert isinstance(server, dict)
        print(f"Server Version: {server.get('gitVersion', '?')}")
    return 0
