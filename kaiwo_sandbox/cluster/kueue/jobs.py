"""Kueue's job integrations as pure functions over dicts: for each kind Kueue gates (batch Job,
RayJob, RayCluster, RayService, AppWrapper, plain Pod), how to read its pod sets, whether it is suspended,
active or finished, and how to start it with the admitted flavors or stop it again.

`start`/`stop` mutate a deep copy the caller then writes; they never touch the store.
"""

from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass
from typing import Any

from kaiwo_sandbox.cluster.kuberay.appwrapper_webhook import parse_path
from kaiwo_sandbox.cluster.kuberay.objects import default_submitter_template
from kaiwo_sandbox.cluster.pods import controller_of
from kaiwo_sandbox.contracts import APPWRAPPERS, GVR, JOBS, PODS, RAYCLUSTERS, RAYJOBS, RAYSERVICES, JsonObj

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
MANAGED_LABEL = "kueue.x-k8s.io/managed"
ADMISSION_GATE = "kueue.x-k8s.io/admission"

# Owner kinds Kueue manages itself: their children are not queued again (ApplyDefaultForSuspend).
MANAGED_OWNER_KINDS = frozenset({"Job", "RayJob", "RayCluster", "RayService", "AppWrapper", "JobSet"})


@dataclass(frozen=True, slots=True)
class PodSetSpec:
    """A pod set as the Workload records it, plus where its template lives in the job."""

    name: str
    count: int
    template: JsonObj
    path: tuple[str | int, ...]  # location of the pod template inside the job object


@dataclass(frozen=True, slots=True)
class PodSetInfo:
    """What admission adds to a pod set's template (and eviction takes away)."""

    name: str
    node_selector: dict[str, str]
    tolerations: list[JsonObj]


@dataclass(frozen=True, slots=True)
class Finish:
    success: bool
    message: str


def _get(obj: JsonObj, path: tuple[str | int, ...]) -> JsonObj | None:
    node: object = obj
    for step in path:
        if isinstance(step, int):
            if not isinstance(node, list) or step >= len(node):
                return None
            node = node[step]
        else:
            if not isinstance(node, dict):
                return None
            node = node.get(step)
    return node if isinstance(node, dict) else None


def _ensure(obj: JsonObj, path: tuple[str | int, ...]) -> JsonObj:
    node: Any = obj
    for step in path:
        if isinstance(step, int):
            node = node[step]  # list entries must exist already
        else:
            child = node.get(step)
            if not isinstance(child, dict):
                child = {}
                node[step] = child
            node = child
    result: JsonObj = node
    return result


def _count(value: object, default: int = 1) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


class Framework:
    """One Kueue integration. Subclasses override what differs from a batch Job."""

    gvr: GVR = JOBS
    kind = "Job"
    framework = "batch/job"  # events come from "<framework>-kueue-controller"
    prefix = "job"

    @property
    def component(self) -> str:
        return f"{self.framework}-kueue-controller"

    def podsets(self, obj: JsonObj) -> list[PodSetSpec]:
        spec = obj.get("spec") or {}
        parallelism = _count(spec.get("parallelism"))
        completions = spec.get("completions")
        count = min(parallelism, completions) if isinstance(completions, int) else parallelism
        return [PodSetSpec("main", count, spec.get("template") or {}, ("spec", "template"))]

    def suspended(self, obj: JsonObj) -> bool:
        return bool((obj.get("spec") or {}).get("suspend"))

    def active(self, obj: JsonObj) -> bool:
        return _count((obj.get("status") or {}).get("active"), 0) > 0

    def finished(self, obj: JsonObj) -> Finish | None:
        for condition in (obj.get("status") or {}).get("conditions") or []:
            if condition.get("status") != "True":
                continue
            if condition.get("type") == "Complete":
                return Finish(True, str(condition.get("message") or "Job finished successfully"))
            if condition.get("type") == "Failed":
                return Finish(False, str(condition.get("message") or "Job failed"))
        return None

    def set_suspend(self, obj: JsonObj, suspend: bool) -> None:
        obj.setdefault("spec", {})["suspend"] = suspend

    def start(self, obj: JsonObj, infos: list[PodSetInfo]) -> None:
        """Unsuspend and merge each pod set's nodeSelector/tolerations into its template."""
        by_name = {info.name: info for info in infos}
        for podset in self.podsets(obj):
            info = by_name.get(podset.name)
            if info is None:
                continue
            template = _get(obj, podset.path)
            if template is None:
                continue
            _merge_info(template.setdefault("spec", {}), info)
        self.set_suspend(obj, False)

    def stop(self, obj: JsonObj, originals: list[PodSetSpec]) -> None:
        """Suspend and put back the pod templates the Workload recorded before admission."""
        self.restore(obj, originals)
        self.set_suspend(obj, True)

    def restore(self, obj: JsonObj, originals: list[PodSetSpec]) -> bool:
        """Put back each pod set's nodeSelector/tolerations as recorded; True when anything changed."""
        by_name = {ps.name: ps for ps in originals}
        changed = False
        for podset in self.podsets(obj):
            original = by_name.get(podset.name)
            template = _get(obj, podset.path)
            if original is None or template is None:
                continue
            changed = _restore(template.setdefault("spec", {}), original.template.get("spec") or {}) or changed
        return changed


def _merge_info(pod_spec: JsonObj, info: PodSetInfo) -> None:
    if info.node_selector:
        selector = dict(pod_spec.get("nodeSelector") or {})
        selector.update(info.node_selector)
        pod_spec["nodeSelector"] = selector
    if info.tolerations:
        tolerations = list(pod_spec.get("tolerations") or [])
        tolerations.extend(t for t in info.tolerations if t not in tolerations)
        pod_spec["tolerations"] = tolerations


def _restore(pod_spec: JsonObj, original: JsonObj) -> bool:
    changed = False
    for key in ("nodeSelector", "tolerations"):
        before = pod_spec.get(key)
        if original.get(key):
            pod_spec[key] = copy.deepcopy(original[key])
        else:
            pod_spec.pop(key, None)
        changed = changed or pod_spec.get(key) != before
    return changed


class RayJobFramework(Framework):
    gvr = RAYJOBS
    kind = "RayJob"
    framework = "ray.io/rayjob"
    prefix = "rayjob"

    def podsets(self, obj: JsonObj) -> list[PodSetSpec]:
        spec = obj.get("spec") or {}
        sets = _ray_cluster_podsets(spec.get("rayClusterSpec") or {}, ("spec", "rayClusterSpec"))
        if (spec.get("submissionMode") or "K8sJobMode") == "K8sJobMode":
            template = spec.get("submitterPodTemplate") or default_submitter_template(obj)
            sets.append(PodSetSpec("submitter", 1, template, ("spec", "submitterPodTemplate")))
        return sets

    def active(self, obj: JsonObj) -> bool:
        status = (obj.get("status") or {}).get("jobDeploymentStatus") or ""
        return status not in ("", "New", "Suspended", "Complete", "Failed", "ValidationFailed")

    def finished(self, obj: JsonObj) -> Finish | None:
        status = obj.get("status") or {}
        deployment = status.get("jobDeploymentStatus")
        if deployment not in ("Complete", "Failed"):
            return None
        success = status.get("jobStatus") == "SUCCEEDED"
        return Finish(success, str(status.get("message") or ("Job finished successfully" if success
                                                           else "Job failed")))

    def start(self, obj: JsonObj, infos: list[PodSetInfo]) -> None:
        spec = obj.setdefault("spec", {})
        if any(i.name == "submitter" for i in infos) and not spec.get("submitterPodTemplate") and \
                (spec.get("submissionMode") or "K8sJobMode") == "K8sJobMode":
            spec["submitterPodTemplate"] = default_submitter_template(obj)
        super().start(obj, infos)


def _ray_cluster_podsets(cluster_spec: JsonObj, base: tuple[str | int, ...]) -> list[PodSetSpec]:
    head = cluster_spec.get("headGroupSpec") or {}
    sets = [PodSetSpec("head", 1, head.get("template") or {}, (*base, "headGroupSpec", "template"))]
    for index, group in enumerate(cluster_spec.get("workerGroupSpecs") or []):
        replicas = group.get("replicas")
        if not isinstance(replicas, int):
            replicas = _count(group.get("minReplicas"), 0)
        count = replicas * _count(group.get("numOfHosts"), 1)
        sets.append(PodSetSpec(str(group.get("groupName", f"group-{index}")), count,
                               group.get("template") or {}, (*base, "workerGroupSpecs", index, "template")))
    return sets


class RayClusterFramework(Framework):
    gvr = RAYCLUSTERS
    kind = "RayCluster"
    framework = "ray.io/raycluster"
    prefix = "raycluster"

    def podsets(self, obj: JsonObj) -> list[PodSetSpec]:
        return _ray_cluster_podsets(obj.get("spec") or {}, ("spec",))

    def active(self, obj: JsonObj) -> bool:
        status = obj.get("status") or {}
        return bool(status) and status.get("state") != "suspended"

    def finished(self, obj: JsonObj) -> Finish | None:
        return None  # a RayCluster runs until deleted


class RayServiceFramework(Framework):
    """Kueue's top-level RayService integration (v0.17+): one Workload for the head and worker groups of
    `spec.rayClusterConfig`, gated by KubeRay 1.7's `spec.suspend` (a suspended RayService has no
    cluster). A RayService runs until deleted."""

    gvr = RAYSERVICES
    kind = "RayService"
    framework = "ray.io/rayservice"
    prefix = "rayservice"

    def podsets(self, obj: JsonObj) -> list[PodSetSpec]:
        return _ray_cluster_podsets((obj.get("spec") or {}).get("rayClusterConfig") or {},
                                    ("spec", "rayClusterConfig"))

    def active(self, obj: JsonObj) -> bool:
        status = obj.get("status") or {}
        return not (obj.get("spec") or {}).get("suspend") and bool(
            (status.get("activeServiceStatus") or {}).get("rayClusterName")
            or (status.get("pendingServiceStatus") or {}).get("rayClusterName"))

    def finished(self, obj: JsonObj) -> Finish | None:
        return None


class AppWrapperFramework(Framework):
    gvr = APPWRAPPERS
    kind = "AppWrapper"
    framework = "workload.codeflare.dev/appwrapper"
    prefix = "appwrapper"

    def podsets(self, obj: JsonObj) -> list[PodSetSpec]:
        name = str((obj.get("metadata") or {}).get("name", ""))
        sets: list[PodSetSpec] = []
        for ci, component in enumerate((obj.get("spec") or {}).get("components") or []):
            for pi, declared in enumerate(component.get("podSets") or []):
                path = parse_path(str(declared.get("path", "")))
                template = _get(component, path) or {}
                sets.append(PodSetSpec(f"{name}-{len(sets)}", _count(declared.get("replicas")), template,
                                       ("spec", "components", ci, "podSets", pi)))
        return sets

    def active(self, obj: JsonObj) -> bool:
        return (obj.get("status") or {}).get("phase") in ("Resuming", "Running", "Suspending", "Resetting")

    def finished(self, obj: JsonObj) -> Finish | None:
        phase = (obj.get("status") or {}).get("phase")
        if phase == "Succeeded":
            return Finish(True, "AppWrapper finished successfully")
        if phase == "Failed":
            return Finish(False, "AppWrapper failed")
        return None

    def start(self, obj: JsonObj, infos: list[PodSetInfo]) -> None:
        """AppWrapper takes admission as podSetInfos next to each declared pod set."""
        by_name = {info.name: info for info in infos}
        components = (obj.get("spec") or {}).get("components") or []
        for component in components:
            component["podSetInfos"] = []
        for podset in self.podsets(obj):
            ci = int(podset.path[2])
            info = by_name.get(podset.name)
            if info is None:
                continue
            entry: JsonObj = {}
            if info.node_selector:
                entry["nodeSelector"] = dict(info.node_selector)
            if info.tolerations:
                entry["tolerations"] = list(info.tolerations)
            components[ci].setdefault("podSetInfos", []).append(entry)
        self.set_suspend(obj, False)

    def restore(self, obj: JsonObj, originals: list[PodSetSpec]) -> bool:
        changed = False
        for component in (obj.get("spec") or {}).get("components") or []:
            changed = component.pop("podSetInfos", None) is not None or changed
        return changed


class PodFramework(Framework):
    gvr = PODS
    kind = "Pod"
    framework = "pod"
    prefix = "pod"

    def podsets(self, obj: JsonObj) -> list[PodSetSpec]:
        template = {"metadata": {k: v for k, v in (obj.get("metadata") or {}).items()
                                 if k in ("labels", "annotations")},
                    "spec": obj.get("spec") or {}}
        return [PodSetSpec("main", 1, template, ())]

    def suspended(self, obj: JsonObj) -> bool:
        gates = (obj.get("spec") or {}).get("schedulingGates") or []
        return any(g.get("name") == ADMISSION_GATE for g in gates)

    def active(self, obj: JsonObj) -> bool:
        return (obj.get("status") or {}).get("phase") not in ("Succeeded", "Failed")

    def finished(self, obj: JsonObj) -> Finish | None:
        phase = (obj.get("status") or {}).get("phase")
        if phase == "Succeeded":
            return Finish(True, "Pod succeeded")
        if phase == "Failed":
            return Finish(False, "Pod failed")
        return None

    def start(self, obj: JsonObj, infos: list[PodSetInfo]) -> None:
        spec = obj.setdefault("spec", {})
        if infos:
            _merge_info(spec, infos[0])
        gates = [g for g in spec.get("schedulingGates") or [] if g.get("name") != ADMISSION_GATE]
        if gates:
            spec["schedulingGates"] = gates
        else:
            spec.pop("schedulingGates", None)


FRAMEWORKS: dict[str, Framework] = {
    fw.gvr.resource: fw for fw in (Framework(), RayJobFramework(), RayClusterFramework(), RayServiceFramework(),
                                   AppWrapperFramework(), PodFramework())
}
FRAMEWORK_BY_KIND: dict[str, Framework] = {fw.kind: fw for fw in FRAMEWORKS.values()}


def queue_name(obj: JsonObj) -> str:
    return str(((obj.get("metadata") or {}).get("labels") or {}).get(QUEUE_LABEL) or "")


def owned_by_managed_job(obj: JsonObj) -> bool:
    owner = controller_of(obj)
    return owner is not None and owner.get("kind") in MANAGED_OWNER_KINDS


def workload_name(kind: str, name: str, uid: str, group: str) -> str:
    """Kueue's GetWorkloadNameForOwnerWithGVK: `<kind>-<name>` (truncated) and 5 hex of a sha1."""
    digest = hashlib.sha1(f"{kind}\n{group}\n{name}\n{uid}".encode()).hexdigest()[:5]
    prefix = f"{kind.lower()}-{name}"[: 253 - 1 - 5]
    return f"{prefix}-{digest}"


def suspend_on_create(gvr: GVR, obj: JsonObj) -> None:
    """Kueue's mutating webhooks at CREATE: queued jobs start suspended, queued pods gated."""
    if not queue_name(obj) or owned_by_managed_job(obj):
        return
    fw = FRAMEWORKS.get(gvr.resource)
    if fw is None or gvr.group != fw.gvr.group:
        return
    if isinstance(fw, PodFramework):
        spec = obj.setdefault("spec", {})
        gates = list(spec.get("schedulingGates") or [])
        if not any(g.get("name") == ADMISSION_GATE for g in gates):
            gates.append({"name": ADMISSION_GATE})
        spec["schedulingGates"] = gates
        obj.setdefault("metadata", {}).setdefault("labels", {})[MANAGED_LABEL] = "true"
        return
    fw.set_suspend(obj, True)


ValidationProblem = tuple[str, object, str]  # (field, value, message)


def validate_rayjob(obj: JsonObj) -> list[ValidationProblem]:
    """Kueue's RayJob webhook rules for queued RayJobs."""
    if not queue_name(obj):
        return []
    spec = obj.get("spec") or {}
    problems: list[ValidationProblem] = []
    if spec.get("clusterSelector"):
        problems.append(("spec.clusterSelector", spec.get("clusterSelector"),
                         "a kueue managed job should not use an existing cluster"))
    if not spec.get("shutdownAfterJobFinishes"):
        problems.append(("spec.shutdownAfterJobFinishes", spec.get("shutdownAfterJobFinishes", False),
                         "a kueue managed job should delete the cluster after finishing"))
    return problems

