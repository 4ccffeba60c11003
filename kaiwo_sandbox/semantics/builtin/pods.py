"""Pod spec validation, shared by Pods and every pod template (Job, Deployment, ReplicaSet), and the rules for
updating a Pod: the parts of pkg/apis/core/validation that Kaiwo's workloads and kubectl users run into,
with the apiserver's field paths and wording.

Deliberate simplification: a Pod update may set spec.nodeName once (the real server only allows that through
the binding subresource), so simulated schedulers that patch it keep working.
"""

from __future__ import annotations

from decimal import Decimal
from functools import lru_cache
from typing import Any, TypeGuard

from kaiwo_sandbox.contracts import JsonObj
from kaiwo_sandbox.semantics import field_errors as fe
from kaiwo_sandbox.semantics.metadata import is_dns1123_label, is_label_key, is_label_value
from kaiwo_sandbox.semantics.quantity import normalize_quantity, parse_quantity

Causes = list[JsonObj]

RESTART_POLICIES = ["Always", "OnFailure", "Never"]
DNS_POLICIES = ["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"]
PULL_POLICIES = ["Always", "IfNotPresent", "Never"]
PROTOCOLS = ["SCTP", "TCP", "UDP"]
TAINT_EFFECTS = ["NoSchedule", "PreferNoSchedule", "NoExecute"]

_POD_UPDATE_FORBIDDEN = (
    "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,"
    "`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),"
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"
)


def as_dict(value: Any) -> JsonObj:
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def non_negative(value: Any, field: str, causes: Causes) -> None:
    if is_int(value) and value < 0:
        causes.append(fe.invalid(field, value, "must be greater than or equal to 0"))


# --- quantities ---------------------------------------------------------------------------------------


def _native(resource: str) -> bool:
    """Native resources (cpu, memory, ephemeral-storage, ...) may be overcommitted; extended ones may not."""
    return ("/" not in resource or resource.startswith("kubernetes.io/")) and not resource.startswith("hugepages-")


@lru_cache(maxsize=4096)


def _quantity_cached(value: str | int | float) -> Decimal | None:
    try:
        return parse_quantity(value)
    except (ValueError, ArithmeticError):
        return None


def quantity(value: Any) -> Decimal | None:
    # Every pod write repeats the same few quantities ("1", "8", "16Gi"): parse each once.
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        return _quantity_cached(value)
    return None


@lru_cache(maxsize=4096)


def _quantity_text_cached(value: str | int | float) -> str:
    try:
        return normalize_quantity(value)
    except (ValueError, ArithmeticError):
        return str(value)


def quantity_text(value: Any) -> str:
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        return _quantity_text_cached(value)
    return str(value)


def _validate_resources(resources: Any, path: str, causes: Causes) -> None:
    resources = as_dict(resources)
    limits, requests = as_dict(resources.get("limits")), as_dict(resources.get("requests"))
    lim_path, req_path = f"{path}.limits", f"{path}.requests"
    _validate_quantities(limits, lim_path, causes)
    for name, raw, q in _validate_quantities(requests, req_path, causes):
        if name in limits:
            limit = quantity(limits[name])
            if limit is None:
                continue
            if q != limit and not _native(name):
                causes.append(fe.invalid(req_path, quantity_text(raw),
                                         f"must be equal to {name} limit of {quantity_text(limits[name])}"))
            elif q > limit:
                causes.append(fe.invalid(req_path, quantity_text(raw),
                                         f"must be less than or equal to {name} limit of "
                                         f"{quantity_text(limits[name])}"))
        elif not _native(name):
            causes.append(fe.required(lim_path, "Limit must be set for non overcommitable resources"))


def _validate_quantities(resources: JsonObj, path: str, causes: Causes) -> list[tuple[str, Any, Decimal]]:
    """Each quantity's own rules; returns (name, raw value, quantity) for those that parse."""
    parsed: list[tuple[str, Any, Decimal]] = []
    for name, raw in resources.items():
        q = quantity(raw)
        if q is None:
            causes.append(fe.invalid(f"{path}[{name}]", str(raw), "quantities must match the regular expression "
                                     "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"))
            continue
        _quantity_value_rules(name, q, raw, f"{path}[{name}]", causes)
        parsed.append((name, raw, q))
    return parsed


def _quantity_value_rules(name: str, q: Any, raw: Any, field: str, causes: Causes) -> None:
    if q < 0:
        causes.append(fe.invalid(field, quantity_text(raw), "must be greater than or equal to 0"))
    elif not _native(name) and q != q.to_integral_value():
        causes.append(fe.invalid(field, quantity_text(raw), "must be an integer"))


# --- pod spec -----------------------------------------------------------------------------------------


def _validate_ports(ports: Any, path: str, causes: Causes) -> None:
    for i, port in enumerate(as_list(ports)):
        port = as_dict(port)
        p = f"{path}[{i}]"
        number = port.get("containerPort")
        if not is_int(number) or not 1 <= number <= 65535:
            causes.append(fe.invalid(f"{p}.containerPort", number, "must be between 1 and 65535, inclusive"))
        host = port.get("hostPort")
        if is_int(host) and host != 0 and not 1 <= host <= 65535:
            causes.append(fe.invalid(f"{p}.hostPort", host, "must be between 1 and 65535, inclusive"))
        protocol = port.get("protocol", "TCP")
        if protocol not in PROTOCOLS:
            causes.append(fe.not_supported(f"{p}.protocol", protocol, PROTOCOLS))


def _validate_container(c: JsonObj, path: str, volumes: set[str], causes: Causes) -> None:
    name = c.get("name")
    if not name:
        causes.append(fe.required(f"{path}.name"))
    elif isinstance(name, str):
        causes.extend(fe.invalid(f"{path}.name", name, m) for m in is_dns1123_label(name))
    if not c.get("image"):
        causes.append(fe.required(f"{path}.image"))
    policy = c.get("imagePullPolicy")
    if policy is not None and policy not in PULL_POLICIES:
        causes.append(fe.not_supported(f"{path}.imagePullPolicy", policy, PULL_POLICIES))
    tmp = c.get("terminationMessagePolicy")
    if tmp is not None and tmp not in ("File", "FallbackToLogsOnError"):
        causes.append(fe.not_supported(f"{path}.terminationMessagePolicy", tmp, ["File", "FallbackToLogsOnError"]))
    _validate_ports(c.get("ports"), f"{path}.ports", causes)
    for i, env in enumerate(as_list(c.get("env"))):
        if not as_dict(env).get("name"):
            causes.append(fe.required(f"{path}.env[{i}].name"))
    for i, mount in enumerate(as_list(c.get("volumeMounts"))):
        mount = as_dict(mount)
        mount_name = mount.get("name")
        if not mount_name:
            causes.append(fe.required(f"{path}.volumeMounts[{i}].name"))
        elif str(mount_name) not in volumes:
            causes.append(fe.not_found(f"{path}.volumeMounts[{i}].name", mount_name))
        if not mount.get("mountPath"):
            causes.append(fe.required(f"{path}.volumeMounts[{i}].mountPath"))
    _validate_resources(c.get("resources"), f"{path}.resources", causes)


def validate_pod_spec(spec: JsonObj, path: str, *, restart_policies: list[str] | None = None) -> Causes:
    """ValidatePodSpec: containers, volumes, policies, tolerations. `path` is where the spec sits."""
    causes: Causes = []
    volumes: set[str] = set()
    for i, v in enumerate(as_list(spec.get("volumes"))):
        name = as_dict(v).get("name")
        vp = f"{path}.volumes[{i}].name"
        if not name:
            causes.append(fe.required(vp))
        elif str(name) in volumes:
            causes.append(fe.duplicate(vp, name))
        else:
            causes.extend(fe.invalid(vp, name, m) for m in is_dns1123_label(str(name)))
            volumes.add(str(name))
    containers = as_list(spec.get("containers"))
    if not containers:
        causes.append(fe.required(f"{path}.containers"))
    seen: set[str] = set()
    for key in ("initContainers", "containers"):
        for i, c in enumerate(as_list(spec.get(key))):
            c = as_dict(c)
            cp = f"{path}.{key}[{i}]"
            _validate_container(c, cp, volumes, causes)
            name = c.get("name")
            if isinstance(name, str) and name:
                if name in seen:
                    causes.append(fe.duplicate(f"{cp}.name", name))
                seen.add(name)
    policy = spec.get("restartPolicy")
    allowed = restart_policies or RESTART_POLICIES
    if policy is not None and policy not in allowed:
        causes.append(fe.not_supported(f"{path}.restartPolicy", policy, allowed))
    dns = spec.get("dnsPolicy")
    if dns is not None and dns not in DNS_POLICIES:
        causes.append(fe.not_supported(f"{path}.dnsPolicy", dns, DNS_POLICIES))
    non_negative(spec.get("terminationGracePeriodSeconds"), f"{path}.terminationGracePeriodSeconds", causes)
    deadline = spec.get("activeDeadlineSeconds")
    if is_int(deadline) and deadline <= 0:
        causes.append(fe.invalid(f"{path}.activeDeadlineSeconds", deadline, "must be between 1 and "
                                 "2147483647, inclusive"))
    for i, t in enumerate(as_list(spec.get("tolerations"))):
        t = as_dict(t)
        tp = f"{path}.tolerations[{i}]"
        effect = t.get("effect")
        if effect and effect not in TAINT_EFFECTS:
            causes.append(fe.not_supported(f"{tp}.effect", effect, TAINT_EFFECTS))
        operator = t.get("operator", "Equal")
        if operator not in ("Equal", "Exists"):
            causes.append(fe.not_supported(f"{tp}.operator", operator, ["Equal", "Exists"]))
        elif operator == "Exists" and t.get("value"):
            causes.append(fe.invalid(f"{tp}.operator", t.get("value"),
                                     "value must be empty when `operator` is 'Exists'"))
        toleration_key = t.get("key")
        if toleration_key:
            causes.extend(fe.invalid(f"{tp}.key", toleration_key, m) for m in is_label_key(str(toleration_key)))
    for key, value in as_dict(spec.get("nodeSelector")).items():
        causes.extend(fe.invalid(f"{path}.nodeSelector", key, m) for m in is_label_key(key))
        if isinstance(value, str):
            causes.extend(fe.invalid(f"{path}.nodeSelector", value, m) for m in is_label_value(value))
    return causes


# --- pod updates ----------------------------------------------------------------------------------------


def validate_pod(obj: JsonObj, old: JsonObj | None) -> Causes:
    spec = as_dict(obj.get("spec"))
    causes = validate_pod_spec(spec, "spec")
    if old is not None:
        old_spec = as_dict(old.get("spec"))
        causes.extend(_scheduling_directive_updates(spec, old_spec))
        if _comparable_pod_spec(spec, old_spec) != _comparable_pod_spec(old_spec, old_spec):
            causes.append(fe.forbidden("spec", _POD_UPDATE_FORBIDDEN))
    return causes


def _scheduling_directive_updates(spec: JsonObj, old_spec: JsonObj) -> Causes:
    """Gates may only be removed; while a pod is gated its nodeSelector may only grow."""
    causes: Causes = []
    old_gates = [as_dict(g).get("name") for g in as_list(old_spec.get("schedulingGates"))]
    for gate in as_list(spec.get("schedulingGates")):
        name = as_dict(gate).get("name")
        if name not in old_gates:
            causes.append(fe.forbidden("spec.schedulingGates",
                                       f"only deletion is allowed, but found new scheduling gate '{name}'"))
    if old_gates:
        old_selector, new_selector = as_dict(old_spec.get("nodeSelector")), as_dict(spec.get("nodeSelector"))
        if any(new_selector.get(k) != v for k, v in old_selector.items()):
            shown = "map[string]string{" + ", ".join(f"{fe.go_quote(str(k))}:{fe.go_quote(str(new_selector[k]))}"
                                                      for k in sorted(new_selector)) + "}"
            causes.append(fe.cause(fe.INVALID, "spec.nodeSelector",
                                   f"Invalid value: {shown}: only additions to spec.nodeSelector are allowed "
                                   "(no mutations or deletions)"))
    return causes


def _comparable_pod_spec(spec: JsonObj, old_spec: JsonObj) -> JsonObj:
    """The spec with every field a pod update may change reset to the old value."""
    out = dict(spec)
    for key in ("containers", "initContainers"):
        new_list, old_list = as_list(spec.get(key)), as_list(old_spec.get(key))
        if len(new_list) == len(old_list):
            out[key] = [
                {**as_dict(n), "image": as_dict(o).get("image")} if isinstance(n, dict) else n
                for n, o in zip(new_list, old_list, strict=True)
            ]
    for key in ("activeDeadlineSeconds", "terminationGracePeriodSeconds"):
        out[key] = old_spec.get(key)
    old_tolerations = as_list(old_spec.get("tolerations"))
    new_tolerations = as_list(spec.get("tolerations"))
    if all(t in new_tolerations for t in old_tolerations):
        out["tolerations"] = old_tolerations
    # Scheduling gates may only be removed; while gated, node selector and affinity may be added.
    old_gates = as_list(old_spec.get("schedulingGates"))
    out["schedulingGates"] = old_gates  # judged by _scheduling_directive_updates
    if old_gates:
        out["nodeSelector"] = old_spec.get("nodeSelector")
        out["affinity"] = old_spec.get("affinity")
    if not old_spec.get("nodeName"):
        out["nodeName"] = old_spec.get("nodeName")
    return {k: v for k, v in out.items() if v is not None}
