"""Label and field selectors: parse like labels.Parse / fields.ParseSelector, match like the apiserver."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kaiwo_sandbox.contracts import ApiError
from kaiwo_sandbox.semantics.selectors import (
    parse_field_selector,
    parse_label_selector,
    selector_from_dict,
)

LABELS = {"app": "web", "tier": "frontend", "kaiwo.silogen.ai/user": "alice", "gpus": "8"}


@pytest.mark.parametrize(
    ("selector", "matches"),
    [
        ("", True),
        ("   ", True),
        ("app=web", True),
        ("app==web", True),
        ("app=db", False),
        ("app!=db", True),
        ("missing!=x", True),
        ("app!=web", False),
        ("app in (web,db)", True),
        ("app in (db)", False),
        ("app notin (db)", True),
        ("missing notin (db)", True),
        ("app notin (web)", False),
        ("app", True),
        ("missing", False),
        ("!missing", True),
        ("!app", False),
        ("app=web,tier=frontend", True),
        ("app=web, tier=backend", False),
        ("kaiwo.silogen.ai/user=alice", True),
        ("gpus>4", True),
        ("gpus<4", False),
        ("app>4", False),
        ("x in (in)", False),
        ("app in (web,,)", True),
        ("missing=", False),
        ("app in ()", False),
    ],
)
def test_label_selector_matches_like_the_apiserver(selector: str, matches: bool) -> None:
    assert parse_label_selector(selector).matches(LABELS) is matches


def test_empty_value_matches_an_empty_label() -> None:
    assert parse_label_selector("a=").matches({"a": ""})
    assert parse_label_selector("a in ()").matches({"a": ""})
    assert not parse_label_selector("a=").matches({})


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        ("app=web,", "found '', expected: identifier after ','"),
        ("app in (web", "unable to parse requirement: found '', expected: ',' or ')'"),
        ("app in web", "unable to parse requirement: found 'web' expected: '('"),
        ("app==web web", "found 'web', expected: ',' or 'end of string'"),
        ("=web", "found '=', expected: !, identifier, or 'end of string'"),
        ("app=!web", "unable to parse requirement: found '!', expected: identifier"),
        ("app (x)", "unable to parse requirement: found '(', expected: in, notin, =, ==, !=, gt, lt"),
        (
            "app=a@b",
            'unable to parse requirement: values[0][app]: Invalid value: "a@b": a valid label must be an empty '
            "string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
            "alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is "
            "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
        ),
        (
            "-app=x",
            'unable to parse requirement: <nil>: Invalid value: "-app": name part must consist of alphanumeric '
            "characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  "
            "or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
        ),
        ("gpus>x", "unable to parse requirement: values[0]: Invalid value: \"x\": for 'Gt', 'Lt' operators, "
                   "the value must be an integer"),
    ],
)
def test_label_selector_errors_are_400_with_the_parser_message(selector: str, message: str) -> None:
    with pytest.raises(ApiError) as info:
        parse_label_selector(selector)
    assert info.value.code == 400
    assert info.value.reason == "BadRequest"
    assert info.value.message == message


def test_selector_prints_sorted_and_normalised() -> None:
    assert str(parse_label_selector("z=1, a in (c,b), !m, k")) == "a in (b,c),k,!m,z=1"


# A label key: an optional DNS-1123 subdomain prefix (dot-separated labels: "a..b" is no prefix) and a name.
_key = st.from_regex(r"\A([a-z0-9]([a-z0-9-]{0,3}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,3}[a-z0-9])?)?/)?"
                     r"[A-Za-z0-9]([A-Za-z0-9_.-]{0,6}[A-Za-z0-9])?\Z")
_value = st.from_regex(r"\A([A-Za-z0-9]([A-Za-z0-9_.-]{0,6}[A-Za-z0-9])?)?\Z")


@st.composite
def _requirements(draw: st.DrawFn) -> str:
    key = draw(_key.filter(lambda k: k not in ("in", "notin")))
    op = draw(st.sampled_from(["=", "==", "!=", "in", "notin", "exists", "!"]))
    if op == "exists":
        return str(key)
    if op == "!":
        return f"!{key}"
    if op in ("in", "notin"):
        values = draw(st.lists(_value.filter(bool), min_size=1, max_size=3))
        return f"{key} {op} ({','.join(values)})"
    return f"{key}{op}{draw(_value)}"


@given(st.lists(_requirements(), min_size=1, max_size=4),
       st.dictionaries(_key, _value, max_size=4))
def test_printed_selector_parses_back_to_the_same_meaning(reqs: list[str], labels: dict[str, str]) -> None:
    parsed = parse_label_selector(",".join(reqs))
    reparsed = parse_label_selector(str(parsed))
    assert str(reparsed) == str(parsed)
    assert reparsed.matches(labels) == parsed.matches(labels)


def test_selector_from_dict_follows_metav1_semantics() -> None:
    sel = selector_from_dict({
        "matchLabels": {"app": "web"},
        "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["frontend", "edge"]},
            {"key": "legacy", "operator": "DoesNotExist"},
        ],
    })
    assert sel.matches(LABELS)
    assert not sel.matches({**LABELS, "legacy": "1"})
    assert selector_from_dict({}).matches({})
    assert not selector_from_dict(None).matches(LABELS)


@pytest.mark.parametrize(
    "bad",
    [
        {"matchExpressions": [{"key": "a", "operator": "Equals", "values": ["x"]}]},
        {"matchExpressions": [{"key": "a", "operator": "In", "values": []}]},
        {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]},
        {"matchLabels": {"a b": "x"}},
    ],
)
def test_malformed_metav1_selector_is_rejected(bad: dict[str, object]) -> None:
    with pytest.raises(ApiError) as info:
        selector_from_dict(bad)
    assert info.value.code == 400


POD = {
    "metadata": {"name": "p1", "namespace": "team-a"},
    "spec": {"nodeName": "node-1", "restartPolicy": "Never", "schedulerName": "default-scheduler"},
    "status": {"phase": "Running", "podIP": "10.0.0.5"},
}


@pytest.mark.parametrize(
    ("selector", "matches"),
    [
        ("", True),
        ("metadata.name=p1", True),
        ("metadata.name==p1", True),
        ("metadata.name!=p1", False),
        ("metadata.namespace=team-a,status.phase=Running", True),
        ("status.phase=Pending", False),
        ("spec.nodeName=", False),
        ("spec.nodeName!=", True),
        ("spec.nodeName=node-1,status.phase!=Succeeded", True),
        ("spec.restartPolicy=Never", True),
        ("spec.hostNetwork=false", True),
        ("status.podIP=10.0.0.5", True),
    ],
)
def test_pod_field_selectors(selector: str, matches: bool) -> None:
    assert parse_field_selector(selector, kind="Pod").matches(POD) is matches


def test_unscheduled_pods_match_an_empty_node_name() -> None:
    assert parse_field_selector("spec.nodeName=", kind="Pod").matches({"metadata": {"name": "x"}, "spec": {}})


@pytest.mark.parametrize(
    ("kind", "selector", "obj", "matches"),
    [
        ("Node", "spec.unschedulable=true", {"spec": {"unschedulable": True}}, True),
        ("Node", "spec.unschedulable=false", {"spec": {}}, True),
        ("Namespace", "status.phase=Active", {"status": {"phase": "Active"}}, True),
        ("Secret", "type=Opaque", {"type": "Opaque"}, True),
        ("Job", "status.successful=1", {"status": {"successful": 1}}, True),
        ("Job", "status.successful=0", {"status": {}}, True),
        ("Event", "involvedObject.name=p1,involvedObject.kind=Pod,type=Warning",
         {"involvedObject": {"name": "p1", "kind": "Pod"}, "type": "Warning"}, True),
        ("Event", "involvedObject.name=p1", {"regarding": {"name": "p1"}}, True),
        ("Event", "reason=Scheduled", {"reason": "Failed"}, False),
        ("Event", "regarding.kind=Job,reportingController=kaiwo",
         {"regarding": {"kind": "Job"}, "reportingController": "kaiwo"}, True),
        ("pods", "status.phase=Running", POD, True),
    ],
)
def test_kind_specific_field_selectors(kind: str, selector: str, obj: dict[str, object], matches: bool) -> None:
    assert parse_field_selector(selector, kind=kind).matches(obj) is matches


@pytest.mark.parametrize(
    ("kind", "selector", "message"),
    [
        ("Pod", "spec.containers=x", "field label not supported: spec.containers"),
        ("ConfigMap", "status.phase=Running", "field label not supported: status.phase"),
        ("RayJob", "spec.entrypoint=x", "field label not supported: spec.entrypoint"),
        ("Pod", "metadata.name", "invalid selector: 'metadata.name'; can't understand 'metadata.name'"),
        ("Pod", r"metadata.name=a\x", r"invalid field selector: invalid escape sequence: \x"),
        ("Pod", "metadata.name=a=b", "invalid field selector: unescaped character ="),
    ],
)
def test_field_selector_errors(kind: str, selector: str, message: str) -> None:
    with pytest.raises(ApiError) as info:
        parse_field_selector(selector, kind=kind)
    assert info.value.code == 400
    assert info.value.message == message


def test_escaped_field_values() -> None:
    sel = parse_field_selector(r"metadata.name=a\,b", kind="ConfigMap")
    assert sel.matches({"metadata": {"name": "a,b"}})
    assert sel.requires_exact("metadata.name") == "a,b"


def test_exact_match_hints_for_indexes() -> None:
    assert parse_label_selector("app in (web),x").requires_exact("app") == "web"
    assert parse_label_selector("app in (a,b)").requires_exact("app") is None
    assert parse_field_selector("spec.nodeName=n1", kind="Pod").requires_exact("spec.nodeName") == "n1"


def test_crd_selectable_fields() -> None:
    fields = [{"jsonPath": ".spec.color"}, {"jsonPath": ".status.ready"}]
    sel = parse_field_selector("spec.color=blue,status.ready=true", kind="Widget", selectable_fields=fields)
    assert sel.matches({"spec": {"color": "blue"}, "status": {"ready": True}})
    assert not sel.matches({"spec": {"color": "red"}, "status": {"ready": True}})
    with pytest.raises(ApiError):
        parse_field_selector("spec.size=1", kind="Widget", selectable_fields=fields)
