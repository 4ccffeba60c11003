"""One kubelet for every node: runs bound pods through their simulated lifecycle and keeps node
status as a live kubelet would post it.

A pod's timeline lives in memory, keyed by its uid, from the moment the kubelet first sees it
bound; the store only ever receives rendered status. Simulated seconds are real seconds divided
by `clock.time_factor`, and every wake-up is a requeue delay, never a sleep.
"""

from __future__ import annotations

import hashlib
import ipaddress
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from kaiwo_sandbox.cluster.base import ClusterSettings, Controller, Key
from kaiwo_sandbox.cluster.events import record_event
from kaiwo_sandbox.cluster.nodes.podsim import (
    ContainerRun,
    PodTimeline,
    Termination,
    plan_pod,
    restart_backoff,
)
from kaiwo_sandbox.cluster.nodes.realpods import RealPodTimeline
from kaiwo_sandbox.cluster.pods import is_terminal
from kaiwo_sandbox.contracts import (
    CONFIGMAPS,
    NODES,
    PODS,
    PVCS,
    SECRETS,
    ApiError,
    Clock,
    JsonObj,
    Store,
    WatchEvent,
    rfc3339,
)
from kaiwo_sandbox.runtime.podspec import (
    EnvSources,
    config_errors,
    container_env,
    expand_argv,
    is_local_image,
    volume_errors,
    volume_files,
)
from kaiwo_sandbox.runtime.probes import Prober
from kaiwo_sandbox.runtime.processes import ContainerProcess, LocalPod
from kaiwo_sandbox.semantics.qos import qos_class
from kaiwo_sandbox.semantics.times import parse_time

COMPONENT = "kubelet"
MIN_DELAY = 0.001  # seconds: never spin on a transition that is due "now"
VOLUME_RETRY_SECONDS = 2.0  # simulated: how often a pod waiting for its claims looks again
STANDARD_NODE_CONDITIONS = (
    ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
)


def _digest(*parts: str) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()


def pod_ip(uid: str, pod_cidr: str | None = None) -> str:
    """A fake but stable pod IP: inside the node's `spec.podCIDR` when it has one, else in the
    kind-style 10.244.0.0/16 pod network."""
    raw = int(_digest("pod-ip", uid)[:8], 16)
    if pod_cidr:
        try:
            network = ipaddress.ip_network(pod_cidr, strict=False)
        except ValueError:
            network = None
        if network is not None and network.num_addresses > 4:
            return str(network.network_address + 2 + raw % (network.num_addresses - 3))
    return f"10.244.{(raw >> 8) & 0xFF}.{max(raw & 0xFF, 2)}"


def node_ip(name: str) -> str:
    raw = bytes.fromhex(_digest("node-ip", name)[:4])
    return f"172.18.{raw[0]}.{max(raw[1], 2)}"


def image_id(image: str) -> str:
    """Fully qualified image reference with a digest, as containerd reports it."""
    repo = image.split("@", 1)[0]
    last = repo.rsplit("/", 1)[-1]
    if ":" in last:
        repo = repo[: len(repo) - len(last)] + last.split(":", 1)[0]
    first = repo.split("/", 1)[0]
    if "/" not in repo:
        repo = f"docker.io/library/{repo}"
    elif "." not in first and ":" not in first and first != "localhost":
        repo = f"docker.io/{repo}"
    return f"{repo}@sha256:{_digest('image', image)}"


@dataclass(slots=True)
class PodRuntime:
    uid: str
    timeline: PodTimeline | RealPodTimeline
    bound_monotonic: float
    bound_wall: datetime
    reported_events: int = 0
    last_written: JsonObj | None = None  # guards against write loops if the store normalises status
    pod_ref: str = ""  # "name_namespace(uid)", as the kubelet names a pod in messages


# --------------------------------------------------------------------------------------------
# Rendering (pure)


def _wall(runtime: PodRuntime, sim_seconds: float, time_factor: float) -> str:
    return rfc3339(runtime.bound_wall + timedelta(seconds=sim_seconds * max(time_factor, 0.0)))


def _terminated(term: Termination, container_id: str, runtime: PodRuntime, tf: float) -> JsonObj:
    out: JsonObj = {
        "exitCode": term.exit_code,
        "reason": term.reason,
        "startedAt": _wall(runtime, term.started_at, tf),
        "finishedAt": _wall(runtime, term.finished_at, tf),
    }
    if container_id:
        out["containerID"] = container_id
    return out


def container_status(run: ContainerRun, runtime: PodRuntime, now: float, tf: float, *, init: bool) -> JsonObj:
    plan = run.plan
    started_ever = run.started_at is not None or run.terminated is not None
    container_id = f"containerd://{_digest(runtime.uid, plan.name, str(run.restart_count))}" if started_ever else ""
    status: JsonObj = {
        "name": plan.name,
        "image": plan.image,
        "imageID": image_id(plan.image) if started_ever else "",
        "ready": (run.state == "terminated" and init) or (not init and run.ready(now)),
        "restartCount": run.restart_count,
        "started": run.state == "running",
        "lastState": {},
    }
    if container_id:
        status["containerID"] = container_id
    if run.state == "running" and run.started_at is not None:
        status["state"] = {"running": {"startedAt": _wall(runtime, run.started_at, tf)}}
    elif run.state == "terminated" and run.terminated is not None and run.restart_at is None:
        status["state"] = {"terminated": _terminated(run.terminated, container_id, runtime, tf)}
    elif run.restart_at is not None and run.terminated is not None:
        status["state"] = {"waiting": {"reason": "CrashLoopBackOff", "message": (
            f"back-off {int(restart_backoff(run.restart_count))}s restarting failed container={plan.name} "
            f"pod={runtime.pod_ref}")}}
        status["lastState"] = {"terminated": _terminated(run.terminated, container_id, runtime, tf)}
    else:
        waiting: JsonObj = {"reason": run.waiting_reason or "ContainerCreating"}
        if run.waiting_message:
            waiting["message"] = run.waiting_message
        status["state"] = {"waiting": waiting}
    if run.last_terminated is not None and run.restart_at is None:
        previous = f"containerd://{_digest(runtime.uid, plan.name, str(run.restart_count - 1))}"
        status["lastState"] = {"terminated": _terminated(run.last_terminated, previous, runtime, tf)}
    return status


def _merge_conditions(existing: list[JsonObj], desired: list[tuple[str, str, str, str]], now: str) -> list[JsonObj]:
    """Desired pod conditions in kubelet order, then any others (PodScheduled, DisruptionTarget...);
    lastTransitionTime survives while the status does not flip."""
    by_type = {c.get("type"): c for c in existing}
    merged: list[JsonObj] = []
    for ctype, status, reason, message in desired:
        old = by_type.get(ctype)
        condition: JsonObj = {"type": ctype, "status": status, "lastProbeTime": None,
                              "lastTransitionTime": old.get("lastTransitionTime", now)
                              if old and old.get("status") == status else now}
        if reason:
            condition["reason"] = reason
        if message:
            condition["message"] = message
        merged.append(condition)
    names = {d[0] for d in desired}
    merged.extend(c for c in existing if c.get("type") not in names)
    if not any(c.get("type") == "PodScheduled" for c in merged):
        # A pod created with spec.nodeName never met the scheduler; the kubelet reports it scheduled.
        merged.append({"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": now})
    return merged


def render_pod_status(pod: JsonObj, runtime: PodRuntime, now: float, tf: float, host_ip: str, now_wall: str,
                      pod_cidr: str | None = None, real_ip: str | None = None) -> JsonObj:
    """The status the kubelet would post for `pod` at simulated time `now`."""
    timeline = runtime.timeline
    phase = timeline.phase()
    terminal = phase in ("Succeeded", "Failed")
    old_status = pod.get("status") or {}
    sandbox = timeline.sandbox_ready_at is not None
    init_pending = [r.plan.name for r in timeline.init if not (r.state == "terminated" and r.terminated
                                                               and r.terminated.exit_code == 0)]
    unready = [r.plan.name for r in timeline.main if not r.ready(now)]
    if terminal:
        ready = ("False", "PodCompleted", "")
    elif unready:
        ready = ("False", "ContainersNotReady", f"containers with unready status: [{' '.join(unready)}]")
    else:
        ready = ("True", "", "")
    desired = [
        ("PodReadyToStartContainers", "True" if sandbox and not terminal else "False", "", ""),
        ("Initialized", "False" if init_pending else "True",
         "ContainersNotInitialized" if init_pending else "",
         f"containers with incomplete status: [{' '.join(init_pending)}]" if init_pending else ""),
        ("Ready", *ready),
        ("ContainersReady", *ready),
    ]
    status: JsonObj = {
        "phase": phase,
        "conditions": _merge_conditions(list(old_status.get("conditions") or []), desired, now_wall),
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "startTime": rfc3339(runtime.bound_wall),
        "qosClass": old_status.get("qosClass") or qos_class(pod.get("spec") or {}),
        "containerStatuses": [container_status(r, runtime, now, tf, init=False) for r in timeline.main],
    }
    if sandbox:
        ip = real_ip or pod_ip(runtime.uid, pod_cidr)
        status["podIP"] = ip
        status["podIPs"] = [{"ip": ip}]
    if timeline.init:
        status["initContainerStatuses"] = [container_status(r, runtime, now, tf, init=True) for r in timeline.init]
    return status


def _comparable(status: JsonObj) -> JsonObj:
    """Status without timestamps that move on every render (condition transition times)."""
    out = dict(status)
    out["conditions"] = [{k: v for k, v in c.items() if k not in ("lastTransitionTime", "lastProbeTime")}
                         for c in status.get("conditions") or []]
    return out


# --------------------------------------------------------------------------------------------
# Controller


class Kubelet(Controller):
    name = "kubelet"
    watches = (PODS, NODES, SECRETS, CONFIGMAPS)

    def __init__(self, store: Store, clock: Clock, settings: ClusterSettings) -> None:
        super().__init__(store, clock, settings)
        self._runtimes: dict[tuple[str, str], PodRuntime] = {}
        self._node_ips: dict[str, str] = {}
        self._pod_cidrs: dict[str, str | None] = {}
        self._volume_waits: set[str] = set()  # pods already told about unbound claims
        self._real: dict[tuple[str, str], tuple[str, float]] = {}  # real pods: (ns, name) -> (uid, grace seconds)
        self._prober: Prober | None = None
        # Pods that wait for a Secret or ConfigMap (a volume's, held before start in _held; or an env
        # reference's, a container in CreateContainerConfigError): namespace -> pod names. A change to
        # such an object in that namespace syncs them again, as the kubelet's retries would.
        self._config_waits: dict[str, set[str]] = {}
        self._held: dict[tuple[str, str], PodRuntime] = {}  # pods whose volumes cannot be mounted yet

    def keys_for(self, event: WatchEvent) -> Iterable[Key]:
        meta = event.object.get("metadata") or {}
        if event.gvr.resource == "nodes":
            return [("node", meta.get("name"))] if event.type == "ADDED" else []
        if event.gvr.resource in ("secrets", "configmaps"):
            namespace = str(meta.get("namespace", ""))
            return [("pod", namespace, name) for name in sorted(self._config_waits.get(namespace, ()))]
        node_name = (event.object.get("spec") or {}).get("nodeName")
        if not node_name and event.type != "DELETED":
            return []
        return [("pod", meta.get("namespace"), meta.get("name"))]

    def reconcile(self, key: Key) -> float | None:
        assert isinstance(key, tuple)
        if key[0] == "node":
            self._ensure_node_status(str(key[1]))
            return None
        return self._sync_pod(str(key[1]), str(key[2]))

    # -- nodes -----------------------------------------------------------------------------------
    def _ensure_node_status(self, name: str) -> None:
        """Fill in what a registering kubelet posts, never overriding what a test or user set
        (a Ready=False condition is how a NotReady node is simulated)."""
        try:
            node = self.store.get(NODES, None, name)
        except ApiError:
            return
        status = node.get("status") or {}
        now = rfc3339(self.clock.now())
        patch: JsonObj = {}
        conditions = list(status.get("conditions") or [])
        have = {c.get("type") for c in conditions}
        missing = [c for c in STANDARD_NODE_CONDITIONS if c[0] not in have]
        if missing:
            conditions.extend({"type": t, "status": s, "reason": r, "message": m, "lastHeartbeatTime": now,
                               "lastTransitionTime": now} for t, s, r, m in missing)
            patch["conditions"] = conditions
        if "allocatable" not in status and "capacity" in status:
            patch["allocatable"] = status["capacity"]
        if not status.get("addresses"):
            patch["addresses"] = [{"type": "InternalIP", "address": node_ip(name)},
                                  {"type": "Hostname", "address": name}]
        if not status.get("nodeInfo"):
            patch["nodeInfo"] = {
                "architecture": "amd64", "operatingSystem": "linux", "osImage": "kaiwo-ray sandbox",
                "kernelVersion": "6.8.0-sandbox", "containerRuntimeVersion": "containerd://1.7.18",
                "kubeletVersion": "v1.31.0", "kubeProxyVersion": "v1.31.0",
                "machineID": _digest("machine", name)[:32], "systemUUID": _digest("system", name)[:32],
                "bootID": _digest("boot", name)[:32],
            }
        if patch:
            self.store.patch(NODES, None, name, {"status": patch}, "merge", subresource="status",
                             user=f"system:node:{name}")

    def _node_network(self, node_name: str) -> tuple[str, str | None]:
        """(InternalIP, podCIDR) of a node, cached: both are fixed once a node registered."""
        cached = self._node_ips.get(node_name)
        if cached:
            return cached, self._pod_cidrs.get(node_name)
        ip, cidr = node_ip(node_name), None
        try:
            node = self.store.get(NODES, None, node_name)
            cidr = (node.get("spec") or {}).get("podCIDR")
            for address in (node.get("status") or {}).get("addresses") or []:
                if address.get("type") == "InternalIP" and address.get("address"):
                    ip = str(address["address"])
                    break
        except ApiError:
            pass
        self._node_ips[node_name] = ip
        self._pod_cidrs[node_name] = str(cidr) if cidr else None
        return ip, self._pod_cidrs[node_name]

    # -- pods ------------------------------------------------------------------------------------
    def _time_factor(self) -> float:
        return max(float(self.clock.time_factor), 1e-9)

    def _sim_now(self, runtime: PodRuntime) -> float:
        return (self.clock.monotonic() - runtime.bound_monotonic) / self._time_factor()

    def _sync_pod(self, namespace: str, name: str) -> float | None:
        try:
            pod = self.store.get(PODS, namespace, name)
        except ApiError as err:
            if err.code == 404:
                self._runtimes.pop((namespace, name), None)
                self._forget_real(namespace, name)
                self._stop_waiting(namespace, name)
                return None
            raise
        meta = pod.get("metadata") or {}
        node_name = (pod.get("spec") or {}).get("nodeName")
        uid = str(meta.get("uid", ""))
        runtime = self._runtimes.get((namespace, name))
        if runtime is not None and runtime.uid != uid:  # same name, new pod
            runtime = None
        real = self._real.get((namespace, name))
        if real is not None and real[0] != uid:
            self._forget_real(namespace, name)
        if not node_name or (runtime is None and is_terminal(pod)):
            self._runtimes.pop((namespace, name), None)
            self._stop_waiting(namespace, name)
            return None
        from_hold = False
        if runtime is None and not meta.get("deletionTimestamp"):
            unmounted = self._unbound_claims(pod)
            if unmounted:
                return self._wait_for_volumes(pod, unmounted)
            failed_mounts = volume_errors(pod, self._lookup(SECRETS), self._lookup(CONFIGMAPS))
            if failed_mounts:
                self._hold_for_mounts(pod, failed_mounts)
                return None
            from_hold = (namespace, name) in self._held
            self._stop_waiting(namespace, name)
        resumed = False
        local_runtime = self.settings.local_runtime
        if runtime is None and local_runtime is not None and local_runtime.runs(pod):
            runtime = self._start_real(pod)
        if runtime is None:
            plan = plan_pod(pod, self.settings.default_run_seconds, self.settings.pod_start_seconds)
            bound_wall, bound_monotonic = self.clock.now(), self.clock.monotonic()
            started = parse_time((pod.get("status") or {}).get("startTime"))
            if started is not None and started <= bound_wall and not from_hold:
                # A kubelet already ran this pod (sandbox restarted from saved state): resume its
                # timeline from when it started instead of starting it over.
                elapsed = (bound_wall - started).total_seconds()
                bound_wall, bound_monotonic, resumed = started, bound_monotonic - elapsed, True
            runtime = PodRuntime(uid=uid, timeline=PodTimeline.start(plan), bound_monotonic=bound_monotonic,
                                 bound_wall=bound_wall, pod_ref=f"{name}_{namespace}({uid})")
            self._runtimes[(namespace, name)] = runtime
        now = self._sim_now(runtime)
        timeline = runtime.timeline
        if isinstance(timeline, PodTimeline):  # a real pod's timeline resolves its env itself
            timeline.blocked = config_errors(pod, EnvSources(self._lookup(SECRETS), self._lookup(CONFIGMAPS),
                                                             {}, "", 0))
            if timeline.blocked:
                self._config_waits.setdefault(namespace, set()).add(name)
            else:
                self._stop_waiting(namespace, name)
        timeline.advance(now)
        if isinstance(timeline, PodTimeline) and not meta.get("deletionTimestamp"):
            timeline.unblock(now)
        if resumed:
            runtime.reported_events = len(timeline.events)  # those were reported before the restart
        if meta.get("deletionTimestamp"):
            timeline.kill(now)
        self._report_events(pod, runtime)
        tf = self._time_factor()
        host_ip, pod_cidr = self._node_network(str(node_name))
        real_ip = timeline.local.ip if isinstance(timeline, RealPodTimeline) and timeline.local else None
        status = render_pod_status(pod, runtime, now, tf, host_ip, rfc3339(self.clock.now()), pod_cidr, real_ip)
        current = pod.get("status") or {}
        wanted = _comparable(status)
        if wanted != runtime.last_written and _comparable({k: current.get(k) for k in status}) != wanted:
            self.store.patch(PODS, namespace, name, {"status": status}, "merge", subresource="status",
                             user=f"system:node:{node_name}")
            runtime.last_written = wanted
        if timeline.terminal():
            self._runtimes.pop((namespace, name), None)
            self._volume_waits.discard(uid)
            self._stop_waiting(namespace, name)
            return None
        due = timeline.next_transition()
        if due is None:
            return None
        return max((due - now) * tf, MIN_DELAY)

    # -- real pods (local images) -------------------------------------------------------------------
    def _start_real(self, pod: JsonObj) -> PodRuntime:
        """A pod of local images: its network namespace and files now, its containers as the timeline
        starts them."""
        local_runtime = self.settings.local_runtime
        assert local_runtime is not None
        meta = pod.get("metadata") or {}
        spec = pod.get("spec") or {}
        namespace, name, uid = str(meta.get("namespace", "")), str(meta.get("name", "")), str(meta.get("uid", ""))
        mount_token = spec.get("automountServiceAccountToken") is not False
        local = local_runtime.ensure_pod(uid, namespace, name,
                                         str(spec.get("serviceAccountName") or "default") if mount_token else None)
        grace = spec.get("terminationGracePeriodSeconds")
        self._real[(namespace, name)] = (uid, float(grace) if isinstance(grace, (int, float)) else 30.0)
        if self._prober is None:
            self._prober = Prober()
        plan = plan_pod(pod, self.settings.default_run_seconds, self.settings.pod_start_seconds)
        timeline = RealPodTimeline.for_pod(plan, pod, local, local_runtime, self._prober,
                                           lambda container: self._start_container(namespace, name, local, container))
        return self._runtimes.setdefault((namespace, name), PodRuntime(
            uid=uid, timeline=timeline, bound_monotonic=self.clock.monotonic(), bound_wall=self.clock.now(),
            pod_ref=f"{name}_{namespace}({uid})"))

    def _start_container(self, namespace: str, name: str, local: LocalPod, container: JsonObj) -> ContainerProcess:
        """Resolve the container's environment against the pod as it is now (its real IP in
        status.podIP), then start its process. ContainerConfigError when a reference is missing."""
        local_runtime = self.settings.local_runtime
        assert local_runtime is not None
        pod = self.store.get(PODS, namespace, name)
        node_name = str((pod.get("spec") or {}).get("nodeName") or "")
        host_ip, _ = self._node_network(node_name)
        status = dict(pod.get("status") or {})
        status.update({"podIP": local.ip, "podIPs": [{"ip": local.ip}], "hostIP": host_ip,
                       "hostIPs": [{"ip": host_ip}]})
        pod["status"] = status
        try:
            allocatable = (self.store.get(NODES, None, node_name).get("status") or {}).get("allocatable") or {}
        except ApiError:
            allocatable = {}
        sources = EnvSources(secret=self._lookup(SECRETS), config_map=self._lookup(CONFIGMAPS),
                             node_allocatable=allocatable, api_host=local_runtime.api_host,
                             api_port=local_runtime.api_port)
        env = container_env(pod, container, sources)
        argv = expand_argv(local_runtime.argv(container), env)
        if not argv:
            argv = ["/bin/sh", "-c", "echo 'kaiwo-ray sandbox: a local image has no entrypoint: "
                                     "set the container command' >&2; exit 127"]
        working_dir = container.get("workingDir")
        own_workdir = not is_local_image(str(container.get("image", "")), local_runtime.images)
        volumes = volume_files(pod, container, self._lookup(SECRETS), self._lookup(CONFIGMAPS))
        return local_runtime.start_container(local, str(container.get("name", "")), argv, env,
                                             str(working_dir) if working_dir else None, own_workdir=own_workdir,
                                             stdin=bool(container.get("stdin")),
                                             stdin_once=bool(container.get("stdinOnce")), volumes=volumes)

    def _lookup(self, gvr: object) -> Callable[[str, str], JsonObj | None]:
        def find(namespace: str, name: str) -> JsonObj | None:
            try:
                return self.store.get(gvr, namespace, name)  # type: ignore[arg-type]
            except ApiError:
                return None
        return find

    def _forget_real(self, namespace: str, name: str) -> None:
        real = self._real.pop((namespace, name), None)
        if real is not None and self.settings.local_runtime is not None:
            self.settings.local_runtime.remove_pod(real[0], real[1])

    def _unbound_claims(self, pod: JsonObj) -> list[tuple[str, str]]:
        """(volume, claim) pairs whose claim is missing or not Bound. Normally the scheduler
        already held such pods back; this catches pods created with `spec.nodeName` set."""
        namespace = str(pod["metadata"].get("namespace", ""))
        missing: list[tuple[str, str]] = []
        for volume in (pod.get("spec") or {}).get("volumes") or []:
            claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
            if not claim:
                continue
            try:
                phase = (self.store.get(PVCS, namespace, str(claim)).get("status") or {}).get("phase")
            except ApiError:
                phase = None
            if phase != "Bound":
                missing.append((str(volume.get("name", "")), str(claim)))
        return missing

    def _wait_for_volumes(self, pod: JsonObj, unmounted: list[tuple[str, str]]) -> float:
        uid = str(pod["metadata"].get("uid", ""))
        if uid not in self._volume_waits:
            self._volume_waits.add(uid)
            namespace = pod["metadata"].get("namespace", "")
            volumes = " ".join(v for v, _ in unmounted)
            record_event(self.store, self.clock, pod, "Warning", "FailedMount",
                         f"Unable to attach or mount volumes: unmounted volumes=[{volumes}], unattached volumes=[], "
                         f"failed to process volumes=[{volumes}]: error processing PVC {namespace}/{unmounted[0][1]}: "
                         "PVC is not bound", COMPONENT)
        return VOLUME_RETRY_SECONDS * self._time_factor()

    def _hold_for_mounts(self, pod: JsonObj, failures: list[tuple[str, str]]) -> None:
        """A secret or configMap volume cannot be mounted: the pod stays ContainerCreating (no sandbox,
        no IP) with a FailedMount event per new failure, until the object appears (a watch event on
        it syncs the pod again)."""
        meta = pod.get("metadata") or {}
        namespace, name, uid = str(meta.get("namespace", "")), str(meta.get("name", "")), str(meta.get("uid", ""))
        held = self._held.get((namespace, name))
        if held is None or held.uid != uid:
            plan = plan_pod(pod, self.settings.default_run_seconds, self.settings.pod_start_seconds)
            held = PodRuntime(uid=uid, timeline=PodTimeline.start(plan), bound_monotonic=self.clock.monotonic(),
                              bound_wall=self.clock.now(), pod_ref=f"{name}_{namespace}({uid})")
            self._held[(namespace, name)] = held
        self._config_waits.setdefault(namespace, set()).add(name)
        messages = tuple(message for _, message in failures)
        if held.last_written is None or held.last_written.get("_mounts") != messages:
            for message in messages:
                record_event(self.store, self.clock, pod, "Warning", "FailedMount", message, COMPONENT)
        host_ip, pod_cidr = self._node_network(str((pod.get("spec") or {}).get("nodeName")))
        status = render_pod_status(pod, held, 0.0, self._time_factor(), host_ip, rfc3339(self.clock.now()), pod_cidr)
        current = pod.get("status") or {}
        if _comparable({k: current.get(k) for k in status}) != _comparable(status):
            self.store.patch(PODS, namespace, name, {"status": status}, "merge", subresource="status",
                             user=f"system:node:{(pod.get('spec') or {}).get('nodeName')}")
        held.last_written = {"_mounts": messages}

    def _stop_waiting(self, namespace: str, name: str) -> None:
        self._held.pop((namespace, name), None)
        waiting = self._config_waits.get(namespace)
        if waiting is not None:
            waiting.discard(name)
            if not waiting:
                self._config_waits.pop(namespace, None)

    def _report_events(self, pod: JsonObj, runtime: PodRuntime) -> None:
        images = {run.plan.name: run.plan.image for run in [*runtime.timeline.init, *runtime.timeline.main]}
        pending = runtime.timeline.events[runtime.reported_events:]
        runtime.reported_events = len(runtime.timeline.events)
        for event in pending:
            event_type, reason, container = event[0], event[1], event[2]
            if len(event) > 3:
                record_event(self.store, self.clock, pod, event_type, reason, str(event[3]), COMPONENT)
            elif reason == "Started":
                image = images.get(container, "")
                record_event(self.store, self.clock, pod, "Normal", "Pulled",
                             f'Container image "{image}" already present on machine', COMPONENT)
                record_event(self.store, self.clock, pod, "Normal", "Created", f"Created container: {container}",
                             COMPONENT)
                record_event(self.store, self.clock, pod, "Normal", "Started", f"Started container {container}",
                             COMPONENT)
            elif reason == "BackOff":
                record_event(self.store, self.clock, pod, event_type, "BackOff",
                             f"Back-off restarting failed container {container} in pod "
                             f"{runtime.pod_ref}", COMPONENT)
            elif reason == "Killing":
                record_event(self.store, self.clock, pod, event_type, "Killing", f"Stopping container {container}",
                             COMPONENT)
