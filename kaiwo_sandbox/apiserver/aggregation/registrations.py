"""What the APIService objects say (pure): which group/versions are proxied and where to, how they
join discovery (kube-aggregator's handler_apis.go: groups by groupPriorityMinimum, highest first, then
name; versions by versionPriority, then kube-like version order), and the first half of the
availability check (remote_available_controller.go): the Service and its Endpoints.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kaiwo_sandbox.contracts import JsonObj

KUBE_AGGREGATOR_USER = "system:kube-aggregator"
MASTERS = "system:masters"
_KUBE_VERSION = re.compile(r"v([1-9][0-9]*)(?:(alpha|beta)([1-9][0-9]*))?")


@dataclass(frozen=True, slots=True)
class Backend:
    """One proxied group/version: the APIService and the Service behind it."""

    name: str  # the APIService's name, <version>.<group>
    group: str
    version: str
    namespace: str
    service: str
    port: int
    ca_bundle: str | None
    insecure: bool
    available: bool
    message: str  # the Available condition's message, for logs

    @property
    def server_name(self) -> str:
        return f"{self.service}.{self.namespace}.svc"


def available_condition(obj: JsonObj) -> JsonObj | None:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(condition, dict) and condition.get("type") == "Available":
            return condition
    return None


def backend(obj: JsonObj) -> Backend | None:
    """The proxy target of an APIService; None for a local one (no Service)."""
    spec = obj.get("spec") or {}
    service = spec.get("service")
    if not isinstance(service, dict):
        return None
    condition = available_condition(obj) or {}
    return Backend(name=str((obj.get("metadata") or {}).get("name") or ""), group=str(spec.get("group") or ""),
                   version=str(spec.get("version") or ""), namespace=str(service.get("namespace") or ""),
                   service=str(service.get("name") or ""), port=int(service.get("port") or 443),
                   ca_bundle=spec.get("caBundle") or None, insecure=bool(spec.get("insecureSkipTLSVerify")),
                   available=condition.get("status") == "True", message=str(condition.get("message") or ""))


def routes(apiservices: list[JsonObj]) -> dict[tuple[str, str], Backend]:
    table: dict[tuple[str, str], Backend] = {}
    for obj in apiservices:
        target = backend(obj)
        if target is not None and target.group:
            table[(target.group, target.version)] = target
    return table


def version_key(version: str) -> tuple[int, int, int, str]:
    """Kube-like version order, as a sort key: v10, v2, v1, v11beta2, v10beta3, v3beta1, v12alpha1, ...
    then anything else alphabetically."""
    match = _KUBE_VERSION.fullmatch(version)
    if match is None:
        return (3, 0, 0, version)
    major, stage, minor = int(match[1]), match[2], int(match[3] or 0)
    return ({None: 0, "beta": 1, "alpha": 2}[stage], -major, -minor, "")


def _priority(obj: JsonObj, field: str) -> int:
    value = (obj.get("spec") or {}).get(field)
    return value if isinstance(value, int) else 0


def aggregated_groups(apiservices: list[JsonObj], local: set[str]) -> list[JsonObj]:
    """APIGroup entries for the groups only APIServices serve, in the aggregator's order."""
    by_group: dict[str, list[JsonObj]] = {}
    for obj in apiservices:
        group = str((obj.get("spec") or {}).get("group") or "")
        if group and group not in local:
            by_group.setdefault(group, []).append(obj)
    ordered = sorted(by_group.items(), key=lambda item: (-max(_priority(o, "groupPriorityMinimum")
                                                                  for o in item[1]), item[0]))
    return [group_entry(group, objs) for group, objs in ordered]


def group_entry(group: str, apiservices: list[JsonObj]) -> JsonObj:
    objs = sorted(apiservices, key=lambda o: (-_priority(o, "versionPriority"),
                                              version_key(str((o.get("spec") or {}).get("version") or ""))))
    versions = [{"groupVersion": f"{group}/{o['spec']['version']}", "version": o["spec"]["version"]} for o in objs]
    return {"name": group, "versions": versions, "preferredVersion": versions[0]}


def condition(status: str, reason: str, message: str, now: str, previous: JsonObj | None) -> JsonObj:
    """The Available condition; lastTransitionTime moves only when the status does."""
    since = now if previous is None or previous.get("status") != status else previous.get("lastTransitionTime", now)
    return {"type": "Available", "status": status, "lastTransitionTime": since, "reason": reason,
            "message": message}


def endpoint(target: Backend, service: JsonObj | None, endpoints: JsonObj | None) -> tuple[str, int] | tuple[str, str]:
    """Where the Service sends the check: (ip, port), or (reason, message) of the False condition.
    A selectorless Service's Endpoints object names the address, as kube-apiserver 1.32 reads it."""
    where = f'service/{target.service} in "{target.namespace}"'
    if service is None:
        return ("ServiceNotFound", f"{where} is not present")
    spec = service.get("spec") or {}
    if spec.get("type") == "ExternalName":
        return (str(spec.get("externalName") or ""), target.port)
    port = next((p for p in spec.get("ports") or [] if p.get("port") == target.port), None)
    if port is None:
        return ("ServicePortError", f"{where} is not listening on port {target.port}")
    if endpoints is None:
        return ("EndpointsNotFound", f"cannot find endpoints for {where}")
    port_name = str(port.get("name") or "")
    for subset in endpoints.get("subsets") or []:
        addresses = subset.get("addresses") or []
        chosen = next((p for p in subset.get("ports") or [] if str(p.get("name") or "") == port_name), None)
        if addresses and chosen is not None:
            return (str(addresses[0]["ip"]), int(chosen["port"]))
    return ("MissingEndpoints", f'endpoints for {where} have no addresses with port name "{port_name}"')
