"""Aggregated discovery's pure parts: Accept negotiation, the legacy-to-v2 conversion, and the
aggregator's discovery manager (fed by a stand-in backend function) keeping a failed backend's last
document as Stale, using the backend's own v2 document and its ETag, and falling back to legacy."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson

from kaiwo_sandbox.apiserver import discovery_v2
from kaiwo_sandbox.apiserver.aggregation.discovery import DiscoveryManager
from kaiwo_sandbox.apiserver.aggregation.registrations import Backend

V2 = discovery_v2.media_type("v2")
V2BETA1 = discovery_v2.media_type("v2beta1")


def test_negotiation_takes_the_first_range_the_server_serves() -> None:
    assert discovery_v2.negotiate(f"{V2},{V2BETA1},application/json") == "v2"
    assert discovery_v2.negotiate(f"{V2BETA1},application/json") == "v2beta1"
    assert discovery_v2.negotiate("application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;"
                                  f"as=APIGroupDiscoveryList,{V2}") == "v2"
    assert discovery_v2.negotiate(f"application/json, {V2}") is None
    assert discovery_v2.negotiate("application/json;g=apidiscovery.k8s.io;v=v3;as=APIGroupDiscoveryList") is None
    assert discovery_v2.negotiate("") is None
    assert discovery_v2.is_aggregated(V2) and not discovery_v2.is_aggregated("application/json")


def test_a_legacy_resource_list_converts_with_subresources_under_their_parent() -> None:
    listed = [{"name": "things", "singularName": "thing", "namespaced": True, "kind": "Thing",
               "verbs": ["get", "list"], "shortNames": ["th"]},
              {"name": "things/scale", "singularName": "", "namespaced": True, "group": "autoscaling",
               "version": "v1", "kind": "Scale", "verbs": ["get", "update"]},
              {"name": "globals", "singularName": "global", "namespaced": False, "kind": "Global", "verbs": ["get"]}]
    assert discovery_v2.from_resource_list(listed) == [
        {"resource": "things", "responseKind": {"group": "", "version": "", "kind": "Thing"}, "scope": "Namespaced",
         "singularResource": "thing", "verbs": ["get", "list"], "shortNames": ["th"],
         "subresources": [{"subresource": "scale", "responseKind": {"group": "autoscaling", "version": "v1",
                                                                    "kind": "Scale"}, "verbs": ["get", "update"]}]},
        {"resource": "globals", "responseKind": {"group": "", "version": "", "kind": "Global"}, "scope": "Cluster",
         "singularResource": "global", "verbs": ["get"]}]


def _apiservice(rv: str, available: bool = True) -> dict[str, Any]:
    return {"metadata": {"name": "v1.ex.com", "resourceVersion": rv},
            "spec": {"group": "ex.com", "version": "v1", "groupPriorityMinimum": 100, "versionPriority": 100,
                     "service": {"namespace": "ns", "name": "svc"}},
            "status": {"conditions": [{"type": "Available", "status": "True" if available else "False"}]}}


class _Backend:
    """Answers discovery GETs from a script: v2 document, legacy, or down."""

    def __init__(self) -> None:
        self.mode = "v2"
        self.calls: list[tuple[str, dict[str, str]]] = []

    async def __call__(self, target: Backend, path: str, headers: list[tuple[str, str]]) -> tuple[int, str, str, bytes]:
        self.calls.append((path, dict(headers)))
        if self.mode == "down":
            raise ConnectionRefusedError("connection refused")
        resource = {"resource": "things", "responseKind": {"group": "", "version": "", "kind": "Thing"},
                    "scope": "Namespaced", "singularResource": "thing", "verbs": ["get"]}
        if self.mode == "v2" and path == "/apis":
            if dict(headers).get("If-None-Match") == '"E1"':
                return 304, "", '"E1"', b""
            body = discovery_v2.document([discovery_v2.group_entry("ex.com", [discovery_v2.version_entry(
                "v1", [resource])])], "v2")
            return 200, V2, '"E1"', orjson.dumps(body)
        if path == "/apis":
            return 200, "application/json", "", b'{"kind":"APIGroupList","groups":[]}'
        return 200, "application/json", "", orjson.dumps({"kind": "APIResourceList", "resources": [
            {"name": "others", "singularName": "other", "namespaced": False, "kind": "Other", "verbs": ["list"]}]})


def test_the_manager_keeps_a_failed_backends_document_as_stale_and_recovers() -> None:
    backend = _Backend()
    manager = DiscoveryManager(backend)

    def shown(*objs: dict[str, Any]) -> list[dict[str, Any]]:
        asyncio.run(manager.sync(list(objs)))
        return manager.groups(list(objs), set())

    [group] = shown(_apiservice("1"))
    assert group["metadata"]["name"] == "ex.com"
    assert [(v["version"], v["freshness"], [r["resource"] for r in v["resources"]]) for v in group["versions"]] == [
        ("v1", "Current", ["things"])]
    assert backend.calls[0] == ("/apis", {"Accept": f"{V2},{V2BETA1}"})
    shown(_apiservice("1"))
    assert len(backend.calls) == 1  # unchanged and not due: not asked again
    shown(_apiservice("2"))
    assert backend.calls[-1][1]["If-None-Match"] == '"E1"'  # 304: the cached document stands
    backend.mode = "down"
    [group] = shown(_apiservice("3", available=False))
    assert [(v["freshness"], [r["resource"] for r in v["resources"]]) for v in group["versions"]] == [
        ("Stale", ["things"])]
    backend.mode = "legacy"
    [group] = shown(_apiservice("4"))
    assert [(v["freshness"], [r["resource"] for r in v["resources"]]) for v in group["versions"]] == [
        ("Current", ["others"])]
    assert [c[0] for c in backend.calls[-2:]] == ["/apis", "/apis/ex.com/v1"]
    assert shown() == []


def test_a_backend_never_reached_shows_its_version_stale_and_empty() -> None:
    backend = _Backend()
    backend.mode = "down"
    manager = DiscoveryManager(backend)
    asyncio.run(manager.sync([_apiservice("1")]))
    assert manager.groups([_apiservice("1")], set()) == [
        {"metadata": {"name": "ex.com", "creationTimestamp": None}, "versions": [{"version": "v1", "freshness": "Stale"}]}]
