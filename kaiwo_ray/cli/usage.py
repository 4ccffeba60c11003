"""`kaiwo status usage [--by user|namespace|queue|...] [--since 7d]`: GPU-hours from the ledger's
ConfigMaps (docs/accounting.md), as a kubectl-style table. Reading them takes `list configmaps` in
the ledger's namespace (an admin's right); others ask the admin API's `/api/v1/usage`, which
authorizes per namespace."""

from __future__ import annotations

import re
import sys
import time
from typing import Any

from kaiwo_ray.telemetry.ledger_store import LABEL, assemble
from kaiwo_ray.telemetry.usage import GROUPS, UsageReport, report, to_csv

HEADERS = ("ALLOCATED", "USED", "IDLE", "UNKNOWN", "RECLAIMED", "USED%", "WORKLOADS", "DECLARED-USERS")
_RELATIVE = re.compile(r"^(\d+(?:\.\d+)?)([smhdw])$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_since(text: str, now: float) -> float:
    """`7d`, `24h`, `30m`, `90s`, `2w` before now; ValueError with the accepted forms."""
    match = _RELATIVE.match(text.strip())
    if not match:
        raise ValueError(f"--since {text!r}: use a duration such as 30m, 24h, 7d or 2w")
    return now - float(match.group(1)) * _UNITS[match.group(2)]


def _gpu_hours(value: float) -> str:
    return f"{value:.2f}" if value >= 0.01 or value == 0 else f"{value:.4f}"


def usage_rows(usage: UsageReport) -> list[list[str]]:
    rows = []
    for item in usage.items:
        reclaimed = sum(item.reclaimed_gpu_hours.values())
        share = f"{round(100 * item.used_gpu_hours / item.allocated_gpu_hours)}%" if item.allocated_gpu_hours else "-"
        rows.append([item.key, _gpu_hours(item.allocated_gpu_hours), _gpu_hours(item.used_gpu_hours),
                     _gpu_hours(item.idle_gpu_hours), _gpu_hours(item.unknown_gpu_hours), _gpu_hours(reclaimed),
                     share, str(item.workloads), ",".join(item.declared_users) or "-"])
    return rows


def run(api: Any, args: Any) -> int:
    from kaiwo_ray.cli.api import ApiStatusError, path_of
    from kaiwo_ray.cli.errors import ClusterError
    from kaiwo_ray.cli.table import render_table
    from kaiwo_ray.kube.resources import CONFIGMAPS

    now = time.time()
    try:
        since = parse_since(args.since, now)
    except ValueError as err:
        sys.stderr.write(f"error: {err}\n")
        return 2
    try:
        listed = api.list(path_of(CONFIGMAPS, args.ledger_namespace), labelSelector=LABEL)
    except ApiStatusError as err:
        if err.code == 403:
            raise ClusterError(f"reading the GPU ledger needs `list configmaps` in {args.ledger_namespace}: "
                               "ask the admin API instead (GET /api/v1/usage)") from None
        raise
    ledger, _ = assemble(list(listed.get("items") or []))
    width = ledger.bucket_seconds
    usage = report(ledger.rows, ledger.owners, ledger.reclaims.values(), by=args.by, since=since - since % width,
                   until=now + width, bucket_seconds=width)
    if args.output == "json":
        print(usage.model_dump_json(indent=2))
        return 0
    if args.output == "csv":
        sys.stdout.write(to_csv(usage))
        return 0
    if not usage.items:
        sys.stderr.write(f"No GPU usage recorded since {args.since} ago (is GPU accounting on? "
                         "GPU_ACCOUNTING_ENABLED, docs/accounting.md).\n")
        return 0
    sys.stdout.write(render_table((args.by.upper(), *HEADERS), usage_rows(usage)))
    return 0


__all__ = ["GROUPS", "HEADERS", "parse_since", "run", "usage_rows"]
