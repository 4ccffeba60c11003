"""The AppWrapper controller, simulated: while suspended nothing exists (phase Suspended); once
Kueue unsuspends it the wrapped components are created (Resuming -> Running) with the admission's
podSetInfos applied to their pod templates, PodsReady follows the pods that carry the
`workload.codeflare.dev/appwrapper` label, and the phase ends Succeeded or Failed from the
components. Suspending again deletes the components. Retries/resets are not modelled.
"""

from __future__ import annotations

import copy
from collections.abc import Hashable, Iterable

from kaiwo_sandbox.cluster.base import Controller
from kaiwo_sandbox.cluster.conditions import set_condition
from kaiwo_sandbox.cluster.events import record_event
from kaiwo_sandbox.cluster.kuberay import appwrapper_webhook
from kaiwo_sandbox.cluster.kuberay.appwrapper_webhook import APPWRAPPER_LABEL, parse_path
from kaiwo_sandbox.cluster.pods import controller_of, owner_reference
from kaiwo_sandbox.contracts import (
    APPWRAPPERS,
    CONFIGMAPS,
    DEPLOYMENTS,
    GVR,
    JOBS,
    PODS,
    RAYCLUSTERS,
    RAYJOBS,
    RAYSERVICES,
    SERVICEACCOUNTS,
    SERVICES,
    ApiError,
    JsonObj,
    WatchEvent,
    rfc3339,
)

COMPONENT = "appwrapper-controller"
KNOWN_KINDS: dict[tuple[str, str], GVR] = {
    (g.api_version, kind): g for g, kind in (
        (JOBS, "Job"), (RAYJOBS, "RayJob"), (RAYCLUSTERS, "RayCluster"), (RAYSERVICES, "RayService"),
        (DEPLOYMENTS, "Deployment"), (PODS, "Pod"), (SERVICES, "Service"), (CONFIGMAPS, "ConfigMap"))
}
WATCHED_COMPONENTS = (JOBS, RAYJOBS, RAYCLUSTERS, RAYSERVICES, DEPLOYMENTS)


def _meta(obj: JsonObj) -> JsonObj:
    meta: JsonObj = obj.get("metadata") or {}
    return meta


def component_gvr(template: JsonObj) -> GVR:
    """The resource a wrapped template is created as (known kinds exactly, others by convention)."""
    api_version = str(template.get("apiVersion", ""))
    kind = str(template.get("kind", ""))
    known = KNOWN_KINDS.get((api_version, kind))
    if known is not None:
        return known
    group, _, version = api_version.rpartition("/")
    return GVR(group, version, kind.lower() + "s")


def expected_pods(aw: JsonObj) -> int:
    total = 0
    for component in (aw.get("spec") or {}).get("components") or []:
        for podset in component.get("podSets") or []:
            replicas = podset.get("replicas", 1)
            total += replicas if isinstance(replicas, int) else 1
    return total


def render_component(aw: JsonObj, index: int) -> JsonObj:
    """Component `index` as it is created: same namespace, owned by the AppWrapper, and each
    declared pod set's template labelled with the AppWrapper and given its podSetInfo."""
    meta = _meta(aw)
    component = ((aw.get("spec") or {}).get("components") or [])[index]
    obj = copy.deepcopy(component.get("template") or {})
    obj_meta = obj.setdefault("metadata", {})
    obj_meta["namespace"] = meta.get("namespace", "")
    obj_meta["ownerReferences"] = [owner_reference(aw)]
    obj_meta.setdefault("labels", {})[APPWRAPPER_LABEL] = str(meta.get("name", ""))
    infos = component.get("podSetInfos") or []
    for ps_index, podset in enumerate(component.get("podSets") or []):
        path = parse_path(str(podset.get("path", "")))
        if path and path[0] == "template":
            path = path[1:]
        template = _walk(obj, path)
        if template is None:
            continue
        tmeta = template.setdefault("metadata", {})
        labels = dict(tmeta.get("labels") or {})
        labels[APPWRAPPER_LABEL] = str(meta.get("name", ""))
        info = infos[ps_index] if ps_index < len(infos) else {}
        labels.update(info.get("labels") or {})
        tmeta["labels"] = labels
        if info.get("annotations"):
            tmeta["annotations"] = {**(tmeta.get("annotations") or {}), **info["annotations"]}
        spec = template.setdefault("spec", {})
        if info.get("nodeSelector"):
            spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **info["nodeSelector"]}
        if info.get("tolerations"):
            spec["tolerations"] = list(spec.get("tolerations") or []) + list(info["tolerations"])
        if info.get("schedulingGates"):
            spec["schedulingGates"] = list(spec.get("schedulingGates") or []) + list(info["schedulingGates"])
    return obj


def _walk(obj: JsonObj, path: tuple[str | int, ...]) -> JsonObj | None:
    node: object = obj
    for step in path:
        if isinstance(step, int):
            node = node[step] if isinstance(node, list) and step < len(node) else None
        else:
            node = node.get(step) if isinstance(node, dict) else None
        if node is None:
            return None
    return node if isinstance(node, dict) else None


def component_failed(obj: JsonObj) -> bool:
    status = obj.get("status") or {}
    if obj.get("kind") == "Job":
        return any(c.get("type") == "Failed" and c.get("status") == "True" for c in status.get("conditions") or [])
    if obj.get("kind") == "RayJob":
        return status.get("jobDeploymentStatus") == "Failed"
    return False


class AppWrapperController(Controller):
    name = "appwrapper"
    watches = (APPWRAPPERS, PODS, *WATCHED_COMPONENTS)

    def admit(self, operation: str, gvr: GVR, obj: JsonObj, old: JsonObj | None, user: str) -> None:
        """AppWrapper's webhooks: the creator's labels on CREATE; immutability on UPDATE."""
        if (gvr.group, gvr.resource) != (APPWRAPPERS.group, APPWRAPPERS.resource):
            return
        if operation == "CREATE":
            appwrapper_webhook.default_on_create(obj, user, self._user_uid(user))
        elif old is not None:
            problems = appwrapper_webhook.update_problems(old, obj)
            if problems:
                raise appwrapper_webhook.denied(problems)

    def _user_uid(self, user: str) -> str:
        """The uid the authenticator reports: a service account's own uid, none for other users."""
        parts = user.split(":")
        if len(parts) != 4 or parts[:2] != ["system", "serviceaccount"]:
            return ""
        try:
            return str(_meta(self.store.get(SERVICEACCOUNTS, parts[2], parts[3])).get("uid", ""))
        except ApiError:
            return ""

    def keys_for(self, event: WatchEvent) -> Iterable[Hashable]:
        meta = _meta(event.object)
        ns = str(meta.get("namespace", ""))
        if event.gvr.resource == APPWRAPPERS.resource:
            return [(ns, str(meta.get("name", "")))]
        if event.gvr.resource == PODS.resource:
            owner_name = (meta.get("labels") or {}).get(APPWRAPPER_LABEL)
            return [(ns, owner_name)] if owner_name else []
        owner = controller_of(event.object)
        return [(ns, owner["name"])] if owner and owner.get("kind") == "AppWrapper" else []

    def reconcile(self, key: Hashable) -> float | None:
        assert isinstance(key, tuple)
        ns, name = str(key[0]), str(key[1])
        try:
            aw = self.store.get(APPWRAPPERS, ns, name)
        except ApiError as err:
            if err.code == 404:
                return None
            raise
        if _meta(aw).get("deletionTimestamp"):
            return None
        status = dict(aw.get("status") or {})
        conditions = [dict(c) for c in status.get("conditions") or []]
        phase = status.get("phase") or ""
        suspend = bool((aw.get("spec") or {}).get("suspend"))
        now = rfc3339(self.clock.now())
        delay: float | None = None
        if phase == "":
            phase = "Suspended"
        elif phase == "Suspended" and not suspend:
            for ctype, cstatus in (("QuotaReserved", "True"), ("ResourcesDeployed", "True"),
                                   ("PodsReady", "False"), ("Unhealthy", "False")):
                set_condition(conditions, ctype, cstatus, "Resuming", "Suspend is false", now)
            phase = "Resuming"
        elif phase in ("Resuming", "Running", "Resetting") and suspend:
            phase = "Suspending"
        elif phase == "Resuming":
            try:
                status["componentStatus"] = self._create_components(aw)
                phase = "Running"
            except ApiError as err:
                # Like the AppWrapper controller's fatal create errors: no retry, the wrapper fails.
                detail = f"error creating components: {err.message}"
                set_condition(conditions, "Unhealthy", "True", "CreateFailed", detail, now)
                record_event(self.store, self.clock, aw, "Normal", "Unhealthy", f"CreateFailed: {detail}",
                             COMPONENT)
                phase = "Failed"
        elif phase == "Running":
            phase = self._observe(aw, conditions, now)
        elif phase == "Suspending":
            if self._delete_components(aw):
                delay = 0.1 * self.clock.time_factor + 0.01
            else:
                set_condition(conditions, "ResourcesDeployed", "False", "Suspended", "Suspend is true", now)
                set_condition(conditions, "QuotaReserved", "False", "Suspended", "Suspend is true", now)
                set_condition(conditions, "PodsReady", "False", "Suspended", "", now)
                set_condition(conditions, "Unhealthy", "False", "Suspended", "", now)
                phase = "Suspended"
        elif phase == "Failed":
            if self._delete_components(aw):
                delay = 0.1 * self.clock.time_factor + 0.01
            else:
                set_condition(conditions, "ResourcesDeployed", "False", "Failed",
                              "Resources deleted for failed AppWrapper", now)
                set_condition(conditions, "QuotaReserved", "False", "Failed", "No resources deployed", now)
        status["phase"] = phase
        status["conditions"] = conditions
        status.setdefault("resettingCount", 0)
        if status != (aw.get("status") or {}):
            self.store.patch(APPWRAPPERS, ns, name, {"status": status}, "merge", subresource="status")
        return delay

    def _create_components(self, aw: JsonObj) -> list[JsonObj]:
        ns = str(_meta(aw).get("namespace", ""))
        statuses = []
        for index, component in enumerate((aw.get("spec") or {}).get("components") or []):
            obj = render_component(aw, index)
            gvr = component_gvr(obj)
            try:
                self.store.create(gvr, obj, namespace=ns)
            except ApiError as err:
                if err.code != 409:  # 409: created by an earlier attempt
                    raise
            statuses.append({"name": _meta(obj).get("name", ""), "kind": obj.get("kind", ""),
                             "apiVersion": obj.get("apiVersion", ""), "podSets": component.get("podSets") or [],
                             "conditions": [{"type": "ResourcesDeployed", "status": "True",
                                             "reason": "CompononentCreated", "message": "Component was created",
                                             "lastTransitionTime": rfc3339(self.clock.now())}]})
        return statuses

    def _components(self, aw: JsonObj) -> list[tuple[GVR, str, JsonObj | None]]:
        ns = str(_meta(aw).get("namespace", ""))
        found = []
        for component in (aw.get("spec") or {}).get("components") or []:
            template = component.get("template") or {}
            gvr = component_gvr(template)
            name = str(_meta(template).get("name", ""))
            try:
                obj: JsonObj | None = self.store.get(gvr, ns, name)
            except ApiError:
                obj = None
            found.append((gvr, name, obj))
        return found

    def _delete_components(self, aw: JsonObj) -> bool:
        """Delete what is left; True while anything still exists."""
        ns = str(_meta(aw).get("namespace", ""))
        remaining = False
        for gvr, name, obj in self._components(aw):
            if obj is None:
                continue
            remaining = True
            if not _meta(obj).get("deletionTimestamp"):
                try:
                    self.store.delete(gvr, ns, name, propagation_policy="Background")
                except ApiError as err:
                    if err.code != 404:
                        raise
        return remaining

    def _observe(self, aw: JsonObj, conditions: list[JsonObj], now: str) -> str:
        components = self._components(aw)
        if any(obj is None for _, _, obj in components):
            expected = len(components)
            deployed = sum(1 for _, _, obj in components if obj is not None)
            set_condition(conditions, "Unhealthy", "True", "MissingComponent",
                          f"Only found {deployed} deployed components, but was expecting {expected}", now)
            return "Failed"
        failed = sum(1 for _, _, obj in components if obj is not None and component_failed(obj))
        if failed:
            set_condition(conditions, "Unhealthy", "True", "FailedComponent", f"Found {failed} failed components",
                          now)
            return "Failed"
        ns = str(_meta(aw).get("namespace", ""))
        pods, _ = self.store.list(PODS, ns, label_selector=f"{APPWRAPPER_LABEL}={_meta(aw).get('name', '')}")
        counts = {"Pending": 0, "Running": 0, "Succeeded": 0, "Failed": 0}
        for pod in pods:
            phase = (pod.get("status") or {}).get("phase") or "Pending"
            counts[phase] = counts.get(phase, 0) + 1
        expected = expected_pods(aw)
        if expected and counts["Succeeded"] >= expected and counts["Pending"] + counts["Running"] + counts["Failed"] == 0:
            message = f"{counts['Succeeded']} pods succeeded and no running, pending, or failed pods"
            set_condition(conditions, "QuotaReserved", "False", "Succeeded", message, now)
            set_condition(conditions, "ResourcesDeployed", "True", "Succeeded", message, now)
            return "Succeeded"
        if counts["Running"] + counts["Succeeded"] >= expected:
            set_condition(conditions, "PodsReady", "True", "SufficientPodsReady",
                          f"{counts['Running']} pods running; {counts['Succeeded']} pods succeeded", now)
        else:
            set_condition(conditions, "PodsReady", "False", "InsufficientPodsReady",
                          f"{counts['Pending']} pods pending; {counts['Running']} pods running; "
                          f"{counts['Succeeded']} pods succeeded", now)
        return "Running"
