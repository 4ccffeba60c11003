"""Registering the admin API's aggregated listener with a sandbox, as deploy/ does in a cluster: a
selectorless Service with the Endpoints of the listener on this machine, and the APIService."""

from __future__ import annotations

import json
from typing import Any

from kaiwo_sandbox.testing import RunningSandbox, eventually

GROUP, VERSION = "admin.kaiwo.silogen.ai", "v1alpha1"
APISERVICE = f"{VERSION}.{GROUP}"
APISERVICES = "/apis/apiregistration.k8s.io/v1/apiservices"


def apiservice(name: str, group: str, version: str, service: str, namespace: str = "kaiwo-system") -> dict[str, Any]:
    return {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": name},
            "spec": {"group": group, "version": version, "groupPriorityMinimum": 100, "versionPriority": 100,
                     "insecureSkipTLSVerify": True, "service": {"namespace": namespace, "name": service}}}


def expose(sb: RunningSandbox, namespace: str, name: str, port: int) -> None:
    """A Service `name` whose port 443 leads to 127.0.0.1:`port`."""
    code, _, body = sb.http("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                           "metadata": {"name": namespace}})
    assert code in (201, 409), body
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": namespace},
               "spec": {"ports": [{"name": "https", "port": 443, "targetPort": port}]}}
    endpoints = {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": name, "namespace": namespace},
                 "subsets": [{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"name": "https", "port": port}]}]}
    for plural, obj in (("services", service), ("endpoints", endpoints)):
        code, _, body = sb.http("POST", f"/api/v1/namespaces/{namespace}/{plural}", obj)
        assert code == 201, body


def available(sb: RunningSandbox, name: str) -> dict[str, Any]:
    code, _, body = sb.http("GET", f"{APISERVICES}/{name}")
    assert code == 200, body
    conditions = (json.loads(body).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == "Available"), {})


def register(sb: RunningSandbox, port: int, *, namespace: str = "kaiwo-system", service: str = "kaiwo-ray-admin",
             timeout: float = 30.0) -> None:
    """Expose the listener on `port` and register the admin group; returns once it is Available."""
    expose(sb, namespace, service, port)
    code, _, body = sb.http("POST", APISERVICES, apiservice(APISERVICE, GROUP, VERSION, service, namespace))
    assert code == 201, body
    eventually(lambda: available(sb, APISERVICE).get("status") == "True", timeout, f"{APISERVICE} Available")
    eventually(lambda: discovered(sb, GROUP, VERSION).get("freshness") == "Current", timeout,
               f"{GROUP}/{VERSION} in aggregated discovery")


DISCOVERY_V2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"


def discovered(sb: RunningSandbox, group: str, version: str) -> dict[str, Any]:
    """The version entry of `group`/`version` in the sandbox's aggregated discovery ({} when absent)."""
    code, _, body = sb.http("GET", "/apis", headers={"Accept": DISCOVERY_V2})
    assert code == 200, body
    for item in json.loads(body)["items"]:
        if item["metadata"].get("name") == group:
            return next((v for v in item["versions"] if v["version"] == version), {})
    return {}


def unregister(sb: RunningSandbox, namespace: str = "kaiwo-system", service: str = "kaiwo-ray-admin") -> None:
    for path in (f"{APISERVICES}/{APISERVICE}", f"/api/v1/namespaces/{namespace}/services/{service}",
                 f"/api/v1/namespaces/{namespace}/endpoints/{service}"):
        code, _, body = sb.http("DELETE", path)
        assert code in (200, 404), body
