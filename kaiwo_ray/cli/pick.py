"""Choosing one pod and container of a workload: flags first, else a numbered prompt on a terminal,
else the first running pod (Ray head first) and its default container, said on stderr."""

from __future__ import annotations

import sys

from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.cli.errors import ClusterError, UsageError
from kaiwo_ray.cli.table import render_table
from kaiwo_ray.cli.workloads import container_rows, default_container


def choose(pods: list[JsonObj], what: str, *, pod: str | None = None, container: str | None = None,
           interactive: bool | None = None, containers_filter: set[tuple[str, str]] | None = None) -> tuple[JsonObj, str]:
    if not pods:
        raise ClusterError(f"{what} has no pods yet: see why with `kaiwo explain {what}`")
    if pod is not None:
        matches = [p for p in pods if p["metadata"]["name"] == pod]
        if not matches:
            names = ", ".join(p["metadata"]["name"] for p in pods)
            raise UsageError(f"pod {pod!r} is not one of {what}'s pods ({names})")
        pods = matches
    rows = [r for r in container_rows(pods) if container is None or r[2] == container]
    if containers_filter is not None:
        rows = [r for r in rows if (r[0], r[2]) in containers_filter]
    if not rows:
        raise UsageError(f"no container {container!r} in the pods of {what}" if container
                         else f"{what} has no matching container")
    by_name = {p["metadata"]["name"]: p for p in pods}
    if len(rows) == 1:
        return by_name[rows[0][0]], rows[0][2]
    if interactive is None:
        interactive = sys.stdin.isatty() and sys.stderr.isatty()
    if interactive and (pod is None or container is None):
        sys.stderr.write(render_table(["#", "POD", "PHASE", "CONTAINER", "STATE"],
                                      [[str(i + 1), *r] for i, r in enumerate(rows)]))
        while True:
            try:
                answer = input(f"choose 1-{len(rows)} [1]: ").strip() or "1"
            except EOFError:
                answer = "1"
            if answer.isdigit() and 1 <= int(answer) <= len(rows):
                chosen = rows[int(answer) - 1]
                return by_name[chosen[0]], chosen[2]
            sys.stderr.write(f"please type a number from 1 to {len(rows)}\n")
    running = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"] or pods
    first = running[0] if pod is None else pods[0]
    name = container or default_container(first)
    if containers_filter is not None and (first["metadata"]["name"], name) not in containers_filter:
        first, name = by_name[rows[0][0]], rows[0][2]
    if len(pods) > 1 or len(rows) > 1:
        sys.stderr.write(f"{len(pods)} pod(s), {len(rows)} container(s): using pod {first['metadata']['name']}, "
                         f"container {name} (choose with --pod and -c)\n")
    return first, name
