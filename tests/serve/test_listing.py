"""Workload paging over the cache: every filter combination pages through exactly the rows a plain
scan finds, in order, each once, whatever the page size (checked against a brute-force listing)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from kaiwo_ray.kube.resources import KAIWOJOBS, KAIWOSERVICES
from serve.cache import ClusterCache
from serve.listing import Filters, WorkloadRows
from serve.selectors import parse_selector


def _cache() -> ClusterCache:
    cache = ClusterCache(None)  # type: ignore[arg-type]  # never started: filled by hand below
    for i in range(60):
        res = KAIWOSERVICES if i % 4 == 0 else KAIWOJOBS
        obj: dict[str, Any] = {
            "kind": res.kind,
            "metadata": {"namespace": f"ns-{i % 5}", "name": f"w-{i:03d}", "resourceVersion": str(i),
                         "labels": {"team": "red" if i % 3 else "blue"}},
            "spec": {"user": f"u{i % 2}"}, "status": {"status": "RUNNING" if i % 2 else "PENDING"}}
        cache.caches[res].upsert(obj)
    cache.workload_version += 1
    return cache


FILTERS = [
    Filters(),
    Filters(namespaces=frozenset({"ns-1"})),
    Filters(namespaces=frozenset({"ns-0", "ns-3", "ns-missing"})),
    Filters(namespaces=frozenset()),
    Filters(kinds=frozenset({"KaiwoService"})),
    Filters(phases=frozenset({"PENDING"}), namespaces=frozenset({"ns-2", "ns-4"})),
    Filters(user="u1", labels=parse_selector("team=red")),
]


@pytest.mark.parametrize(("filters", "limit"), list(itertools.product(FILTERS, [1, 3, 7, 100])))
def test_pages_visit_exactly_the_matching_rows(filters: Filters, limit: int) -> None:
    rows = WorkloadRows(_cache())
    expected = [(r.namespace, r.name) for r in rows.rows() if filters.match(r)]
    seen: list[tuple[str, str]] = []
    token = None
    for _ in range(100):
        page, total, token = rows.page(filters, limit, token)
        assert total == len(expected)
        assert len(page) <= limit
        seen += [(r.namespace, r.name) for r in page]
        if token is None:
            break
    assert seen == expected


def test_rows_follow_watch_events_incrementally() -> None:
    cache = _cache()
    rows = WorkloadRows(cache)
    assert rows.page(Filters(namespaces=frozenset({"ns-1"})), 100, None)[1] == 12
    on_job = cache.informers[KAIWOJOBS].on_event
    added = {"kind": "KaiwoJob", "metadata": {"namespace": "ns-1", "name": "a-new", "resourceVersion": "900"},
             "spec": {"user": "u9"}, "status": {"status": "PENDING"}}
    cache.caches[KAIWOJOBS].upsert(added)
    on_job("ADDED", added, None)
    changed = dict(cache.caches[KAIWOJOBS].get("ns-1", "w-001") or {})
    changed["metadata"] = {**changed["metadata"], "resourceVersion": "901"}
    changed["status"] = {"status": "FAILED"}
    old = cache.caches[KAIWOJOBS].upsert(changed)
    on_job("MODIFIED", changed, old)
    gone = cache.caches[KAIWOJOBS].get("ns-1", "w-006")
    assert gone is not None
    cache.caches[KAIWOJOBS].remove(gone)
    on_job("DELETED", gone, gone)
    page, total, _ = rows.page(Filters(namespaces=frozenset({"ns-1"})), 100, None)
    assert total == 12 and page[0].name == "a-new"
    assert "w-006" not in {r.name for r in page}
    assert next(r for r in page if r.name == "w-001").phase == "FAILED"
    assert [r.name for r in rows.page(Filters(user="u9"), 100, None)[0]] == ["a-new"]
