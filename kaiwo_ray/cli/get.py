"""`kaiwo list` / `kaiwo get`: workloads in kubectl's table style (-o wide|yaml|json|name, -w)."""

from __future__ import annotations

import argparse
import queue
import sys
import threading
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.cli.access import add_cluster_arguments, connect

if TYPE_CHECKING:
    from kaiwo_ray.cli.api import Api
    from kaiwo_ray.cli.workloads import WorkloadType

EXAMPLES = """examples:
  kaiwo list                         # jobs and services in the current namespace
  kaiwo list jobs -A                 # every namespace
  kaiwo get job/my-training -o yaml
  kaiwo list --user jane@example.com -o wide
  kaiwo list services -l team=vision -w
  kaiwo list -o name | xargs -n1 kaiwo delete
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("what", nargs="*", metavar="TYPE[/NAME]",
                        help="jobs, services (default: both), or job/NAME; TYPE NAME works too")
    parser.add_argument("-o", "--output", choices=("wide", "yaml", "json", "name"), help="output format")
    parser.add_argument("-l", "--selector", metavar="LABELS", help="label selector, e.g. team=vision")
    parser.add_argument("--user", help="only workloads whose spec.user is this")
    parser.add_argument("-w", "--watch", action="store_true", help="after listing, print changes as they happen")
    parser.add_argument("--no-headers", action="store_true", help="omit the table header")
    add_cluster_arguments(parser, all_namespaces=True)


def targets(words: list[str]) -> tuple[list[WorkloadType], list[str]]:
    """Types to list and names to fetch: [] -> both types; `jobs`; `job/a service/b`; `job a b`."""
    from kaiwo_ray.cli.errors import UsageError
    from kaiwo_ray.cli.workloads import TYPES, parse_selector, workload_type

    if not words:
        return list(TYPES), []
    if "/" in words[0]:
        pairs = [parse_selector(w) for w in words]
        types = list(dict.fromkeys(t for t, _ in pairs))
        return types, [f"{t.short}/{n}" for t, n in pairs]
    if words[0] in ("all", "workloads"):
        return list(TYPES), []
    types = [workload_type(t) for t in words[0].split(",")]
    if words[1:] and len(types) != 1:
        raise UsageError("name workloads of several types as TYPE/NAME (e.g. job/a service/b)")
    return types, [f"{types[0].short}/{n}" for n in words[1:]]


def run(args: argparse.Namespace) -> int:
    import orjson

    from kaiwo_ray.cli.api import ApiStatusError
    from kaiwo_ray.cli.errors import ClusterError, UsageError
    from kaiwo_ray.cli.workloads import fetch, parse_selector

    types, names = targets(args.what)
    if names and args.all_namespaces:
        raise UsageError("-A lists every namespace: it cannot be combined with names")
    api = connect(args)
    namespace = None if args.all_namespaces else (args.namespace or api.access.namespace)
    items: list[JsonObj] = []
    versions: dict[str, str] = {}
    if names:
        for text in names:
            wtype, name = parse_selector(text)
            items.append(fetch(api, wtype, str(namespace), name))
    else:
        for wtype in types:
            try:
                body = api.raw("GET", wtype.path(namespace), query={"labelSelector": args.selector}).data
            except ApiStatusError as err:
                if err.code == 404:
                    raise ClusterError(f"the cluster has no {wtype.kind} resource: install the Kaiwo CRDs "
                                       "(kubectl apply -f crds/)") from None
                if err.code == 400 and args.selector:
                    raise UsageError(f"bad label selector {args.selector!r}: {err.message}") from None
                raise
            listed = orjson.loads(body)
            versions[wtype.short] = str((listed.get("metadata") or {}).get("resourceVersion", ""))
            kind = wtype.kind
            for item in listed.get("items") or []:
                item.setdefault("kind", kind)
                item.setdefault("apiVersion", "kaiwo.silogen.ai/v1alpha1")
                items.append(item)
    if args.user:
        items = [i for i in items if (i.get("spec") or {}).get("user") == args.user]
    printer = Printer(args, with_namespace=namespace is None, with_type=len(types) > 1)
    printer.print_all(items)
    if args.watch:
        watch(api, types, namespace, versions, args, printer)
    elif not items and args.output in (None, "wide"):
        where = "any namespace" if namespace is None else f"{namespace} namespace"
        sys.stderr.write(f"No resources found in {where}.\n")
    return 0


class Printer:
    def __init__(self, args: argparse.Namespace, *, with_namespace: bool, with_type: bool) -> None:
        self.output = args.output
        self.no_headers = args.no_headers
        self.with_namespace = with_namespace
        self.with_type = with_type
        self.headers_shown = False

    def print_all(self, items: list[JsonObj]) -> None:
        from kaiwo_ray.cli.table import render_table
        from kaiwo_ray.cli.workloads import headers, row

        out = sys.stdout
        if self.output in ("json", "yaml"):
            document: JsonObj = items[0] if len(items) == 1 else {"apiVersion": "v1", "kind": "List", "items": items,
                                                                   "metadata": {"resourceVersion": ""}}
            out.write(_dump(document, self.output))
            return
        if self.output == "name":
            from kaiwo_ray.cli.workloads import type_of

            out.write("".join(f"{type_of(i).short}/{i['metadata']['name']}\n" for i in items))
            return
        if not items:
            return
        now = datetime.now(UTC)
        wide = self.output == "wide"
        rows = [row(i, now, with_namespace=self.with_namespace, with_type=self.with_type, wide=wide) for i in items]
        out.write(render_table(headers(with_namespace=self.with_namespace, wide=wide), rows,
                               no_headers=self.no_headers or self.headers_shown))
        self.headers_shown = True
        out.flush()

    def print_event(self, item: JsonObj) -> None:
        if self.output in ("json", "yaml"):
            sys.stdout.write(_dump(item, self.output) + ("---\n" if self.output == "yaml" else ""))
            sys.stdout.flush()
            return
        self.print_all([item])


def _dump(document: JsonObj, output: str) -> str:
    if output == "json":
        import json

        return json.dumps(document, indent=4) + "\n"
    import yaml

    return str(yaml.safe_dump(document, sort_keys=False))


def watch(api: Api, types: list[WorkloadType], namespace: str | None, versions: dict[str, str],
          args: argparse.Namespace, printer: Printer) -> None:
    """One watch per type on its own thread (each resumes from its list's resourceVersion); rows
    print on the main thread in arrival order. Ctrl-C ends it."""
    events: queue.Queue[JsonObj | BaseException] = queue.Queue()

    def follow(wtype: WorkloadType) -> None:
        version = versions.get(wtype.short, "")
        try:
            while True:
                for event in api.watch(wtype.path(namespace), resource_version=version,
                                       labelSelector=args.selector):
                    obj = event.get("object") or {}
                    version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
                    if event.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                        obj.setdefault("kind", wtype.kind)
                        events.put(obj)
                    elif event.get("type") == "ERROR":  # 410 Gone: start from now
                        version = ""
        except BaseException as exc:  # handed to the main thread, which reports it
            events.put(exc)

    for wtype in types:
        threading.Thread(target=follow, args=(wtype,), daemon=True).start()
    while True:
        item = events.get()
        if isinstance(item, BaseException):
            raise item
        if args.user and (item.get("spec") or {}).get("user") != args.user:
            continue
        printer.print_event(item)
