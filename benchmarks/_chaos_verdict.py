"""What the chaos soak (benchmarks/chaos.py) judges, as pure functions of one snapshot of the cluster:
which workloads have not reached their final phase, which children are duplicated or orphaned, and
which foreign objects (look-alikes the operator does not own) were modified. No I/O here: the soak
lists the cluster, these functions decide."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Literal

from kaiwo_ray.api.jsonobj import JsonObj

OWNER_KINDS = frozenset({"KaiwoJob", "KaiwoService"})
# (API path prefix, plural, kind) of every kind a workload controller may make a child of
CHILD_KINDS: tuple[tuple[str, str, str], ...] = (
    ("/apis/batch/v1", "jobs", "Job"),
    ("/apis/apps/v1", "deployments", "Deployment"),
    ("/api/v1", "persistentvolumeclaims", "PersistentVolumeClaim"),
    ("/api/v1", "configmaps", "ConfigMap"),
    ("/apis/ray.io/v1", "rayjobs", "RayJob"),
    ("/apis/ray.io/v1", "rayservices", "RayService"),
    ("/apis/workload.codeflare.dev/v1beta2", "appwrappers", "AppWrapper"),
)
PLURALS = {kind: plural for _prefix, plural, kind in CHILD_KINDS}
Final = Literal["COMPLETE", "RUNNING", "CONFLICT", "GONE"]


@dataclass(frozen=True, slots=True)
class Wanted:
    """One workload of the soak and where it must end: COMPLETE (a KaiwoJob), RUNNING (a KaiwoService),
    CONFLICT (ERROR with Schedulable=False/ChildNameConflict: a look-alike holds a child's name) or
    GONE (deleted during the soak: the CR and every child of it gone). `children`: the most children of
    each kind it may control (more is a duplicate)."""

    kind: str
    namespace: str
    name: str
    final: Final
    children: tuple[tuple[str, int], ...]

    @property
    def key(self) -> tuple[str, str, str]:
        return self.kind, self.namespace, self.name

    def label(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


@dataclass(slots=True)
class Snapshot:
    """Workloads by (kind, namespace, name) and every child-kind object of the soak's namespaces."""

    workloads: dict[tuple[str, str, str], JsonObj] = field(default_factory=dict)
    objects: list[JsonObj] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Verdict:
    unfinished: list[str]
    duplicates: list[str]
    orphans: list[str]

    @property
    def converged(self) -> bool:
        return not (self.unfinished or self.duplicates or self.orphans)


def phase(obj: JsonObj | None) -> str:
    return str(((obj or {}).get("status") or {}).get("status") or "")


def condition_reason(obj: JsonObj | None, cond_type: str) -> str:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or ():
        if cond.get("type") == cond_type:
            return str(cond.get("reason") or "")
    return ""


def reached(wanted: Wanted, obj: JsonObj | None) -> bool:
    if wanted.final == "GONE":
        return obj is None
    if obj is None or (obj.get("metadata") or {}).get("deletionTimestamp"):
        return False
    if wanted.final == "CONFLICT":
        return phase(obj) == "ERROR" and condition_reason(obj, "Schedulable") == "ChildNameConflict"
    return phase(obj) == wanted.final


def controller_owner(obj: JsonObj) -> tuple[str, str] | None:
    """(kind, uid) of the object's controller ownerReference when it is a workload of ours."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("controller") and ref.get("kind") in OWNER_KINDS:
            return str(ref["kind"]), str(ref.get("uid", ""))
    return None


def unfinished(wanted: list[Wanted], workloads: dict[tuple[str, str, str], JsonObj]) -> list[str]:
    """The workloads not at their final phase, each with the phase it is in."""
    return [w.label() + f" (phase {phase(workloads.get(w.key)) or 'none'}, wanted {w.final})"
            for w in wanted if not reached(w, workloads.get(w.key))]


def judge(wanted: list[Wanted], snapshot: Snapshot) -> Verdict:
    not_final = unfinished(wanted, snapshot.workloads)
    by_uid = {str(obj["metadata"]["uid"]): w for w in wanted
              if (obj := snapshot.workloads.get(w.key)) is not None}
    live_uids = {str(obj["metadata"]["uid"]) for obj in snapshot.workloads.values()}
    counts: Counter[tuple[str, str]] = Counter()
    orphans: list[str] = []
    for obj in snapshot.objects:
        owner = controller_owner(obj)
        if owner is None:
            continue
        meta = obj["metadata"]
        if owner[1] not in live_uids:
            orphans.append(f"{obj.get('kind')} {meta.get('namespace')}/{meta['name']} (owner {owner[0]} gone)")
        else:
            counts[(owner[1], str(obj.get("kind")))] += 1
    duplicates: list[str] = []
    for (uid, kind), count in sorted(counts.items()):
        w = by_uid.get(uid)
        allowed = dict(w.children).get(kind, 0) if w is not None else 0
        if count > allowed:
            duplicates.append(f"{count - allowed} extra {kind} of {w.label() if w else uid} ({count}, at most {allowed})")
    return Verdict(not_final, duplicates, orphans)


def duplicate_count(verdict: Verdict) -> int:
    return sum(int(line.split(" ", 1)[0]) for line in verdict.duplicates)


# -- foreign objects ----------------------------------------------------------------------------


def fingerprint(obj: JsonObj) -> JsonObj:
    """What nobody but the object's owner may change: identity, labels, annotations, owners,
    finalizers, deletion and spec (its status is the simulated cluster's to write)."""
    meta = obj.get("metadata") or {}
    return {"uid": meta.get("uid"), "labels": meta.get("labels") or {}, "annotations": meta.get("annotations") or {},
            "ownerReferences": meta.get("ownerReferences") or [], "finalizers": meta.get("finalizers") or [],
            "deletionTimestamp": meta.get("deletionTimestamp"), "spec": obj.get("spec"), "data": obj.get("data")}


def foreign_key(obj: JsonObj) -> tuple[str, str, str]:
    meta = obj["metadata"]
    return str(obj["kind"]), str(meta.get("namespace", "")), str(meta["name"])


def foreign_modified(before: dict[tuple[str, str, str], JsonObj], now: list[JsonObj],
                     operator_writes: set[tuple[str, str, str]]) -> list[str]:
    """Look-alikes (by kind, namespace, name -> fingerprint before the soak) that are gone, changed, or
    that an operator identity wrote to at all (`operator_writes`: (resource plural, namespace, name))."""
    live = {foreign_key(obj): obj for obj in now}
    found: list[str] = []
    for key, print_before in sorted(before.items()):
        kind, namespace, name = key
        obj = live.get(key)
        what = f"{kind} {namespace}/{name}"
        if obj is None:
            found.append(f"{what}: gone")
        elif fingerprint(obj) != print_before:
            changed = sorted(k for k, v in fingerprint(obj).items() if v != print_before.get(k))
            found.append(f"{what}: {', '.join(changed)} changed")
        elif (PLURALS.get(kind, ""), namespace, name) in operator_writes:
            found.append(f"{what}: written by the operator")
    return found
