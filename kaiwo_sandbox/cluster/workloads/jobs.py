"""The batch/v1 Job controller: pods for parallelism/completions, suspend/resume, backoffLimit,
the Kubernetes >= 1.31 terminal condition order (SuccessCriteriaMet -> Complete, FailureTarget ->
Failed), and ttlSecondsAfterFinished.

Pods are counted with the real finalizer protocol: a finished pod's uid goes into
`status.uncountedTerminatedPods` first, then its `batch.kubernetes.io/job-tracking` finalizer is
removed, then it moves into `succeeded`/`failed`. A conflict between those writes can delay a
count but never double it or lose it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable

from kaiwo_sandbox.cluster.base import ClusterSettings, Controller, Key
from kaiwo_sandbox.cluster.conditions import condition_true, find_condition, set_condition
from kaiwo_sandbox.cluster.events import record_event
from kaiwo_sandbox.cluster.pods import (
    PodsByController,
    as_int,
    controller_of,
    is_ready,
    is_terminal,
)
from kaiwo_sandbox.contracts import JOBS, PODS, ApiError, Clock, JsonObj, Store, WatchEvent, rfc3339
from kaiwo_sandbox.semantics.times import parse_time

COMPONENT = "job-controller"
TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
CONTROLLER_UID = "batch.kubernetes.io/controller-uid"
JOB_NAME = "batch.kubernetes.io/job-name"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
DEFAULT_BACKOFF_LIMIT = 6
ORPHAN_KEY = "orphan-pod"  # work-key tag: (ORPHAN_KEY, namespace, pod name)
POD_BACKOFF_SECONDS = 10.0  # first retry after a failure; doubles per failure...
POD_BACKOFF_MAX_SECONDS = 360.0  # ...up to six minutes, like the real controller
# A refused pod create fails the sync; the real controller's work queue retries the Job after its API
# back-off (DefaultJobApiBackOff 1 s, doubling per consecutive failure, MaxJobApiBackOff 1 min) and
# forgets the count after a sync that succeeds.
API_BACKOFF_SECONDS = 1.0
API_BACKOFF_MAX_SECONDS = 60.0


def api_backoff(failures: int) -> float:
    """Simulated seconds before the retry that follows `failures` consecutive failed syncs (>= 1)."""
    exponent: int = min(max(failures - 1, 0), 32)
    return min(API_BACKOFF_SECONDS * float(1 << exponent), API_BACKOFF_MAX_SECONDS)
BACKOFF_MESSAGE = "Job has reached the specified backoff limit"
DEADLINE_MESSAGE = "Job was active longer than specified deadline"
COMPLETIONS_MESSAGE = "Reached expected number of succeeded pods"


def _index_of(pod: JsonObj) -> int | None:
    raw = ((pod.get("metadata") or {}).get("annotations") or {}).get(COMPLETION_INDEX)
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


def format_indexes(indexes: Iterable[int]) -> str:
    """`status.completedIndexes` form: sorted ranges, e.g. "0-2,4"."""
    ordered = sorted(set(indexes))
    parts: list[str] = []
    start = prev = None
    for value in ordered:
        if start is None:
            start = prev = value
        elif prev is not None and value == prev + 1:
            prev = value
        else:
            parts.append(str(start) if start == prev else f"{start}-{prev}")
            start = prev = value
    if start is not None:
        parts.append(str(start) if start == prev else f"{start}-{prev}")
    return ",".join(parts)


def parse_indexes(text: str | None) -> set[int]:
    result: set[int] = set()
    for part in (text or "").split(","):
        part = part.strip()
        if not part:
            continue
        low, _, high = part.partition("-")
        with contextlib.suppress(ValueError):
            result.update(range(int(low), int(high or low) + 1))
    return result


_UNWRITTEN = "__counts_to_write__"  # in-memory marker, never sent to the store


def _optional_int(value: object) -> int | None:
    """An optional duration: absent or malformed both mean "not set"."""
    parsed = as_int(value, -1)
    return parsed if parsed >= 0 else None


def _uncounted(succeeded: list[str], failed: list[str]) -> JsonObj:
    """A merge-patch value: empty lists are sent as null so the field really empties."""
    return {"succeeded": succeeded or None, "failed": failed or None}


def _same(current: object, patch: object) -> bool:
    """Whether merge-patching `patch` onto `current` would change nothing."""
    if isinstance(patch, dict):
        base = current if isinstance(current, dict) else {}
        return all(_same(base.get(k), v) for k, v in patch.items()) and (isinstance(current, dict) or not patch)
    if patch is None:
        return current is None
    return current == patch


class JobController(Controller):
    name = "job-controller"
    watches = (JOBS, PODS)

    def __init__(self, store: Store, clock: Clock, settings: ClusterSettings) -> None:
        super().__init__(store, clock, settings)
        self._last_failure: dict[str, tuple[int, float]] = {}  # job uid -> (failed count, monotonic)
        self._finished: dict[str, float] = {}  # job uid -> monotonic time it finished
        self._started: dict[str, float] = {}  # job uid -> monotonic time it (re)started, for deadlines
        # job uid -> (consecutive syncs whose pod create was refused, monotonic time creates resume)
        self._create_failures: dict[str, tuple[int, float]] = {}
        self._pods = PodsByController("Job")

    def keys_for(self, event: WatchEvent) -> Iterable[Key]:
        meta = event.object.get("metadata") or {}
        if event.gvr.resource == "jobs":
            return [(meta.get("namespace"), meta.get("name"))]
        ref = controller_of(event.object)
        if ref is not None and not str(ref.get("apiVersion", "")).startswith("batch/"):
            return []
        owner = self._pods.observe(event.type, event.object)
        if owner is not None:
            return [owner]
        if event.type != "DELETED" and ref is None and TRACKING_FINALIZER in (meta.get("finalizers") or []):
            # Orphaned (its Job was deleted with propagationPolicy Orphan): nobody else would
            # ever drop the tracking finalizer, so the pod could never be deleted.
            return [(ORPHAN_KEY, meta.get("namespace"), meta.get("name"))]
        return []

    def _tf(self) -> float:
        return max(float(self.clock.time_factor), 1e-9)

    def _sim_since(self, moment: float) -> float:
        return (self.clock.monotonic() - moment) / self._tf()

    # ------------------------------------------------------------------------------------------
    def reconcile(self, key: Key) -> float | None:
        assert isinstance(key, tuple)
        if key[0] == ORPHAN_KEY:
            self._release_orphan_pod(str(key[1]), str(key[2]))
            return None
        namespace, name = str(key[0]), str(key[1])
        try:
            job = self.store.get(JOBS, namespace, name)
        except ApiError as err:
            if err.code != 404:
                raise
            self._release_orphans(namespace, name, None)
            return None
        spec = job.get("spec") or {}
        meta = job["metadata"]
        uid = str(meta.get("uid", ""))
        if spec.get("managedBy") not in (None, "", "kubernetes.io/job-controller"):
            return None  # another controller (e.g. MultiKueue) owns this Job's status
        self._release_orphans(namespace, name, uid)
        pods = self._pods.pods(uid)
        if meta.get("deletionTimestamp"):
            self._create_failures.pop(uid, None)
            self._flush(job, pods, count=False)
            return None
        if condition_true(job, "Complete") or condition_true(job, "Failed"):
            self._create_failures.pop(uid, None)
            self._flush(job, pods, count=False)
            return self._ttl(job)
        job = self._flush(job, pods, count=True)
        return self._sync(job, self._pods.pods(uid))

    # -- accounting ----------------------------------------------------------------------------
    def _flush(self, job: JsonObj, pods: list[JsonObj], *, count: bool) -> JsonObj:
        """Count finished pods through uncountedTerminatedPods and release their finalizers.
        With count=False (job finished or being deleted) pods are only released.

        The final move into succeeded/failed is not written here: it is returned inside the
        job's status (marked in `_UNWRITTEN`) so `_sync` writes it with the conditions it implies,
        in one status update, as the real controller does."""
        meta = job["metadata"]
        uid = str(meta.get("uid", ""))
        status = job.get("status") or {}
        uncounted = status.get("uncountedTerminatedPods") or {}
        pending_ok = list(uncounted.get("succeeded") or [])
        pending_failed = list(uncounted.get("failed") or [])
        # Pods deleted because the Job was suspended or already succeeded are released uncounted;
        # any other deleted pod counts as failed (it never got to finish).
        forgiven = bool((job.get("spec") or {}).get("suspend")) or condition_true(job, "SuccessCriteriaMet")
        to_release: list[JsonObj] = []
        for pod in pods:
            pmeta = pod["metadata"]
            if TRACKING_FINALIZER not in (pmeta.get("finalizers") or []):
                continue
            deleting = bool(pmeta.get("deletionTimestamp"))
            if not is_terminal(pod) and not deleting:
                continue
            to_release.append(pod)
            pod_uid = str(pmeta.get("uid", ""))
            if not count or pod_uid in pending_ok or pod_uid in pending_failed:
                continue
            if (pod.get("status") or {}).get("phase") == "Succeeded":
                pending_ok.append(pod_uid)
            elif not (deleting and forgiven):
                pending_failed.append(pod_uid)
        if count and (pending_ok != list(uncounted.get("succeeded") or [])
                      or pending_failed != list(uncounted.get("failed") or [])):
            job = self._write_status(job, {"uncountedTerminatedPods": _uncounted(pending_ok, pending_failed)})
        for pod in to_release:
            self._release(pod)
        if not count or not (pending_ok or pending_failed):
            return job
        # Every uncounted uid now has no finalizer (or no pod): move them into the counters.
        still_tracked = {str(p["metadata"].get("uid")) for p in self._pods.pods(uid)
                         if TRACKING_FINALIZER in (p["metadata"].get("finalizers") or [])}
        moved_ok = [u for u in pending_ok if u not in still_tracked]
        moved_failed = [u for u in pending_failed if u not in still_tracked]
        if not moved_ok and not moved_failed:
            return job
        status = job.get("status") or {}
        update: JsonObj = {
            # int32 omitempty fields: zero is written as absent, like the real API shows them
            "succeeded": as_int(status.get("succeeded"), 0) + len(moved_ok) or None,
            "failed": as_int(status.get("failed"), 0) + len(moved_failed) or None,
            "uncountedTerminatedPods": _uncounted([u for u in pending_ok if u not in moved_ok],
                                                  [u for u in pending_failed if u not in moved_failed]),
        }
        if (job.get("spec") or {}).get("completionMode") == "Indexed" and moved_ok:
            done = parse_indexes(status.get("completedIndexes"))
            done.update(i for p in pods if str(p["metadata"].get("uid")) in moved_ok
                        and (i := _index_of(p)) is not None)
            update["completedIndexes"] = format_indexes(done)
        if moved_failed:
            self._last_failure[uid] = (as_int(update["failed"], 0), self.clock.monotonic())
        merged = dict(job)
        merged["status"] = {**status, **update, _UNWRITTEN: update}
        return merged

    def _release(self, pod: JsonObj) -> None:
        """Drop the tracking finalizer, guarded by resourceVersion so another finalizer added
        meanwhile is not lost; on a conflict, retry once on a fresh read."""
        for _ in range(2):
            pmeta = pod["metadata"]
            remaining = [f for f in pmeta.get("finalizers") or [] if f != TRACKING_FINALIZER]
            try:
                self.store.patch(PODS, pmeta.get("namespace"), str(pmeta["name"]),
                                 {"metadata": {"finalizers": remaining or None,
                                               "resourceVersion": pmeta.get("resourceVersion")}},
                                 "merge", user="system:serviceaccount:kube-system:job-controller")
                return
            except ApiError as err:
                if err.code != 409:
                    return
                try:
                    pod = self.store.get(PODS, pmeta.get("namespace"), str(pmeta["name"]))
                except ApiError:
                    return

    def _release_orphans(self, namespace: str, name: str, live_uid: str | None) -> None:
        """Pods of a deleted Job (or of an older Job with the same name) still carrying the
        tracking finalizer would never go away: release them, as the real controller does."""
        for pod in self._pods.orphans(namespace, name, live_uid):
            if TRACKING_FINALIZER in (pod["metadata"].get("finalizers") or []):
                self._release(pod)

    def _release_orphan_pod(self, namespace: str, name: str) -> None:
        try:
            pod = self.store.get(PODS, namespace, name)
        except ApiError:
            return
        if controller_of(pod) is None and TRACKING_FINALIZER in (pod["metadata"].get("finalizers") or []):
            self._release(pod)

    # -- decisions -----------------------------------------------------------------------------
    def _sync(self, job: JsonObj, pods: list[JsonObj]) -> float | None:
        spec = job.get("spec") or {}
        meta = job["metadata"]
        uid = str(meta.get("uid", ""))
        status = dict(job.get("status") or {})
        now = rfc3339(self.clock.now())
        conditions = [dict(c) for c in status.get("conditions") or []]
        suspended = bool(spec.get("suspend"))
        active = [p for p in pods if not is_terminal(p) and not p["metadata"].get("deletionTimestamp")]
        terminating = [p for p in pods if not is_terminal(p) and p["metadata"].get("deletionTimestamp")]
        succeeded = as_int(status.get("succeeded"), 0)
        failed = as_int(status.get("failed"), 0)
        uncounted = status.get("uncountedTerminatedPods") or {}
        has_uncounted = bool(uncounted.get("succeeded") or uncounted.get("failed"))
        update: JsonObj = dict(status.pop(_UNWRITTEN, None) or {})
        requeue: float | None = None
        parallelism = max(as_int(spec.get("parallelism"), 1), 0)
        completions: int | None = None
        if spec.get("completions") is not None:
            completions = max(as_int(spec.get("completions"), 1), 0)
        elif spec.get("parallelism") is None:
            completions = 1  # the apiserver defaults both to 1 when neither is set
        indexed = spec.get("completionMode") == "Indexed" and completions is not None

        if suspended:
            for pod in active:
                self._delete_pod(job, pod)
            active = []
            if set_condition(conditions, "Suspended", "True", "JobSuspended", "Job suspended", now,
                             probe_times=True):
                record_event(self.store, self.clock, job, "Normal", "Suspended", "Job suspended", COMPONENT)
            self._started.pop(uid, None)
        else:
            suspended_before = find_condition(conditions, "Suspended")
            if suspended_before is not None and suspended_before.get("status") == "True":
                set_condition(conditions, "Suspended", "False", "JobResumed", "Job resumed", now, probe_times=True)
                record_event(self.store, self.clock, job, "Normal", "Resumed", "Job resumed", COMPONENT)
                update["startTime"] = now
                self._started[uid] = self.clock.monotonic()
            elif not status.get("startTime"):
                update["startTime"] = now
                self._started[uid] = self.clock.monotonic()
            else:
                self._started.setdefault(uid, self.clock.monotonic())

            done_indexes = parse_indexes(status.get("completedIndexes")) if indexed else set()
            if completions is None:
                complete = succeeded > 0 and not active
            else:
                complete = (len(done_indexes) if indexed else succeeded) >= int(completions)
            failure = self._failure_reason(job, pods, failed)
            if failure is not None and not condition_true(job, "FailureTarget") and not complete:
                set_condition(conditions, "FailureTarget", "True", failure[0], failure[1], now, probe_times=True)
            if condition_true({"status": {"conditions": conditions}}, "FailureTarget"):
                # The terminal condition waits until every pod is gone and counted.
                draining = bool(active or terminating or has_uncounted)
                for pod in active:
                    self._delete_pod(job, pod)
                active = []
                target = find_condition(conditions, "FailureTarget") or {}
                if not draining:
                    set_condition(conditions, "Failed", "True", str(target.get("reason", "")),
                                  str(target.get("message", "")), now, probe_times=True)
                    record_event(self.store, self.clock, job, "Warning", str(target.get("reason", "")),
                                 str(target.get("message", "")), COMPONENT)
                    self._finished[uid] = self.clock.monotonic()
                    requeue = self._ttl_delay(job, uid)
                else:
                    requeue = 0.05
            elif complete:
                set_condition(conditions, "SuccessCriteriaMet", "True", "CompletionsReached",
                              COMPLETIONS_MESSAGE, now, probe_times=True)
                draining = bool(active or terminating or has_uncounted)
                for pod in active:
                    self._delete_pod(job, pod)
                active = []
                if not draining:
                    set_condition(conditions, "Complete", "True", "CompletionsReached", COMPLETIONS_MESSAGE, now,
                                  probe_times=True)
                    update["completionTime"] = now
                    record_event(self.store, self.clock, job, "Normal", "Completed", "Job completed", COMPONENT)
                    self._finished[uid] = self.clock.monotonic()
                    requeue = self._ttl_delay(job, uid)
                else:
                    requeue = 0.05
            else:
                active, requeue = self._manage(job, active, parallelism, completions, succeeded, failed,
                                               indexed, done_indexes)
                deadline = _optional_int(spec.get("activeDeadlineSeconds"))
                if deadline is not None and uid in self._started:
                    left = float(deadline) - self._sim_since(self._started[uid])
                    wait = max(left, 0.0) * self._tf() + 0.001
                    requeue = wait if requeue is None else min(requeue, wait)

        update.update({
            "active": len(active) or None,
            "ready": sum(1 for p in active if is_ready(p)),
            "terminating": len(terminating),
            "uncountedTerminatedPods": _uncounted(list(uncounted.get("succeeded") or []),
                                                  list(uncounted.get("failed") or [])),
            "conditions": conditions,
        })
        update.setdefault("succeeded", succeeded or None)
        update.setdefault("failed", failed or None)
        if not conditions:
            update.pop("conditions")
        self._write_status(job, update)
        return requeue

    def _failure_reason(self, job: JsonObj, pods: list[JsonObj], failed: int) -> tuple[str, str] | None:
        spec = job.get("spec") or {}
        limit = as_int(spec.get("backoffLimit"), DEFAULT_BACKOFF_LIMIT)
        if failed > limit:
            return ("BackoffLimitExceeded", BACKOFF_MESSAGE)
        template_spec = (spec.get("template") or {}).get("spec") or {}
        if template_spec.get("restartPolicy") == "OnFailure":
            restarts = sum(as_int(cs.get("restartCount"), 0) for p in pods if not is_terminal(p)
                           for cs in (p.get("status") or {}).get("containerStatuses") or [])
            if restarts > limit:
                return ("BackoffLimitExceeded", BACKOFF_MESSAGE)
        deadline = _optional_int(spec.get("activeDeadlineSeconds"))
        uid = str(job["metadata"].get("uid", ""))
        if deadline is not None and uid in self._started and self._sim_since(self._started[uid]) >= float(deadline):
            return ("DeadlineExceeded", DEADLINE_MESSAGE)
        return None

    def _manage(self, job: JsonObj, active: list[JsonObj], parallelism: int,
                completions: int | None, succeeded: int, failed: int, indexed: bool,
                done_indexes: set[int]) -> tuple[list[JsonObj], float | None]:
        """Create or delete pods so that `active` matches what parallelism/completions want."""
        uid = str(job["metadata"].get("uid", ""))
        if indexed and completions is not None:
            busy = {i for p in active if (i := _index_of(p)) is not None}
            todo = [i for i in range(int(completions)) if i not in done_indexes and i not in busy]
            wanted = min(parallelism, len(busy) + len(todo))
        elif completions is not None:
            todo = []
            wanted = max(min(parallelism, int(completions) - succeeded), 0)
        else:
            todo = []
            wanted = parallelism if succeeded == 0 else 0
        if len(active) > wanted:
            for pod in sorted(active, key=lambda p: str(p["metadata"].get("creationTimestamp", "")),
                              reverse=True)[: len(active) - wanted]:
                self._delete_pod(job, pod)
            return active[: wanted], None
        missing = wanted - len(active)
        if missing <= 0:
            self._create_failures.pop(uid, None)  # a sync with nothing refused: the queue forgets
            return active, None
        last = self._last_failure.get(uid)
        if last is not None and failed > 0:
            backoff = min(POD_BACKOFF_SECONDS * 2 ** (max(failed, 1) - 1), POD_BACKOFF_MAX_SECONDS)
            remaining = backoff - self._sim_since(last[1])
            if remaining > 0:
                return active, remaining * self._tf()
        refused = self._create_failures.get(uid)
        if refused is not None and refused[1] > self.clock.monotonic():
            return active, refused[1] - self.clock.monotonic()  # still backing off: no create before then
        created = list(active)
        for slot in range(missing):
            fresh = self._create_pod(job, todo[slot] if indexed and slot < len(todo) else None)
            if fresh is None:
                # The first batch of the real controller's slow start is one pod: a refusal ends the sync.
                failures = (refused[0] if refused is not None else 0) + 1
                delay = api_backoff(failures) * self._tf()
                self._create_failures[uid] = (failures, self.clock.monotonic() + delay)
                return created, delay
            created.append(fresh)
        self._create_failures.pop(uid, None)
        return created, None

    # -- writes --------------------------------------------------------------------------------
    def _create_pod(self, job: JsonObj, index: int | None) -> JsonObj | None:
        meta = job["metadata"]
        spec = job.get("spec") or {}
        template = spec.get("template") or {}
        tmeta = template.get("metadata") or {}
        namespace, name, uid = str(meta["namespace"]), str(meta["name"]), str(meta.get("uid", ""))
        labels = dict(tmeta.get("labels") or {})
        labels.update({CONTROLLER_UID: uid, JOB_NAME: name, "controller-uid": uid, "job-name": name})
        annotations = dict(tmeta.get("annotations") or {})
        pod_spec = dict(template.get("spec") or {})
        generate = f"{name}-"
        if index is not None:
            labels[COMPLETION_INDEX] = str(index)
            annotations[COMPLETION_INDEX] = str(index)
            generate = f"{name}-{index}-"
            pod_spec.setdefault("hostname", f"{name}-{index}")
            containers = []
            for container in pod_spec.get("containers") or []:
                container = dict(container)
                env = [e for e in container.get("env") or [] if e.get("name") != "JOB_COMPLETION_INDEX"]
                env.append({"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {
                    "apiVersion": "v1", "fieldPath": f"metadata.annotations['{COMPLETION_INDEX}']"}}})
                container["env"] = env
                containers.append(container)
            pod_spec["containers"] = containers
        pod: JsonObj = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "generateName": generate,
                "namespace": namespace,
                "labels": labels,
                "annotations": annotations,
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": uid,
                                     "controller": True, "blockOwnerDeletion": True}],
                "finalizers": [TRACKING_FINALIZER],
            },
            "spec": pod_spec,
        }
        if not annotations:
            del pod["metadata"]["annotations"]
        try:
            created = self.store.create(PODS, pod, namespace=namespace,
                                        user="system:serviceaccount:kube-system:job-controller")
        except ApiError as err:
            record_event(self.store, self.clock, job, "Warning", "FailedCreate", f"Error creating: {err.message}",
                         COMPONENT)
            return None
        record_event(self.store, self.clock, job, "Normal", "SuccessfulCreate",
                     f"Created pod: {created['metadata']['name']}", COMPONENT)
        return created

    def _delete_pod(self, job: JsonObj, pod: JsonObj) -> None:
        pmeta = pod["metadata"]
        try:
            self.store.delete(PODS, pmeta.get("namespace"), str(pmeta["name"]),
                              user="system:serviceaccount:kube-system:job-controller")
        except ApiError:
            return
        record_event(self.store, self.clock, job, "Normal", "SuccessfulDelete", f"Deleted pod: {pmeta['name']}",
                     COMPONENT)

    def _write_status(self, job: JsonObj, update: JsonObj) -> JsonObj:
        status = job.get("status") or {}
        if not status.get(_UNWRITTEN) and all(_same(status.get(k), v) for k, v in update.items()):
            return job
        meta = job["metadata"]
        written = self.store.patch(JOBS, meta["namespace"], meta["name"], {"status": update}, "merge",
                                   subresource="status", user="system:serviceaccount:kube-system:job-controller")
        return written

    # -- ttl -----------------------------------------------------------------------------------
    def _ttl_delay(self, job: JsonObj, uid: str) -> float | None:
        ttl = _optional_int((job.get("spec") or {}).get("ttlSecondsAfterFinished"))
        if ttl is None:
            return None
        finished = self._finished.get(uid, self.clock.monotonic())
        return max(float(ttl) - self._sim_since(finished), 0.0) * self._tf() + 0.001

    def _ttl(self, job: JsonObj) -> float | None:
        """The TTL-after-finished controller: delete the Job (and, in the background, its pods)."""
        spec = job.get("spec") or {}
        ttl = _optional_int(spec.get("ttlSecondsAfterFinished"))
        if ttl is None:
            return None
        meta = job["metadata"]
        uid = str(meta.get("uid", ""))
        if uid not in self._finished:
            finished_text = (job.get("status") or {}).get("completionTime") or next(
                (c.get("lastTransitionTime") for c in (job.get("status") or {}).get("conditions") or []
                 if c.get("type") in ("Complete", "Failed") and c.get("status") == "True"), None)
            finished_at = parse_time(finished_text)
            elapsed_real = (self.clock.now() - finished_at).total_seconds() if finished_at else 0.0
            self._finished[uid] = self.clock.monotonic() - max(elapsed_real, 0.0)
        left = float(ttl) - self._sim_since(self._finished[uid])
        if left > 0:
            return left * self._tf() + 0.001
        with contextlib.suppress(ApiError):
            self.store.delete(JOBS, meta["namespace"], meta["name"], propagation_policy="Background",
                              user="system:serviceaccount:kube-system:ttl-after-finished-controller")
        self._finished.pop(uid, None)
        self._last_failure.pop(uid, None)
        self._started.pop(uid, None)
        return None
