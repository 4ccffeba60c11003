"""Workload listing over the cache: rows memoized per resourceVersion, a sorted key order kept until
the set of workloads changes, filters, and opaque `continue` tokens (the last key of a page)."""

from __future__ import annotations

import base64
import bisect
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from kaiwo_ray.kube.resources import KAIWOJOBS, KAIWOSERVICES, Resource
from kaiwo_ray.views.workloads import WorkloadSummary, summarize
from serve.cache import ClusterCache

RowKey = tuple[str, str, str]  # (namespace, name, kind)
_KINDS = (KAIWOJOBS, KAIWOSERVICES)
_KINDS_BY_NAME = {res.kind: res for res in _KINDS}


@dataclass(frozen=True, slots=True)
class Filters:
    namespaces: frozenset[str] | None = None
    """None: every namespace (the caller narrows it to what the user may list)."""
    user: str | None = None
    queue: str | None = None
    phases: frozenset[str] | None = None
    kinds: frozenset[str] | None = None
    labels: Callable[[Mapping[str, str]], bool] | None = None

    @property
    def only_namespaces(self) -> bool:
        """Nothing to test per row (every kind, no other filter): a page is a slice."""
        return (self.user is None and self.queue is None and self.phases is None and self.labels is None
                and (self.kinds is None or self.kinds >= {"KaiwoJob", "KaiwoService"}))

    def match(self, row: WorkloadSummary) -> bool:
        return ((self.namespaces is None or row.namespace in self.namespaces)
                and (self.kinds is None or row.kind in self.kinds)
                and (self.phases is None or row.phase in self.phases)
                and (self.user is None or row.user == self.user)
                and (self.queue is None or row.queue == self.queue)
                and (self.labels is None or self.labels(row.labels)))


class BadToken(ValueError):
    pass


def encode_token(key: RowKey) -> str:
    return base64.urlsafe_b64encode(json.dumps(list(key)).encode()).decode().rstrip("=")


def decode_token(token: str) -> RowKey:
    try:
        raw = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        if not (isinstance(raw, list) and len(raw) == 3 and all(isinstance(p, str) for p in raw)):
            raise ValueError
        return (raw[0], raw[1], raw[2])
    except ValueError as err:
        raise BadToken(f"invalid continue token {token!r}") from err


class WorkloadRows:
    """Rows kept in step with the watch: a workload event marks its key dirty, and the next read
    re-summarizes only dirty keys (a KaiwoConfig change, which can move every row's queue, rebuilds
    all). The sorted key order is patched by bisection on adds and deletes."""

    def __init__(self, cache: ClusterCache) -> None:
        self.cache = cache
        self._rows: dict[RowKey, tuple[str, str, WorkloadSummary]] = {}
        self._json: dict[RowKey, bytes] = {}  # each row serialized once per resourceVersion
        self._order: list[RowKey] = []
        self._dirty: set[RowKey] | None = None  # None: rebuild everything on the next read
        cache.workload_listeners.append(self._touched)

    def _touched(self, res: Resource, obj: Mapping[str, object]) -> None:
        if res not in _KINDS:
            self._dirty = None
        elif self._dirty is not None:
            meta = obj.get("metadata")
            meta = meta if isinstance(meta, dict) else {}
            self._dirty.add((str(meta.get("namespace") or ""), str(meta.get("name") or ""), res.kind))

    def _refresh(self) -> None:
        if self._dirty is None:
            self._rebuild()
            return
        if not self._dirty:
            return
        default_queue = self.cache.default_queue()
        for key in self._dirty:
            obj = self.cache.get(_KINDS_BY_NAME[key[2]], key[0], key[1])
            known = key in self._rows
            self._json.pop(key, None)
            if obj is None:
                if known:
                    del self._rows[key]
                    index = bisect.bisect_left(self._order, key)
                    if index < len(self._order) and self._order[index] == key:
                        del self._order[index]
                continue
            rv = str((obj.get("metadata") or {}).get("resourceVersion") or "")
            self._rows[key] = (rv, default_queue, summarize(obj, default_queue))
            if not known:
                bisect.insort(self._order, key)
        self._dirty = set()

    def _rebuild(self) -> None:
        self._dirty = set()  # events from here on are applied incrementally
        default_queue = self.cache.default_queue()
        rows: dict[RowKey, tuple[str, str, WorkloadSummary]] = {}
        for res in _KINDS:
            for obj in self.cache.caches.get(res) or ():
                meta = obj.get("metadata") or {}
                key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""), res.kind)
                rv = str(meta.get("resourceVersion") or "")
                memo = self._rows.get(key)
                if memo is not None and memo[0] == rv and memo[1] == default_queue:
                    rows[key] = memo
                else:
                    rows[key] = (rv, default_queue, summarize(obj, default_queue))
                    self._json.pop(key, None)
        for gone in [k for k in self._json if k not in rows]:
            del self._json[gone]
        self._rows = rows
        self._order = sorted(rows)

    def rows(self) -> Iterable[WorkloadSummary]:
        self._refresh()
        return (self._rows[k][2] for k in self._order)

    def page_json(self, filters: Filters, limit: int, token: str | None) -> bytes:
        """The page as WorkloadList JSON, assembled from rows serialized once (a list is then a
        filter pass and a join, not a model validation and serialization per row per request)."""
        keys, total, next_token = self.page_keys(filters, limit, token)
        rows = []
        for key in keys:
            data = self._json.get(key)
            if data is None:
                data = self._json[key] = self._rows[key][2].model_dump_json().encode()
            rows.append(data)
        tail = json.dumps({"total": total, "continue": next_token}).encode()
        return b'{"items":[' + b",".join(rows) + b"]," + tail[1:]

    def versioned(self, key: RowKey) -> tuple[str, WorkloadSummary]:
        """(resourceVersion, row) of a key `page_keys` returned."""
        rv, _, row = self._rows[key]
        return rv, row

    def page(self, filters: Filters, limit: int, token: str | None) -> tuple[list[WorkloadSummary], int, str | None]:
        """(items, total matching, continue token or None on the last page)."""
        keys, total, next_token = self.page_keys(filters, limit, token)
        return [self._rows[k][2] for k in keys], total, next_token

    def page_keys(self, filters: Filters, limit: int, token: str | None) -> tuple[list[RowKey], int, str | None]:
        """Keys are sorted (namespace, name, kind), so a namespace is a contiguous run found by
        bisection, and a page without other filters is a slice: a request costs what it returns
        (plus one pass over the namespaces asked for when other filters must be counted)."""
        self._refresh()
        after = decode_token(token) if token else None
        spans = self._spans(filters.namespaces)
        if filters.only_namespaces:
            total = sum(hi - lo for lo, hi in spans)
            items: list[RowKey] = []
            more = False
            for lo, hi in spans:
                if after is not None:
                    lo = max(lo, bisect.bisect_right(self._order, after, lo, hi))
                take = self._order[lo:min(hi, lo + limit - len(items))]
                items.extend(take)
                if len(items) == limit:
                    more = lo + len(take) < hi or any(h > lo2 for lo2, h in spans if lo2 > lo)
                    break
            last = items[-1] if items else None
            return items, total, encode_token(last) if more and last is not None else None
        items = []
        total = 0
        last_key: RowKey | None = None
        more = False
        for lo, hi in spans:
            for key in self._order[lo:hi]:
                if not filters.match(self._rows[key][2]):
                    continue
                total += 1
                if after is not None and key <= after:
                    continue
                if len(items) < limit:
                    items.append(key)
                    last_key = key
                else:
                    more = True
        return items, total, encode_token(last_key) if more and last_key is not None else None

    def _spans(self, namespaces: frozenset[str] | None) -> list[tuple[int, int]]:
        """[lo, hi) ranges of `_order` holding the given namespaces (everything when None), in order."""
        if namespaces is None:
            return [(0, len(self._order))]
        spans = []
        for ns in sorted(namespaces):
            lo = bisect.bisect_left(self._order, (ns, "", ""))
            hi = bisect.bisect_left(self._order, (ns + "\0", "", ""))
            if hi > lo:
                spans.append((lo, hi))
        return spans
