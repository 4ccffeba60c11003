"""The endpoints controller for real pods: each Service with a selector gets an Endpoints object of its
name listing the real pods behind it (ready ones under `addresses`, the rest under `notReadyAddresses`,
every one under `addresses` where the Service publishes not-ready addresses) and its ports with each
`targetPort` resolved, a named one through the pod's container ports, as kube-controller-manager's
endpoints controller writes them. What reads them: the aggregation layer's availability check and
proxy (an APIService's Service). Does nothing without real pods; simulated pods listen nowhere.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kaiwo_sandbox.cluster.base import Controller, Key
from kaiwo_sandbox.contracts import GVR, PODS, SERVICES, ApiError, JsonObj, WatchEvent
from kaiwo_sandbox.runtime.podspec import selected_real_pods

ENDPOINTS = GVR("", "v1", "endpoints")
USER = "system:serviceaccount:kube-system:endpoint-controller"


def _target_port(service_port: JsonObj, pod: JsonObj) -> int | None:
    """The pod's port a Service port reaches: a number as written, a name through the containers' ports."""
    target: Any = service_port.get("targetPort", service_port.get("port"))
    if isinstance(target, int):
        return target
    if isinstance(target, str) and target.isdigit():
        return int(target)
    for container in (pod.get("spec") or {}).get("containers") or []:
        for port in container.get("ports") or []:
            if port.get("name") == target and isinstance(port.get("containerPort"), int):
                return int(port["containerPort"])
    return None


def endpoints_for(service: JsonObj, pods: Iterable[JsonObj], reachable: dict[str, str]) -> list[JsonObj]:
    """The Endpoints subsets of `service`: one per distinct set of resolved ports, its ready and not-ready
    addresses sorted by IP. A pod whose named target port it lacks is left out of that port's subset."""
    spec = service.get("spec") or {}
    namespace = (service.get("metadata") or {}).get("namespace")
    publish_unready = bool(spec.get("publishNotReadyAddresses"))
    subsets: dict[tuple[tuple[str, int, str], ...], dict[str, list[JsonObj]]] = {}
    for pod, ip, ready in selected_real_pods(service, pods, reachable):
        meta = pod.get("metadata") or {}
        ports = []
        for service_port in spec.get("ports") or []:
            number = _target_port(service_port, pod)
            if number is not None:
                ports.append((str(service_port.get("name") or ""), number, str(service_port.get("protocol") or "TCP")))
        if not ports:
            continue
        address = {"ip": ip, "nodeName": (pod.get("spec") or {}).get("nodeName"),
                   "targetRef": {"kind": "Pod", "namespace": namespace, "name": meta.get("name"),
                                 "uid": meta.get("uid")}}
        bucket = subsets.setdefault(tuple(ports), {"addresses": [], "notReadyAddresses": []})
        bucket["addresses" if ready or publish_unready else "notReadyAddresses"].append(address)
    result: list[JsonObj] = []
    for ports_key, addresses in sorted(subsets.items()):
        subset: JsonObj = {"ports": [{"name": name, "port": port, "protocol": protocol}
                                     for name, port, protocol in ports_key]}
        for field in ("addresses", "notReadyAddresses"):
            if addresses[field]:
                subset[field] = sorted(addresses[field], key=lambda a: str(a["ip"]))
        result.append(subset)
    return result


class RealPodEndpoints(Controller):
    name = "endpoints"
    watches = (PODS, SERVICES)

    def keys_for(self, event: WatchEvent) -> Iterable[Key]:
        if self.settings.local_runtime is None:
            return []
        meta = event.object.get("metadata") or {}
        namespace = meta.get("namespace")
        if event.gvr == SERVICES:
            return [(namespace, meta.get("name"))]
        services, _ = self.store.list(SERVICES, namespace)
        return [(namespace, (s.get("metadata") or {}).get("name")) for s in services
                if (s.get("spec") or {}).get("selector")]

    def reconcile(self, key: Key) -> float | None:
        runtime = self.settings.local_runtime
        if runtime is None or not runtime.pods():
            return None
        assert isinstance(key, tuple)
        namespace, name = str(key[0]), str(key[1])
        service = self._get(SERVICES, namespace, name)
        if service is None or not (service.get("spec") or {}).get("selector"):
            return None  # a selectorless Service's Endpoints are its owner's to write
        pods, _ = self.store.list(PODS, namespace)
        subsets = endpoints_for(service, pods, runtime.reachable())
        current = self._get(ENDPOINTS, namespace, name)
        labels = dict((service.get("metadata") or {}).get("labels") or {})
        try:
            if current is None:
                self.store.create(ENDPOINTS, {"apiVersion": "v1", "kind": "Endpoints",
                                              "metadata": {"name": name, "namespace": namespace, "labels": labels},
                                              "subsets": subsets}, namespace=namespace, user=USER)
            elif (current.get("subsets") or []) != subsets:
                updated = {**current, "subsets": subsets}
                self.store.update(ENDPOINTS, updated, user=USER)
        except ApiError as err:
            if err.code in (404, 409):
                return 0.1  # raced with a delete or another write: look again
            raise
        return None

    def _get(self, gvr: GVR, namespace: str, name: str) -> JsonObj | None:
        try:
            return self.store.get(gvr, namespace, name)
        except ApiError as err:
            if err.code == 404:
                return None
            raise
