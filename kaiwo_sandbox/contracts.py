"""Contracts shared by every part of the sandbox: resource identity (`GVR`, `ResourceInfo`), API errors, watch events,
the store protocol that the HTTP layer and the simulated controllers both use, and the clock.

Objects are plain JSON-shaped dicts, exactly what goes on the wire.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, Protocol

JsonObj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class GVR:
    """Group/version/resource (plural). The core group is the empty string."""

    group: str
    version: str
    resource: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def __str__(self) -> str:
        return f"{self.resource}.{self.version}.{self.group}" if self.group else f"{self.resource}.{self.version}"


# Well-known resources, so callers never spell group/version/plural by hand.
NAMESPACES = GVR("", "v1", "namespaces")
NODES = GVR("", "v1", "nodes")
PODS = GVR("", "v1", "pods")
SERVICES = GVR("", "v1", "services")
CONFIGMAPS = GVR("", "v1", "configmaps")
SECRETS = GVR("", "v1", "secrets")
EVENTS = GVR("", "v1", "events")
PVCS = GVR("", "v1", "persistentvolumeclaims")
SERVICEACCOUNTS = GVR("", "v1", "serviceaccounts")
DEPLOYMENTS = GVR("apps", "v1", "deployments")
REPLICASETS = GVR("apps", "v1", "replicasets")
REPLICATIONCONTROLLERS = GVR("", "v1", "replicationcontrollers")
DAEMONSETS = GVR("apps", "v1", "daemonsets")
JOBS = GVR("batch", "v1", "jobs")
LEASES = GVR("coordination.k8s.io", "v1", "leases")
EVENTS_V1 = GVR("events.k8s.io", "v1", "events")
PRIORITYCLASSES = GVR("scheduling.k8s.io", "v1", "priorityclasses")
STORAGECLASSES = GVR("storage.k8s.io", "v1", "storageclasses")
CRDS = GVR("apiextensions.k8s.io", "v1", "customresourcedefinitions")

RAYJOBS = GVR("ray.io", "v1", "rayjobs")
RAYSERVICES = GVR("ray.io", "v1", "rayservices")
RAYCLUSTERS = GVR("ray.io", "v1", "rayclusters")
APPWRAPPERS = GVR("workload.codeflare.dev", "v1beta2", "appwrappers")
KUEUE_VERSION = "v1beta2"
CLUSTERQUEUES = GVR("kueue.x-k8s.io", KUEUE_VERSION, "clusterqueues")
LOCALQUEUES = GVR("kueue.x-k8s.io", KUEUE_VERSION, "localqueues")
RESOURCEFLAVORS = GVR("kueue.x-k8s.io", KUEUE_VERSION, "resourceflavors")
WORKLOADPRIORITYCLASSES = GVR("kueue.x-k8s.io", KUEUE_VERSION, "workloadpriorityclasses")
WORKLOADS = GVR("kueue.x-k8s.io", KUEUE_VERSION, "workloads")
TOPOLOGIES = GVR("kueue.x-k8s.io", "v1beta1", "topologies")


ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
NO_COLLECTION_VERBS = ("create", "delete", "get", "list", "patch", "update", "watch")

StorageKey = tuple[str, str]


@dataclass(frozen=True, slots=True)
class ResourceInfo:
    """Everything discovery and the store need to know about one group/resource (the registry
    builds them)."""

    group: str
    versions: tuple[str, ...]  # served versions, preferred first
    resource: str
    kind: str
    singular: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ALL_VERBS
    subresources: frozenset[str] = frozenset()
    storage_group: str | None = None  # set when another group's storage is shared (events.k8s.io)
    custom: bool = False
    # CRD only: per-version structural schema and printer columns, scale subresource paths.
    schemas: dict[str, JsonObj] = field(default_factory=dict)
    printer_columns: dict[str, list[JsonObj]] = field(default_factory=dict)
    scale_paths: JsonObj | None = None
    storage_version: str = ""  # CRD: the version marked storage; built-ins: the only version
    deprecations: dict[str, str] = field(default_factory=dict)  # version -> Warning text (CRD `deprecated`)

    @property
    def stored_version(self) -> str:
        return self.storage_version or self.versions[0]

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def storage(self) -> StorageKey:
        return (self.group if self.storage_group is None else self.storage_group, self.resource)

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources

    def gvr(self, version: str | None = None) -> GVR:
        return GVR(self.group, version or self.versions[0], self.resource)

    def api_version(self, version: str | None = None) -> str:
        # GVR.api_version without building a GVR: every write asks, several times.
        version = version or self.versions[0]
        return f"{self.group}/{version}" if self.group else version


class ApiError(Exception):
    """An API failure carrying what a real apiserver would answer: HTTP code, Status reason, message.

    `details` follows metav1.StatusDetails ({name, group, kind, causes: [{reason, message, field}]}).
    """

    def __init__(self, code: int, reason: str, message: str, details: JsonObj | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details

    def status(self) -> JsonObj:
        body: JsonObj = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if not self.reason:
            del body["reason"]  # omitempty: an error the apiserver does not classify has none
        if self.details is not None:
            body["details"] = self.details
        return body

    # Constructors with the real apiserver's wording.
    @classmethod
    def not_found(cls, gvr: GVR, name: str) -> ApiError:
        qualified = f"{gvr.resource}.{gvr.group}" if gvr.group else gvr.resource
        return cls(404, "NotFound", f'{qualified} "{name}" not found',
                   {"name": name, "group": gvr.group, "kind": gvr.resource})

    @classmethod
    def already_exists(cls, gvr: GVR, name: str) -> ApiError:
        qualified = f"{gvr.resource}.{gvr.group}" if gvr.group else gvr.resource
        return cls(409, "AlreadyExists", f'{qualified} "{name}" already exists',
                   {"name": name, "group": gvr.group, "kind": gvr.resource})

    @classmethod
    def conflict(cls, gvr: GVR, name: str, why: str) -> ApiError:
        qualified = f"{gvr.resource}.{gvr.group}" if gvr.group else gvr.resource
        return cls(409, "Conflict", f'Operation cannot be fulfilled on {qualified} "{name}": {why}',
                   {"name": name, "group": gvr.group, "kind": gvr.resource})

    @classmethod
    def invalid(cls, kind: str, group: str, name: str, causes: list[JsonObj]) -> ApiError:
        """422. Each cause: {"reason": "FieldValueInvalid"|..., "message": ..., "field": "spec.gpus"}."""
        qualified = f"{kind}.{group}" if group else kind
        # utilerrors.Aggregate wording: one error bare, several bracketed, duplicates dropped.
        texts = list(dict.fromkeys(f"{c.get('field', '')}: {c.get('message', '')}" for c in causes))
        summary = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
        return cls(422, "Invalid", f'{qualified} "{name}" is invalid: {summary}',
                   {"name": name, "group": group, "kind": kind, "causes": causes})

    @classmethod
    def gone(cls, message: str) -> ApiError:
        return cls(410, "Expired", message)

    @classmethod
    def bad_request(cls, message: str) -> ApiError:
        return cls(400, "BadRequest", message)

    @classmethod
    def method_not_allowed(cls, message: str) -> ApiError:
        return cls(405, "MethodNotAllowed", message)

    @classmethod
    def unsupported_media_type(cls, message: str) -> ApiError:
        return cls(415, "UnsupportedMediaType", message)


EventType = Literal["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"]


@dataclass(slots=True)
class WatchEvent:
    """One committed change. `object` is the stored snapshot: read-only for every receiver."""

    type: EventType
    gvr: GVR
    object: JsonObj
    old: JsonObj | None = None
    resource_version: int = 0


PatchType = Literal["json", "merge", "strategic", "apply"]

PATCH_CONTENT_TYPES: dict[str, PatchType] = {
    "application/json-patch+json": "json",
    "application/merge-patch+json": "merge",
    "application/strategic-merge-patch+json": "strategic",
    "application/apply-patch+yaml": "apply",
    "application/apply-patch+cbor": "apply",
}


AdmissionHook = Callable[[str, "GVR", JsonObj, JsonObj | None, str], None]
"""Mutating admission, as a webhook would do it: (operation "CREATE"|"UPDATE", gvr, candidate
object, old object (the stored snapshot: read-only) or None, user). Mutates the candidate in place
or raises ApiError to reject.
Runs after decoding and defaulting, before validation, for writes to the main resource only
(not subresources), never for the store's own bookkeeping writes (GC, finalizer removal)."""


class Store(Protocol):
    """What a real apiserver does, minus HTTP. Every write goes through defaulting, validation,
    admission (e.g. Kueue's suspend-on-create), resourceVersion and generation bookkeeping,
    managedFields, finalizers and garbage collection, then notifies subscribers.

    `namespace` is None for cluster-scoped resources. `get`/`list` return deep copies the caller
    may mutate. Writes return the stored object (also a copy). Errors raise ApiError.
    """

    def get(self, gvr: GVR, namespace: str | None, name: str) -> JsonObj: ...

    def list(
        self,
        gvr: GVR,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> tuple[list[JsonObj], str]:
        """Items and the list's resourceVersion. namespace None lists across all namespaces."""
        ...

    def create(self, gvr: GVR, obj: JsonObj, *, namespace: str | None = None, dry_run: bool = False,
               field_manager: str | None = None, user: str = "system:sandbox") -> JsonObj: ...

    def update(self, gvr: GVR, obj: JsonObj, *, subresource: str | None = None, dry_run: bool = False,
               field_manager: str | None = None, user: str = "system:sandbox") -> JsonObj:
        """PUT semantics: 409 Conflict when obj's metadata.resourceVersion is set and stale.
        subresource "status" changes only .status; None changes everything but .status."""
        ...

    def patch(self, gvr: GVR, namespace: str | None, name: str, patch: Any, patch_type: PatchType, *,
              subresource: str | None = None, field_manager: str | None = None, force: bool = False,
              dry_run: bool = False, user: str = "system:sandbox") -> JsonObj: ...

    def delete(self, gvr: GVR, namespace: str | None, name: str, *, propagation_policy: str | None = None,
               resource_version: str | None = None, dry_run: bool = False,
               user: str = "system:sandbox") -> JsonObj:
        """Returns the deleted object (or the object now carrying deletionTimestamp when finalizers
        or Foreground propagation keep it)."""
        ...

    def bind(self, namespace: str, name: str, node_name: str, *, dry_run: bool = False,
             user: str = "system:sandbox") -> JsonObj:
        """POST pods/binding: set spec.nodeName (once) and PodScheduled=True in one write."""
        ...

    def subscribe(self, callback: Callable[[WatchEvent], None]) -> Callable[[], None]:
        """Call `callback` synchronously after every committed write (never for dry runs).
        The callback must not write to the store; it should only record work. Returns unsubscribe."""
        ...

    def add_admission_hook(self, hook: AdmissionHook) -> Callable[[], None]:
        """Register a mutating admission hook (see AdmissionHook). Returns a remover."""
        ...


class Clock(Protocol):
    """Wall time for timestamps and a monotonic source for timers. `time_factor` scales simulated
    durations (a pod annotated to run 10 s runs 10 * time_factor real seconds)."""

    time_factor: float

    def now(self) -> datetime: ...

    def monotonic(self) -> float: ...

    def call_later(self, delay: float, callback: Callable[[], None]) -> TimerHandle:
        """Run `callback` once `delay` seconds of this clock have passed (on the sandbox's loop)."""
        ...


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


@dataclass(slots=True)
class RealClock:
    time_factor: float = 1.0
    _offset: float = field(default=0.0, repr=False)

    def now(self) -> datetime:
        return datetime.fromtimestamp(time.time() + self._offset, tz=UTC)

    def monotonic(self) -> float:
        return time.monotonic() + self._offset

    def call_later(self, delay: float, callback: Callable[[], None]) -> TimerHandle:
        return asyncio.get_running_loop().call_later(max(delay, 0.0), callback)


@dataclass(slots=True)
class ScaledClock:
    """The cluster's own clock, running 1/`factor` times as fast as the wall clock and reading the
    wall clock at `origin` (Unix seconds). Timestamps, and the intervals every simulated controller
    measures, are cluster seconds, so nothing else scales (`time_factor` is 1): a pod annotated to run
    10 s runs 10 s of its own timestamps, and 10 * factor wall seconds. An operator that reads the same
    scaled clock (kaiwo_ray.clock, `KAIWO_CLOCK_SCALE`) sees the same times a simulation would."""

    factor: float
    origin: float
    time_factor: float = 1.0

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.origin + (time.time() - self.origin) / self.factor, tz=UTC)

    def monotonic(self) -> float:
        return time.monotonic() / self.factor

    def call_later(self, delay: float, callback: Callable[[], None]) -> TimerHandle:
        return asyncio.get_running_loop().call_later(max(delay, 0.0) * self.factor, callback)


@dataclass(slots=True)
class _ManualTimer:
    callback: Callable[[], None] | None

    def cancel(self) -> None:
        self.callback = None


@dataclass(slots=True)
class ManualClock:
    """A clock that moves only when told to (`advance`): time-based cluster behaviour (TTLs, back-off,
    grace periods, deadlines) is tested by advancing time, at its exact boundaries, instead of
    sleeping in scaled real time. Timers fire inside `advance`, in due order, on the caller's thread
    (the sandbox's loop: `RunningSandbox.advance` takes care of that)."""

    time_factor: float = 1.0
    start: datetime = field(default_factory=lambda: datetime.now(UTC).replace(microsecond=0))
    _elapsed: float = 0.0
    _timers: list[tuple[float, int, _ManualTimer]] = field(default_factory=list)
    _order: itertools.count[int] = field(default_factory=itertools.count)

    def now(self) -> datetime:
        return self.start + timedelta(seconds=self._elapsed)

    def monotonic(self) -> float:
        return self._elapsed

    def call_later(self, delay: float, callback: Callable[[], None]) -> TimerHandle:
        timer = _ManualTimer(callback)
        heapq.heappush(self._timers, (self._elapsed + max(delay, 0.0), next(self._order), timer))
        return timer

    def next_due(self) -> float | None:
        """Seconds until the earliest pending timer (None when none is pending)."""
        while self._timers and self._timers[0][2].callback is None:
            heapq.heappop(self._timers)
        return max(self._timers[0][0] - self._elapsed, 0.0) if self._timers else None

    def advance(self, seconds: float) -> int:
        """Move time forward by `seconds`, firing every timer that falls due; returns how many fired."""
        target = self._elapsed + max(seconds, 0.0)
        fired = 0
        while self._timers and self._timers[0][0] <= target:
            due, _, timer = heapq.heappop(self._timers)
            self._elapsed = max(self._elapsed, due)
            if timer.callback is not None:
                callback, timer.callback = timer.callback, None
                callback()
                fired += 1
        self._elapsed = target
        return fired


# The second last formatted and its text (one tuple, so threads never see half an update):
# every write stamps "now", and strftime was a visible part of a write's cost.
_last_second: tuple[datetime | None, str] = (None, "")


def rfc3339(moment: datetime) -> str:
    """Kubernetes' metav1.Time format: second precision, Z suffix."""
    global _last_second
    second = moment.replace(microsecond=0)
    cached = _last_second
    if second == cached[0]:  # equal instants format alike (aware ones compare in UTC)
        return cached[1]
    text = moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    _last_second = (second, text)
    return text


def rfc3339_micro(moment: datetime) -> str:
    """metav1.MicroTime (events.k8s.io eventTime, Lease renewTime)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
