"""ObjectMeta validation with the apiserver's messages."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kaiwo_sandbox.semantics.metadata import is_label_key, validate_object_meta

SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)


def _obj(**meta: Any) -> dict[str, Any]:
    return {"metadata": {"name": "ok", "namespace": "default", **meta}}


def _causes(obj: dict[str, Any], *, namespaced: bool = True, kind: str = "Pod") -> list[tuple[str, str, str]]:
    return [(c["field"], c["reason"], c["message"])
            for c in validate_object_meta(obj, namespaced=namespaced, kind=kind)]


def test_valid_metadata() -> None:
    obj = _obj(labels={"app.kubernetes.io/name": "web", "empty": ""},
               annotations={"kaiwo.silogen.ai/User": "x" * 1000}, finalizers=["kaiwo.silogen.ai/finalizer"],
               ownerReferences=[{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u", "controller": True}])
    assert _causes(obj) == []


def test_bad_name_uses_the_subdomain_message() -> None:
    assert _causes(_obj(name="Bad_Name")) == [
        ("metadata.name", "FieldValueInvalid", f'Invalid value: "Bad_Name": {SUBDOMAIN_MSG}')]


def test_missing_name() -> None:
    obj = _obj()
    del obj["metadata"]["name"]
    assert _causes(obj) == [("metadata.name", "FieldValueRequired",
                             "Required value: name or generateName is required")]


def test_generate_name_may_end_with_a_dash() -> None:
    assert _causes(_obj(name="job-abcde", generateName="job-")) == []


def test_namespace_names_are_dns_labels() -> None:
    assert _causes({"metadata": {"name": "a.b"}}, namespaced=False, kind="Namespace") == [
        ("metadata.name", "FieldValueInvalid", 'Invalid value: "a.b": must not contain dots')]


def test_service_names_are_dns1035_labels() -> None:
    [(field, _, message)] = _causes(_obj(name="1svc"), kind="Service")
    assert field == "metadata.name"
    assert message.startswith('Invalid value: "1svc": a DNS-1035 label must consist of lower case alphanumeric')


def test_namespace_rules() -> None:
    obj = _obj()
    del obj["metadata"]["namespace"]
    assert _causes(obj) == [("metadata.namespace", "FieldValueRequired", "Required value")]
    assert _causes(_obj(), namespaced=False, kind="Node") == [
        ("metadata.namespace", "FieldValueForbidden", "Forbidden: not allowed on this type")]


def test_label_errors() -> None:
    causes = _causes(_obj(labels={"bad key": "v", "ok": "bad value!"}))
    assert causes == [
        ("metadata.labels", "FieldValueInvalid",
         "Invalid value: \"bad key\": name part must consist of alphanumeric characters, '-', '_' or '.', and must "
         "start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used "
         "for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"),
        ("metadata.labels", "FieldValueInvalid",
         "Invalid value: \"bad value!\": a valid label must be an empty string or consist of alphanumeric "
         "characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
         "'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"),
    ]


def test_long_label_value() -> None:
    [(_, _, message)] = _causes(_obj(labels={"a": "x" * 64}))
    assert message == f'Invalid value: "{"x" * 64}": must be no more than 63 characters'


@pytest.mark.parametrize(
    ("key", "first"),
    [
        ("/x", "prefix part must be non-empty"),
        ("a/b/c", "a valid label key must consist of"),
        ("Example.com/x", "prefix part a lowercase RFC 1123 subdomain"),
        ("x" * 64, "name part must be no more than 63 characters"),
    ],
)
def test_label_key_rules(key: str, first: str) -> None:
    assert is_label_key(key)[0].startswith(first)


def test_annotation_size_limit() -> None:
    assert _causes(_obj(annotations={"a": "x" * (256 * 1024)})) == [
        ("metadata.annotations", "FieldValueTooLong", "Too long: may not be more than 262144 bytes")]


def test_owner_reference_checks() -> None:
    causes = _causes(_obj(ownerReferences=[{"apiVersion": "", "kind": "Job", "name": "j", "uid": ""}]))
    assert causes == [
        ("metadata.ownerReferences.apiVersion", "FieldValueInvalid", 'Invalid value: "": version must not be empty'),
        ("metadata.ownerReferences.uid", "FieldValueInvalid", 'Invalid value: "": uid must not be empty'),
    ]


def test_input_untouched() -> None:
    obj = _obj(labels={"bad key": "v"})
    before = copy.deepcopy(obj)
    validate_object_meta(obj, namespaced=True, kind="Pod")
    assert obj == before


@pytest.mark.parametrize(
    ("meta", "message"),
    [
        ({"labels": {"gpus": 8}}, 'Pod in version "v1" cannot be handled as a Pod: json: cannot unmarshal number '
                                  "into Go struct field ObjectMeta.metadata.labels of type string"),
        ({"labels": ["a"]}, 'Pod in version "v1" cannot be handled as a Pod: json: cannot unmarshal array into Go '
                            "struct field ObjectMeta.metadata.labels of type map[string]string"),
        ({"name": 5}, 'Pod in version "v1" cannot be handled as a Pod: json: cannot unmarshal number into Go struct '
                      "field ObjectMeta.metadata.name of type string"),
        ({"finalizers": [True]}, 'Pod in version "v1" cannot be handled as a Pod: json: cannot unmarshal bool into '
                                 "Go struct field ObjectMeta.metadata.finalizers of type string"),
    ],
)
def test_wrongly_typed_metadata_is_a_400(meta: dict[str, Any], message: str) -> None:
    from kaiwo_sandbox.contracts import ApiError

    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "d", **meta}}
    with pytest.raises(ApiError) as info:
        validate_object_meta(obj, namespaced=True, kind="Pod")
    assert (info.value.code, info.value.message) == (400, message)
