"""Table responses: the columns and cells kubectl prints."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kaiwo_sandbox.apiserver import jsonpath
from kaiwo_sandbox.apiserver.tables import human_duration, to_table

NOW = datetime(2026, 11, 21, 12, 0, 0, tzinfo=UTC)


def _ts(seconds_ago: float) -> str:
    return (NOW - timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _meta(name: str, age: float = 12) -> dict[str, Any]:
    return {"name": name, "namespace": "default", "creationTimestamp": _ts(age), "uid": "u-" + name}


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(-5, "<invalid>"), (-1, "0s"), (0, "0s"), (12, "12s"), (119, "119s"), (120, "2m"), (182, "3m2s"),
     (600, "10m"), (179 * 60, "179m"), (3 * 3600, "3h"), (4 * 3600 + 60 * 5, "4h5m"), (9 * 3600, "9h"),
     (47 * 3600, "47h"), (2 * 86400 + 3 * 3600, "2d3h"), (7 * 86400, "7d"), (30 * 86400, "30d"),
     (800 * 86400, "2y70d"), (3000 * 86400, "8y")],
)
def test_human_duration(seconds: float, text: str) -> None:
    assert human_duration(seconds) == text


def _names(table: dict[str, Any], wide: bool = False) -> list[str]:
    return [c["name"].upper() for c in table["columnDefinitions"] if wide or c["priority"] == 0]


def _cells(table: dict[str, Any]) -> dict[str, Any]:
    names = [c["name"].upper() for c in table["columnDefinitions"]]
    [row] = table["rows"]
    return dict(zip(names, row["cells"], strict=True))


def _pod(phase: str, statuses: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
    pod = {"metadata": _meta("p"), "spec": {"containers": [{"name": "main", "image": "x"}]},
           "status": {"phase": phase, **({"containerStatuses": statuses} if statuses is not None else {})}}
    pod.update(extra)
    return pod


RUNNING = {"name": "main", "ready": True, "restartCount": 0, "state": {"running": {"startedAt": _ts(10)}}}


@pytest.mark.parametrize(
    ("pod", "ready", "status"),
    [
        (_pod("Pending"), "0/1", "Pending"),
        (_pod("Pending", [{"name": "main", "ready": False, "restartCount": 0,
                           "state": {"waiting": {"reason": "ContainerCreating"}}}]), "0/1", "ContainerCreating"),
        (_pod("Running", [RUNNING]), "1/1", "Running"),
        (_pod("Succeeded", [{"name": "main", "ready": False, "restartCount": 0,
                             "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]), "0/1", "Completed"),
        (_pod("Failed", [{"name": "main", "ready": False, "restartCount": 0,
                          "state": {"terminated": {"exitCode": 1, "reason": "Error"}}}]), "0/1", "Error"),
        (_pod("Failed", [{"name": "main", "ready": False, "restartCount": 0,
                          "state": {"terminated": {"exitCode": 137}}}]), "0/1", "ExitCode:137"),
        (_pod("Pending", status={"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]}), "0/1", "SchedulingGated"),
        (_pod("Running", [RUNNING], metadata={**_meta("p"), "deletionTimestamp": _ts(1)}), "1/1", "Terminating"),
        (_pod("Failed", status={"phase": "Failed", "reason": "Evicted"}), "0/1", "Evicted"),
    ],
)
def test_pod_ready_and_status(pod: dict[str, Any], ready: str, status: str) -> None:
    cells = _cells(to_table([pod], kind="Pod", group="", printer_columns=None, now=NOW))
    assert (cells["READY"], cells["STATUS"], cells["RESTARTS"], cells["AGE"]) == (ready, status, "0", "12s")


def test_pod_columns_and_wide_cells() -> None:
    pod = _pod("Running", [RUNNING])
    pod["spec"]["nodeName"] = "mi300x-0"
    pod["status"]["podIP"] = "10.0.0.7"
    table = to_table([pod], kind="Pod", group="", printer_columns=None, now=NOW)
    assert table["kind"] == "Table" and table["apiVersion"] == "meta.k8s.io/v1"
    assert _names(table) == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert _names(table, wide=True)[5:] == ["IP", "NODE", "NOMINATED NODE", "READINESS GATES"]
    assert table["rows"][0]["cells"] == ["p", "1/1", "Running", "0", "12s", "10.0.0.7", "mi300x-0", "<none>", "<none>"]
    assert table["rows"][0]["object"] == {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                                          "metadata": pod["metadata"]}


def test_restarts_show_when_the_last_one_happened() -> None:
    status = {**RUNNING, "restartCount": 2, "lastState": {"terminated": {"exitCode": 1, "finishedAt": _ts(300)}}}
    cells = _cells(to_table([_pod("Running", [status])], kind="Pod", group="", printer_columns=None, now=NOW))
    assert cells["RESTARTS"] == "2 (5m ago)"


def test_init_containers_progress() -> None:
    pod = _pod("Pending")
    pod["spec"]["initContainers"] = [{"name": "a", "image": "x"}, {"name": "b", "image": "x"}]
    pod["status"]["initContainerStatuses"] = [
        {"name": "a", "state": {"terminated": {"exitCode": 0}}, "restartCount": 0},
        {"name": "b", "state": {"running": {}}, "restartCount": 0},
    ]
    assert _cells(to_table([pod], kind="Pod", group="", printer_columns=None, now=NOW))["STATUS"] == "Init:1/2"


def test_completed_pods_carry_row_conditions() -> None:
    table = to_table([_pod("Succeeded")], kind="Pod", group="", printer_columns=None, now=NOW)
    assert table["rows"][0]["conditions"][0]["type"] == "Completed"


def _job(**status: Any) -> dict[str, Any]:
    return {"metadata": _meta("train", 600),
            "spec": {"completions": 1, "parallelism": 1,
                     "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "u"}},
                     "template": {"spec": {"containers": [{"name": "main", "image": "python:3.12"}]}}},
            "status": status}


@pytest.mark.parametrize(
    ("job", "expected"),
    [
        (_job(), ["train", "Running", "0/1", "", "10m"]),
        (_job(startTime=_ts(65), active=1), ["train", "Running", "0/1", "65s", "10m"]),
        (_job(startTime=_ts(300), completionTime=_ts(60), succeeded=1,
              conditions=[{"type": "Complete", "status": "True"}]), ["train", "Complete", "1/1", "4m", "10m"]),
        (_job(conditions=[{"type": "Suspended", "status": "True"}]), ["train", "Suspended", "0/1", "", "10m"]),
        (_job(conditions=[{"type": "Failed", "status": "True"}]), ["train", "Failed", "0/1", "", "10m"]),
    ],
)
def test_job_rows(job: dict[str, Any], expected: list[Any]) -> None:
    table = to_table([job], kind="Job", group="batch", printer_columns=None, now=NOW)
    assert _names(table) == ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"]
    assert table["rows"][0]["cells"] == [*expected, "main", "python:3.12", "batch.kubernetes.io/controller-uid=u"]


def test_parallel_job_without_completions() -> None:
    job = _job()
    del job["spec"]["completions"]
    job["spec"]["parallelism"] = 3
    assert _cells(to_table([job], kind="Job", group="batch", printer_columns=None, now=NOW))["COMPLETIONS"] == \
        "0/1 of 3"


def test_deployment_row() -> None:
    dep = {"metadata": _meta("web", 60), "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                                                  "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}},
           "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}}
    table = to_table([dep], kind="Deployment", group="apps", printer_columns=None, now=NOW)
    assert _names(table) == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
    assert table["rows"][0]["cells"] == ["web", "2/3", 3, 2, "60s", "c", "i", "app=web"]


def test_node_rows() -> None:
    node = {"metadata": {**_meta("mi300x-0", 86400 * 3), "labels": {"node-role.kubernetes.io/control-plane": ""}},
            "spec": {"unschedulable": True},
            "status": {"conditions": [{"type": "Ready", "status": "True"}],
                       "addresses": [{"type": "InternalIP", "address": "10.1.0.2"}],
                       "nodeInfo": {"kubeletVersion": "v1.32.0"}}}
    table = to_table([node], kind="Node", group="", printer_columns=None, now=NOW)
    assert _names(table) == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert table["rows"][0]["cells"] == ["mi300x-0", "Ready,SchedulingDisabled", "control-plane", "3d", "v1.32.0",
                                         "10.1.0.2", "<none>", "<unknown>", "<unknown>", "<unknown>"]
    node["status"]["conditions"][0]["status"] = "False"
    del node["spec"]["unschedulable"]
    assert _cells(to_table([node], kind="Node", group="", printer_columns=None, now=NOW))["STATUS"] == "NotReady"


def test_event_rows_for_both_event_apis() -> None:
    core = {"metadata": _meta("p.1", 30), "involvedObject": {"kind": "Pod", "name": "p"}, "reason": "Scheduled",
            "type": "Normal", "message": "Successfully assigned default/p to n1 ", "source": {"component": "sched"},
            "firstTimestamp": _ts(30), "lastTimestamp": _ts(20), "count": 2}
    table = to_table([core], kind="Event", group="", printer_columns=None, now=NOW)
    assert _names(table) == ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert table["rows"][0]["cells"] == ["20s", "Normal", "Scheduled", "pod/p", "", "sched",
                                         "Successfully assigned default/p to n1", "30s", 2, "p.1"]
    v1 = {"metadata": _meta("e", 5), "regarding": {"kind": "Job", "name": "j"}, "reason": "Created",
          "type": "Normal", "note": "made it", "reportingController": "kaiwo",
          "eventTime": (NOW - timedelta(seconds=5)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")}
    cells = _cells(to_table([v1], kind="Event", group="events.k8s.io", printer_columns=None, now=NOW))
    assert (cells["LAST SEEN"], cells["OBJECT"], cells["MESSAGE"], cells["SOURCE"], cells["COUNT"]) == \
        ("5s", "job/j", "made it", "kaiwo", 1)


@pytest.mark.parametrize(
    ("kind", "group", "obj", "header", "cells"),
    [
        ("Namespace", "", {"metadata": _meta("team"), "status": {"phase": "Active"}},
         ["NAME", "STATUS", "AGE"], ["team", "Active", "12s"]),
        ("ConfigMap", "", {"metadata": _meta("c"), "data": {"a": "1", "b": "2"}}, ["NAME", "DATA", "AGE"],
         ["c", 2, "12s"]),
        ("Secret", "", {"metadata": _meta("s"), "type": "Opaque", "data": {"a": "MQ=="}},
         ["NAME", "TYPE", "DATA", "AGE"], ["s", "Opaque", 1, "12s"]),
        ("Service", "", {"metadata": _meta("head"), "spec": {"type": "ClusterIP", "clusterIPs": ["10.96.0.9"],
                                                             "ports": [{"port": 8265, "protocol": "TCP"}],
                                                             "selector": {"app": "ray"}}},
         ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"],
         ["head", "ClusterIP", "10.96.0.9", "<none>", "8265/TCP", "12s", "app=ray"]),
        ("Service", "", {"metadata": _meta("lb"), "spec": {"type": "LoadBalancer", "clusterIPs": ["10.96.0.8"],
                                                           "ports": [{"port": 80, "nodePort": 30080,
                                                                      "protocol": "TCP"}]}},
         ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"],
         ["lb", "LoadBalancer", "10.96.0.8", "<pending>", "80:30080/TCP", "12s", "<none>"]),
        ("PersistentVolumeClaim", "", {"metadata": _meta("data"), "spec": {"storageClassName": "fast",
                                                                            "volumeMode": "Filesystem"},
                                       "status": {"phase": "Pending"}},
         ["NAME", "STATUS", "VOLUME", "CAPACITY", "ACCESS MODES", "STORAGECLASS", "VOLUMEATTRIBUTESCLASS", "AGE"],
         ["data", "Pending", "", "", "", "fast", "<unset>", "12s", "Filesystem"]),
        ("Lease", "coordination.k8s.io", {"metadata": _meta("leader"), "spec": {"holderIdentity": "op-1"}},
         ["NAME", "HOLDER", "AGE"], ["leader", "op-1", "12s"]),
        ("CustomResourceDefinition", "apiextensions.k8s.io", {"metadata": _meta("kaiwojobs.kaiwo.silogen.ai")},
         ["NAME", "CREATED AT"], ["kaiwojobs.kaiwo.silogen.ai", _ts(12)]),
    ],
)
def test_other_builtin_tables(kind: str, group: str, obj: dict[str, Any], header: list[str],
                              cells: list[Any]) -> None:
    table = to_table([obj], kind=kind, group=group, printer_columns=None, now=NOW)
    assert _names(table) == header
    assert table["rows"][0]["cells"] == cells


def test_custom_resource_printer_columns() -> None:
    columns = [
        {"name": "Status", "type": "string", "jsonPath": ".status.status"},
        {"name": "Ready", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Ready")].status'},
        {"name": "GPUs", "type": "integer", "jsonPath": ".spec.gpus", "priority": 1},
        {"name": "Started", "type": "date", "jsonPath": ".status.startTime"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]
    obj = {"metadata": _meta("job-a", 7200), "spec": {"gpus": 8},
           "status": {"status": "RUNNING", "startTime": _ts(90),
                      "conditions": [{"type": "Queued", "status": "False"}, {"type": "Ready", "status": "True"}]}}
    table = to_table([obj], kind="KaiwoJob", group="kaiwo.silogen.ai", printer_columns=columns, now=NOW)
    assert _names(table) == ["NAME", "STATUS", "READY", "STARTED", "AGE"]
    assert table["rows"][0]["cells"] == ["job-a", "RUNNING", "True", 8, "90s", "120m"]
    missing = to_table([{"metadata": _meta("b")}], kind="KaiwoJob", group="kaiwo.silogen.ai",
                       printer_columns=columns, now=NOW)
    assert missing["rows"][0]["cells"] == ["b", None, None, None, None, "12s"]


def test_custom_resource_without_columns_gets_age() -> None:
    table = to_table([{"metadata": _meta("w")}], kind="Widget", group="x.io", printer_columns=[], now=NOW)
    assert _names(table) == ["NAME", "AGE"]
    assert table["rows"][0]["cells"] == ["w", "12s"]


def test_include_object_modes_and_no_mutation() -> None:
    obj = {"metadata": _meta("c"), "data": {}}
    before = copy.deepcopy(obj)
    full = to_table([obj], kind="ConfigMap", group="", printer_columns=None, now=NOW, include_object="Object")
    assert full["rows"][0]["object"] == obj
    none = to_table([obj], kind="ConfigMap", group="", printer_columns=None, now=NOW, include_object="None")
    assert "object" not in none["rows"][0]
    assert obj == before


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        (".spec.a.b", [1]),
        ("{.spec.a.b}", [1]),
        (".spec.list[1].name", ["y"]),
        (".spec.list[*].name", ["x", "y"]),
        (".spec.list[?(@.name=='y')].v", [2]),
        (".spec.list[?(@.v==1)].name", ["x"]),
        (".spec.missing", []),
        (".metadata.labels['app.kubernetes.io/name']", ["web"]),
    ],
)
def test_jsonpath_subset(expr: str, expected: list[Any]) -> None:
    doc = {"metadata": {"labels": {"app.kubernetes.io/name": "web"}},
           "spec": {"a": {"b": 1}, "list": [{"name": "x", "v": 1}, {"name": "y", "v": 2}]}}
    assert jsonpath.find(expr, doc) == expected
