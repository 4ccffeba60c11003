"""Validation of built-in kinds: the rules of pkg/apis/{core,apps,batch}/validation (paraphrased) that Kaiwo,
its tests and kubectl users can run into, with the apiserver's field paths and wording.

Runs after defaulting, so it sees defaulted objects (e.g. a Job template without restartPolicy has become
`Always` and is rejected as the real server rejects it). ObjectMeta is validated separately (metadata.py).

Deliberate simplifications, documented so nobody relies on them:
- Immutable-field errors print the old Go struct as `core.PodTemplateSpec{...}` (the real message dumps the
  whole struct with %#v); the field path, reason and "field is immutable" are exact.
- Pod updates may set spec.nodeName once (the real server only allows that through the binding subresource),
  so simulated schedulers that patch it keep working.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from decimal import Decimal
from functools import lru_cache
from typing import Any, TypeGuard

from kaiwo_ray.api.quantity import normalize_quantity, parse_quantity
from kaiwo_ray.sandbox import field_errors as fe
from kaiwo_ray.sandbox.metadata import (
    is_dns1035_label,
    is_dns1123_label,
    is_dns1123_subdomain,
    is_label_key,
    is_label_value,
    regex_error,
)
from kaiwo_ray.sandbox.selectors import selector_from_dict
from kaiwo_ray.sandbox.types import ApiError, JsonObj

Causes = list[JsonObj]

RESTART_POLICIES = ["Always", "OnFailure", "Never"]
DNS_POLICIES = ["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"]
PULL_POLICIES = ["Always", "IfNotPresent", "Never"]
PROTOCOLS = ["SCTP", "TCP", "UDP"]
TAINT_EFFECTS = ["NoSchedule", "PreferNoSchedule", "NoExecute"]
SERVICE_TYPES = ["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"]
ACCESS_MODES = ["ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"]

_CONFIG_KEY_FMT = "[-._a-zA-Z0-9]+"
_CONFIG_KEY_RE = re.compile(_CONFIG_KEY_FMT)
_POD_UPDATE_FORBIDDEN = (
    "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,"
    "`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),"
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"
)


def _d(value: Any) -> JsonObj:
    return value if isinstance(value, dict) else {}


def _l(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _non_negative(value: Any, field: str, causes: Causes) -> None:
    if _is_int(value) and value < 0:
        causes.append(fe.invalid(field, value, "must be greater than or equal to 0"))


def _invalid_struct(field: str, type_name: str, detail: str) -> JsonObj:
    """field.Invalid with a Go struct as the value: printed abbreviated as `core.Type{...}`."""
    return fe.cause(fe.INVALID, field, f"Invalid value: {type_name}{{...}}: {detail}")


def _immutable(field: str, type_name: str, new: Any, old: Any, causes: Causes) -> None:
    if new != old:
        if isinstance(new, dict | list):
            causes.append(_invalid_struct(field, type_name, "field is immutable"))
        else:
            causes.append(fe.invalid(field, new, "field is immutable"))


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


def _quantity(value: Any) -> Decimal | None:
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


def _quantity_text(value: Any) -> str:
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        return _quantity_text_cached(value)
    return str(value)


def _validate_resources(resources: Any, path: str, causes: Causes) -> None:
    resources = _d(resources)
    limits, requests = _d(resources.get("limits")), _d(resources.get("requests"))
    lim_path, req_path = f"{path}.limits", f"{path}.requests"
    for name, raw in limits.items():
        q = _quantity(raw)
        if q is None:
            causes.append(fe.invalid(f"{lim_path}[{name}]", str(raw), "quantities must match the regular expression "
                                     "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"))
            continue
        _quantity_value_rules(name, q, raw, f"{lim_path}[{name}]", causes)
    for name, raw in requests.items():
        q = _quantity(raw)
        if q is None:
            causes.append(fe.invalid(f"{req_path}[{name}]", str(raw), "quantities must match the regular expression "
                                     "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"))
            continue
        _quantity_value_rules(name, q, raw, f"{req_path}[{name}]", causes)
        if name in limits:
            limit = _quantity(limits[name])
            if limit is None:
                continue
            if q != limit and not _native(name):
                causes.append(fe.invalid(req_path, _quantity_text(raw),
                                         f"must be equal to {name} limit of {_quantity_text(limits[name])}"))
            elif q > limit:
                causes.append(fe.invalid(req_path, _quantity_text(raw),
                                         f"must be less than or equal to {name} limit of "
                                         f"{_quantity_text(limits[name])}"))
        elif not _native(name):
            causes.append(fe.required(lim_path, "Limit must be set for non overcommitable resources"))


def _quantity_value_rules(name: str, q: Any, raw: Any, field: str, causes: Causes) -> None:
    if q < 0:
        causes.append(fe.invalid(field, _quantity_text(raw), "must be greater than or equal to 0"))
    elif not _native(name) and q != q.to_integral_value():
        causes.append(fe.invalid(field, _quantity_text(raw), "must be an integer"))


# --- pod spec -----------------------------------------------------------------------------------------


def _validate_ports(ports: Any, path: str, causes: Causes) -> None:
    for i, port in enumerate(_l(ports)):
        port = _d(port)
        p = f"{path}[{i}]"
        number = port.get("containerPort")
        if not _is_int(number) or not 1 <= number <= 65535:
            causes.append(fe.invalid(f"{p}.containerPort", number, "must be between 1 and 65535, inclusive"))
        host = port.get("hostPort")
        if _is_int(host) and host != 0 and not 1 <= host <= 65535:
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
    for i, env in enumerate(_l(c.get("env"))):
        if not _d(env).get("name"):
            causes.append(fe.required(f"{path}.env[{i}].name"))
    for i, mount in enumerate(_l(c.get("volumeMounts"))):
        mount = _d(mount)
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
    for i, v in enumerate(_l(spec.get("volumes"))):
        name = _d(v).get("name")
        vp = f"{path}.volumes[{i}].name"
        if not name:
            causes.append(fe.required(vp))
        elif str(name) in volumes:
            causes.append(fe.duplicate(vp, name))
        else:
            causes.extend(fe.invalid(vp, name, m) for m in is_dns1123_label(str(name)))
            volumes.add(str(name))
    containers = _l(spec.get("containers"))
    if not containers:
        causes.append(fe.required(f"{path}.containers"))
    seen: set[str] = set()
    for key in ("initContainers", "containers"):
        for i, c in enumerate(_l(spec.get(key))):
            c = _d(c)
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
    _non_negative(spec.get("terminationGracePeriodSeconds"), f"{path}.terminationGracePeriodSeconds", causes)
    deadline = spec.get("activeDeadlineSeconds")
    if _is_int(deadline) and deadline <= 0:
        causes.append(fe.invalid(f"{path}.activeDeadlineSeconds", deadline, "must be between 1 and "
                                 "2147483647, inclusive"))
    for i, t in enumerate(_l(spec.get("tolerations"))):
        t = _d(t)
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
    for key, value in _d(spec.get("nodeSelector")).items():
        causes.extend(fe.invalid(f"{path}.nodeSelector", key, m) for m in is_label_key(key))
        if isinstance(value, str):
            causes.extend(fe.invalid(f"{path}.nodeSelector", value, m) for m in is_label_value(value))
    return causes


def _validate_template(obj: JsonObj, causes: Causes, *, restart_policies: list[str] | None = None) -> JsonObj:
    template = _d(_d(obj.get("spec")).get("template"))
    causes.extend(validate_pod_spec(_d(template.get("spec")), "spec.template.spec",
                                    restart_policies=restart_policies))
    return template


def _selector_matches_template(selector: Any, template: JsonObj, causes: Causes) -> None:
    labels = _d(_d(template.get("metadata")).get("labels"))
    try:
        sel = selector_from_dict(selector if isinstance(selector, dict) else None)
    except ApiError as err:
        causes.append(_invalid_struct("spec.selector", "v1.LabelSelector", err.message))
        return
    if not sel.matches(labels):
        shown = "map[string]string{" + ", ".join(f"{fe.go_quote(k)}:{fe.go_quote(str(labels[k]))}"
                                                  for k in sorted(labels)) + "}"
        causes.append(fe.cause(fe.INVALID, "spec.template.metadata.labels",
                               f"Invalid value: {shown}: `selector` does not match template `labels`"))


# --- kinds --------------------------------------------------------------------------------------------


def _pod(obj: JsonObj, old: JsonObj | None) -> Causes:
    spec = _d(obj.get("spec"))
    causes = validate_pod_spec(spec, "spec")
    if old is not None:
        old_spec = _d(old.get("spec"))
        causes.extend(_scheduling_directive_updates(spec, old_spec))
        if _comparable_pod_spec(spec, old_spec) != _comparable_pod_spec(old_spec, old_spec):
            causes.append(fe.forbidden("spec", _POD_UPDATE_FORBIDDEN))
    return causes


def _scheduling_directive_updates(spec: JsonObj, old_spec: JsonObj) -> Causes:
    """Gates may only be removed; while a pod is gated its nodeSelector may only grow."""
    causes: Causes = []
    old_gates = [_d(g).get("name") for g in _l(old_spec.get("schedulingGates"))]
    for gate in _l(spec.get("schedulingGates")):
        name = _d(gate).get("name")
        if name not in old_gates:
            causes.append(fe.forbidden("spec.schedulingGates",
                                       f"only deletion is allowed, but found new scheduling gate '{name}'"))
    if old_gates:
        old_selector, new_selector = _d(old_spec.get("nodeSelector")), _d(spec.get("nodeSelector"))
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
        new_list, old_list = _l(spec.get(key)), _l(old_spec.get(key))
        if len(new_list) == len(old_list):
            out[key] = [
                {**_d(n), "image": _d(o).get("image")} if isinstance(n, dict) else n
                for n, o in zip(new_list, old_list, strict=True)
            ]
    for key in ("activeDeadlineSeconds", "terminationGracePeriodSeconds"):
        out[key] = old_spec.get(key)
    old_tolerations = _l(old_spec.get("tolerations"))
    new_tolerations = _l(spec.get("tolerations"))
    if all(t in new_tolerations for t in old_tolerations):
        out["tolerations"] = old_tolerations
    # Scheduling gates may only be removed; while gated, node selector and affinity may be added.
    old_gates = _l(old_spec.get("schedulingGates"))
    out["schedulingGates"] = old_gates  # judged by _scheduling_directive_updates
    if old_gates:
        out["nodeSelector"] = old_spec.get("nodeSelector")
        out["affinity"] = old_spec.get("affinity")
    if not old_spec.get("nodeName"):
        out["nodeName"] = old_spec.get("nodeName")
    return {k: v for k, v in out.items() if v is not None}


def _job(obj: JsonObj, old: JsonObj | None) -> Causes:
    causes: Causes = []
    spec = _d(obj.get("spec"))
    template = _validate_template(obj, causes, restart_policies=["OnFailure", "Never"])
    restart = _d(template.get("spec")).get("restartPolicy")
    if restart not in ("OnFailure", "Never") and not any(c["field"] == "spec.template.spec.restartPolicy"
                                                         for c in causes):
        causes.append(fe.not_supported("spec.template.spec.restartPolicy", restart or "", ["OnFailure", "Never"]))
    for key in ("parallelism", "completions", "backoffLimit", "activeDeadlineSeconds", "ttlSecondsAfterFinished"):
        _non_negative(spec.get(key), f"spec.{key}", causes)
    mode = spec.get("completionMode")
    if mode is not None and mode not in ("NonIndexed", "Indexed"):
        causes.append(fe.not_supported("spec.completionMode", mode, ["NonIndexed", "Indexed"]))
    if mode == "Indexed" and not _is_int(spec.get("completions")):
        causes.append(fe.required("spec.completions", "when completion mode is Indexed"))
    if "selector" not in spec:
        if spec.get("manualSelector"):
            causes.append(fe.required("spec.selector"))
    else:
        _selector_matches_template(spec.get("selector"), template, causes)
    if old is not None:
        causes.extend(_job_update(obj, old))
    return causes


def _job_update(obj: JsonObj, old: JsonObj) -> Causes:
    causes: Causes = []
    spec, old_spec = _d(obj.get("spec")), _d(old.get("spec"))
    _immutable("spec.selector", "v1.LabelSelector", spec.get("selector"), old_spec.get("selector"), causes)
    for key, type_name in (("completionMode", "batch.CompletionMode"), ("podFailurePolicy", "batch.PodFailurePolicy"),
                           ("backoffLimitPerIndex", "int32"), ("managedBy", "string"),
                           ("successPolicy", "batch.SuccessPolicy")):
        _immutable(f"spec.{key}", type_name, spec.get(key), old_spec.get(key), causes)
    elastic = spec.get("completionMode") == "Indexed" and spec.get("completions") == spec.get("parallelism")
    if not elastic:
        _immutable("spec.completions", "int32", spec.get("completions"), old_spec.get("completions"), causes)
    template, old_template = _d(spec.get("template")), _d(old_spec.get("template"))
    # Kueue relies on this: a suspended Job that never started may change its scheduling directives.
    if old_spec.get("suspend") is True and not _d(old.get("status")).get("startTime"):
        old_template = _with_scheduling_directives(old_template, template)
    _immutable("spec.template", "core.PodTemplateSpec", template, old_template, causes)
    return causes


def _with_scheduling_directives(old_template: JsonObj, template: JsonObj) -> JsonObj:
    merged = dict(old_template)
    merged["metadata"] = {k: v for k, v in _d(old_template.get("metadata")).items()
                          if k not in ("labels", "annotations")}
    for key in ("labels", "annotations"):
        if key in _d(template.get("metadata")):
            merged["metadata"][key] = _d(template.get("metadata"))[key]
    if not merged["metadata"] and "metadata" not in old_template:
        del merged["metadata"]
    spec = dict(_d(old_template.get("spec")))
    new_spec = _d(template.get("spec"))
    for key in ("nodeSelector", "tolerations", "schedulingGates"):
        spec.pop(key, None)
        if key in new_spec:
            spec[key] = new_spec[key]
    affinity = dict(_d(spec.get("affinity")))
    affinity.pop("nodeAffinity", None)
    new_node_affinity = _d(new_spec.get("affinity")).get("nodeAffinity")
    if new_node_affinity is not None:
        affinity["nodeAffinity"] = new_node_affinity
    if affinity:
        spec["affinity"] = affinity
    elif "affinity" not in new_spec or not _d(new_spec.get("affinity")):
        spec.pop("affinity", None)
        if "affinity" in new_spec:
            spec["affinity"] = new_spec["affinity"]
    merged["spec"] = spec
    return merged


def _deployment(obj: JsonObj, old: JsonObj | None) -> Causes:
    causes: Causes = []
    spec = _d(obj.get("spec"))
    template = _validate_template(obj, causes, restart_policies=["Always"])
    _non_negative(spec.get("replicas"), "spec.replicas", causes)
    _non_negative(spec.get("revisionHistoryLimit"), "spec.revisionHistoryLimit", causes)
    selector = spec.get("selector")
    if selector is None:
        causes.append(fe.required("spec.selector"))
    elif not _d(selector).get("matchLabels") and not _d(selector).get("matchExpressions"):
        causes.append(_invalid_struct("spec.selector", "v1.LabelSelector", "empty selector is invalid for deployment"))
    else:
        _selector_matches_template(selector, template, causes)
    strategy = _d(spec.get("strategy"))
    stype = strategy.get("type")
    if stype is not None and stype not in ("Recreate", "RollingUpdate"):
        causes.append(fe.not_supported("spec.strategy.type", stype, ["Recreate", "RollingUpdate"]))
    if stype == "Recreate" and strategy.get("rollingUpdate") is not None:
        causes.append(fe.forbidden("spec.strategy.rollingUpdate", "may not be specified when strategy `type` is "
                                   "'Recreate'"))
    rolling = _d(strategy.get("rollingUpdate"))
    if rolling and _is_zero(rolling.get("maxUnavailable")) and _is_zero(rolling.get("maxSurge")):
        causes.append(fe.invalid("spec.strategy.rollingUpdate.maxUnavailable", rolling.get("maxUnavailable"),
                                 "may not be 0 when `maxSurge` is 0"))
    if old is not None:
        _immutable("spec.selector", "v1.LabelSelector", selector, _d(old.get("spec")).get("selector"), causes)
    return causes


def _is_zero(value: Any) -> bool:
    return value in (0, "0", "0%")


def _replicaset(obj: JsonObj, old: JsonObj | None) -> Causes:
    causes: Causes = []
    template = _validate_template(obj, causes, restart_policies=["Always"])
    spec = _d(obj.get("spec"))
    _non_negative(spec.get("replicas"), "spec.replicas", causes)
    if spec.get("selector") is None:
        causes.append(fe.required("spec.selector"))
    else:
        _selector_matches_template(spec.get("selector"), template, causes)
    return causes


def _service(obj: JsonObj, old: JsonObj | None) -> Causes:
    causes: Causes = []
    spec = _d(obj.get("spec"))
    svc_type = spec.get("type", "ClusterIP")
    if svc_type not in SERVICE_TYPES:
        causes.append(fe.not_supported("spec.type", svc_type, SERVICE_TYPES))
    ports = _l(spec.get("ports"))
    headless = spec.get("clusterIP") == "None"
    if not ports and svc_type != "ExternalName" and not headless:
        causes.append(fe.required("spec.ports"))
    names: set[str] = set()
    for i, port in enumerate(ports):
        port = _d(port)
        p = f"spec.ports[{i}]"
        name = port.get("name")
        if len(ports) > 1 and not name:
            causes.append(fe.required(f"{p}.name"))
        elif name:
            if str(name) in names:
                causes.append(fe.duplicate(f"{p}.name", name))
            names.add(str(name))
            causes.extend(fe.invalid(f"{p}.name", name, m) for m in is_dns1123_label(str(name)))
        number = port.get("port")
        if not _is_int(number) or not 1 <= number <= 65535:
            causes.append(fe.invalid(f"{p}.port", number, "must be between 1 and 65535, inclusive"))
        protocol = port.get("protocol", "TCP")
        if protocol not in PROTOCOLS:
            causes.append(fe.not_supported(f"{p}.protocol", protocol, PROTOCOLS))
        target = port.get("targetPort")
        if _is_int(target) and not 1 <= target <= 65535:
            causes.append(fe.invalid(f"{p}.targetPort", target, "must be between 1 and 65535, inclusive"))
    if svc_type == "ExternalName":
        external = spec.get("externalName")
        if not external:
            causes.append(fe.required("spec.externalName"))
    for key, value in _d(spec.get("selector")).items():
        causes.extend(fe.invalid("spec.selector", key, m) for m in is_label_key(key))
        if isinstance(value, str):
            causes.extend(fe.invalid("spec.selector", value, m) for m in is_label_value(value))
    if old is not None:
        old_spec = _d(old.get("spec"))
        old_ip = old_spec.get("clusterIP")
        if old_ip and old_ip != "None" and svc_type != "ExternalName" and spec.get("clusterIP") != old_ip:
            causes.append(fe.invalid("spec.clusterIP", spec.get("clusterIP", ""), "field is immutable"))
    return causes


def _pvc(obj: JsonObj, old: JsonObj | None) -> Causes:
    causes: Causes = []
    spec = _d(obj.get("spec"))
    modes = _l(spec.get("accessModes"))
    if not modes:
        causes.append(fe.required("spec.accessModes", "at least 1 access mode is required"))
    for mode in modes:
        if mode not in ACCESS_MODES:
            causes.append(fe.not_supported("spec.accessModes", mode, ACCESS_MODES))
    storage = _d(_d(spec.get("resources")).get("requests")).get("storage")
    if storage is None:
        causes.append(fe.required("spec.resources[storage]"))
    elif (q := _quantity(storage)) is None or q <= 0:
        causes.append(fe.invalid("spec.resources[storage]", _quantity_text(storage), "must be greater than zero"))
    volume_mode = spec.get("volumeMode")
    if volume_mode is not None and volume_mode not in ("Block", "Filesystem"):
        causes.append(fe.not_supported("spec.volumeMode", volume_mode, ["Block", "Filesystem"]))
    if old is not None:
        old_spec = _d(old.get("spec"))
        new_cmp, old_cmp = dict(spec), dict(old_spec)
        for cmp in (new_cmp, old_cmp):
            cmp["resources"] = {k: v for k, v in _d(cmp.get("resources")).items() if k != "requests"}
            cmp.pop("volumeAttributesClassName", None)
        if not old_spec.get("volumeName"):
            new_cmp.pop("volumeName", None)
            old_cmp.pop("volumeName", None)
        if new_cmp != old_cmp:
            causes.append(fe.forbidden("spec", "spec is immutable after creation except resources.requests and "
                                       "volumeAttributesClassName for bound claims"))
    return causes


def _node(obj: JsonObj, old: JsonObj | None) -> Causes:
    causes: Causes = []
    seen: set[tuple[str, str]] = set()
    for i, taint in enumerate(_l(_d(obj.get("spec")).get("taints"))):
        taint = _d(taint)
        p = f"spec.taints[{i}]"
        key = str(taint.get("key") or "")
        if not key:
            causes.append(fe.required(f"{p}.key"))
        else:
            causes.extend(fe.invalid(f"{p}.key", key, m) for m in is_label_key(key))
        value = taint.get("value")
        if isinstance(value, str) and value:
            causes.extend(fe.invalid(f"{p}.value", value, m) for m in is_label_value(value))
        effect = taint.get("effect")
        if not effect:
            causes.append(fe.required(f"{p}.effect"))
        elif effect not in TAINT_EFFECTS:
            causes.append(fe.not_supported(f"{p}.effect", effect, TAINT_EFFECTS))
        elif (key, str(effect)) in seen:
            causes.append(fe.cause(fe.DUPLICATE, p, "Duplicate value: core.Taint{...}"))
        seen.add((key, str(effect)))
    return causes


def _config_keys(data: Any, field: str, causes: Causes) -> None:
    for key in _d(data):
        msgs: list[str] = []
        if len(key) > 253:
            msgs.append("must be no more than 253 characters")
        if not _CONFIG_KEY_RE.fullmatch(key):
            msgs.append(regex_error("a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
                                    _CONFIG_KEY_FMT, "key.name", "KEY_NAME", "key-name"))
        if key in (".", ".."):
            msgs.append(f"must not be '{key}'")
        elif key.startswith(".."):
            msgs.append("must not start with '..'")
        causes.extend(fe.invalid(f"{field}[{key}]", key, m) for m in msgs)


def _configmap(obj: JsonObj, old: JsonObj | None) -> Causes:
    causes: Causes = []
    _config_keys(obj.get("data"), "data", causes)
    _config_keys(obj.get("binaryData"), "binaryData", causes)
    for key in set(_d(obj.get("data"))) & set(_d(obj.get("binaryData"))):
        causes.append(fe.invalid(f"data[{key}]", key, "duplicate of key present in binaryData"))
    if old is not None and old.get("immutable") is True:
        for key in ("data", "binaryData"):
            if obj.get(key) != old.get(key):
                causes.append(fe.forbidden(key, "field is immutable when `immutable` is set"))
    return causes


def _secret(obj: JsonObj, old: JsonObj | None) -> Causes:
    causes: Causes = []
    _config_keys(obj.get("data"), "data", causes)
    if old is not None and obj.get("type") != old.get("type"):
        causes.append(fe.cause(fe.INVALID, "type", f"Invalid value: {fe.go_value(obj.get('type'))}: "
                               "field is immutable"))
    return causes


def _priorityclass(obj: JsonObj, old: JsonObj | None) -> Causes:
    causes: Causes = []
    value = obj.get("value")
    name = str(_d(obj.get("metadata")).get("name", ""))
    if _is_int(value) and value > 1_000_000_000 and not name.startswith("system-"):
        causes.append(fe.forbidden("value", "maximum allowed value of a user defined priority is 1000000000"))
    policy = obj.get("preemptionPolicy")
    if policy is not None and policy not in ("Never", "PreemptLowerPriority"):
        causes.append(fe.not_supported("preemptionPolicy", policy, ["Never", "PreemptLowerPriority"]))
    if old is not None and value != old.get("value"):
        causes.append(fe.forbidden("value", "may not be changed in an update."))
    return causes


def _crd(obj: JsonObj, old: JsonObj | None) -> Causes:
    causes: Causes = []
    spec = _d(obj.get("spec"))
    names = _d(spec.get("names"))
    group, plural = str(spec.get("group") or ""), str(names.get("plural") or "")
    name = str(_d(obj.get("metadata")).get("name") or "")
    if not group:
        causes.append(fe.required("spec.group"))
    elif len(group.split(".")) < 2:
        causes.append(fe.invalid("spec.group", group, "should be a domain with at least one dot"))
    if not plural:
        causes.append(fe.required("spec.names.plural"))
    else:
        causes.extend(fe.invalid("spec.names.plural", plural, m) for m in is_dns1035_label(plural))
    if not names.get("kind"):
        causes.append(fe.required("spec.names.kind"))
    if group and plural and name != f"{plural}.{group}":
        causes.append(fe.invalid("metadata.name", name, 'must be spec.names.plural+"."+spec.group'))
    scope = spec.get("scope")
    if scope not in ("Cluster", "Namespaced"):
        causes.append(fe.not_supported("spec.scope", scope or "", ["Cluster", "Namespaced"]))
    versions = [_d(v) for v in _l(spec.get("versions"))]
    if sum(1 for v in versions if v.get("storage") is True) != 1:
        causes.append(_invalid_struct("spec.versions", "[]apiextensions.CustomResourceDefinitionVersion",
                                      "must have exactly one version marked as storage version"))
    seen: set[str] = set()
    for i, v in enumerate(versions):
        vname = str(v.get("name") or "")
        if not vname:
            causes.append(fe.required(f"spec.versions[{i}].name"))
        elif vname in seen:
            causes.append(fe.duplicate(f"spec.versions[{i}].name", vname))
        else:
            causes.extend(fe.invalid(f"spec.versions[{i}].name", vname, m) for m in is_dns1035_label(vname))
        seen.add(vname)
    for i, v in enumerate(versions):
        schema = _d(v.get("schema")).get("openAPIV3Schema")
        path = f"spec.versions[{i}].schema.openAPIV3Schema"
        if not isinstance(schema, dict):
            causes.append(fe.required(path, "schemas are required"))
            continue
        if schema.get("type") != "object":
            causes.append(fe.not_supported(f"{path}.type", schema.get("type") or "", ["object"]))
        _structural(schema, path, causes)
    if old is not None:
        old_spec = _d(old.get("spec"))
        _immutable("spec.group", "string", spec.get("group"), old_spec.get("group"), causes)
        _immutable("spec.names.plural", "string", names.get("plural"), _d(old_spec.get("names")).get("plural"),
                   causes)
    return causes


_SCHEMA_TYPES = ["array", "boolean", "integer", "number", "object", "string"]


def _structural(schema: JsonObj, path: str, causes: Causes) -> None:
    """The structural-schema rules that matter for serving: every specified field has a type (unless it
    preserves unknown fields or is int-or-string), and the type is a known one."""
    for key, prop in _d(schema.get("properties")).items():
        _structural_node(prop, f"{path}.properties[{key}]", "must not be empty for specified object fields",
                         causes)
    items = schema.get("items")
    if isinstance(items, dict):
        _structural_node(items, f"{path}.items", "must not be empty for specified array items", causes)
    additional = schema.get("additionalProperties")
    if isinstance(additional, dict):
        _structural_node(additional, f"{path}.additionalProperties", "must not be empty for specified object fields",
                         causes)


def _structural_node(node: Any, path: str, missing: str, causes: Causes) -> None:
    if not isinstance(node, dict):
        return
    node_type = node.get("type")
    if not node_type:
        if not node.get("x-kubernetes-preserve-unknown-fields") and not node.get("x-kubernetes-int-or-string"):
            causes.append(fe.required(f"{path}.type", missing))
    elif node_type not in _SCHEMA_TYPES:
        causes.append(fe.not_supported(f"{path}.type", node_type, _SCHEMA_TYPES))
    _structural(node, path, causes)


def _namespace(obj: JsonObj, old: JsonObj | None) -> Causes:
    causes: Causes = []
    for i, finalizer in enumerate(_l(_d(obj.get("spec")).get("finalizers"))):
        if isinstance(finalizer, str):
            causes.extend(fe.invalid(f"spec.finalizers[{i}]", finalizer, m) for m in is_label_key(finalizer))
    return causes


def _lease(obj: JsonObj, old: JsonObj | None) -> Causes:
    causes: Causes = []
    spec = _d(obj.get("spec"))
    duration = spec.get("leaseDurationSeconds")
    if _is_int(duration) and duration <= 0:
        causes.append(fe.invalid("spec.leaseDurationSeconds", duration, "must be greater than 0"))
    _non_negative(spec.get("leaseTransitions"), "spec.leaseTransitions", causes)
    return causes


_EVENT_V1_NAMES = {"regarding": "involvedObject", "note": "message", "deprecatedSource": "source",
                   "deprecatedFirstTimestamp": "firstTimestamp", "deprecatedLastTimestamp": "lastTimestamp",
                   "deprecatedCount": "count", "reportingController": "reportingComponent"}


def _internal_event(obj: JsonObj) -> JsonObj:
    """Events are validated in their internal (core) shape whichever API wrote them."""
    out = dict(obj)
    for v1_name, core_name in _EVENT_V1_NAMES.items():
        if v1_name in out and core_name not in out:
            out[core_name] = out.pop(v1_name)
    return out


def _event_causes(obj: JsonObj, *, events_v1: bool) -> Causes:
    """ValidateEventCreate: the legacy rules for every write, the strict ones for events.k8s.io/v1."""
    ev = _internal_event(obj)
    causes: Causes = []
    namespace = str(_d(ev.get("metadata")).get("namespace") or "")
    involved_ns = str(_d(ev.get("involvedObject")).get("namespace") or "")
    controller_field = "reportingController" if events_v1 else "reportingComponent"
    if not ev.get("eventTime"):
        if (not involved_ns and namespace not in ("", "default")) or (involved_ns and namespace != involved_ns):
            causes.append(fe.invalid("involvedObject.namespace", involved_ns, "does not match event.namespace"))
    else:
        if not involved_ns and namespace not in ("default", "kube-system"):
            causes.append(fe.invalid("involvedObject.namespace", involved_ns, "does not match event.namespace"))
        controller = str(ev.get("reportingComponent") or "")
        if not controller:
            causes.append(fe.required(controller_field))
        causes.extend(fe.invalid(controller_field, controller, m) for m in is_label_key(controller))
        for field, limit in (("reportingInstance", 128), ("action", 128), ("reason", 128)):
            value = str(ev.get(field) or "")
            if not value:
                causes.append(fe.required(field))
            elif len(value) > limit:
                causes.append(fe.invalid(field, "", f"can have at most {limit} characters"))
        if len(str(ev.get("message") or "")) > 1024:
            causes.append(fe.invalid("message", "", "can have at most 1024 characters"))
    if namespace:
        causes.extend(fe.invalid("namespace", namespace, m) for m in is_dns1123_subdomain(namespace))
    if not events_v1:
        return causes
    series = ev.get("series")
    if isinstance(series, dict):
        count = series.get("count")
        if not _is_int(count) or count < 2:
            causes.append(fe.invalid("series.count", "", "should be at least 2"))
        if not series.get("lastObservedTime"):
            causes.append(fe.required("series.lastObservedTime"))
    if not ev.get("eventTime"):
        causes.append(fe.required("eventTime"))
    if ev.get("type") not in ("Normal", "Warning"):
        causes.append(fe.invalid("type", "", f"has invalid value: {ev.get('type') or ''}"))
    for core_name, v1_name in (("firstTimestamp", "deprecatedFirstTimestamp"),
                               ("lastTimestamp", "deprecatedLastTimestamp"), ("count", "deprecatedCount")):
        if ev.get(core_name):
            causes.append(fe.invalid(v1_name, "", "needs to be unset"))
    source = _d(ev.get("source"))
    if source.get("component") or source.get("host"):
        causes.append(fe.invalid("deprecatedSource", "", "needs to be unset"))
    return causes


def _event(obj: JsonObj, old: JsonObj | None) -> Causes:
    return _event_causes(obj, events_v1=False) if old is None else []


def _event_v1(obj: JsonObj, old: JsonObj | None) -> Causes:
    return _event_causes(obj, events_v1=True) if old is None else []


_VALIDATORS: dict[tuple[str, str], Callable[[JsonObj, JsonObj | None], Causes]] = {
    ("", "Pod"): _pod,
    ("", "Service"): _service,
    ("", "PersistentVolumeClaim"): _pvc,
    ("", "Node"): _node,
    ("", "Namespace"): _namespace,
    ("", "ConfigMap"): _configmap,
    ("", "Secret"): _secret,
    ("", "Event"): _event,
    ("events.k8s.io", "Event"): _event_v1,
    ("apps", "Deployment"): _deployment,
    ("apps", "ReplicaSet"): _replicaset,
    ("batch", "Job"): _job,
    ("coordination.k8s.io", "Lease"): _lease,
    ("scheduling.k8s.io", "PriorityClass"): _priorityclass,
    ("apiextensions.k8s.io", "CustomResourceDefinition"): _crd,
}


def validate_builtin(group: str, kind: str, obj: JsonObj, old: JsonObj | None) -> list[JsonObj]:
    """Status causes for what the kind's validation rejects; `old` is the stored object on update."""
    validator = _VALIDATORS.get((group, kind))
    if validator is None:
        return []
    return validator(obj, old)


__all__ = ["validate_builtin", "validate_pod_spec"]
