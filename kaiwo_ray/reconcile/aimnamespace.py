"""The AIMNamespaceConfig decision, as one pure function: which config of a namespace counts, and
whether what it references exists.

Seed 004 defines only the spec. What kaiwo-ray adds, and why:
- One config per namespace counts, the oldest (creation time, then name): the workloads of a namespace
  read one set of credentials, never a merge. Any other says so (`Accepted=False`, `DuplicateConfig`)
  and is ignored; it takes over once the counted one is deleted.
- `SecretsFound` checks every Secret key the spec names (credentials and image pull secrets) against the
  namespace's Secrets; `status.missingSecrets` lists what is missing, so that a workload borrowing a
  credential can say which Secret and key it waits for without reading Secrets itself.
- `GatewayFound` checks the named Gateway (gateway.networking.k8s.io/v1) where a gateway is set.
A condition turning False is also a Warning event, once per change.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from kaiwo_ray.api.aim import AIMNamespaceConfigSpec, SecretValueReference
from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.reconcile.conditions import Cond, find, same_conditions, set_conditions

OWNED = ("Accepted", "SecretsFound", "GatewayFound")


@dataclass(frozen=True, slots=True)
class NamespaceConfigWorld:
    obj: JsonObj
    configs: Sequence[JsonObj]
    """Every AIMNamespaceConfig of the namespace, `obj` included."""
    secret_keys: Callable[[str], frozenset[str] | None]
    """The keys of the namespace's Secret `name`, None when there is no such Secret."""
    gateway_exists: Callable[[str, str], bool] | None
    """Whether Gateway (namespace, name) exists; None when the cluster serves no Gateway API."""
    now: datetime


@dataclass(slots=True)
class NamespaceConfigPlan:
    status: JsonObj | None = None
    events: list[tuple[str, str, str]] = field(default_factory=list)  # (type, reason, message)


def counted_config(configs: Sequence[JsonObj]) -> JsonObj | None:
    """The config that counts for a namespace: the oldest not being deleted (ties: by name)."""
    live = [c for c in configs if not (c.get("metadata") or {}).get("deletionTimestamp")]
    if not live:
        return None
    return min(live, key=lambda c: (str((c.get("metadata") or {}).get("creationTimestamp") or ""),
                                    str((c.get("metadata") or {}).get("name") or "")))


def secret_references(spec: AIMNamespaceConfigSpec) -> list[tuple[str, SecretValueReference]]:
    """(field path, reference) for every Secret key the spec names; image pull secrets have no key."""
    refs: list[tuple[str, SecretValueReference | None]] = []
    credentials = spec.credentials
    if credentials is not None:
        refs.append(("spec.credentials.huggingFaceToken", credentials.hugging_face_token))
        for i, s3 in enumerate(credentials.s3):
            refs.append((f"spec.credentials.s3[{i}].accessKeyId", s3.access_key_id))
            refs.append((f"spec.credentials.s3[{i}].secretAccessKey", s3.secret_access_key))
        for i, gcs in enumerate(credentials.gcs):
            refs.append((f"spec.credentials.gcs[{i}].applicationCredentials", gcs.application_credentials))
        for i, azure in enumerate(credentials.azure_blob):
            refs.append((f"spec.credentials.azureBlob[{i}].connectionString", azure.connection_string))
    if spec.images is not None:
        for i, name in enumerate(spec.images.image_pull_secrets):
            refs.append((f"spec.images.imagePullSecrets[{i}]", SecretValueReference(secret_name=name)))
    return [(path, ref) for path, ref in refs if ref is not None]


def missing_secrets(spec: AIMNamespaceConfigSpec, secret_keys: Callable[[str], frozenset[str] | None]) -> list[JsonObj]:
    """`status.missingSecrets`: each reference whose Secret or key is absent, or that names no Secret."""
    missing: list[JsonObj] = []
    for path, ref in secret_references(spec):
        name, key = ref.secret_name or "", ref.secret_key or ""
        is_pull_secret = path.startswith("spec.images.")
        if not name or (not key and not is_pull_secret):
            reason = "SecretReferenceIncomplete"
        else:
            keys = secret_keys(name)
            if keys is None:
                reason = "SecretNotFound"
            elif key and key not in keys:
                reason = "SecretKeyNotFound"
            else:
                continue
        missing.append({"field": path, "secretName": name, "secretKey": key, "reason": reason})
    return missing


def _describe(entry: JsonObj) -> str:
    where = entry["field"]
    if entry["reason"] == "SecretReferenceIncomplete":
        return f"{where} needs both secretName and secretKey"
    if entry["reason"] == "SecretNotFound":
        key = f" (key {entry['secretKey']})" if entry["secretKey"] else ""
        return f"{where}: Secret {entry['secretName']}{key} not found"
    return f"{where}: Secret {entry['secretName']} has no key {entry['secretKey']}"


def decide(world: NamespaceConfigWorld, spec: AIMNamespaceConfigSpec) -> NamespaceConfigPlan:
    obj = world.obj
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace") or ""
    status: JsonObj = obj.get("status") or {}
    conditions: list[Cond] = []
    missing: list[JsonObj] = []
    counted = counted_config(world.configs)
    counted_name = (counted or {}).get("metadata", {}).get("name")
    if counted is not None and counted_name != meta.get("name"):
        conditions.append(Cond("Accepted", "False", "DuplicateConfig",
                               f"AIMNamespaceConfig {counted_name} already configures namespace {namespace}: "
                               "only the oldest counts, this one is ignored"))
    else:
        conditions.append(Cond("Accepted", "True", "Accepted",
                               f"this AIMNamespaceConfig configures namespace {namespace}"))
        missing = missing_secrets(spec, world.secret_keys)
        if missing:
            reasons = {m["reason"] for m in missing}
            reason = reasons.pop() if len(reasons) == 1 else "SecretNotFound"
            conditions.append(Cond("SecretsFound", "False", reason, "; ".join(_describe(m) for m in missing)))
        else:
            conditions.append(Cond("SecretsFound", "True", "SecretsFound",
                                   "every Secret the config references exists"))
        gateway = spec.gateway
        if gateway is not None and gateway.name:
            where = f"{gateway.namespace or namespace}/{gateway.name}"
            if world.gateway_exists is None:
                conditions.append(Cond("GatewayFound", "False", "GatewayAPINotInstalled",
                                       f"Gateway {where}: the cluster serves no gateway.networking.k8s.io/v1"))
            elif world.gateway_exists(gateway.namespace or namespace, gateway.name):
                conditions.append(Cond("GatewayFound", "True", "GatewayFound", f"Gateway {where} exists"))
            else:
                conditions.append(Cond("GatewayFound", "False", "GatewayNotFound", f"Gateway {where} not found"))

    plan = NamespaceConfigPlan()
    stored = status.get("conditions") or []
    generation = meta.get("generation")
    if (same_conditions(stored, conditions, OWNED) and (status.get("missingSecrets") or []) == missing
            and status.get("observedGeneration") == generation):
        return plan
    for cond in conditions:
        before = find(stored, cond.type)
        if cond.status == "False" and (before is None or before.get("status") != "False"
                                       or before.get("message") != cond.message):
            plan.events.append(("Warning", cond.reason, cond.message))
    body: JsonObj = {"conditions": set_conditions(stored, conditions, world.now.strftime("%Y-%m-%dT%H:%M:%SZ"),
                                                  owned_types=OWNED),
                     "missingSecrets": missing}
    if generation is not None:
        body["observedGeneration"] = generation
    plan.status = body
    return plan
