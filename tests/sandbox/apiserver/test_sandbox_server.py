"""HTTP surface: discovery, health, Tables, Status errors, fault injection, audit, identities."""

from __future__ import annotations

import json
import time
from typing import Any

import kubernetes
import pytest
from kubernetes.client import ApiException

from kaiwo_sandbox.testing import RunningSandbox


def _get(sandbox: RunningSandbox, path: str, **kwargs: Any) -> tuple[int, Any]:
    status, _, body = sandbox.http("GET", path, **kwargs)
    return status, json.loads(body) if body.startswith(b"{") else body


def test_health_and_version_need_no_token(sandbox: RunningSandbox) -> None:
    for path in ("/healthz", "/readyz", "/livez"):
        status, _, body = sandbox.http("GET", path, token="not-a-token")
        assert (status, body) == (200, b"ok")
    status, version = _get(sandbox, "/version", token="not-a-token")
    assert (status, version["major"], version["minor"]) == (200, "1", "32")


def test_core_discovery(sandbox: RunningSandbox) -> None:
    _, versions = _get(sandbox, "/api")
    assert (versions["kind"], versions["versions"]) == ("APIVersions", ["v1"])
    _, resources = _get(sandbox, "/api/v1")
    by_name = {r["name"]: r for r in resources["resources"]}
    assert by_name["pods"]["shortNames"] == ["po"]
    assert by_name["pods"]["categories"] == ["all"]
    assert by_name["pods"]["singularName"] == "pod"
    assert by_name["nodes"]["namespaced"] is False
    assert by_name["pods/binding"]["verbs"] == ["create"]
    assert "deletecollection" not in by_name["namespaces"]["verbs"]


def test_group_discovery(sandbox: RunningSandbox) -> None:
    _, groups = _get(sandbox, "/apis")
    names = [g["name"] for g in groups["groups"]]
    assert names[:2] == ["apps", "events.k8s.io"]
    _, apps = _get(sandbox, "/apis/apps")
    assert apps["preferredVersion"] == {"groupVersion": "apps/v1", "version": "v1"}
    _, resources = _get(sandbox, "/apis/apps/v1")
    by_name = {r["name"]: r for r in resources["resources"]}
    assert by_name["deployments/scale"]["kind"] == "Scale"
    assert by_name["deployments"]["shortNames"] == ["deploy"]
    status, _ = _get(sandbox, "/apis/nothing.example.com/v1")
    assert status == 404


def test_aggregated_discovery_request_gets_the_aggregated_document(sandbox: RunningSandbox) -> None:
    accept = ("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
              "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json")
    status, headers, body = sandbox.http("GET", "/apis", headers={"Accept": accept})
    assert status == 200
    assert headers["content-type"] == "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    assert headers["vary"] == "Accept" and headers["etag"].startswith('"')
    document = json.loads(body)
    assert document["kind"] == "APIGroupDiscoveryList"
    apps = next(i for i in document["items"] if i["metadata"]["name"] == "apps")
    deployments = next(r for r in apps["versions"][0]["resources"] if r["resource"] == "deployments")
    assert {"subresource": "scale", "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
            "verbs": ["get", "patch", "update"]} in deployments["subresources"]
    status, headers, body = sandbox.http("GET", "/apis", headers={"Accept": "application/json"})
    assert status == 200 and headers["content-type"] == "application/json"
    assert json.loads(body)["kind"] == "APIGroupList"


def test_pod_table_has_kubectl_columns(sandbox: RunningSandbox, core: Any) -> None:
    core.create_namespaced_pod("default", {"metadata": {"name": "p"},
                                           "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    status, table = _get(sandbox, "/api/v1/namespaces/default/pods",
                         headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"})
    assert status == 200
    assert table["kind"] == "Table" and table["apiVersion"] == "meta.k8s.io/v1"
    assert [c["name"] for c in table["columnDefinitions"] if c["priority"] == 0] == \
        ["Name", "Ready", "Status", "Restarts", "Age"]
    assert table["rows"][0]["cells"][:3] == ["p", "0/1", "Pending"]
    assert table["rows"][0]["object"]["kind"] == "PartialObjectMetadata"
    assert table["metadata"]["resourceVersion"]


def test_errors_are_status_objects(sandbox: RunningSandbox) -> None:
    status, body = _get(sandbox, "/api/v1/namespaces/default/nothings")
    assert status == 404
    assert body["kind"] == "Status" and body["status"] == "Failure" and body["code"] == 404
    status, _, raw = sandbox.http("POST", "/api/v1/namespaces/default/configmaps", "{not json",
                                  headers={"Content-Type": "application/json"})
    assert status == 400
    assert json.loads(raw)["reason"] == "BadRequest"
    status, _, raw = sandbox.http("PUT", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "x"}})
    assert status == 405
    assert json.loads(raw)["reason"] == "MethodNotAllowed"


def test_injected_500_for_n_calls(sandbox: RunningSandbox, core: Any) -> None:
    sandbox.faults.fail(code=500, verbs="create", resources="configmaps", times=2)
    for _ in range(2):
        with pytest.raises(ApiException) as exc:
            core.create_namespaced_config_map("default", {"metadata": {"name": "x"}})
        assert exc.value.status == 500
    core.create_namespaced_config_map("default", {"metadata": {"name": "x"}})


def test_injected_429_carries_retry_after(sandbox: RunningSandbox) -> None:
    sandbox.faults.fail(code=429, resources=["jobs.batch"], retry_after=3)
    status, headers, body = sandbox.http("GET", "/apis/batch/v1/namespaces/default/jobs")
    assert (status, headers["retry-after"], json.loads(body)["reason"]) == (429, "3", "TooManyRequests")
    status, _, _ = sandbox.http("GET", "/api/v1/namespaces/default/configmaps")
    assert status == 200


def test_probabilistic_faults_are_deterministic_per_seed(sandbox: RunningSandbox) -> None:
    def run() -> list[int]:
        sandbox.faults.clear()
        sandbox.faults.seed(7)
        sandbox.faults.fail(code=409, verbs="get", probability=0.5)
        return [sandbox.http("GET", "/api/v1/namespaces/default")[0] for _ in range(12)]

    first, second = run(), run()
    assert first == second
    assert set(first) == {200, 409}


def test_injected_latency(sandbox: RunningSandbox) -> None:
    sandbox.faults.delay(0.3, verbs="list", namespaces="default")
    started = time.monotonic()
    sandbox.http("GET", "/api/v1/namespaces/default/configmaps")
    assert time.monotonic() - started >= 0.3


def test_faults_never_touch_in_process_writes(sandbox: RunningSandbox) -> None:
    from kaiwo_sandbox.contracts import CONFIGMAPS

    sandbox.faults.fail(code=500)
    created = sandbox.call(sandbox.store.create, CONFIGMAPS, {"metadata": {"name": "inproc"}}, namespace="default")
    assert created["metadata"]["name"] == "inproc"


def test_control_endpoint(sandbox: RunningSandbox) -> None:
    status, _, body = sandbox.http("POST", "/sandbox/v1/faults", {"code": 503, "verbs": ["list"], "times": 1})
    assert status == 201
    assert sandbox.http("GET", "/api/v1/nodes")[0] == 503
    assert sandbox.http("GET", "/api/v1/nodes")[0] == 200
    status, _, body = sandbox.http("POST", "/sandbox/v1/faults", {"colour": "red"})
    assert status == 400 and "unknown fault fields" in json.loads(body)["message"]
    status, _, body = sandbox.http("GET", "/sandbox/v1/audit?verb=list")
    records = json.loads(body)["records"]
    assert [(r["resource"], r["code"]) for r in records] == [("nodes", 503), ("nodes", 200)]
    assert sandbox.http("DELETE", "/sandbox/v1/audit")[0] == 200
    assert len(sandbox.audit) == 0
    status, _, _ = sandbox.http("GET", "/sandbox/v1/faults", token="wrong")
    assert status == 401


def test_audit_records_each_request(sandbox: RunningSandbox, core: Any) -> None:
    sandbox.audit.clear()
    core.create_namespaced_config_map("default", {"metadata": {"name": "a"}})
    core.patch_namespaced_config_map("a", "default", {"data": {"x": "1"}})
    core.list_namespaced_config_map("default")
    with pytest.raises(ApiException):
        core.read_namespaced_config_map("missing", "default")
    core.delete_namespaced_config_map("a", "default")
    records = sandbox.audit.records()
    assert [(r.verb, r.resource, r.name, r.code) for r in records] == [
        ("create", "configmaps", "a", 201), ("patch", "configmaps", "a", 200), ("list", "configmaps", "", 200),
        ("get", "configmaps", "missing", 404), ("delete", "configmaps", "a", 200)]
    assert {r.user for r in records} == {"kaiwo-admin"}
    assert sandbox.audit.by_verb() == {"create": 1, "patch": 1, "list": 1, "get": 1, "delete": 1}


def test_a_create_is_audited_with_the_name_it_got(sandbox: RunningSandbox, core: Any) -> None:
    """A create's name comes from its body (or generateName), not its path; the record names it,
    as a real apiserver's objectRef.name does. A refused create records none."""
    made = core.create_namespaced_config_map("default", {"metadata": {"generateName": "gen-"}})
    with pytest.raises(ApiException):
        core.create_namespaced_config_map("default", {"metadata": {"name": made.metadata.name}})
    creates = [(r.name, r.code) for r in sandbox.audit.records(verb="create", resource="configmaps")]
    assert creates == [(made.metadata.name, 201), ("", 409)]
    assert made.metadata.name.startswith("gen-")


def test_minted_tokens_are_separate_identities(sandbox: RunningSandbox) -> None:
    token = sandbox.mint_token("operator")
    other = kubernetes.client.CoreV1Api(sandbox.api_client(token=token))
    other.list_namespace()
    assert sandbox.audit.count("list", "namespaces", user="operator") == 1


def test_pod_log_reflects_the_simulated_container(sandbox: RunningSandbox, core: Any) -> None:
    core.create_namespaced_pod("default", {"metadata": {"name": "p"}, "spec": {"containers": [
        {"name": "c", "image": "busybox", "command": ["sleep", "1"]}]}})
    status, _, body = sandbox.http("GET", "/api/v1/namespaces/default/pods/p/log")
    assert status == 400
    assert json.loads(body)["message"] == 'container "c" in pod "p" is waiting to start: ContainerCreating'
    core.patch_namespaced_pod_status("p", "default", {"status": {"containerStatuses": [{
        "name": "c", "image": "busybox", "imageID": "", "ready": False, "restartCount": 0,
        "state": {"terminated": {"exitCode": 0, "startedAt": "2026-01-01T00:00:00Z"}}}]}})
    text = core.read_namespaced_pod_log("p", "default")
    assert "command: sleep 1" in text and "exit code 0" in text


def test_watches_are_audited_once(sandbox: RunningSandbox) -> None:
    sandbox.audit.clear()
    list(sandbox.stream("/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=1"))
    status, _, _ = sandbox.http("GET", "/api/v1/namespaces/default/configmaps?watch=1&sendInitialEvents=true")
    assert status == 422  # sendInitialEvents needs resourceVersionMatch=NotOlderThan
    assert [(r.verb, r.code) for r in sandbox.audit.records()] == [("watch", 200), ("watch", 422)]


@pytest.mark.parametrize(("path", "body"), [
    ("/api/v1/namespaces/default/pods", {"metadata": {"name": "p"}, "spec": {"containers": "x"}}),
    ("/api/v1/namespaces/default/pods", {"metadata": {"name": "p"}, "spec": {"containers": [
        {"name": "c", "image": "i", "resources": {"limits": "x"}}]}}),
    ("/apis/batch/v1/namespaces/default/jobs", {"metadata": {"name": "j"}, "spec": "x"}),
    ("/api/v1/namespaces/default/configmaps", {"metadata": {"name": 5}}),
    ("/api/v1/namespaces/default/configmaps", {"metadata": "x"}),
    ("/api/v1/namespaces/default/configmaps", ["not", "an", "object"]),
    ("/api/v1/namespaces/default/configmaps", {"metadata": {"name": "o", "ownerReferences": [1]}}),
    ("/apis/ray.io/v1/namespaces/default/rayjobs", {"metadata": {"name": "r"}, "spec": []}),
])
def test_malformed_bodies_never_crash_the_store(sandbox: RunningSandbox, path: str, body: Any) -> None:
    # (Type checks of built-in fields belong to builtin_validation; the store must just not crash.)
    status, _, raw = sandbox.http("POST", path, body)
    assert status < 500, raw


def test_watch_with_a_malformed_resource_version_is_400(sandbox: RunningSandbox) -> None:
    status, _, raw = sandbox.http("GET", "/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=abc")
    assert status == 400
    assert json.loads(raw)["reason"] == "BadRequest"


def test_malformed_patch_results_are_400(sandbox: RunningSandbox, core: Any) -> None:
    core.create_namespaced_config_map("default", {"metadata": {"name": "ok"}})
    status, _, raw = sandbox.http("PATCH", "/api/v1/namespaces/default/configmaps/ok", '{"metadata": "x"}',
                                  headers={"Content-Type": "application/merge-patch+json"})
    assert status == 400, raw


def test_a_watcher_gone_before_its_stream_begins_is_no_server_error(sandbox: RunningSandbox,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    """A client that closes its connection before the watch's headers are written (an operator shutting
    down) is the client's doing: audited as 499 (it was 500), never logged as a failure of the server.
    Here the close lands while the request waits (aiohttp cancels the handler); the chaos soak met the
    other timing, the transport closing as the headers were written, which printed a traceback."""
    from kaiwo_sandbox.testing import eventually

    sandbox.faults.delay(0.3, verbs="watch", namespaces="default")  # the client is gone by the time it answers
    sandbox.audit.clear()
    connection = sandbox._connection(5.0)
    connection.request("GET", "/api/v1/namespaces/default/configmaps?watch=1",
                       headers={"Authorization": f"Bearer {sandbox.token}"})
    connection.close()
    eventually(lambda: [(r.verb, r.code) for r in sandbox.audit.records()] == [("watch", 499)], 5.0,
               "the watch audited as closed by its client")
    assert not [r for r in caplog.records if r.levelno >= 30 and "failed" in r.getMessage()]
    assert sandbox.http("GET", "/api/v1/namespaces/default/configmaps")[0] == 200
