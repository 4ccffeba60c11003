"""ObjectMeta validation and the name/label syntax checks behind it, worded as the apiserver words them
(k8s.io/apimachinery/pkg/api/validation and .../util/validation, paraphrased).

The `is_*` checks return lists of messages (empty when valid) like their Go counterparts, so callers can
attach them to whichever field path they validate.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from kaiwo_sandbox.contracts import ApiError, JsonObj
from kaiwo_sandbox.semantics import field_errors as fe


def regex_error(msg: str, fmt: str, *examples: str) -> str:
    """validation.RegexError: the examples are joined with the apiserver's odd double space."""
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{msg} (e.g. {shown}regex used for validation is '{fmt}')"


def max_len_error(length: int) -> str:
    return f"must be no more than {length} characters"


EMPTY_ERROR = "must be non-empty"

_LABEL_KEY_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_KEY_MSG = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
_LABEL_KEY_RE = re.compile(f"^{_LABEL_KEY_FMT}$")
_LABEL_VALUE_FMT = f"({_LABEL_KEY_FMT})?"
_LABEL_VALUE_MSG = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
                    "and must start and end with an alphanumeric character")
_LABEL_VALUE_RE = re.compile(f"^{_LABEL_VALUE_FMT}$")

_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
                      "and must start and end with an alphanumeric character")
_DNS1123_LABEL_RE = re.compile(f"^{_DNS1123_LABEL_FMT}$")
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + "(\\." + _DNS1123_LABEL_FMT + ")*"
_DNS1123_SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
                          "'.', and must start and end with an alphanumeric character")
_DNS1123_SUBDOMAIN_RE = re.compile(f"^{_DNS1123_SUBDOMAIN_FMT}$")
_DNS1035_LABEL_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
_DNS1035_LABEL_MSG = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
                      "alphabetic character, and end with an alphanumeric character")
_DNS1035_LABEL_RE = re.compile(f"^{_DNS1035_LABEL_FMT}$")

TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024


def is_dns1123_subdomain(value: str) -> list[str]:
    return list(_is_dns1123_subdomain(value))


@lru_cache(maxsize=4096)
def _is_dns1123_subdomain(value: str) -> tuple[str, ...]:
    return tuple(_is_dns1123_subdomain_uncached(value))


def _is_dns1123_subdomain_uncached(value: str) -> list[str]:
    errs: list[str] = []
    if len(value) > 253:
        errs.append(max_len_error(253))
    if not _DNS1123_SUBDOMAIN_RE.match(value):
        errs.append(regex_error(_DNS1123_SUBDOMAIN_MSG, _DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


def is_dns1123_label(value: str) -> list[str]:
    return list(_is_dns1123_label(value))


@lru_cache(maxsize=4096)
def _is_dns1123_label(value: str) -> tuple[str, ...]:
    return tuple(_is_dns1123_label_uncached(value))


def _is_dns1123_label_uncached(value: str) -> list[str]:
    errs: list[str] = []
    if len(value) > 63:
        errs.append(max_len_error(63))
    if not _DNS1123_LABEL_RE.match(value):
        if _DNS1123_SUBDOMAIN_RE.match(value):
            errs.append("must not contain dots")
        else:
            errs.append(regex_error(_DNS1123_LABEL_MSG, _DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return errs


def is_dns1035_label(value: str) -> list[str]:
    return list(_is_dns1035_label(value))


@lru_cache(maxsize=4096)
def _is_dns1035_label(value: str) -> tuple[str, ...]:
    return tuple(_is_dns1035_label_uncached(value))


def _is_dns1035_label_uncached(value: str) -> list[str]:
    errs: list[str] = []
    if len(value) > 63:
        errs.append(max_len_error(63))
    if not _DNS1035_LABEL_RE.match(value):
        errs.append(regex_error(_DNS1035_LABEL_MSG, _DNS1035_LABEL_FMT, "my-name", "abc-123"))
    return errs


def is_label_key(value: str) -> list[str]:
    return list(_is_label_key(value))


@lru_cache(maxsize=4096)
def _is_label_key(value: str) -> tuple[str, ...]:
    return tuple(_is_label_key_uncached(value))


def _is_label_key_uncached(value: str) -> list[str]:
    """A qualified name: optional DNS-subdomain prefix and '/', then a 63-character name."""
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part " + EMPTY_ERROR)
        else:
            errs.extend("prefix part " + m for m in is_dns1123_subdomain(prefix))
    else:
        return [
            "a valid label key " + regex_error(_LABEL_KEY_MSG, _LABEL_KEY_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errs.append("name part " + EMPTY_ERROR)
    elif len(name) > 63:
        errs.append("name part " + max_len_error(63))
    if not _LABEL_KEY_RE.match(name):
        errs.append("name part " + regex_error(_LABEL_KEY_MSG, _LABEL_KEY_FMT, "MyName", "my.name", "123-abc"))
    return errs


def is_label_value(value: str) -> list[str]:
    return list(_is_label_value(value))


@lru_cache(maxsize=4096)
def _is_label_value(value: str) -> tuple[str, ...]:
    return tuple(_is_label_value_uncached(value))


def _is_label_value_uncached(value: str) -> list[str]:
    errs: list[str] = []
    if len(value) > 63:
        errs.append(max_len_error(63))
    if not _LABEL_VALUE_RE.match(value):
        errs.append(regex_error(_LABEL_VALUE_MSG, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return errs


def is_path_segment_name(value: str, *, prefix: bool = False) -> list[str]:
    """path.IsValidPathSegmentName: the only rule for kinds whose names are free-form (RBAC roles)."""
    errs: list[str] = []
    if not prefix and value in (".", ".."):
        errs.append(f"may not be '{value}'")
    for bad in ("/", "%"):
        if bad in value:
            errs.append(f"may not contain '{bad}'")
    return errs


# Kinds whose name rule differs from the default DNS-1123 subdomain.
_DNS_LABEL_NAMED = frozenset({"Namespace"})
_DNS1035_NAMED = frozenset({"Service"})
_PATH_SEGMENT_NAMED = frozenset({"Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"})


def name_messages(kind: str, name: str, *, prefix: bool = False) -> list[str]:
    """What the kind's name rule says about `name`. With prefix (generateName), a trailing dash is allowed."""
    if kind in _PATH_SEGMENT_NAMED:
        return is_path_segment_name(name, prefix=prefix)
    if prefix and name.endswith("-"):
        name = name[:-1]
    if kind in _DNS_LABEL_NAMED:
        return is_dns1123_label(name)
    if kind in _DNS1035_NAMED:
        return is_dns1035_label(name)
    return is_dns1123_subdomain(name)


def _add_invalid(causes: list[JsonObj], field: str, value: str, messages: tuple[str, ...]) -> None:
    """One Invalid cause per message. The messages come cached and are almost always none: a plain
    loop over an empty tuple builds nothing (a generator passed to extend() would, on every field)."""
    for message in messages:
        causes.append(fe.invalid(field, value, message))


def validate_labels(labels: Any, field: str) -> list[JsonObj]:
    causes: list[JsonObj] = []
    if not isinstance(labels, dict):
        return causes
    for key in sorted(labels):
        value = labels[key]
        _add_invalid(causes, field, key, _is_label_key(key))
        if isinstance(value, str):
            _add_invalid(causes, field, value, _is_label_value(value))
    return causes


def validate_annotations(annotations: Any, field: str) -> list[JsonObj]:
    causes: list[JsonObj] = []
    if not isinstance(annotations, dict):
        return causes
    total = 0
    for key in sorted(annotations):
        value = annotations[key]
        _add_invalid(causes, field, key, _is_label_key(key.lower()))
        total += len(key) + (len(value) if isinstance(value, str) else 0)
    if total > TOTAL_ANNOTATION_SIZE_LIMIT:
        causes.append(fe.too_long(field, TOTAL_ANNOTATION_SIZE_LIMIT))
    return causes


def _validate_owner_references(refs: Any, field: str) -> list[JsonObj]:
    causes: list[JsonObj] = []
    if not isinstance(refs, list):
        return causes
    controllers: list[str] = []
    for ref in refs:
        if not isinstance(ref, dict):
            continue
        api_version = str(ref.get("apiVersion") or "")
        version = api_version.rsplit("/", 1)[-1] if api_version else ""
        if not version:
            causes.append(fe.invalid(f"{field}.apiVersion", api_version, "version must not be empty"))
        for key in ("kind", "name", "uid"):
            value = str(ref.get(key) or "")
            if not value:
                causes.append(fe.invalid(f"{field}.{key}", value, f"{key} must not be empty"))
        if ref.get("controller") is True:
            controllers.append(f"{ref.get('kind', '')}/{ref.get('name', '')}")
    if len(controllers) > 1:
        causes.append(fe.cause(
            fe.INVALID, field,
            "Invalid value: []v1.OwnerReference{...}: Only one reference can have Controller set to true. "
            f"Found \"true\" in references for {controllers[0]} and {controllers[1]}",
        ))
    return causes


# ObjectMeta fields whose JSON type typed decoding enforces, with their Go types.
_META_TYPES: dict[str, tuple[type, str]] = {
    "name": (str, "string"), "generateName": (str, "string"), "namespace": (str, "string"),
    "labels": (dict, "map[string]string"), "annotations": (dict, "map[string]string"),
    "finalizers": (list, "[]string"), "ownerReferences": (list, "[]v1.OwnerReference"),
}


def _check_meta_types(obj: JsonObj, meta: JsonObj, kind: str) -> None:
    """Typed decoding fails before validation: a 400 naming the Go field, like the apiserver's decoder."""
    api_version = str(obj.get("apiVersion") or "")
    version = api_version.rsplit("/", 1)[-1]
    prefix = f'{kind} in version "{version}" cannot be handled as a {kind}: json: cannot unmarshal'
    for key, (py_type, go_type) in _META_TYPES.items():
        value = meta.get(key)
        if value is None:
            continue
        if not isinstance(value, py_type):
            raise ApiError.bad_request(f"{prefix} {fe.go_json_kind(value)} into Go struct field "
                                       f"ObjectMeta.metadata.{key} of type {go_type}")
        if isinstance(value, dict):
            for item in value.values():
                if item is not None and not isinstance(item, str):
                    raise ApiError.bad_request(f"{prefix} {fe.go_json_kind(item)} into Go struct field "
                                               f"ObjectMeta.metadata.{key} of type string")
        elif go_type == "[]string" and isinstance(value, list):
            for item in value:
                if not isinstance(item, str):
                    raise ApiError.bad_request(f"{prefix} {fe.go_json_kind(item)} into Go struct field "
                                               f"ObjectMeta.metadata.{key} of type string")


def validate_object_meta(obj: JsonObj, *, namespaced: bool, kind: str) -> list[JsonObj]:
    """metav1.ObjectMeta rules for a create or update. The store fills a generated name before calling,
    so a missing name means neither name nor generateName was given. Wrongly typed fields (labels that
    are not strings, ...) raise ApiError 400, as typed decoding does before any validation."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        meta = {}
    _check_meta_types(obj, meta, kind)
    causes: list[JsonObj] = []
    generate_name = meta.get("generateName")
    if isinstance(generate_name, str) and generate_name:
        causes.extend(fe.invalid("metadata.generateName", generate_name, m)
                      for m in name_messages(kind, generate_name, prefix=True))
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        causes.append(fe.required("metadata.name", "name or generateName is required"))
    else:
        causes.extend(fe.invalid("metadata.name", name, m) for m in name_messages(kind, name))
    namespace = meta.get("namespace")
    if namespaced:
        if not isinstance(namespace, str) or not namespace:
            causes.append(fe.required("metadata.namespace"))
        else:
            causes.extend(fe.invalid("metadata.namespace", namespace, m) for m in is_dns1123_label(namespace))
    elif namespace:
        causes.append(fe.forbidden("metadata.namespace", "not allowed on this type"))
    generation = meta.get("generation")
    if isinstance(generation, int) and generation < 0:
        causes.append(fe.invalid("metadata.generation", generation, "must be greater than or equal to 0"))
    causes.extend(validate_labels(meta.get("labels"), "metadata.labels"))
    causes.extend(validate_annotations(meta.get("annotations"), "metadata.annotations"))
    causes.extend(_validate_owner_references(meta.get("ownerReferences"), "metadata.ownerReferences"))
    finalizers = meta.get("finalizers")
    if isinstance(finalizers, list):
        for finalizer in finalizers:
            if isinstance(finalizer, str):
                _add_invalid(causes, "metadata.finalizers", finalizer, _is_label_key(finalizer))
    return causes
