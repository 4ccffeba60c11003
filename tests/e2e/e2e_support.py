"""What the end-to-end scenarios use to talk to a cluster — the sandbox or a real one — through the
Kubernetes API only (the official `kubernetes` client's DynamicClient), plus polling and a status
history recorder.

Scenarios never touch sandbox internals, so the same code runs against `KAIWO_E2E_KUBECONFIG`.
Reads and writes tolerate the transient errors a fault-injecting server (or a busy real one) answers
with: a scenario must fail because the operator misbehaved, not because one GET met a 500.
"""

from __future__ import annotations

import functools
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import kubernetes
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import DynamicApiError
from urllib3.exceptions import HTTPError

from kaiwo_sandbox.contracts import JsonObj
from kaiwo_sandbox.testing import polling

T = TypeVar("T")

KAIWO_API = "kaiwo.silogen.ai/v1alpha1"
CONFIG_API = "config.kaiwo.silogen.ai/v1alpha1"
TRANSIENT = frozenset({409, 429, 500, 502, 503, 504})
TERMINAL_PHASES = frozenset({"COMPLETE", "FAILED", "TERMINATED"})


def _status_of(err: Exception) -> int | None:
    status = getattr(err, "status", None)
    return status if isinstance(status, int) else None


def is_transient(err: Exception) -> bool:
    """An error worth retrying: injected/overload 5xx and 429, a conflict, or a broken connection."""
    if isinstance(err, ApiException | DynamicApiError):
        return _status_of(err) in TRANSIENT
    return isinstance(err, HTTPError | ConnectionError | TimeoutError)


# Poll under a deadline: the one polling loop is kaiwo_sandbox.testing.eventually.
wait_for = polling(interval=0.05, ignoring=is_transient)


def retrying(call: Callable[[], T], attempts: int = 30) -> T:
    """Run one API call, again after transient errors (with a short pause), as kubectl users retry."""
    for attempt in range(attempts):
        try:
            return call()
        except Exception as err:
            if not is_transient(err) or attempt == attempts - 1:
                raise
            time.sleep(min(0.05 * (attempt + 1), 0.5))
    raise AssertionError("unreachable")


def phase(obj: JsonObj | None) -> str:
    return str(((obj or {}).get("status") or {}).get("status") or "")


def condition(obj: JsonObj | None, cond_type: str) -> JsonObj | None:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or ():
        if cond.get("type") == cond_type:
            return dict(cond)
    return None


def owned_by(obj: JsonObj, uid: str) -> bool:
    return any(ref.get("uid") == uid and ref.get("controller")
               for ref in (obj.get("metadata") or {}).get("ownerReferences") or ())


class Kube:
    """Generic get/list/create/patch/delete by (apiVersion, kind), returning plain JSON dicts."""

    def __init__(self, api_client: Any) -> None:
        self.api_client = api_client
        self.dyn = retrying(lambda: DynamicClient(api_client))  # type: ignore[no-untyped-call]
        self.core = kubernetes.client.CoreV1Api(api_client)

    @functools.cached_property
    def kueue_api(self) -> str:
        """The newest Kueue API version the cluster serves (a real cluster may have only v1beta1)."""
        served = {r.group_version for r in retrying(
            lambda: self.dyn.resources.search(group="kueue.x-k8s.io", kind="Workload"))}
        return next((v for v in ("kueue.x-k8s.io/v1beta2", "kueue.x-k8s.io/v1beta1") if v in served),
                    "kueue.x-k8s.io/v1beta2")

    def resource(self, api_version: str, kind: str) -> Any:
        return retrying(lambda: self.dyn.resources.get(api_version=api_version, kind=kind))

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> JsonObj | None:
        res = self.resource(api_version, kind)
        try:
            obj: JsonObj = retrying(lambda: res.get(name=name, namespace=namespace).to_dict())
            return obj
        except DynamicApiError as err:
            if err.status == 404:
                return None
            raise

    def items(self, api_version: str, kind: str, namespace: str | None = None,
             label_selector: str | None = None) -> list[JsonObj]:
        res = self.resource(api_version, kind)
        result = retrying(lambda: res.get(namespace=namespace, label_selector=label_selector).to_dict())
        return list(result.get("items") or [])

    def create(self, obj: JsonObj, namespace: str | None = None) -> JsonObj:
        """Create `obj`; a retry after a transient error that finds it already there is a success."""
        res = self.resource(obj["apiVersion"], obj["kind"])
        namespace = namespace or (obj.get("metadata") or {}).get("namespace")
        try:
            created: JsonObj = retrying(lambda: res.create(body=obj, namespace=namespace).to_dict())
            return created
        except DynamicApiError as err:
            live = self.get(obj["apiVersion"], obj["kind"], obj["metadata"]["name"], namespace)
            if err.status == 409 and live is not None:
                return live
            raise

    def patch(self, api_version: str, kind: str, name: str, body: JsonObj, namespace: str | None = None) -> JsonObj:
        res = self.resource(api_version, kind)
        patched: JsonObj = retrying(lambda: res.patch(body=body, name=name, namespace=namespace,
                                                      content_type="application/merge-patch+json").to_dict())
        return patched

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> None:
        res = self.resource(api_version, kind)
        try:
            retrying(lambda: res.delete(name=name, namespace=namespace))
        except DynamicApiError as err:
            if err.status != 404:
                raise

    def events(self, namespace: str, name: str, kind: str | None = None) -> list[JsonObj]:
        items = self.items("v1", "Event", namespace)
        return [e for e in items if (e.get("involvedObject") or {}).get("name") == name
                and (kind is None or (e.get("involvedObject") or {}).get("kind") == kind)]

    def event_reasons(self, namespace: str, name: str, kind: str | None = None) -> list[str]:
        return [str(e.get("reason")) for e in self.events(namespace, name, kind)]


@dataclass
class StatusHistory:
    """Every distinct `.status.status` each object of one kind in one namespace went through, in order,
    seen by a watch (a snapshot poll could miss a short-lived phase). Runs on a daemon thread."""

    kube: Kube
    api_version: str
    kind: str
    namespace: str
    phases: dict[str, list[str]] = field(default_factory=dict)
    # Every distinct status (phase plus each condition's type/status/reason) in order: a status
    # write that changes a condition but not the phase (e.g. Admitted flipping while PENDING) is a
    # real change too, and is counted here.
    states: dict[str, list[tuple[str, frozenset[tuple[str, str, str]]]]] = field(default_factory=dict)
    relists: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _thread: threading.Thread | None = None

    def start(self) -> StatusHistory:
        self._resync()  # synchronously: whatever the test creates next is seen by the watch
        self._thread = threading.Thread(target=self._run, name=f"history-{self.kind}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def of(self, name: str) -> list[str]:
        with self._lock:
            return list(self.phases.get(name, []))

    def states_of(self, name: str) -> list[tuple[str, frozenset[tuple[str, str, str]]]]:
        with self._lock:
            return list(self.states.get(name, []))

    def _record(self, obj: JsonObj) -> None:
        name = (obj.get("metadata") or {}).get("name") or ""
        seen = phase(obj)
        status = obj.get("status") or {}
        state = (seen, frozenset((str(c.get("type")), str(c.get("status")), str(c.get("reason")))
                                 for c in status.get("conditions") or ()))
        with self._lock:
            history = self.phases.setdefault(name, [])
            if seen and (not history or history[-1] != seen):
                history.append(seen)
            states = self.states.setdefault(name, [])
            if seen and (not states or states[-1] != state):
                states.append(state)

    def _resync(self) -> str:
        res = self.kube.resource(self.api_version, self.kind)
        listed = retrying(lambda: res.get(namespace=self.namespace).to_dict())
        for obj in listed.get("items") or ():
            self._record(obj)
        return str((listed.get("metadata") or {}).get("resourceVersion") or "")

    def _run(self) -> None:
        res = self.kube.resource(self.api_version, self.kind)
        version = ""
        while not self._stop.is_set():
            try:
                if not version:
                    version = self._resync()
                    self.relists += 1
                watcher = kubernetes.watch.Watch()  # type: ignore[no-untyped-call]
                stream = self.kube.dyn.watch(  # type: ignore[no-untyped-call]
                    res, namespace=self.namespace, resource_version=version, timeout=1, watcher=watcher,
                    allow_watch_bookmarks=True)
                for event in stream:
                    raw: JsonObj = event["raw_object"]
                    version = str((raw.get("metadata") or {}).get("resourceVersion") or version)
                    if event["type"] in ("ADDED", "MODIFIED", "DELETED"):
                        self._record(raw)
                    if self._stop.is_set():
                        break
            except Exception as err:
                if _status_of(err) == 410:
                    version = ""  # expired: list again (and possibly miss a phase, counted in relists)
                elif not is_transient(err) and not isinstance(err, ValueError):
                    raise
                self._stop.wait(0.05)


@contextmanager
def recording(kube: Kube, api_version: str, kind: str, namespace: str) -> Iterator[StatusHistory]:
    history = StatusHistory(kube, api_version, kind, namespace).start()
    try:
        yield history
    finally:
        history.stop()


@dataclass
class Target:
    """Where the scenarios run: a client, the scale of time (seconds a `sleep 1` really takes, and
    how long to wait for anything), and whether the operator runs in-process (the sandbox)."""

    kube: Kube
    name: str
    timeout: float
    sandbox: bool
    namespaces: list[str] = field(default_factory=list)

    def namespace(self, prefix: str) -> str:
        """A fresh namespace for one scenario (deleted at teardown on a real cluster)."""
        name = f"{prefix}-{uuid.uuid4().hex[:6]}"
        self.kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        self.namespaces.append(name)
        return name

    def cleanup(self) -> None:
        for name in self.namespaces:
            self.kube.delete("v1", "Namespace", name)
        self.namespaces.clear()
