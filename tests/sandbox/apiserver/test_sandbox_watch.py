"""Watch semantics: resume, 410 past history, selector transitions, bookmarks, timeouts, cuts."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest

from kaiwo_sandbox.testing import RunningSandbox, eventually, start_sandbox

CMS = "/api/v1/namespaces/default/configmaps"


def _cm(core: Any, name: str, labels: dict[str, str] | None = None) -> Any:
    return core.create_namespaced_config_map("default", {"metadata": {"name": name, "labels": labels or {}}})


class Collector:
    """Reads a watch stream on a thread into a list (the test thread polls it with a deadline)."""

    def __init__(self, stream: Iterator[dict[str, Any]]) -> None:
        self.events: list[dict[str, Any]] = []
        self.ended = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(stream,), daemon=True)
        self._thread.start()

    def _run(self, stream: Iterator[dict[str, Any]]) -> None:
        try:
            for event in stream:
                self.events.append(event)
        except OSError:
            pass
        finally:
            self.ended.set()

    def types(self) -> list[tuple[str, str]]:
        return [(e["type"], e["object"].get("metadata", {}).get("name", "")) for e in self.events]


def test_watch_from_resource_version_sees_only_later_events(sandbox: RunningSandbox, core: Any) -> None:
    _cm(core, "before")
    rv = core.list_namespaced_config_map("default").metadata.resource_version
    _cm(core, "after")
    core.patch_namespaced_config_map("after", "default", {"data": {"x": "1"}})
    core.delete_namespaced_config_map("after", "default")
    watch = Collector(sandbox.stream(f"{CMS}?watch=1&resourceVersion={rv}&timeoutSeconds=5"))
    eventually(lambda: len(watch.events) >= 3)
    assert watch.types() == [("ADDED", "after"), ("MODIFIED", "after"), ("DELETED", "after")]
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in watch.events]
    assert rvs == sorted(rvs) and rvs[0] > int(rv)


def test_watch_without_resource_version_starts_with_current_state(sandbox: RunningSandbox, core: Any) -> None:
    _cm(core, "existing")
    watch = Collector(sandbox.stream(f"{CMS}?watch=true&timeoutSeconds=5"))
    eventually(lambda: watch.events)
    _cm(core, "new")
    eventually(lambda: len(watch.events) >= 2)
    assert watch.types()[:2] == [("ADDED", "existing"), ("ADDED", "new")]


def test_watch_resume_past_history_gets_410_error_event() -> None:
    with start_sandbox(nodes=[], install_crds=False) as sandbox:
        small_core = kubernetes.client.CoreV1Api(sandbox.api_client())
        _cm(small_core, "a")
        rv = small_core.read_namespaced_config_map("a", "default").metadata.resource_version
        _cm(small_core, "b")
        sandbox.call(lambda: sandbox.store.fanout.expire(sandbox.store.resource_version))  # "b" compacted away
        events = list(sandbox.stream(f"{CMS}?watch=1&resourceVersion={rv}&timeoutSeconds=5"))
    assert len(events) == 1
    assert events[0]["type"] == "ERROR"
    status = events[0]["object"]
    assert (status["kind"], status["code"], status["reason"]) == ("Status", 410, "Expired")
    assert status["message"].startswith(f"too old resource version: {rv}")


def test_history_is_bounded() -> None:
    from kaiwo_sandbox.contracts import CONFIGMAPS, NAMESPACES, ApiError
    from kaiwo_sandbox.storage.store import ObjectStore

    store = ObjectStore(history_limit=5)
    store.create(NAMESPACES, {"metadata": {"name": "default"}})
    for i in range(10):
        store.create(CONFIGMAPS, {"metadata": {"name": f"c{i}"}}, namespace="default")
    info = store.resolve(CONFIGMAPS)
    assert len(store.events_since(info, store.resource_version - 5)) == 5
    with pytest.raises(ApiError) as exc:
        store.events_since(info, 2)
    assert exc.value.code == 410


def test_label_selector_watch_sees_objects_leave_and_enter(sandbox: RunningSandbox, core: Any) -> None:
    rv = core.list_namespaced_config_map("default").metadata.resource_version
    watch = Collector(sandbox.stream(f"{CMS}?watch=1&labelSelector=app%3Dweb&resourceVersion={rv}"
                                     "&timeoutSeconds=5"))
    _cm(core, "x", {"app": "web"})
    _cm(core, "ignored", {"app": "db"})
    core.patch_namespaced_config_map("x", "default", {"metadata": {"labels": {"app": "db"}}})
    core.patch_namespaced_config_map("x", "default", {"metadata": {"labels": {"app": "web"}}})
    core.patch_namespaced_config_map("x", "default", {"data": {"k": "v"}})
    eventually(lambda: len(watch.events) >= 4)
    assert watch.types() == [("ADDED", "x"), ("DELETED", "x"), ("ADDED", "x"), ("MODIFIED", "x")]


def test_field_selector_watch_with_official_watch_helper(sandbox: RunningSandbox, core: Any) -> None:
    seen: list[tuple[str, str]] = []
    watcher = kubernetes.watch.Watch()

    def consume() -> None:
        for event in watcher.stream(core.list_namespaced_config_map, "default",
                                    field_selector="metadata.name=wanted", timeout_seconds=5):
            seen.append((event["type"], event["object"].metadata.name))
            if len(seen) == 2:
                watcher.stop()

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    eventually(lambda: sandbox.open_watches >= 1)
    _cm(core, "other")
    _cm(core, "wanted")
    core.delete_namespaced_config_map("wanted", "default")
    thread.join(timeout=10)
    assert seen == [("ADDED", "wanted"), ("DELETED", "wanted")]


def test_bookmarks_carry_only_a_resource_version() -> None:
    with start_sandbox(nodes=[], install_crds=False, bookmark_interval=0.05) as sandbox:
        events = []
        for event in sandbox.stream(f"{CMS}?watch=1&allowWatchBookmarks=true&resourceVersion=1&timeoutSeconds=2"):
            events.append(event)
            if event["type"] == "BOOKMARK":
                break
    bookmark = events[-1]
    assert bookmark["type"] == "BOOKMARK"
    assert bookmark["object"]["kind"] == "ConfigMap"
    assert set(bookmark["object"]["metadata"]) == {"resourceVersion"}


def test_send_initial_events_ends_with_annotated_bookmark(sandbox: RunningSandbox, core: Any) -> None:
    _cm(core, "one")
    events = []
    for event in sandbox.stream(f"{CMS}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
                                "&allowWatchBookmarks=true&timeoutSeconds=2"):
        events.append(event)
        if event["type"] == "BOOKMARK":
            break
    assert [e["type"] for e in events] == ["ADDED", "BOOKMARK"]
    assert events[-1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


def test_timeout_seconds_ends_the_stream_cleanly(sandbox: RunningSandbox) -> None:
    rv = sandbox.call(lambda: sandbox.store.resource_version)
    events = list(sandbox.stream(f"{CMS}?watch=1&resourceVersion={rv}&timeoutSeconds=1", timeout=10))
    assert events == []


def test_cut_watch_streams(sandbox: RunningSandbox, core: Any) -> None:
    rv = core.list_namespaced_config_map("default").metadata.resource_version
    watch = Collector(sandbox.stream(f"{CMS}?watch=1&resourceVersion={rv}&timeoutSeconds=30", timeout=30))
    eventually(lambda: sandbox.open_watches == 1)
    assert sandbox.faults.cut_watches(after_events=1) == 1
    _cm(core, "a")
    _cm(core, "b")
    assert watch.ended.wait(10)
    assert watch.types() == [("ADDED", "a")]


def test_forced_410_on_next_watch(sandbox: RunningSandbox, core: Any) -> None:
    rv = core.list_namespaced_config_map("default").metadata.resource_version
    sandbox.faults.expire_next()
    events = list(sandbox.stream(f"{CMS}?watch=1&resourceVersion={rv}&timeoutSeconds=2"))
    assert [e["type"] for e in events] == ["ERROR"]
    assert events[0]["object"]["code"] == 410


def test_legacy_watch_path(sandbox: RunningSandbox, core: Any) -> None:
    rv = core.list_namespaced_config_map("default").metadata.resource_version
    watch = Collector(sandbox.stream(f"/api/v1/watch/namespaces/default/configmaps?resourceVersion={rv}"
                                     "&timeoutSeconds=5"))
    _cm(core, "legacy")
    eventually(lambda: watch.events)
    assert watch.types() == [("ADDED", "legacy")]


def test_stop_ends_open_watches_promptly() -> None:
    sandbox = start_sandbox(nodes=[], install_crds=False)
    watch = Collector(sandbox.stream(f"{CMS}?watch=1&timeoutSeconds=300", timeout=300))
    eventually(lambda: sandbox.open_watches == 1)
    sandbox.stop()
    assert watch.ended.wait(5)


def test_cut_now_from_the_test_thread(sandbox: RunningSandbox) -> None:
    watch = Collector(sandbox.stream(f"{CMS}?watch=1&resourceVersion=1&timeoutSeconds=30", timeout=30))
    eventually(lambda: sandbox.open_watches == 1)
    assert sandbox.faults.cut_watches() == 1
    assert watch.ended.wait(5)
    eventually(lambda: sandbox.open_watches == 0)
