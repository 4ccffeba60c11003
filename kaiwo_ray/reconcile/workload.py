"""The KaiwoJob/KaiwoService reconcile decision (spec/workloads.md §7), as one pure function.

`decide(world) -> Plan`: read the world the controller observed (the CR, KaiwoConfig, nodes, the
queue config, the children it owns, their Kueue Workloads), decide the phase and conditions, and
list what to write. Differences from upstream (docs/compatibility.md): children and status are
handled in the same pass (upstream needs two), children are updated wherever Kubernetes allows
(upstream never updates them), only the condition types this reconciler owns are compared (foreign
ones such as ResourceUnderutilization do not cause endless rewrites), `observedGeneration` and
`completionTime` are set, and a same-named predecessor's children still being garbage collected are
waited for (upstream's create fails on them).

No finalizer, as upstream: the garbage collector deletes a deleted workload's children through their
ownerReferences. A workload that still carries the finalizer an earlier version added gets it
removed once its children are gone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from kaiwo_ray.api.aim import AIMNamespaceConfigSpec
from kaiwo_ray.api.config import KaiwoConfigSpec
from kaiwo_ray.api.durations import format_go_duration, parse_go_duration
from kaiwo_ray.api.errors import ManifestError
from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.api.load import parse_as
from kaiwo_ray.api.meta import parse_time
from kaiwo_ray.api.queueconfig import KaiwoQueueConfigSpec
from kaiwo_ray.api.workloads import KaiwoJob, KaiwoService
from kaiwo_ray.reconcile import phases as ph
from kaiwo_ray.reconcile.conditions import Cond, find, same_conditions, set_conditions
from kaiwo_ray.reconcile.drift import drifted, needs_write, update_body
from kaiwo_ray.reconcile.events import PlannedEvent
from kaiwo_ray.reconcile.managed import tracked_kind
from kaiwo_ray.render import (
    RenderError,
    effective_queue,
    has_downloads,
    main_kind,
    main_of,
    prepare,
    resource_config,
    storage_of,
    workload_gpu_check,
)
from kaiwo_ray.render.context import PriorityClasses, RenderContext
from kaiwo_ray.render.httproute import render_httproute
from kaiwo_ray.render.storage import borrowed_credentials

Workload = KaiwoJob | KaiwoService

FINALIZER = "kaiwo.silogen.ai/finalizer"

OWNED_CONDITIONS = ("SpecValid", "Schedulable", "PvcReady", "DownloadJobSucceeded", "Admitted", "Preemptable",
                    "WorkloadTerminatedEarly", "CredentialsFound")

CHILD_NAME_CONFLICT = "ChildNameConflict"

# Children deleted on termination (§7.5): everything but the download ConfigMap.
TERMINATED_KINDS = frozenset({"Deployment", "RayService", "AppWrapper", "Job", "RayJob", "PersistentVolumeClaim",
                              "HTTPRoute"})

_PHASE_EVENTS: dict[str, tuple[str, str, str]] = {
    ph.DOWNLOADING: ("Normal", "WorkloadDownloading", "Workload is downloading its data"),
    ph.PENDING: ("Normal", "WorkloadPending", "Workload is pending admission"),
    ph.STARTING: ("Normal", "WorkloadStarting", "Workload admitted, starting"),
    ph.RUNNING: ("Normal", "WorkloadRunning", "Workload is running"),
    ph.COMPLETE: ("Normal", "WorkloadComplete", "Workload completed"),
    ph.FAILED: ("Warning", "WorkloadFailed", "Workload failed"),
    ph.TERMINATING: ("Normal", "WorkloadTermination", "Workload flagged for termination"),
    ph.TERMINATED: ("Normal", "WorkloadTerminated", "Workload terminated"),
}


def _no_object(kind: str, name: str) -> JsonObj | None:
    return None


def controller_ref(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """`obj`'s controller ownerReference, if it has one."""
    return next((ref for ref in (obj.get("metadata") or {}).get("ownerReferences") or () if ref.get("controller")),
                None)


def controlled_by(obj: Mapping[str, Any], uid: str) -> bool:
    """Does `obj` carry a controller ownerReference to the object with `uid`?"""
    return bool(uid) and any(ref.get("uid") == uid and ref.get("controller")
                             for ref in (obj.get("metadata") or {}).get("ownerReferences") or ())


@dataclass(frozen=True, slots=True)
class Refusal:
    """A child write the API server refused in the previous pass: a create answered AlreadyExists by
    an object this workload does not control (`taken`), or a 4xx that retrying unchanged cannot fix
    (`code`, `message`)."""

    kind: str
    name: str
    taken: bool = False
    code: int = 0
    message: str = ""


@dataclass(frozen=True, slots=True)
class World:
    """Everything the decision reads. `children` are the live objects whose controller owner is this
    CR, keyed by (kind, name); `kueue_workloads` are the Workloads of the main child (of its pods for
    a Deployment)."""

    obj: JsonObj
    config: KaiwoConfigSpec
    nodes: Sequence[JsonObj]
    queue_config: KaiwoQueueConfigSpec | None
    children: Mapping[tuple[str, str], JsonObj]
    kueue_workloads: Sequence[JsonObj]
    local_queue_exists: bool
    cluster_queue: JsonObj | None
    now: datetime
    active_gpu_demand: bool = False  # a PENDING GPU workload of our queue+vendor older than the threshold
    any_pending_workload: bool = False  # some Kaiwo workload is PENDING (upstream's sweep path)
    # > 0: in the pass that creates the main child, write no status yet and look again after this many
    # seconds. Kueue usually answers within milliseconds, so the first status written is what the
    # queue made of the new child (PENDING when it waits, STARTING/RUNNING when admitted) instead of a
    # PENDING that is stale before it lands. A wait longer than this is still reported as PENDING.
    settle_seconds: float = 0.0
    # Seconds left of that window for a main child this controller created recently: a pass that runs
    # inside it (woken by the echo of the child's creation, say) does not write PENDING either.
    settle_remaining: float = 0.0
    # Any live object of (kind, name) in the CR's namespace, owned or not. A desired child whose name
    # is taken by an object this CR does not control is never written (nothing we do not own is
    # taken over): the workload reports a ChildNameConflict instead.
    live_object: Callable[[str, str], JsonObj | None] = _no_object
    # APIs this cluster does not serve (KubeRay's ray.io/v1, AppWrapper's workload.codeflare.dev/v1beta2),
    # each with the line that says what to install: a workload whose children need one ends in ERROR.
    missing_apis: Mapping[str, str] = field(default_factory=dict)
    # The spec generation a decision of this process last rendered whole without an error (None: none
    # since it started). The settle pass after a create reads it: no status has observed the
    # generation yet, and the template need not be rendered again to learn what the create did.
    rendered_generation: int | None = None
    # Whether `spec.priorityClass` names a PriorityClass and/or a Kueue WorkloadPriorityClass (None: not
    # looked up, or no class named).
    priority_classes: PriorityClasses | None = None
    # The AIMNamespaceConfig that counts in the CR's namespace (None: none): its name, its spec, and
    # the Secret keys its status reports missing, {(secretName, secretKey): reason}.
    namespace_config_name: str = ""
    namespace_config: AIMNamespaceConfigSpec | None = None
    namespace_missing_secrets: Mapping[tuple[str, str], str] = field(default_factory=dict)
    # The cluster serves the Gateway API's HTTPRoute (routes are only rendered where it does).
    serves_http_routes: bool = False
    # Children whose live copy lacks what cannot change after creation (a Job's pod template: the
    # caches keep Jobs without it). An update is planned from the whole object, so a pass that would
    # update one asks for it to be read whole (Plan.read_whole) and writes nothing.
    trimmed: frozenset[tuple[str, str]] = frozenset()
    # The write the previous pass had refused: this pass says so on the workload and writes nothing else.
    refusal: Refusal | None = None


@dataclass(slots=True)
class Plan:
    """What the controller shell must do, in order: applies, deletes, status, finalizer removal, events."""

    remove_finalizer: bool = False  # the finalizer of an earlier version, on a deleted workload
    apply: list[JsonObj] = field(default_factory=list)
    delete: list[JsonObj] = field(default_factory=list)
    status: JsonObj | None = None
    events: list[PlannedEvent] = field(default_factory=list)
    requeue_after: float | None = None
    phase: str = ""
    created_main: bool = False  # this plan creates the main child (the settle window starts)
    # (kind, name) of the `apply` bodies that are new: the shell creates them (POST), so that an
    # object that appeared since the cache was read is refused (AlreadyExists), never taken over.
    creates: set[tuple[str, str]] = field(default_factory=set)
    # (kind, name) of foreign objects blocking a child: the shell retries when one of them changes.
    conflicts: list[tuple[str, str]] = field(default_factory=list)
    # The spec generation this decision rendered the main child of whole, without an error (the shell
    # remembers it for the next decision: World.rendered_generation).
    rendered_generation: int | None = None
    # (kind, name) of trimmed children (World.trimmed) this decision would update: the shell reads them
    # whole and the next pass decides on them; nothing else of this plan is carried out.
    read_whole: list[tuple[str, str]] = field(default_factory=list)
    # The status written makes this workload PENDING: the RUNNING workloads whose duration rules read
    # the PENDING ones run again (spec §7.6). The shell's own write raises no event that would wake them.
    wakes_duration_rules: bool = False


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_workload(obj: Mapping[str, Any]) -> Workload:
    model: type[Workload] = KaiwoService if obj.get("kind") == "KaiwoService" else KaiwoJob
    return parse_as(model, obj)


def decide(world: World) -> Plan:
    """The one decision of a reconcile pass: what to write for `world`."""
    if world.refusal is not None:
        return refused(world, world.refusal)
    plan = _decide(world)
    unread = [key for key in ((body["kind"], body["metadata"]["name"]) for body in plan.apply)
              if key in world.trimmed and key not in plan.creates]
    if unread:
        return Plan(phase=plan.phase, conflicts=plan.conflicts, read_whole=unread)
    plan.wakes_duration_rules = plan.status is not None and plan.phase == ph.PENDING
    return plan


def refused(world: World, refusal: Refusal) -> Plan:
    """The workload in ERROR for a write the API server refused (`child_name_taken`, `child_rejected`)."""
    if refusal.taken:
        return child_name_taken(world, refusal.kind, refusal.name)
    return child_rejected(world, refusal.kind, refusal.name, refusal.code, refusal.message)


def _decide(world: World) -> Plan:
    obj = world.obj
    meta: JsonObj = obj.get("metadata") or {}
    status: JsonObj = obj.get("status") or {}
    stored = str(status.get("status") or "")
    plan = Plan(phase=stored)

    if meta.get("deletionTimestamp"):
        # The garbage collector takes the children; only a finalizer of ours (an earlier version
        # added one to every workload) is left for us to release, once they are gone.
        return _deleting(world, plan) if FINALIZER in (meta.get("finalizers") or []) else plan

    if stored in ph.TERMINAL:
        return plan
    if stored == ph.TERMINATING:
        return _terminate(world, plan, status)

    try:
        # The status is read from `obj` as stored, never from the model: validating it (its condition
        # timestamps) would be about 15% of a no-op decision.
        workload = parse_workload({key: value for key, value in obj.items() if key != "status"})
        return _observe_and_act(world, workload, plan, status, stored)
    except (ManifestError, RenderError) as err:
        cond = Cond("SpecValid", "False", "InvalidSpec", str(err))
        return _write_status(world, plan, status, stored, ph.ERROR, [cond], error=cond)


def child_rejected(world: World, kind: str, name: str, code: int, message: str) -> Plan:
    """The API server refused to write a child for good (4xx: invalid, forbidden, quota, namespace
    terminating): the workload is in ERROR with the server's own words, so the user sees why
    instead of a silent retry loop. 400/422 mean the child as rendered is invalid (SpecValid);
    anything else means the cluster will not take it as things stand (Schedulable)."""
    status: JsonObj = world.obj.get("status") or {}
    stored = str(status.get("status") or "")
    what = f"the API server rejected {kind} {name} ({code}): {message}"
    if code in (400, 422):
        cond = Cond("SpecValid", "False", "ChildInvalid", what)
    elif code == 403:
        cond = Cond("Schedulable", "False", "ChildForbidden", what)
    else:
        cond = Cond("Schedulable", "False", "ChildRejected", what)
    return _write_status(world, Plan(phase=stored), status, stored, ph.ERROR, [cond], error=cond)


def child_name_taken(world: World, kind: str, name: str) -> Plan:
    """A create answered AlreadyExists and the object is not ours (one the caches do not hold: they
    keep only labelled children): the same ERROR as a conflict seen in the cache."""
    status: JsonObj = world.obj.get("status") or {}
    stored = str(status.get("status") or "")
    cond = conflict_condition([f"{kind} {name}"])
    plan = Plan(phase=stored, conflicts=[(kind, name)])
    return _write_status(world, plan, status, stored, ph.ERROR, [cond], error=cond)


def _deleting(world: World, plan: Plan) -> Plan:
    """A deleted workload that carries our finalizer (from an earlier version): delete what we own,
    and let the CR go once nothing is left, as that version promised."""
    remaining = [child for child in world.children.values() if not (child.get("metadata") or {}).get(
        "deletionTimestamp")]
    plan.delete.extend(remaining)
    if not world.children and FINALIZER in ((world.obj.get("metadata") or {}).get("finalizers") or []):
        plan.remove_finalizer = True
    elif world.children:
        plan.requeue_after = 1.0
    return plan


def _terminate(world: World, plan: Plan, status: JsonObj) -> Plan:
    """TERMINATING -> TERMINATED: flip WorkloadTerminatedEarly to True (keeping its reason), write
    status first, then delete the workload's children (§7.5)."""
    early = find(status.get("conditions"), "WorkloadTerminatedEarly") or {}
    reason = early.get("reason") or "EarlyTermination"
    message = early.get("message") or "Workload terminated early"
    cond = Cond("WorkloadTerminatedEarly", "True", reason, message)
    conditions = set_conditions(status.get("conditions") or [], [cond], _stamp(world.now),
                                owned_types=["WorkloadTerminatedEarly"])
    plan.status = _status_body(world, status, ph.TERMINATED, conditions)
    plan.phase = ph.TERMINATED
    plan.events.append(PlannedEvent("Warning", reason, message))
    plan.events.append(PlannedEvent(*_PHASE_EVENTS[ph.TERMINATED][:2], _PHASE_EVENTS[ph.TERMINATED][2]))
    plan.delete.extend(c for c in world.children.values() if c.get("kind") in TERMINATED_KINDS)
    return plan


def _schedulable(world: World, workload: Workload, queue: str) -> Cond:
    qc = world.queue_config
    if qc is not None:
        entry = next((q for q in qc.cluster_queues if q.name == queue), None)
        if entry is None:
            return Cond("Schedulable", "False", "ClusterQueueNotFound",
                        f"Cluster queue '{queue}' is not defined in KaiwoQueueConfig 'kaiwo'")
        namespace = workload.metadata.namespace or "default"
        if entry.namespaces and namespace not in entry.namespaces:
            return Cond("Schedulable", "False", "WrongQueueNamespace",
                        f"Cluster queue '{queue}' does not serve namespace '{namespace}' "
                        f"(it serves {', '.join(entry.namespaces)})")
    check = workload_gpu_check(workload, world.config, world.nodes)
    return Cond("Schedulable", "True" if check.schedulable else "False", check.reason, check.message)


def _missing_dependency(world: World, workload: Workload) -> Cond | None:
    """Schedulable=False/DependencyMissing when the workload's children need an API the cluster lacks: a Ray
    KaiwoJob needs KubeRay; a Ray KaiwoService needs AppWrapper (which wraps a RayService) and KubeRay."""
    if not world.missing_apis or not workload.spec.effective_uses_ray:
        return None
    needed = ["ray.io/v1"]
    if isinstance(workload, KaiwoService) and not tracked_kind(world.obj):  # a tracked RayService has no wrapper
        needed.insert(0, "workload.codeflare.dev/v1beta2")
    lines = [world.missing_apis[api] for api in needed if api in world.missing_apis]
    if not lines:
        return None
    return Cond("Schedulable", "False", "DependencyMissing", "; ".join(lines))


def _priority_class(world: World, workload: Workload) -> Cond | None:
    """PriorityClassFound: what `spec.priorityClass` names. Seed 001 says a Kubernetes PriorityClass
    (the pods' priorityClassName), upstream's code a Kueue WorkloadPriorityClass (its label); both
    apply where they exist, and a name that is neither is said here, the workload still runs."""
    name = workload.spec.priority_class
    found = world.priority_classes
    if not name or found is None:
        return None
    kinds = [kind for kind, there in (("PriorityClass", found.pod), ("Kueue WorkloadPriorityClass", found.workload))
             if there]
    if not kinds:
        return Cond("PriorityClassFound", "False", "PriorityClassNotFound",
                    f"priorityClass '{name}' names neither a PriorityClass nor a Kueue WorkloadPriorityClass: "
                    "the workload runs without a priority")
    return Cond("PriorityClassFound", "True", "PriorityClassFound",
                f"priorityClass '{name}' is a {' and a '.join(kinds)}")


def _observe_and_act(world: World, workload: Workload, plan: Plan, status: JsonObj, stored: str) -> Plan:
    name = workload.metadata.name or ""
    queue = effective_queue(workload, world.config)
    conditions: list[Cond] = []

    missing = _missing_dependency(world, workload)
    if missing is not None:
        return _write_status(world, plan, status, stored, ph.ERROR, [missing], error=missing)

    # a. Schedulable: a wrong queue or too few GPUs is an ERROR, and nothing is created.
    schedulable = _schedulable(world, workload, queue)
    if schedulable.status == "False":
        return _write_status(world, plan, status, stored, ph.ERROR, [schedulable], error=schedulable)
    conditions.append(schedulable)

    priority = _priority_class(world, workload)
    if priority is not None:
        conditions.append(priority)

    numbers = resource_config(workload, world.config, world.nodes)
    # One render context (validation included) for the storage and the main object of this decision.
    render_ctx = prepare(workload, world.config, world.nodes, numbers=numbers,
                         priority_classes=world.priority_classes, namespace_config=world.namespace_config)
    credentials = _credentials(world, render_ctx)
    if credentials is not None:
        conditions.append(credentials)
    storage_children = storage_of(render_ctx)
    if _awaiting_collection(world, plan, storage_children):
        return plan
    conflict = _name_conflict(world, plan, storage_children)
    if conflict is not None:
        return _write_status(world, plan, status, stored, ph.ERROR, [conflict], error=conflict)
    downloads = has_downloads(workload)

    # b. Storage: PVC readiness and the download Job gate the main object.
    storage_phase: str = ph.COMPLETE
    if storage_children:
        storage_phase = ph.NEW
        observed_all = True
        last_phase: str = ph.NEW
        for desired in storage_children:
            live = world.children.get((desired["kind"], desired["metadata"]["name"]))
            if desired["kind"] == "ConfigMap":
                observed_all &= live is not None
                continue
            if live is None:
                observed_all = False
                continue
            if desired["kind"] == "PersistentVolumeClaim":
                last_phase, pvc_cond = ph.pvc_phase(live)
                if pvc_cond is not None:
                    conditions.append(pvc_cond)
            elif desired["kind"] == "Job":
                last_phase, dl_cond = ph.download_job_condition(ph.batch_job_phase(live))
                conditions.append(dl_cond)
        if observed_all:
            storage_phase = last_phase
        conditions = _dedupe(conditions)

    phase: str
    main_allowed = True
    if downloads and storage_phase != ph.COMPLETE:
        main_allowed = False
        phase = ph.FAILED if storage_phase == ph.FAILED else ph.DOWNLOADING
    elif not downloads and storage_phase == ph.FAILED:
        main_allowed = False
        phase = ph.FAILED
    else:
        # c/d. Admission through Kueue, then the main child's own progress.
        # A tracked workload's main child is the object it tracks (a RayService, not an AppWrapper).
        main = world.children.get((tracked_kind(world.obj) or main_kind(workload)[1], name))
        admitted = main is not None and ph.kueue_admitted(list(world.kueue_workloads))
        if not admitted:
            phase = ph.PENDING
            conditions.append(Cond("Admitted", "False", "Pending",
                                   f"Workload is pending admission into '{queue}'"))
        else:
            conditions.append(Cond("Admitted", "True", "Admitted", "Workload is admitted"))
            phase = _main_phase(workload, main, world, stored)
            if phase == ph.NEW:
                phase = ph.STARTING
            phase = _duration_rules(world, workload, status, stored, phase, conditions, plan)

    # Children first (dependencies before the main object), in the same pass.
    if phase in ph.ACTIVE or phase == ph.PENDING:
        _ensure(world, plan, storage_children)
        if main_allowed:
            if not world.local_queue_exists:
                lq = _local_queue(world, workload, queue)
                if lq is None:
                    plan.requeue_after = 1.0  # the queue-config controller has not made it yet
                    main_allowed = False
                else:
                    _ensure(world, plan, [lq])
            if main_allowed and tracked_kind(world.obj):
                pass  # the tracked workload was admitted as its user wrote it: observed, never rendered
            elif main_allowed:
                lean = _template_known(world, workload, status, stored)
                main_body = main_of(render_ctx, pod_template=not lean)
                if lean and drifted(main_body, world.children.get(("Job", main_body["metadata"]["name"]))):
                    lean = False  # a write is due: planned from the whole rendering, as always
                    main_body = main_of(render_ctx)
                if _awaiting_collection(world, plan, [main_body]):
                    return plan
                conflict = _name_conflict(world, plan, [main_body])
                if conflict is not None:
                    return _write_status(world, plan, status, stored, ph.ERROR, [conflict], error=conflict)
                if not lean:  # (a lean body that did not drift: nothing to write)
                    _ensure(world, plan, [main_body])
                    plan.rendered_generation = (world.obj.get("metadata") or {}).get("generation")
                _route(world, plan, render_ctx)
                plan.created_main = (main_body["kind"], main_body["metadata"]["name"]) not in world.children
                wait = world.settle_seconds if plan.created_main else world.settle_remaining
                if wait > 0 and phase == ph.PENDING:
                    plan.requeue_after = min(plan.requeue_after or wait, wait)
                    return plan

    return _write_status(world, plan, status, stored, phase, conditions)


def _credentials(world: World, ctx: RenderContext) -> Cond | None:
    """CredentialsFound, for a workload whose downloads take credentials from its namespace's
    AIMNamespaceConfig: False naming each Secret and key the config's status reports missing (the
    download pod would wait for them), True naming what is used. None when nothing is borrowed."""
    borrowed = borrowed_credentials(ctx)
    if not borrowed:
        return None
    config = world.namespace_config_name
    missing = [(b, world.namespace_missing_secrets[(b.secret_name, b.secret_key)]) for b in borrowed
               if (b.secret_name, b.secret_key) in world.namespace_missing_secrets]
    if missing:
        said = "; ".join(
            f"Secret {b.secret_name} key {b.secret_key} ({config} {b.config_field}): "
            + ("no such Secret" if reason == "SecretNotFound" else "the Secret has no such key")
            for b, reason in missing)
        reason = missing[0][1] if len({r for _, r in missing}) == 1 else "SecretNotFound"
        return Cond("CredentialsFound", "False", reason,
                    f"downloads use AIMNamespaceConfig {config}'s credentials, which are missing: {said}")
    used = ", ".join(f"Secret {b.secret_name} key {b.secret_key}" for b in borrowed)
    return Cond("CredentialsFound", "True", "NamespaceCredentials",
                f"downloads use AIMNamespaceConfig {config}'s credentials: {used}")


def _route(world: World, plan: Plan, ctx: RenderContext) -> None:
    """The HTTPRoute to the namespace's gateway (render/httproute.py), kept with the main object;
    one the workload no longer needs (the gateway was removed from the config) is deleted."""
    route = render_httproute(ctx) if world.serves_http_routes else None
    if route is not None:
        if _name_conflict(world, plan, [route]) is None:
            _ensure(world, plan, [route])
        return
    live = world.children.get(("HTTPRoute", ctx.name))
    if live is not None and not (live.get("metadata") or {}).get("deletionTimestamp"):
        plan.delete.append(live)


def _template_known(world: World, workload: Workload, status: JsonObj, stored: str) -> bool:
    """May this decision skip rendering the main Job's pod template? Only when nothing would read it:
    the Job exists (its template is frozen, so a no-op pass compares everything but the template), and
    a decision with the whole rendering already saw this generation of the spec without an error (this
    process's last such decision says so, or the status observed it: the first status write of a
    generation comes from a decision that rendered whole, because its observedGeneration was older; an
    error would have left the workload ERROR).
    At 10,000 KaiwoJobs the template was a fifth of every no-op reconcile of a cold start."""
    name = workload.metadata.name or ""
    if main_kind(workload)[1] != "Job" or ("Job", name) not in world.children or stored == ph.ERROR:
        return False
    generation = (world.obj.get("metadata") or {}).get("generation")
    return generation is not None and generation in (status.get("observedGeneration"), world.rendered_generation)


def _main_phase(workload: Workload, main: JsonObj | None, world: World, stored: str) -> str:
    kind = (main or {}).get("kind")
    if kind == "Job":
        return ph.batch_job_phase(main, stored)
    if kind == "RayJob":
        return ph.rayjob_phase(main)
    if kind == "Deployment":
        return ph.deployment_phase(main)
    if kind == "AppWrapper":
        return ph.rayservice_phase(world.children.get(("RayService", workload.metadata.name or "")))
    if kind == "RayService":  # a tracked one, queued by Kueue itself
        return ph.rayservice_phase(main)
    return ph.NEW


def _duration_rules(world: World, workload: Workload, status: JsonObj, stored: str, phase: str,
                    conditions: list[Cond], plan: Plan) -> str:
    """Preemptable and the two duration-preemption paths (§7.6)."""
    spec_duration = workload.spec.duration
    started = parse_time(status.get("startTime"))
    if not spec_duration:
        return phase
    if stored != ph.RUNNING or started is None:
        if phase == ph.RUNNING:
            # This pass writes RUNNING and startTime; the controller ignores its own write's event,
            # so ask for the pass that sets Preemptable and schedules the deadline (upstream's
            # "requeue immediately" after a status change).
            plan.requeue_after = 0.01
        return phase
    limit = parse_go_duration(spec_duration)
    deadline = started + limit
    generation = workload.metadata.generation
    if world.now < deadline:
        conditions.append(Cond("Preemptable", "False", "DurationNotExceeded",
                               f"Workload may run until {_stamp(deadline)}", generation))
        plan.requeue_after = max((deadline - world.now).total_seconds(), 0.01)
        return phase
    written = format_go_duration(limit)  # in messages as Go's Duration.String() writes it: 1h0m0s
    conditions.append(Cond("Preemptable", "True", "DurationExceeded",
                           f"Workload exceeded its duration of {written}", generation))
    if world.active_gpu_demand:
        conditions.append(Cond("WorkloadTerminatedEarly", "False", "DurationExceededWithActiveGpuDemand",
                               f"Duration {written} exceeded while GPU workloads wait in the queue"))
        plan.requeue_after = 0.01  # the termination pass reads the TERMINATING this pass writes
        return ph.TERMINATING
    if world.any_pending_workload:
        conditions.append(Cond("WorkloadTerminatedEarly", "False", "DurationExceeded",
                               f"Duration {written} exceeded and another workload is pending"))
        plan.requeue_after = 0.01
        return ph.TERMINATING
    return phase


def _local_queue(world: World, workload: Workload, queue: str) -> JsonObj | None:
    """The LocalQueue a workload needs when its ClusterQueue serves every namespace (§7.8)."""
    qc = world.queue_config
    entry = next((q for q in qc.cluster_queues if q.name == queue), None) if qc else None
    if entry is not None and entry.namespaces:
        return None  # the queue-config controller owns namespaced LocalQueues
    cq = world.cluster_queue
    if cq is None:
        return None
    cq_meta = cq.get("metadata") or {}
    return {
        "apiVersion": cq.get("apiVersion", "kueue.x-k8s.io/v1beta2"),
        "kind": "LocalQueue",
        "metadata": {
            "name": queue,
            "namespace": workload.metadata.namespace or "default",
            "ownerReferences": [{"apiVersion": cq.get("apiVersion", "kueue.x-k8s.io/v1beta2"),
                                 "kind": "ClusterQueue", "name": cq_meta.get("name", queue),
                                 "uid": cq_meta.get("uid", "")}],
        },
        "spec": {"clusterQueue": queue},
    }


PREDECESSOR_GRACE_SECONDS = 30.0
"""How long a workload waits silently for a same-named predecessor's children to be garbage collected
(usually well under a second); past that it reports them as a ChildNameConflict that says why."""


def _api_group(api_version: Any) -> str:
    return str(api_version or "").rpartition("/")[0]


def predecessor_leftover(live: Mapping[str, Any], desired: Mapping[str, Any]) -> bool:
    """Is `live`, which holds the name of the child `desired`, a child of a deleted same-named
    predecessor of `desired`'s workload: its controller has the same API group, kind and name as
    `desired`'s, but another uid? Names are unique, so that owner is gone and the garbage collector is
    deleting `live`; the workload waits for it (never writes it)."""
    ours, theirs = controller_ref(desired), controller_ref(live)
    return (ours is not None and theirs is not None and theirs.get("kind") == ours.get("kind")
            and theirs.get("name") == ours.get("name") and theirs.get("uid") != ours.get("uid")
            and _api_group(theirs.get("apiVersion")) == _api_group(ours.get("apiVersion")))


def _held_names(world: World, desired: Sequence[JsonObj]) -> Iterator[tuple[tuple[str, str], JsonObj, JsonObj]]:
    """(key, desired child, live object) for each desired child whose name an object this workload
    does not control holds."""
    uid = str((world.obj.get("metadata") or {}).get("uid") or "")
    for obj in desired:
        key = (obj["kind"], obj["metadata"]["name"])
        if key in world.children:
            continue
        live = world.live_object(*key)
        if live is not None and not controlled_by(live, uid):
            yield key, obj, live


def _awaiting_collection(world: World, plan: Plan, desired: Sequence[JsonObj]) -> bool:
    """True when a desired child's name is still held by a predecessor's leftover: nothing is written
    (no status, no conflict reported) and the pass runs again when the leftover goes (its deletion
    wakes us, as a conflicting object's does), or in a second at the latest. A workload older than
    PREDECESSOR_GRACE_SECONDS waits no longer silently: `_name_conflict` reports the leftover."""
    created = parse_time((world.obj.get("metadata") or {}).get("creationTimestamp"))
    if created is not None and (world.now - created).total_seconds() > PREDECESSOR_GRACE_SECONDS:
        return False
    leftovers = [key for key, obj, live in _held_names(world, desired) if predecessor_leftover(live, obj)]
    if leftovers:
        plan.conflicts.extend(leftovers)
        plan.requeue_after = 1.0
    return bool(leftovers)


def _name_conflict(world: World, plan: Plan, desired: Sequence[JsonObj]) -> Cond | None:
    """Schedulable=False/ChildNameConflict when a desired child's name is held by an object this CR
    does not control (a user's PVC `train-data`, say): we neither adopt nor overwrite it."""
    taken: list[str] = []
    leftovers: list[str] = []
    for key, obj, live in _held_names(world, desired):
        plan.conflicts.append(key)
        (leftovers if predecessor_leftover(live, obj) else taken).append(f"{key[0]} {key[1]}")
    if leftovers and not taken:
        kind, name = world.obj.get("kind") or "workload", (world.obj.get("metadata") or {}).get("name")
        one = len(leftovers) == 1
        return Cond("Schedulable", "False", CHILD_NAME_CONFLICT,
                    f"{', '.join(leftovers)} of a deleted {kind} {name} still {'exists' if one else 'exist'} "
                    f"{PREDECESSOR_GRACE_SECONDS:.0f} s after this one was created (a finalizer holding "
                    f"{'it' if one else 'them'}?); the workload continues once {'it is' if one else 'they are'} "
                    "gone")
    if not taken and not leftovers:
        return None
    return conflict_condition(taken + leftovers)


def conflict_condition(taken: Sequence[str]) -> Cond:
    """Schedulable=False/ChildNameConflict naming each taken child ("PersistentVolumeClaim train-data")."""
    if len(taken) == 1:
        message = (f"{taken[0]} already exists and is not controlled by this workload; rename or delete it "
                   "(the workload continues once the name is free)")
    else:
        message = (f"{', '.join(taken)} already exist and are not controlled by this workload; rename or "
                   "delete them (the workload continues once the names are free)")
    return Cond("Schedulable", "False", CHILD_NAME_CONFLICT, message)


def _ensure(world: World, plan: Plan, desired: Sequence[JsonObj]) -> None:
    for obj in desired:
        live = world.children.get((obj["kind"], obj["metadata"]["name"]))
        if obj["kind"] == "LocalQueue":
            live = None  # only created when absent
        if not drifted(obj, live):
            continue  # the common case, a no-op resync: nothing to write, nothing to report
        body, not_propagated = update_body(obj, live)
        if needs_write(body, live):
            plan.apply.append(body)
            if live is None:
                plan.creates.add((obj["kind"], obj["metadata"]["name"]))
                plan.events.append(PlannedEvent("Normal", "ResourceCreated",
                                          f"Created {obj['apiVersion']}, Kind={obj['kind']}: "
                                          f"{obj['metadata']['name']}"))
            else:
                plan.events.append(PlannedEvent("Normal", "ResourceUpdated",
                                          f"Updated {obj['kind']} {obj['metadata']['name']}"))
        if not_propagated and needs_write(body, live):
            plan.events.append(PlannedEvent("Warning", "SpecChangeNotPropagated",
                                      f"{obj['kind']} {obj['metadata']['name']}: "
                                      f"{', '.join(not_propagated)} cannot change after creation"))


def _dedupe(conds: list[Cond]) -> list[Cond]:
    """Keep the last condition of each type (the last PVC is the one that counts, as upstream)."""
    by_type: dict[str, Cond] = {}
    for cond in conds:
        by_type.pop(cond.type, None)
        by_type[cond.type] = cond
    return list(by_type.values())


def _status_body(world: World, status: JsonObj, phase: str, conditions: list[JsonObj]) -> JsonObj:
    body: JsonObj = {k: v for k, v in status.items() if k not in ("status", "conditions")}
    body["status"] = phase
    body["conditions"] = conditions
    generation = (world.obj.get("metadata") or {}).get("generation")
    if generation is not None:
        body["observedGeneration"] = generation
    started = parse_time(body.get("startTime"))
    if phase in (ph.RUNNING, ph.COMPLETE) and started is None:
        # A job can finish between two observations; it still ran, so it still started.
        started = world.now
        body["startTime"] = _stamp(started)
    if (world.obj.get("kind") == "KaiwoJob" and phase in (ph.COMPLETE, ph.FAILED)
            and not body.get("completionTime")):
        body["completionTime"] = _stamp(world.now)
    if started is not None:
        end = parse_time(body.get("completionTime")) or world.now
        body["duration"] = max(int((end - started) / timedelta(seconds=1)), 0)
    return body


def _write_status(world: World, plan: Plan, status: JsonObj, stored: str, phase: str, observed: list[Cond],
                  *, error: Cond | None = None) -> Plan:
    plan.phase = phase
    stored_conditions: list[JsonObj] = status.get("conditions") or []
    generation = (world.obj.get("metadata") or {}).get("generation")
    unchanged = (phase == stored and same_conditions(stored_conditions, observed, OWNED_CONDITIONS)
                 and (generation is None or status.get("observedGeneration") == generation))
    if unchanged:
        return plan
    conditions = set_conditions(stored_conditions, observed, _stamp(world.now), owned_types=OWNED_CONDITIONS)
    plan.status = _status_body(world, status, phase, conditions)
    if phase == ph.ERROR and error is not None:
        # Also within ERROR when the cause changed (a name conflict after a GPU shortage, say).
        plan.events.append(PlannedEvent("Warning", error.reason, error.message))
    elif phase != stored and phase in _PHASE_EVENTS:
        event_type, reason, message = _PHASE_EVENTS[phase]
        plan.events.append(PlannedEvent(event_type, reason, message))
    return plan


def effective_queue_name(obj: JsonObj, config: KaiwoConfigSpec) -> str:
    return str((obj.get("spec") or {}).get("clusterQueue") or config.default_cluster_queue_name)


def gpu_demand(obj: JsonObj, config: KaiwoConfigSpec, queue: str, pending: Iterable[JsonObj],
               now: datetime) -> tuple[bool, bool]:
    """(active GPU demand: a PENDING GPU workload of our queue and vendor older than the preemption
    threshold; any workload PENDING), from every PENDING workload of both kinds. Only RUNNING
    workloads with a duration ask (spec §7.2); for the rest nothing in `pending` is read."""
    spec = obj.get("spec") or {}
    if (obj.get("status") or {}).get("status") != ph.RUNNING or not spec.get("duration"):
        return False, False
    threshold = parse_go_duration(config.scheduling.pending_threshold_for_preemption)
    vendor = spec.get("gpuVendor", "amd")
    any_pending = False
    for other in pending:
        any_pending = True
        ospec = other.get("spec") or {}
        created = parse_time((other.get("metadata") or {}).get("creationTimestamp"))
        if ((ospec.get("gpus") or 0) > 0 and ospec.get("gpuVendor", "amd") == vendor
                and effective_queue_name(other, config) == queue
                and created is not None and now - created > threshold):
            return True, True
    return False, any_pending


def shared_child(body: JsonObj) -> bool:
    """A child that is shared, not ours (a LocalQueue): a create answered AlreadyExists means someone
    made it first, which is all we wanted; it is left be."""
    return bool(body["kind"] == "LocalQueue")


# What a pass does about a child of its own it meant to create that already exists (`existing_child`).
RESTORE, RETRY, TAKEN = "restore", "retry", "taken"


def existing_child(body: JsonObj, live: JsonObj | None) -> str:
    """The verdict on a create of `body` answered AlreadyExists, `live` being what holds the name now
    (None: gone again meanwhile). Ours (its run-id label was removed, so the watch lost it): RESTORE
    it by apply. Gone again, or a deleted predecessor's that the garbage collector is taking: RETRY
    the create, with backoff. Anyone else's: TAKEN, never written."""
    if live is None:
        return RETRY
    if controlled_by(live, str((controller_ref(body) or {}).get("uid") or "")):
        return RESTORE
    return RETRY if predecessor_leftover(live, body) else TAKEN
