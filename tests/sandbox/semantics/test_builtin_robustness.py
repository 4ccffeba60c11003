"""Malformed objects must produce causes or ApiErrors, never crash the pure modules."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kaiwo_sandbox.apiserver.tables import to_table
from kaiwo_sandbox.contracts import ApiError
from kaiwo_sandbox.semantics.builtin.decoding import check_builtin_types
from kaiwo_sandbox.semantics.builtin.defaults import apply_builtin_defaults
from kaiwo_sandbox.semantics.builtin.validation import validate_builtin
from kaiwo_sandbox.semantics.metadata import validate_object_meta
from kaiwo_sandbox.semantics.schema import apply_defaults, prune, validate
from kaiwo_sandbox.semantics.selectors import parse_field_selector, parse_label_selector, selector_from_dict

KINDS = [("", "Pod"), ("batch", "Job"), ("apps", "Deployment"), ("apps", "ReplicaSet"), ("", "Service"),
         ("", "PersistentVolumeClaim"), ("", "Node"), ("", "Namespace"), ("", "ConfigMap"), ("", "Secret"),
         ("", "Event"), ("coordination.k8s.io", "Lease"), ("scheduling.k8s.io", "PriorityClass"),
         ("apiextensions.k8s.io", "CustomResourceDefinition"), ("events.k8s.io", "Event")]

_json = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 70000) | st.floats(allow_nan=False, width=32) | st.text(max_size=6),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(
        st.sampled_from(["spec", "status", "metadata", "containers", "template", "name", "image", "labels",
                         "resources", "limits", "requests", "ports", "selector", "matchLabels", "x", "type",
                         "conditions", "replicas", "data", "taints", "versions", "names", "volumes"]),
        children, max_size=4),
    max_leaves=20,
)


@given(st.sampled_from(KINDS), st.dictionaries(st.sampled_from(["metadata", "spec", "status", "data", "type"]),
                                                _json, max_size=4))
def test_builtin_modules_never_crash(kind: tuple[str, str], obj: dict[str, Any]) -> None:
    group, name = kind
    try:
        check_builtin_types(group, name, "v1", obj)
    except ApiError as err:
        assert err.code == 400 and "cannot unmarshal" in err.message
    defaulted = apply_builtin_defaults(group, name, obj)
    validate_builtin(group, name, defaulted, None)
    validate_builtin(group, name, defaulted, obj)
    try:
        validate_object_meta(defaulted, namespaced=True, kind=name)
    except ApiError as err:
        assert err.code == 400
    to_table([defaulted], kind=name, group=group, printer_columns=None, now=datetime.now(UTC))


_NAMES = st.sampled_from(["spec", "status", "metadata", "name", "x", "items", "replicas", "labels"])
_TYPES = st.sampled_from(["object", "array", "string", "integer", "number", "boolean"])
_NUMBER = st.integers(-5, 70000) | st.floats(-5, 70000, allow_nan=False, width=32)
_COUNT = st.integers(0, 5)
_SCALAR_KEYWORDS: dict[str, st.SearchStrategy[Any]] = {
    "type": _TYPES, "nullable": st.booleans(), "default": _json, "enum": st.lists(_json, max_size=3),
    "format": st.sampled_from(["int32", "int64", "date-time", "uuid", "byte", "quantity", "junk"]),
    "pattern": st.sampled_from(["^a", "[0-9]+", "^[a-z]([-a-z0-9]*[a-z0-9])?$", ""]),
    "minimum": _NUMBER, "maximum": _NUMBER, "exclusiveMinimum": st.booleans(), "exclusiveMaximum": st.booleans(),
    "multipleOf": st.integers(1, 7), "minLength": _COUNT, "maxLength": _COUNT, "minItems": _COUNT,
    "maxItems": _COUNT, "minProperties": _COUNT, "maxProperties": _COUNT, "required": st.lists(_NAMES, max_size=3),
    "x-kubernetes-preserve-unknown-fields": st.booleans(), "x-kubernetes-int-or-string": st.booleans(),
    "x-kubernetes-embedded-resource": st.booleans(),
    "x-kubernetes-list-type": st.sampled_from(["atomic", "set", "map"]),
    "x-kubernetes-list-map-keys": st.lists(_NAMES, max_size=2),
}


def _with_keywords(children: st.SearchStrategy[Any] | None) -> st.SearchStrategy[dict[str, Any]]:
    """A structural schema node: any of the OpenAPI keywords the sandbox reads, nested ones
    (schemas in `children`) included unless this is a leaf."""
    nested: dict[str, st.SearchStrategy[Any]] = {} if children is None else {
        "properties": st.dictionaries(_NAMES, children, max_size=3), "items": children,
        "additionalProperties": st.booleans() | children, "not": children,
        "allOf": st.lists(children, max_size=2), "anyOf": st.lists(children, max_size=2),
        "oneOf": st.lists(children, max_size=2),
    }
    keywords = {**_SCALAR_KEYWORDS, **nested}
    return st.lists(st.sampled_from(sorted(keywords)), max_size=5, unique=True).flatmap(
        lambda chosen: st.fixed_dictionaries({k: keywords[k] for k in chosen}))


_schema = st.recursive(_with_keywords(None), _with_keywords, max_leaves=8)


@given(_schema, st.dictionaries(_NAMES, _json, max_size=4))
def test_schema_functions_never_crash(schema: dict[str, Any], obj: dict[str, Any]) -> None:
    validate(schema, prune(schema, apply_defaults(schema, obj)))


@given(st.text(alphabet="ab=!,() in notin<>x-/.", max_size=20))
def test_selector_parsers_only_raise_api_errors(text: str) -> None:
    for parse in (parse_label_selector, lambda s: parse_field_selector(s, kind="Pod")):
        try:
            parse(text)
        except ApiError as err:
            assert err.code == 400


@pytest.mark.parametrize("bad", [{"matchLabels": "x"}, {"matchExpressions": ["x"]}, {"matchExpressions": [{}]}])
def test_malformed_selector_dicts(bad: dict[str, Any]) -> None:
    with pytest.raises(ApiError):
        selector_from_dict(bad)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(value, dict):
        for k, v in value.items():
            out.extend(_paths(v, (*prefix, k)))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out.extend(_paths(v, (*prefix, i)))
    return out


def _replace(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: _replace(value[head], rest, new)}
    copied = list(value)
    copied[head] = _replace(copied[head], rest, new)
    return copied


SAMPLES: list[tuple[str, str, dict[str, Any]]] = [
    ("", "Pod", {"metadata": {"name": "p", "namespace": "d", "labels": {"a": "b"}, "ownerReferences": [
        {"apiVersion": "v1", "kind": "X", "name": "x", "uid": "u", "controller": True}]},
                 "spec": {"containers": [{"name": "c", "image": "x", "ports": [{"containerPort": 80}],
                                          "env": [{"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "x"}}}],
                                          "resources": {"limits": {"cpu": "1"}, "requests": {"cpu": "1"}},
                                          "volumeMounts": [{"name": "v", "mountPath": "/v"}],
                                          "readinessProbe": {"httpGet": {"port": 1}}}],
                          "volumes": [{"name": "v", "configMap": {"name": "c"}}],
                          "tolerations": [{"key": "k", "operator": "Exists"}], "nodeSelector": {"a": "b"},
                          "readinessGates": [{"conditionType": "X"}]},
                 "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}],
                            "containerStatuses": [{"name": "c", "ready": True, "restartCount": 1,
                                                   "state": {"running": {}},
                                                   "lastState": {"terminated": {"finishedAt": "2026-01-01T00:00:00Z"}}}],
                            "initContainerStatuses": [{"name": "i", "state": {"waiting": {"reason": "X"}}}],
                            "podIPs": [{"ip": "1.2.3.4"}]}}),
    ("batch", "Job", {"metadata": {"name": "j", "uid": "u"},
                      "spec": {"suspend": True, "selector": {"matchLabels": {"a": "b"},
                                                             "matchExpressions": [{"key": "a", "operator": "In",
                                                                                   "values": ["b"]}]},
                               "template": {"metadata": {"labels": {"a": "b"}},
                                            "spec": {"restartPolicy": "Never",
                                                     "containers": [{"name": "c", "image": "x"}]}},
                               "podFailurePolicy": {"rules": [{"onPodConditions": [{"type": "X"}]}]}},
                      "status": {"startTime": "2026-01-01T00:00:00Z", "conditions": [{"type": "Complete",
                                                                                      "status": "True"}]}}),
    ("", "Service", {"metadata": {"name": "s"}, "spec": {"type": "LoadBalancer", "ports": [{"port": 80}],
                                                         "selector": {"a": "b"}},
                     "status": {"loadBalancer": {"ingress": [{"ip": "1.1.1.1"}]}}}),
    ("", "Node", {"metadata": {"name": "n", "labels": {"node-role.kubernetes.io/x": ""}},
                  "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]},
                  "status": {"capacity": {"cpu": "1"}, "conditions": [{"type": "Ready", "status": "True"}],
                             "addresses": [{"type": "InternalIP", "address": "1"}], "nodeInfo": {}}}),
    ("", "Event", {"metadata": {"name": "e"}, "involvedObject": {"kind": "Pod", "name": "p"},
                   "source": {"component": "x"}, "series": {"count": 2}}),
    ("", "PersistentVolumeClaim", {"metadata": {"name": "c"}, "spec": {"accessModes": ["ReadWriteOnce"],
                                                                        "resources": {"requests": {"storage": "1Gi"}},
                                                                        "volumeName": "v"},
                                   "status": {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}}}),
    ("apiextensions.k8s.io", "CustomResourceDefinition", {
        "metadata": {"name": "ws.x.io"}, "spec": {"group": "x.io", "scope": "Namespaced",
                                                  "names": {"plural": "ws", "kind": "W"},
                                                  "versions": [{"name": "v1", "storage": True}],
                                                  "conversion": {"webhook": {"clientConfig": {"service": {}}}}}}),
]

NASTY: list[Any] = [None, 1, "x", [], {}, [1], True]


@pytest.mark.parametrize(("group", "kind", "sample"), SAMPLES)
def test_every_field_replaced_by_garbage_is_handled(group: str, kind: str, sample: dict[str, Any]) -> None:
    now = datetime.now(UTC)
    for path in _paths(sample):
        for garbage in NASTY:
            obj = _replace(sample, path, garbage)
            try:
                defaulted = apply_builtin_defaults(group, kind, obj)
                validate_builtin(group, kind, defaulted, sample)
                validate_builtin(group, kind, defaulted, None)
                validate_object_meta(defaulted, namespaced=True, kind=kind)
                to_table([defaulted], kind=kind, group=group, printer_columns=None, now=now)
            except ApiError:
                pass
            except Exception as err:  # pragma: no cover - the assertion message is the point
                raise AssertionError(f"{kind} with {path}={garbage!r} crashed: {err!r}") from err


SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20}}},
        "spec": {"type": "object", "required": ["vendor"], "properties": {
            "gpus": {"type": "integer", "minimum": 0, "maximum": 8, "multipleOf": 1, "default": 0},
            "vendor": {"type": "string", "enum": ["amd", "nvidia"], "pattern": "^[a-z]+$", "minLength": 1},
            "size": {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}],
                     "oneOf": [{"type": "string"}, {"type": "integer"}], "not": {"type": "boolean"}},
            "tags": {"type": "array", "items": {"type": "string", "format": "date-time"},
                     "x-kubernetes-list-type": "set", "maxItems": 3, "minItems": 1},
            "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                      "items": {"type": "object", "properties": {"name": {"type": "string"},
                                                                 "port": {"type": "integer", "default": 1}}}},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}, "maxProperties": 2,
                       "minProperties": 1},
            "storage": {"type": "object", "default": {}, "nullable": True,
                        "properties": {"size": {"type": "string", "default": "1Gi"}}},
            "template": {"type": "object", "x-kubernetes-embedded-resource": True,
                         "x-kubernetes-preserve-unknown-fields": True},
        }},
    },
}


def test_custom_resources_with_garbage_fields_are_handled() -> None:
    sample = {"apiVersion": "x.io/v1", "kind": "Widget", "metadata": {"name": "w"},
              "spec": {"gpus": 1, "vendor": "amd", "tags": ["a"], "ports": [{"name": "a"}], "labels": {"a": "b"},
                       "storage": {"size": "1"}, "size": "1Gi",
                       "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}, "spec": {"x": "y"}}}}
    columns = [{"name": "G", "type": "integer", "jsonPath": ".spec.gpus"},
               {"name": "T", "type": "date", "jsonPath": ".spec.tags[0]"},
               {"name": "B", "type": "boolean", "jsonPath": ".spec.ports[?(@.name=='a')].name"}]
    now = datetime.now(UTC)
    for path in _paths(sample):
        for garbage in NASTY:
            obj = _replace(sample, path, garbage)
            try:
                validate(SCHEMA, apply_defaults(SCHEMA, prune(SCHEMA, obj)))
                to_table([obj], kind="Widget", group="x.io", printer_columns=columns, now=now)
            except Exception as err:  # pragma: no cover
                raise AssertionError(f"{path}={garbage!r} crashed: {err!r}") from err
    for path in _paths(SCHEMA):
        for garbage in NASTY:
            schema = _replace(SCHEMA, path, garbage)
            try:
                validate(schema, apply_defaults(schema, prune(schema, sample)))
            except Exception as err:  # pragma: no cover
                raise AssertionError(f"schema {path}={garbage!r} crashed: {err!r}") from err
