"""The cluster options every `kaiwo` command takes (kubectl's names) and the client they give."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kaiwo_ray.cli.api import Api


def add_cluster_arguments(parser: argparse.ArgumentParser, *, namespace: bool = True,
                          all_namespaces: bool = False) -> None:
    group = parser.add_argument_group("cluster")
    group.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config)")
    group.add_argument("--context", metavar="NAME", help="kubeconfig context (default: its current-context)")
    if namespace:
        group.add_argument("-n", "--namespace", metavar="NS",
                           help="namespace (default: the context's namespace, else 'default')")
    if all_namespaces:
        group.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace")


def connect(args: argparse.Namespace) -> Api:
    from kaiwo_ray.cli.api import Api
    from kaiwo_ray.cli.kubeconfig import load

    return Api(load(getattr(args, "kubeconfig", None), getattr(args, "context", None)))


def namespace_of(args: argparse.Namespace, api: Api) -> str:
    return getattr(args, "namespace", None) or api.access.namespace
