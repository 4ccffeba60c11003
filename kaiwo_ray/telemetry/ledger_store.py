"""Where the ledger lives between restarts: ConfigMaps in the operator's namespace.

    kaiwo-gpu-ledger            the head: the open days' rows, every node's watermark and last
                                holders, the owners, the reclaims, and a generation number
    kaiwo-gpu-ledger-YYYYMMDD   one sealed day's rows (and their owners), never written again
                                once every node's watermark has passed its end

Why ConfigMaps: the API server is the one store every operator instance (and the admin API, a
replica elsewhere, a restarted process) already reaches and may write; it needs no volume, no
database, no new CRD; and a write is atomic with a resourceVersion precondition, which is what
keeps two writers (a failover that overlaps) from both adding the same interval: the head's
watermarks and its rows change in one write, so an interval is either in it with the watermark
past it or in neither. Data is gzipped JSON in `binaryData` (a day of 1,000 workloads with hourly
buckets is ~100 KiB), under the 1 MiB object limit.

Sealing a day writes its ConfigMap first, then the head without that day. A crash in between
leaves the day in both: each sealed day records the head generations merged into it, and a
reader or a later seal skips a generation already there, so nothing counts twice.
"""

from __future__ import annotations

import base64
import gzip
import json
import logging
from dataclasses import dataclass, field
from typing import Any

from kaiwo_ray.kube.errors import NotFound
from kaiwo_ray.kube.resources import CONFIGMAPS
from kaiwo_ray.telemetry.ledger import Ledger

log = logging.getLogger(__name__)
HEAD = "kaiwo-gpu-ledger"
HEAD_WARN_BYTES = 900 * 1024
LABEL = "kaiwo.silogen.ai/gpu-ledger"
DATA_KEY = "ledger.json.gz"
DAY = 86_400


class LedgerConflict(Exception):
    """Another writer changed the head since we read it: we are not (or no longer) the only one."""


def encode(state: dict[str, Any]) -> str:
    return base64.b64encode(gzip.compress(json.dumps(state, separators=(",", ":")).encode(), 6)).decode()


def decode(obj: dict[str, Any]) -> dict[str, Any]:
    raw = (obj.get("binaryData") or {}).get(DATA_KEY)
    if not raw:
        return {}
    data: dict[str, Any] = json.loads(gzip.decompress(base64.b64decode(raw)))
    return data


def day_name(day_start: int) -> str:
    from datetime import UTC, datetime

    return f"{HEAD}-{datetime.fromtimestamp(day_start, UTC):%Y%m%d}"


def _configmap(name: str, namespace: str, state: dict[str, Any], kind: str, rv: str | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": {LABEL: kind}}
    if rv:
        meta["resourceVersion"] = rv
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "binaryData": {DATA_KEY: encode(state)}}


def slice_state(ledger: Ledger, lo: int, hi: int) -> dict[str, Any]:
    """Rows of buckets in [lo, hi) and the owners they name (a sealed day)."""
    rows = [[b, o, v, m, *(round(x, 3) for x in vals)] for (b, o, v, m), vals in ledger.rows.items() if lo <= b < hi]
    named = {str(r[1]) for r in rows}
    return {"rows": rows, "owners": [ledger.owners[k].as_dict() for k in sorted(named) if k in ledger.owners]}


@dataclass(slots=True)
class LedgerStore:
    client: Any  # KubeClient
    namespace: str
    head_rv: str = ""
    generation: int = 0
    sealed: set[str] = field(default_factory=set)

    async def load(self, ledger: Ledger) -> None:
        """Fill `ledger` from the head (watermarks included); sealed days are the readers' (`split`, `assemble`),
        not needed to keep accounting."""
        try:
            head = await self.client.get(CONFIGMAPS, HEAD, self.namespace)
        except NotFound:
            self.head_rv, self.generation = "", 0
            return
        state = decode(head)
        ledger.load(state)
        self.head_rv = str((head.get("metadata") or {}).get("resourceVersion") or "")
        self.generation = int(state.get("generation") or 0)

    async def save(self, ledger: Ledger, now: float) -> None:
        """Seal the days every watermark has passed, then write the head (LedgerConflict: someone else did)."""
        floor = min((c.until for c in ledger.nodes.values()), default=now)
        open_from = int(min(floor, now) // DAY) * DAY
        generation = self.generation + 1
        days = sorted({b // DAY * DAY for (b, _, _, _) in ledger.rows if b < open_from})
        for day in days:
            await self._seal(day, slice_state(ledger, day, day + DAY), generation)
        state = ledger.to_state()
        state["rows"] = [r for r in state["rows"] if r[0] >= open_from]
        state["generation"] = generation
        state["bucket_seconds"] = ledger.bucket_seconds
        state["saved"] = now
        body = _configmap(HEAD, self.namespace, state, "head", self.head_rv or None)
        from kaiwo_ray.kube.errors import Conflict

        size = len(body["binaryData"][DATA_KEY])
        if size > HEAD_WARN_BYTES:
            log.warning("the GPU ledger's head is %d KiB, near the API server's 1 MiB object limit", size // 1024)
        try:
            if self.head_rv:
                written = await self._update(body)
            else:
                written = await self.client.create(CONFIGMAPS, body, self.namespace)
        except Conflict as err:  # AlreadyExists included: a head we never read
            raise LedgerConflict(str(err)) from err
        self.head_rv = str((written.get("metadata") or {}).get("resourceVersion") or "")
        self.generation = generation
        if days:
            ledger.drop_before(open_from)
            ledger.prune_owners()

    async def _update(self, body: dict[str, Any]) -> Any:
        """A merge patch carrying the resourceVersion read: the API server refuses it (409) when the object
        changed since, as it would a PUT; the operator's ClusterRole grants `patch` on ConfigMaps, not
        `update`."""
        meta = body["metadata"]
        return await self.client.patch(CONFIGMAPS, meta["name"], {"metadata": {"resourceVersion": meta["resourceVersion"]},
                                                                 "binaryData": body["binaryData"]}, self.namespace)

    async def _seal(self, day: int, state: dict[str, Any], generation: int) -> None:
        name = day_name(day)
        try:
            existing = await self.client.get(CONFIGMAPS, name, self.namespace)
        except NotFound:
            existing = None
        if existing is not None:
            old = decode(existing)
            if generation in (old.get("generations") or []):
                return  # merged before a crash: the head still had it
            merged = Ledger()
            merged.load(old, with_nodes=False)
            merged.load(state, with_nodes=False)
            state = slice_state(merged, day, day + DAY)
            state["generations"] = [*(old.get("generations") or []), generation]
            rv = str((existing.get("metadata") or {}).get("resourceVersion") or "")
            await self._update(_configmap(name, self.namespace, state, "day", rv))
        else:
            state["generations"] = [generation]
            await self.client.create(CONFIGMAPS, _configmap(name, self.namespace, state, "day", None), self.namespace)


def assemble(items: list[dict[str, Any]], cache: dict[str, tuple[str, dict[str, Any]]] | None = None,
             ) -> tuple[Ledger, dict[str, Any]]:
    """The ledger ConfigMaps (as listed) as one Ledger, and the head's state (pure)."""
    head, days = split(items, cache)
    ledger = Ledger()
    for _, state in days.values():
        ledger.load(state, with_nodes=False)
    if head:
        ledger.load(head)
        ledger.bucket_seconds = int(head.get("bucket_seconds") or ledger.bucket_seconds)
    return ledger, head


def split(items: list[dict[str, Any]], cache: dict[str, tuple[str, dict[str, Any]]] | None = None,
          ) -> tuple[dict[str, Any], dict[str, tuple[str, dict[str, Any]]]]:
    """(the head's state, {name: (resourceVersion, state)} of the sealed days that count). A sealed day
    whose merge the head never committed (a crash between the two writes) is left out: the head still
    holds that day. `cache` keeps decoded ConfigMaps by name and resourceVersion across calls."""
    decoded: dict[str, tuple[str, dict[str, Any]]] = {}
    for obj in items:
        meta = obj.get("metadata") or {}
        name, rv = str(meta.get("name") or ""), str(meta.get("resourceVersion") or "")
        hit = cache.get(name) if cache is not None else None
        if hit is not None and hit[0] == rv:
            state = hit[1]
        else:
            state = decode(obj)
            if cache is not None:
                cache[name] = (rv, state)
        decoded[name] = (rv, state)
    head = decoded.pop(HEAD, ("", {}))[1]
    head_days = {day_name(int(r[0]) // DAY * DAY) for r in head.get("rows") or ()}
    committed = int(head.get("generation") or 0)
    days = {name: (rv, state) for name, (rv, state) in decoded.items()
            if not (name in head_days and max(state.get("generations") or [0]) > committed)}
    return head, days
