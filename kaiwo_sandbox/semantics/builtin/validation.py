"""Validation of built-in kinds: the rules of pkg/apis/{core,apps,batch}/validation (paraphrased) that Kaiwo,
its tests and kubectl users can run into, with the apiserver's field paths and wording.

Runs after defaulting, so it sees defaulted objects (e.g. a Job template without restartPolicy has become
`Always` and is rejected as the real server rejects it). ObjectMeta is validated separately (metadata.py).

Pod specs (and pod updates) are validated in builtin/pods.py; this module holds the per-kind rules and the
dispatch table.

Deliberate simplification, documented so nobody relies on it: immutable-field errors print a Go struct value as
`core.PodTemplateSpec{...}` (the real message dumps the whole struct with %#v); the field path, reason and
"field is immutable" are exact.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from kaiwo_sandbox.contracts import ApiError, JsonObj
from kaiwo_sandbox.semantics import field_errors as fe
from kaiwo_sandbox.semantics.builtin.apiservices import VALIDATORS as APISERVICE_VALIDATORS
from kaiwo_sandbox.semantics.builtin.pods import (
    PROTOCOLS,
    TAINT_EFFECTS,
    Causes,
    as_dict,
    as_list,
    is_int,
    non_negative,
    quantity,
    quantity_text,
    validate_pod,
    validate_pod_spec,
)
from kaiwo_sandbox.semantics.builtin.rbac import VALIDATORS as RBAC_VALIDATORS
from kaiwo_sandbox.semantics.builtin.webhooks import VALIDATORS as WEBHOOK_VALIDATORS
from kaiwo_sandbox.semantics.metadata import (
    is_dns1035_label,
    is_dns1123_label,
    is_dns1123_subdomain,
    is_label_key,
    is_label_value,
    regex_error,
)
from kaiwo_sandbox.semantics.schema import pattern_error
from kaiwo_sandbox.semantics.selectors import selector_from_dict

SERVICE_TYPES = ["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"]
ACCESS_MODES = ["ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"]

_CONFIG_KEY_FMT = "[-._a-zA-Z0-9]+"
_CONFIG_KEY_RE = re.compile(_CONFIG_KEY_FMT)


def _invalid_struct(field: str, type_name: str, detail: str) -> JsonObj:
    """field.Invalid with a Go struct as the value: printed abbreviated as `core.Type{...}`."""
    return fe.cause(fe.INVALID, field, f"Invalid value: {type_name}{{...}}: {detail}")


def _immutable(field: str, type_name: str, new: Any, old: Any, causes: Causes) -> None:
    if new != old:
        if isinstance(new, dict | list):
            causes.append(_invalid_struct(field, type_name, "field is immutable"))
        else:
            causes.append(fe.invalid(field, new, "field is immutable"))


def _validate_template(obj: JsonObj, causes: Causes, *, restart_policies: list[str] | None = None) -> JsonObj:
    template = as_dict(as_dict(obj.get("spec")).get("template"))
    causes.extend(validate_pod_spec(as_dict(template.get("spec")), "spec.template.spec",
                                    restart_policies=restart_policies))
    return template


def _selector_matches_template(selector: Any, template: JsonObj, causes: Causes) -> None:
    labels = as_dict(as_dict(template.get("metadata")).get("labels"))
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


def _job(obj: JsonObj, old: JsonObj | None) -> Causes:
    causes: Causes = []
    spec = as_dict(obj.get("spec"))
    template = _validate_template(obj, causes, restart_policies=["OnFailure", "Never"])
    restart = as_dict(template.get("spec")).get("restartPolicy")
    if restart not in ("OnFailure", "Never") and not any(c["field"] == "spec.template.spec.restartPolicy"
                                                         for c in causes):
        causes.append(fe.not_supported("spec.template.spec.restartPolicy", restart or "", ["OnFailure", "Never"]))
    for key in ("parallelism", "completions", "backoffLimit", "activeDeadlineSeconds", "ttlSecondsAfterFinished"):
        non_negative(spec.get(key), f"spec.{key}", causes)
    mode = spec.get("completionMode")
    if mode is not None and mode not in ("NonIndexed", "Indexed"):
        causes.append(fe.not_supported("spec.completionMode", mode, ["NonIndexed", "Indexed"]))
    if mode == "Indexed" and not is_int(spec.get("completions")):
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
    spec, old_spec = as_dict(obj.get("spec")), as_dict(old.get("spec"))
    _immutable("spec.selector", "v1.LabelSelector", spec.get("selector"), old_spec.get("selector"), causes)
    for key, type_name in (("completionMode", "batch.CompletionMode"), ("podFailurePolicy", "batch.PodFailurePolicy"),
                           ("backoffLimitPerIndex", "int32"), ("managedBy", "string"),
                           ("successPolicy", "batch.SuccessPolicy")):
        _immutable(f"spec.{key}", type_name, spec.get(key), old_spec.get(key), causes)
    elastic = spec.get("completionMode") == "Indexed" and spec.get("completions") == spec.get("parallelism")
    if not elastic:
        _immutable("spec.completions", "int32", spec.get("completions"), old_spec.get("completions"), causes)
    template, old_template = as_dict(spec.get("template")), as_dict(old_spec.get("template"))
    # Kueue relies on this: a suspended Job that never started may change its scheduling directives.
    if old_spec.get("suspend") is True and not as_dict(old.get("status")).get("startTime"):
        old_template = _with_scheduling_directives(old_template, template)
    _immutable("spec.template", "core.PodTemplateSpec", template, old_template, causes)
    return causes


def _with_scheduling_directives(old_template: JsonObj, template: JsonObj) -> JsonObj:
    merged = dict(old_template)
    merged["metadata"] = {k: v for k, v in as_dict(old_template.get("metadata")).items()
                          if k not in ("labels", "annotations")}
    for key in ("labels", "annotations"):
        if key in as_dict(template.get("metadata")):
            merged["metadata"][key] = as_dict(template.get("metadata"))[key]
    if not merged["metadata"] and "metadata" not in old_template:
        del merged["metadata"]
    spec = dict(as_dict(old_template.get("spec")))
    new_spec = as_dict(template.get("spec"))
    for key in ("nodeSelector", "tolerations", "schedulingGates"):
        spec.pop(key, None)
        if key in new_spec:
            spec[key] = new_spec[key]
    affinity = dict(as_dict(spec.get("affinity")))
    affinity.pop("nodeAffinity", None)
    new_node_affinity = as_dict(new_spec.get("affinity")).get("nodeAffinity")
    if new_node_affinity is not None:
        affinity["nodeAffinity"] = new_node_affinity
    if affinity:
        spec["affinity"] = affinity
    elif "affinity" not in new_spec or not as_dict(new_spec.get("affinity")):
        spec.pop("affinity", None)
        if "affinity" in new_spec:
            spec["affinity"] = new_spec["affinity"]
    merged["spec"] = spec
    return merged


def _deployment(obj: JsonObj, old: JsonObj | None) -> Causes:
    causes: Causes = []
    spec = as_dict(obj.get("spec"))
    template = _validate_template(obj, causes, restart_policies=["Always"])
    non_negative(spec.get("replicas"), "spec.replicas", causes)
    non_negative(spec.get("revisionHistoryLimit"), "spec.revisionHistoryLimit", causes)
    selector = spec.get("selector")
    if selector is None:
        causes.append(fe.required("spec.selector"))
    elif not as_dict(selector).get("matchLabels") and not as_dict(selector).get("matchExpressions"):
        causes.append(_invalid_struct("spec.selector", "v1.LabelSelector", "empty selector is invalid for deployment"))
    else:
        _selector_matches_template(selector, template, causes)
    strategy = as_dict(spec.get("strategy"))
    stype = strategy.get("type")
    if stype is not None and stype not in ("Recreate", "RollingUpdate"):
        causes.append(fe.not_supported("spec.strategy.type", stype, ["Recreate", "RollingUpdate"]))
    if stype == "Recreate" and strategy.get("rollingUpdate") is not None:
        causes.append(fe.forbidden("spec.strategy.rollingUpdate", "may not be specified when strategy `type` is "
                                   "'Recreate'"))
    rolling = as_dict(strategy.get("rollingUpdate"))
    for key in ("maxUnavailable", "maxSurge"):
        _int_or_percent(rolling.get(key), f"spec.strategy.rollingUpdate.{key}", causes)
    unavailable = rolling.get("maxUnavailable")
    if isinstance(unavailable, str) and _PERCENT_RE.fullmatch(unavailable) and int(unavailable[:-1]) > 100:
        causes.append(fe.invalid("spec.strategy.rollingUpdate.maxUnavailable", unavailable,
                                 "must not be greater than 100%"))
    if rolling and _is_zero(rolling.get("maxUnavailable")) and _is_zero(rolling.get("maxSurge")):
        causes.append(fe.invalid("spec.strategy.rollingUpdate.maxUnavailable", rolling.get("maxUnavailable"),
                                 "may not be 0 when `maxSurge` is 0"))
    if old is not None:
        _immutable("spec.selector", "v1.LabelSelector", selector, as_dict(old.get("spec")).get("selector"), causes)
    return causes


_PERCENT_FMT = "[0-9]+%"
_PERCENT_RE = re.compile(_PERCENT_FMT)


def _int_or_percent(value: Any, field: str, causes: Causes) -> None:
    """ValidatePositiveIntOrPercent: a non-negative integer or a percent string."""
    if value is None:
        return
    if isinstance(value, str):
        if not _PERCENT_RE.fullmatch(value):
            causes.append(fe.invalid(field, value, regex_error(
                "a valid percent string must be a numeric string followed by an ending '%'", _PERCENT_FMT,
                "1%", "93%")))
    elif is_int(value):
        non_negative(value, field, causes)


def _is_zero(value: Any) -> bool:
    return value in (0, "0", "0%")


def _replicaset(obj: JsonObj, old: JsonObj | None) -> Causes:
    causes: Causes = []
    template = _validate_template(obj, causes, restart_policies=["Always"])
    spec = as_dict(obj.get("spec"))
    non_negative(spec.get("replicas"), "spec.replicas", causes)
    if spec.get("selector") is None:
        causes.append(fe.required("spec.selector"))
    else:
        _selector_matches_template(spec.get("selector"), template, causes)
    return causes


def _replicationcontroller(obj: JsonObj, old: JsonObj | None) -> Causes:
    """v1 ReplicationController: a plain label map as selector, required (after defaulting from the
    template's labels) and matching them."""
    causes: Causes = []
    template = _validate_template(obj, causes, restart_policies=["Always"])
    spec = as_dict(obj.get("spec"))
    non_negative(spec.get("replicas"), "spec.replicas", causes)
    selector = spec.get("selector")
    if not isinstance(selector, dict) or not selector:
        causes.append(fe.required("spec.selector"))
        return causes
    labels = as_dict(as_dict(template.get("metadata")).get("labels"))
    if any(labels.get(k) != v for k, v in selector.items()):
        shown = "map[string]string{" + ", ".join(f"{fe.go_quote(k)}:{fe.go_quote(str(labels[k]))}"
                                                  for k in sorted(labels)) + "}"
        causes.append(fe.cause(fe.INVALID, "spec.template.metadata.labels",
                               f"Invalid value: {shown}: `selector` does not match template `labels`"))
    return causes


def _daemonset(obj: JsonObj, old: JsonObj | None) -> Causes:
    causes: Causes = []
    template = _validate_template(obj, causes, restart_policies=["Always"])
    spec = as_dict(obj.get("spec"))
    non_negative(spec.get("revisionHistoryLimit"), "spec.revisionHistoryLimit", causes)
    selector = spec.get("selector")
    if selector is None:
        causes.append(fe.required("spec.selector"))
    elif not as_dict(selector).get("matchLabels") and not as_dict(selector).get("matchExpressions"):
        causes.append(_invalid_struct("spec.selector", "v1.LabelSelector", "empty selector is invalid for daemonset"))
    else:
        _selector_matches_template(selector, template, causes)
    if old is not None and as_dict(old.get("spec")).get("selector") != selector:
        causes.append(fe.invalid("spec.selector", selector, "field is immutable"))
    stype = as_dict(spec.get("updateStrategy")).get("type")
    if stype is not None and stype not in ("OnDelete", "RollingUpdate"):
        causes.append(fe.not_supported("spec.updateStrategy.type", stype, ["OnDelete", "RollingUpdate"]))
    return causes


def _service(obj: JsonObj, old: JsonObj | None) -> Causes:
    causes: Causes = []
    spec = as_dict(obj.get("spec"))
    svc_type = spec.get("type", "ClusterIP")
    if svc_type not in SERVICE_TYPES:
        causes.append(fe.not_supported("spec.type", svc_type, SERVICE_TYPES))
    ports = as_list(spec.get("ports"))
    headless = spec.get("clusterIP") == "None"
    if not ports and svc_type != "ExternalName" and not headless:
        causes.append(fe.required("spec.ports"))
    names: set[str] = set()
    for i, port in enumerate(ports):
        port = as_dict(port)
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
        if not is_int(number) or not 1 <= number <= 65535:
            causes.append(fe.invalid(f"{p}.port", number, "must be between 1 and 65535, inclusive"))
        protocol = port.get("protocol", "TCP")
        if protocol not in PROTOCOLS:
            causes.append(fe.not_supported(f"{p}.protocol", protocol, PROTOCOLS))
        target = port.get("targetPort")
        if is_int(target) and not 1 <= target <= 65535:
            causes.append(fe.invalid(f"{p}.targetPort", target, "must be between 1 and 65535, inclusive"))
    if svc_type == "ExternalName":
        external = spec.get("externalName")
        if not external:
            causes.append(fe.required("spec.externalName"))
    for key, value in as_dict(spec.get("selector")).items():
        causes.extend(fe.invalid("spec.selector", key, m) for m in is_label_key(key))
        if isinstance(value, str):
            causes.extend(fe.invalid("spec.selector", value, m) for m in is_label_value(value))
    if old is not None:
        old_spec = as_dict(old.get("spec"))
        old_ip = old_spec.get("clusterIP")
        if old_ip and old_ip != "None" and svc_type != "ExternalName" and spec.get("clusterIP") != old_ip:
            causes.append(fe.invalid("spec.clusterIP", spec.get("clusterIP", ""), "field is immutable"))
    return causes


def _pvc(obj: JsonObj, old: JsonObj | None) -> Causes:
    causes: Causes = []
    spec = as_dict(obj.get("spec"))
    modes = as_list(spec.get("accessModes"))
    if not modes:
        causes.append(fe.required("spec.accessModes", "at least 1 access mode is required"))
    for mode in modes:
        if mode not in ACCESS_MODES:
            causes.append(fe.not_supported("spec.accessModes", mode, ACCESS_MODES))
    storage = as_dict(as_dict(spec.get("resources")).get("requests")).get("storage")
    if storage is None:
        causes.append(fe.required("spec.resources[storage]"))
    elif (q := quantity(storage)) is None or q <= 0:
        causes.append(fe.invalid("spec.resources[storage]", quantity_text(storage), "must be greater than zero"))
    volume_mode = spec.get("volumeMode")
    if volume_mode is not None and volume_mode not in ("Block", "Filesystem"):
        causes.append(fe.not_supported("spec.volumeMode", volume_mode, ["Block", "Filesystem"]))
    if old is not None:
        old_spec = as_dict(old.get("spec"))
        new_cmp, old_cmp = dict(spec), dict(old_spec)
        for cmp in (new_cmp, old_cmp):
            cmp["resources"] = {k: v for k, v in as_dict(cmp.get("resources")).items() if k != "requests"}
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
    for i, taint in enumerate(as_list(as_dict(obj.get("spec")).get("taints"))):
        taint = as_dict(taint)
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
    for key in as_dict(data):
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


MAX_SECRET_SIZE = 1024 * 1024  # core.MaxSecretSize, also the bound of a ConfigMap's data + binaryData


def _decoded_size(value: Any) -> int:
    """The byte length of a []byte value as JSON carries it (base64, padded)."""
    text = str(value or "")
    return len(text) * 3 // 4 - len(text) + len(text.rstrip("="))


def _string_size(value: Any) -> int:
    return len(str(value or "").encode())


def _configmap(obj: JsonObj, old: JsonObj | None) -> Causes:
    causes: Causes = []
    _config_keys(obj.get("data"), "data", causes)
    _config_keys(obj.get("binaryData"), "binaryData", causes)
    total = (sum(_string_size(v) for v in as_dict(obj.get("data")).values())
             + sum(_decoded_size(v) for v in as_dict(obj.get("binaryData")).values()))
    if total > MAX_SECRET_SIZE:
        causes.append(fe.too_long("[]", MAX_SECRET_SIZE))  # field.NewPath(""): the whole object
    for key in set(as_dict(obj.get("data"))) & set(as_dict(obj.get("binaryData"))):
        causes.append(fe.invalid(f"data[{key}]", key, "duplicate of key present in binaryData"))
    if old is not None and old.get("immutable") is True:
        for key in ("data", "binaryData"):
            if obj.get(key) != old.get(key):
                causes.append(fe.forbidden(key, "field is immutable when `immutable` is set"))
    return causes


def _secret(obj: JsonObj, old: JsonObj | None) -> Causes:
    causes: Causes = []
    _config_keys(obj.get("data"), "data", causes)
    if sum(_decoded_size(v) for v in as_dict(obj.get("data")).values()) > MAX_SECRET_SIZE:
        causes.append(fe.too_long("data", MAX_SECRET_SIZE))
    if old is not None and obj.get("type") != old.get("type"):
        causes.append(fe.cause(fe.INVALID, "type", f"Invalid value: {fe.go_value(obj.get('type'))}: "
                               "field is immutable"))
    return causes


def _priorityclass(obj: JsonObj, old: JsonObj | None) -> Causes:
    causes: Causes = []
    value = obj.get("value")
    name = str(as_dict(obj.get("metadata")).get("name", ""))
    if is_int(value) and value > 1_000_000_000 and not name.startswith("system-"):
        causes.append(fe.forbidden("value", "maximum allowed value of a user defined priority is 1000000000"))
    policy = obj.get("preemptionPolicy")
    if policy is not None and policy not in ("Never", "PreemptLowerPriority"):
        causes.append(fe.not_supported("preemptionPolicy", policy, ["Never", "PreemptLowerPriority"]))
    if old is not None and value != old.get("value"):
        causes.append(fe.forbidden("value", "may not be changed in an update."))
    return causes


def _crd(obj: JsonObj, old: JsonObj | None) -> Causes:
    causes: Causes = []
    spec = as_dict(obj.get("spec"))
    names = as_dict(spec.get("names"))
    group, plural = str(spec.get("group") or ""), str(names.get("plural") or "")
    name = str(as_dict(obj.get("metadata")).get("name") or "")
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
    versions = [as_dict(v) for v in as_list(spec.get("versions"))]
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
        schema = as_dict(v.get("schema")).get("openAPIV3Schema")
        path = f"spec.versions[{i}].schema.openAPIV3Schema"
        if not isinstance(schema, dict):
            causes.append(fe.required(path, "schemas are required"))
            continue
        if schema.get("type") != "object":
            causes.append(fe.not_supported(f"{path}.type", schema.get("type") or "", ["object"]))
        _structural(schema, path, causes)
    if old is not None:
        old_spec = as_dict(old.get("spec"))
        _immutable("spec.group", "string", spec.get("group"), old_spec.get("group"), causes)
        _immutable("spec.names.plural", "string", names.get("plural"), as_dict(old_spec.get("names")).get("plural"),
                   causes)
    return causes


_SCHEMA_TYPES = ["array", "boolean", "integer", "number", "object", "string"]


def _structural(schema: JsonObj, path: str, causes: Causes) -> None:
    """The structural-schema rules that matter for serving: every specified field has a type (unless it
    preserves unknown fields or is int-or-string), and the type is a known one."""
    for key, prop in as_dict(schema.get("properties")).items():
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
    pattern = node.get("pattern")
    if isinstance(pattern, str):
        problem = pattern_error(pattern)
        if problem is not None:  # Go's regexp.Compile would fail (backreferences, lookaround, ...)
            causes.append(fe.invalid(f"{path}.pattern", pattern,
                                     f"must be a valid regular expression, but isn't: error parsing regexp: {problem}"))
    _structural(node, path, causes)


def _namespace(obj: JsonObj, old: JsonObj | None) -> Causes:
    causes: Causes = []
    for i, finalizer in enumerate(as_list(as_dict(obj.get("spec")).get("finalizers"))):
        if isinstance(finalizer, str):
            causes.extend(fe.invalid(f"spec.finalizers[{i}]", finalizer, m) for m in is_label_key(finalizer))
    return causes


def _lease(obj: JsonObj, old: JsonObj | None) -> Causes:
    causes: Causes = []
    spec = as_dict(obj.get("spec"))
    duration = spec.get("leaseDurationSeconds")
    if is_int(duration) and duration <= 0:
        causes.append(fe.invalid("spec.leaseDurationSeconds", duration, "must be greater than 0"))
    non_negative(spec.get("leaseTransitions"), "spec.leaseTransitions", causes)
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
    namespace = str(as_dict(ev.get("metadata")).get("namespace") or "")
    involved_ns = str(as_dict(ev.get("involvedObject")).get("namespace") or "")
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
        if not is_int(count) or count < 2:
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
    source = as_dict(ev.get("source"))
    if source.get("component") or source.get("host"):
        causes.append(fe.invalid("deprecatedSource", "", "needs to be unset"))
    return causes


def _event(obj: JsonObj, old: JsonObj | None) -> Causes:
    return _event_causes(obj, events_v1=False) if old is None else []


def _event_v1(obj: JsonObj, old: JsonObj | None) -> Causes:
    return _event_causes(obj, events_v1=True) if old is None else []


_VALIDATORS: dict[tuple[str, str], Callable[[JsonObj, JsonObj | None], Causes]] = {
    ("", "Pod"): validate_pod,
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
    ("", "ReplicationController"): _replicationcontroller,
    ("apps", "DaemonSet"): _daemonset,
    ("batch", "Job"): _job,
    ("coordination.k8s.io", "Lease"): _lease,
    ("scheduling.k8s.io", "PriorityClass"): _priorityclass,
    ("apiextensions.k8s.io", "CustomResourceDefinition"): _crd,
}


_VALIDATORS.update(RBAC_VALIDATORS)
_VALIDATORS.update(WEBHOOK_VALIDATORS)
_VALIDATORS.update(APISERVICE_VALIDATORS)


def validate_builtin(group: str, kind: str, obj: JsonObj, old: JsonObj | None) -> list[JsonObj]:
    """Status causes for what the kind's validation rejects; `old` is the stored object on update."""
    validator = _VALIDATORS.get((group, kind))
    if validator is None:
        return []
    return validator(obj, old)


__all__ = ["validate_builtin", "validate_pod_spec"]
