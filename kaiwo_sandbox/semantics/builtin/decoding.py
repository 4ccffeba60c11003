"""Typed decoding of built-in kinds: the apiserver unmarshals a body into Go structs before it defaults or
validates it, so a wrongly typed field (ConfigMap `data` given as a list, `resources.limits: "x"`) is a
400 BadRequest naming the Go field, never a stored object. CRs have no Go types (their schema decides,
422), so only built-in kinds are checked, and only the fields declared below: the ones users and
generators get wrong in practice, not all of Kubernetes' types.

A type is a Go type name ("string", "int32", "bool", "map[string]string", "v1.ResourceList", ...), a
`Struct` (name and fields) or a `Slice` of one of those.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from kaiwo_sandbox.contracts import ApiError, JsonObj
from kaiwo_sandbox.semantics.field_errors import go_json_kind


@dataclass(frozen=True, slots=True)
class Struct:
    name: str
    fields: dict[str, GoType]


@dataclass(frozen=True, slots=True)
class Slice:
    item: GoType


GoType = str | Struct | Slice


class Fail(Protocol):
    def __call__(self, json_kind: str, struct: str, path: str, go_name: str) -> None: ...

_STRING_MAP = "map[string]string"
_BYTES_MAP = "map[string][]uint8"
_INTS = {"int32", "int64"}
# Map types and the Go type of their values ([]uint8 decodes from a base64 JSON string).
_MAP_VALUES = {_STRING_MAP: "string", _BYTES_MAP: "string", "v1.ResourceList": "resource.Quantity"}

_RESOURCES = Struct("ResourceRequirements", {"limits": "v1.ResourceList", "requests": "v1.ResourceList"})
_ENV_VAR = Struct("EnvVar", {"name": "string", "value": "string"})
_CONTAINER_PORT = Struct("ContainerPort", {"name": "string", "containerPort": "int32", "hostPort": "int32",
                                           "protocol": "v1.Protocol"})
_CONTAINER = Struct("Container", {
    "name": "string", "image": "string", "command": Slice("string"), "args": Slice("string"),
    "workingDir": "string", "env": Slice(_ENV_VAR), "ports": Slice(_CONTAINER_PORT), "resources": _RESOURCES,
    "imagePullPolicy": "v1.PullPolicy",
})
_POD_SPEC = Struct("PodSpec", {
    "containers": Slice(_CONTAINER), "initContainers": Slice(_CONTAINER), "restartPolicy": "v1.RestartPolicy",
    "nodeSelector": _STRING_MAP, "nodeName": "string", "serviceAccountName": "string",
    "schedulerName": "string", "priorityClassName": "string", "terminationGracePeriodSeconds": "int64",
    "volumes": Slice(Struct("Volume", {"name": "string"})),
    "tolerations": Slice(Struct("Toleration", {"key": "string", "value": "string"})),
})
_TEMPLATE = Struct("PodTemplateSpec", {"metadata": Struct("ObjectMeta", {}), "spec": _POD_SPEC})

_KINDS: dict[tuple[str, str], Struct] = {
    ("", "ConfigMap"): Struct("ConfigMap", {"data": _STRING_MAP, "binaryData": _BYTES_MAP, "immutable": "bool"}),
    ("", "Secret"): Struct("Secret", {"data": _BYTES_MAP, "stringData": _STRING_MAP, "type": "v1.SecretType",
                                      "immutable": "bool"}),
    ("", "Pod"): Struct("Pod", {"spec": _POD_SPEC}),
    ("", "Service"): Struct("Service", {"spec": Struct("ServiceSpec", {
        "selector": _STRING_MAP, "type": "v1.ServiceType",
        "ports": Slice(Struct("ServicePort", {"name": "string", "port": "int32", "protocol": "v1.Protocol"})),
    })}),
    ("batch", "Job"): Struct("Job", {"spec": Struct("JobSpec", {
        "parallelism": "int32", "completions": "int32", "backoffLimit": "int32", "suspend": "bool",
        "activeDeadlineSeconds": "int64", "ttlSecondsAfterFinished": "int32", "template": _TEMPLATE,
    })}),
    ("apps", "Deployment"): Struct("Deployment", {"spec": Struct("DeploymentSpec", {
        "replicas": "int32", "paused": "bool", "template": _TEMPLATE,
    })}),
}


def _go_name(go_type: GoType) -> str:
    if isinstance(go_type, Struct):
        return f"v1.{go_type.name}"
    if isinstance(go_type, Slice):
        return f"[]{_go_name(go_type.item)}"
    return go_type


def _scalar_fits(value: Any, go_type: str) -> bool:
    if go_type == "bool":
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if go_type in _INTS:
        return isinstance(value, int)
    if go_type == "resource.Quantity":  # decodes from a JSON string or number
        return isinstance(value, str | int | float)
    return isinstance(value, str)  # string and the named string types (v1.Protocol, ...)


def _scalar_mismatch(value: Any, go_type: str) -> str:
    if go_type in _INTS and isinstance(value, float):
        return f"number {value!r}"  # Go names the literal: "number 1.5"
    return go_json_kind(value)


def _check(value: Any, go_type: GoType, struct: str, path: str, fail: Fail) -> None:
    if value is None:
        return  # null decodes to the zero value
    if isinstance(go_type, Struct):
        if not isinstance(value, dict):
            fail(go_json_kind(value), struct, path, _go_name(go_type))
            return
        for key, field_type in go_type.fields.items():
            if key in value:
                _check(value[key], field_type, go_type.name, f"{path}.{key}" if path else key, fail)
    elif isinstance(go_type, Slice):
        if not isinstance(value, list):
            fail(go_json_kind(value), struct, path, _go_name(go_type))
            return
        for item in value:
            _check(item, go_type.item, struct, path, fail)
    elif go_type in _MAP_VALUES:
        if not isinstance(value, dict):
            fail(go_json_kind(value), struct, path, go_type)
            return
        item_type = _MAP_VALUES[go_type]
        for item in value.values():
            if item is not None and not _scalar_fits(item, item_type):
                fail(_scalar_mismatch(item, item_type), struct, path, item_type)
    elif not _scalar_fits(value, go_type):
        fail(_scalar_mismatch(value, go_type), struct, path, go_type)


def check_builtin_types(group: str, kind: str, version: str, obj: JsonObj) -> None:
    """Raise ApiError 400 for the first field typed decoding would refuse, with the apiserver's message."""
    root = _KINDS.get((group, kind))
    if root is None:
        return

    def fail(json_kind: str, struct: str, path: str, go_name: str) -> None:
        raise ApiError.bad_request(f'{kind} in version "{version}" cannot be handled as a {kind}: json: cannot '
                                   f"unmarshal {json_kind} into Go struct field {struct}.{path} of type {go_name}")

    _check(obj, root, kind, "", fail)


__all__ = ["GoType", "Slice", "Struct", "check_builtin_types"]
