"""The GPU-time ledger's pure core: per-node sample streams in, GPU-seconds per workload out.

Each node's samples are integrated piecewise constant: a sample's reading (which workload holds
each GPU, and its utilization) stands for the time until the node's next sample. For every GPU a
workload holds, an interval of `d` seconds adds

    allocated += d                       always (the GPU was bound to the workload)
    used      += d * utilization / 100   when the reading is known
    idle      += d                       when known and utilization < idle_threshold
    unknown   += d                       when not known

so `allocated = known + unknown`, `idle <= known`, `used <= known`. An interval is *not known*
when the node's previous sample is older than `stale_after` (its telemetry stopped: the time
until the next sample, or until `advance(now)`, goes to the last known holders as unknown), when
the node or the device could not be read, and across a restart (the checkpoint's holders own the
gap as unknown). Unknown is never idle or used.

A node's `until` is its watermark: time before it is accounted and never again (a replayed or
late sample is dropped), which is what keeps a restart from double-counting. Rows are bucketed
by `bucket_seconds` (an interval crossing a boundary is split), so a query over a window and a
chart over time read the same rows.

Reclaimed time (GPU preemption, resource monitoring) is booked, not integrated: one entry per
(workload, cause), set rather than added, so the same preemption seen twice counts once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

FIELDS = ("allocated", "used", "idle", "unknown")
ALLOCATED, USED, IDLE, UNKNOWN = range(4)
DEFAULT_IDLE_THRESHOLD = 5.0  # percent: GPU preemption's default threshold (spec/cluster.md §8)


@dataclass(frozen=True, slots=True)
class Owner:
    """Who a GPU-second is charged to. `user` is the authenticated submitter (never the manifest's
    claim); `declared_user` is `spec.user`/the user label as written, shown beside it."""

    key: str  # the root workload's UID, or "pod:<namespace>/<name>" for a pod no workload claims
    namespace: str = ""
    kind: str = ""
    name: str = ""
    user: str = ""
    declared_user: str = ""
    queue: str = ""  # Kueue LocalQueue
    cluster_queue: str = ""
    preemption: bool = False  # GPU preemption was enabled for it

    def as_dict(self) -> dict[str, Any]:
        return {"key": self.key, "namespace": self.namespace, "kind": self.kind, "name": self.name,
                "user": self.user, "declared_user": self.declared_user, "queue": self.queue,
                "cluster_queue": self.cluster_queue, "preemption": self.preemption}

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> Owner:
        return Owner(**{k: data[k] for k in Owner.__slots__ if k in data})


@dataclass(frozen=True, slots=True)
class Holder:
    """One GPU of a node held by a workload at one sample."""

    owner: str  # Owner.key
    vendor: str
    model: str
    utilization: float | None  # None: the device could not be read
    share: float = 1.0  # a GPU several pods hold (time-slicing) is split between them
    pod: str = ""  # namespace/name: a silent node's holders stop accruing once their pod is gone


@dataclass(slots=True)
class NodeCursor:
    until: float  # the watermark: accounted up to here
    last: float  # the node's last sample
    holders: tuple[Holder, ...] = ()
    error: bool = False  # the last sample could not be read: its time is unknown


RowKey = tuple[int, str, str, str]  # (bucket start, owner key, vendor, model)


@dataclass(frozen=True, slots=True)
class Reclaim:
    owner: str
    cause: str  # "gpu-preemption" | "resource-monitoring"
    at: float
    gpus: int
    seconds: float  # GPU-seconds reclaimed
    vendor: str = ""
    reason: str = ""


def vendor_of(raw: str) -> str:
    """"sandbox-amd" and "amd" are both AMD: accounting groups by who made the GPU."""
    text = raw.lower()
    return "nvidia" if "nvidia" in text else "amd" if "amd" in text else text or "unknown"


@dataclass(slots=True)
class Ledger:
    idle_threshold: float = DEFAULT_IDLE_THRESHOLD
    stale_after: float = 5.0
    bucket_seconds: int = 3600
    rows: dict[RowKey, list[float]] = field(default_factory=dict)
    nodes: dict[str, NodeCursor] = field(default_factory=dict)
    owners: dict[str, Owner] = field(default_factory=dict)
    reclaims: dict[tuple[str, str], Reclaim] = field(default_factory=dict)

    # -- input ----------------------------------------------------------------------------------

    def observe(self, node: str, timestamp: float, holders: Iterable[Holder], *, error: bool = False) -> bool:
        """One sample of `node`. Returns False for a sample at or before the watermark (dropped)."""
        cursor = self.nodes.get(node)
        held = tuple(holders)
        if cursor is None:
            self.nodes[node] = NodeCursor(timestamp, timestamp, held, error)
            return True
        if timestamp <= cursor.until:
            return False
        if error and not held:  # an unreadable node: its last holders keep their GPUs, as unknown
            held = cursor.holders
        known = not cursor.error and timestamp - cursor.last <= self.stale_after
        self._accrue(cursor.holders, cursor.until, timestamp, known)
        cursor.until = cursor.last = timestamp
        cursor.holders, cursor.error = held, error
        return True

    def advance(self, now: float, alive: Callable[[Holder], bool] | None = None) -> None:
        """Nodes whose telemetry stopped: their last holders own the time since as unknown, as long as
        `alive` says their pod still exists (a pod that ended while its node was silent is charged up to
        the node's last sample only: when it ended is not known). A silent node that no live pod holds
        is forgotten."""
        for name, cursor in list(self.nodes.items()):
            if now - cursor.last > self.stale_after and now > cursor.until:
                if alive is not None:
                    cursor.holders = tuple(h for h in cursor.holders if alive(h))
                if not cursor.holders:
                    del self.nodes[name]  # nothing to charge; a sample brings it back
                    continue
                self._accrue(cursor.holders, cursor.until, now, False)
                cursor.until = now

    def rekey(self, old: str, new: str) -> None:
        """What was charged to `old` (a pod seen before the cache knew it) belongs to `new` (its workload)."""
        if old == new:
            return
        for key in [k for k in self.rows if k[1] == old]:
            values = self.rows.pop(key)
            row = self.rows.setdefault((key[0], new, key[2], key[3]), [0.0, 0.0, 0.0, 0.0])
            for i in range(4):
                row[i] += values[i]
        for cursor in self.nodes.values():
            if any(h.owner == old for h in cursor.holders):
                cursor.holders = tuple(replace(h, owner=new) if h.owner == old else h for h in cursor.holders)
        self.owners.pop(old, None)

    def prune_owners(self) -> None:
        """Forget owners no row, holder or reclaim names (sealed days keep their own)."""
        named = {k[1] for k in self.rows} | {h.owner for c in self.nodes.values() for h in c.holders} \
            | {k[0] for k in self.reclaims}
        for key in [k for k in self.owners if k not in named]:
            del self.owners[key]

    def book(self, reclaim: Reclaim) -> bool:
        """Record a reclaim once per (workload, cause); True when it is new."""
        key = (reclaim.owner, reclaim.cause)
        if key in self.reclaims:
            return False
        self.reclaims[key] = reclaim
        return True

    def _accrue(self, holders: tuple[Holder, ...], start: float, end: float, known: bool) -> None:
        if not holders or end <= start:
            return
        width = self.bucket_seconds
        cut = start
        while cut < end:
            bucket = int(cut // width) * width
            stop = min(end, bucket + width)
            seconds = stop - cut
            for holder in holders:
                key = (bucket, holder.owner, holder.vendor, holder.model)
                row = self.rows.get(key)
                if row is None:
                    row = self.rows[key] = [0.0, 0.0, 0.0, 0.0]
                part = seconds * holder.share
                row[ALLOCATED] += part
                value = holder.utilization
                if known and value is not None:
                    row[USED] += part * value / 100.0
                    if value < self.idle_threshold:
                        row[IDLE] += part
                else:
                    row[UNKNOWN] += part
            cut = stop

    # -- persistence ----------------------------------------------------------------------------

    def to_state(self, *, before: int | None = None) -> dict[str, Any]:
        """Everything as plain JSON (rows of buckets before `before` only, when given)."""
        rows = [[b, o, v, m, *(round(x, 3) for x in vals)] for (b, o, v, m), vals in self.rows.items()
                if before is None or b < before]
        used = {r[1] for r in rows} | {h.owner for c in self.nodes.values() for h in c.holders} \
            | {k[0] for k in self.reclaims}
        return {
            "rows": rows,
            "nodes": {name: {"until": c.until, "last": c.last, "error": c.error,
                             "holders": [[h.owner, h.vendor, h.model, h.utilization, h.share, h.pod] for h in c.holders]}
                      for name, c in self.nodes.items()},
            "owners": [o.as_dict() for k, o in self.owners.items() if k in used],
            "reclaims": [[r.owner, r.cause, r.at, r.gpus, r.seconds, r.vendor, r.reason]
                         for r in self.reclaims.values()],
        }

    def load(self, state: Mapping[str, Any], *, with_nodes: bool = True) -> None:
        """Merge a stored state in: rows add up (sealed days and the open head never overlap),
        owners and reclaims fill in, node cursors (the watermarks) come from the head only."""
        for b, o, v, m, *vals in state.get("rows") or ():
            row = self.rows.setdefault((int(b), str(o), str(v), str(m)), [0.0, 0.0, 0.0, 0.0])
            for i, x in enumerate(vals[:4]):
                row[i] += float(x)
        for data in state.get("owners") or ():
            owner = Owner.from_dict(data)
            self.owners.setdefault(owner.key, owner)
        for o, cause, at, gpus, seconds, vendor, reason in state.get("reclaims") or ():
            self.reclaims.setdefault((o, cause), Reclaim(o, cause, float(at), int(gpus), float(seconds), vendor,
                                                         reason))
        if with_nodes:
            for name, data in (state.get("nodes") or {}).items():
                self.nodes[name] = NodeCursor(float(data["until"]), float(data["last"]),
                                              tuple(Holder(*h) for h in data.get("holders") or ()),
                                              bool(data.get("error")))

    def drop_before(self, bucket: int) -> None:
        """Forget rows older than `bucket` (they were sealed into their own day)."""
        for key in [k for k in self.rows if k[0] < bucket]:
            del self.rows[key]


def reclaimed_seconds(gpus: int, at: float, started: float | None, duration: float | None,
                      horizon: float) -> float:
    """GPU-seconds an early end gave back: the GPUs times what was left of the workload's declared
    `duration` (from `started`), or times `horizon` when it declared none."""
    if gpus <= 0:
        return 0.0
    if duration is not None and started is not None:
        return gpus * max(0.0, started + duration - at)
    return gpus * horizon


def hours(seconds: float) -> float:
    return seconds / 3600.0

