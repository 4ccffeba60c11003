"""The admin API over real HTTP (uvicorn) against the sandbox with the operator running."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import yaml
from admin_support import BILLION_LAUGHS, kaiwojob, serve_app, submit
from e2e_harness import OperatorSandbox
from e2e_support import wait_for
from prometheus_client.parser import text_string_to_metric_families

from kaiwo_ray.views.nodes import GpuReading
from serve.state import AdminSettings


def names(response: httpx.Response) -> list[str]:
    assert response.status_code == 200, response.text
    return [f"{i['namespace']}/{i['name']}" for i in response.json()["items"]]


@pytest.fixture(scope="module")
def listed(env: OperatorSandbox, api: Any) -> None:
    """Five KaiwoJobs in two namespaces, by two users, with labels; all RUNNING."""
    with api.client() as http:
        for ns in ("list-a", "list-b"):
            env.sb.http("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                        "metadata": {"name": ns}})
        jobs = [("one", "list-a", "ann@example.com", {"team": "red"}),
                ("two", "list-a", "bob@example.com", {"team": "blue"}),
                ("three", "list-a", "ann@example.com", {"team": "red", "tier": "gold"}),
                ("four", "list-b", "bob@example.com", {}),
                ("five", "list-b", "ann@example.com", {"team": "red"})]
        for name, ns, user, labels in jobs:
            response = submit(http, kaiwojob(name, ns, user=user, labels=labels))
            assert response.status_code == 201, response.text
        wait_for(lambda: len(names(http.get("/api/v1/workloads", params={"phase": "RUNNING",
                                                                            "labelSelector": "suite=none"}))) == 0
                 and sorted(names(http.get("/api/v1/workloads?namespace=list-a&phase=RUNNING")))
                 == ["list-a/one", "list-a/three", "list-a/two"], 30, "three RUNNING in list-a")


def test_list_filters(http: httpx.Client, listed: None) -> None:
    assert names(http.get("/api/v1/workloads?namespace=list-b")) == ["list-b/five", "list-b/four"]
    assert names(http.get("/api/v1/workloads", params={"user": "bob@example.com"}))[-2:] == [
        "list-a/two", "list-b/four"]
    assert names(http.get("/api/v1/workloads", params={"labelSelector": "team=red,tier"})) == ["list-a/three"]
    assert names(http.get("/api/v1/workloads", params={"labelSelector": "team in (red),!tier"})) == [
        "list-a/one", "list-b/five"]
    assert names(http.get("/api/v1/workloads", params={"namespace": "list-a", "kind": "services"})) == []
    assert len(names(http.get("/api/v1/workloads", params={"namespace": "list-a", "kind": "kaiwojobs",
                                                           "queue": "kaiwo", "phase": "running,pending"}))) == 3


def test_paging_visits_every_row_once(http: httpx.Client, listed: None) -> None:
    seen: list[str] = []
    token = None
    while True:
        params: dict[str, Any] = {"labelSelector": "team", "limit": 2}
        if token:
            params["continue"] = token
        body = http.get("/api/v1/workloads", params=params).json()
        assert body["total"] == 4
        seen += [f"{i['namespace']}/{i['name']}" for i in body["items"]]
        token = body.get("continue")
        if not token:
            break
    assert seen == ["list-a/one", "list-a/three", "list-a/two", "list-b/five"]


@pytest.mark.parametrize(("query", "field"), [
    ("limit=0", "query.limit"), ("limit=abc", "query.limit"), ("continue=!!!", "query.continue"),
    ("labelSelector=a%20%3D%3D%3D", "query.labelSelector"), ("kind=pods", "query.kind")])
def test_bad_query_is_422_with_the_field(http: httpx.Client, query: str, field: str) -> None:
    response = http.get(f"/api/v1/workloads?{query}")
    assert response.status_code == 422, response.text
    body = response.json()
    assert body["kind"] == "Status" and body["reason"] == "Invalid"
    assert [c["field"] for c in body["details"]["causes"]] == [field]


def test_get_detail_events_and_404s(http: httpx.Client, listed: None) -> None:
    detail = http.get("/api/v1/namespaces/list-a/kaiwojobs/one")
    assert detail.status_code == 200, detail.text
    body = detail.json()
    assert body["summary"]["phase"] == "RUNNING" and body["summary"]["user"] == "ann@example.com"
    assert ("Job", "one") in {(c["kind"], c["name"]) for c in body["children"]}
    assert body["pods"] and body["pods"][0]["phase"] == "Running"
    events = http.get("/api/v1/namespaces/list-a/kaiwojobs/one/events").json()["items"]
    reasons = {(e["object"]["kind"], e["reason"]) for e in events}
    assert {("KaiwoJob", "WorkloadRunning"), ("Job", "CreatedWorkload"), ("Pod", "Scheduled")} <= reasons
    missing = http.get("/api/v1/namespaces/list-a/kaiwojobs/nope")
    assert missing.status_code == 404 and missing.json()["reason"] == "NotFound"
    unknown_type = http.get("/api/v1/namespaces/list-a/pods/one")  # `plural` is an enum in the OpenAPI document
    assert unknown_type.status_code == 422, unknown_type.text
    assert [c["field"] for c in unknown_type.json()["details"]["causes"]] == ["path.plural"]
    assert http.get("/api/v1/namespaces/list-a/kaiwojobs/nope/explain").status_code == 404


def test_logs_stream_the_pods_log(http: httpx.Client, listed: None) -> None:
    with http.stream("GET", "/api/v1/namespaces/list-a/kaiwojobs/one/logs", params={"tail": 10}) as response:
        assert response.status_code == 200
        assert response.headers["x-kaiwo-pod"].startswith("one-")
        text = "".join(response.iter_text())
    assert "simulated container 'workload' (image busybox)" in text
    tail = http.get("/api/v1/namespaces/list-a/kaiwojobs/one/logs", params={"tail": 1}).text
    assert tail.count("\n") == 1 and tail.startswith("[kaiwo-ray sandbox] running since")
    assert http.get("/api/v1/namespaces/list-a/kaiwojobs/one/logs", params={"tail": -1}).status_code == 422
    bad = http.get("/api/v1/namespaces/list-a/kaiwojobs/one/logs", params={"container": "nope"})
    assert bad.status_code == 400 and "container nope is not valid" in bad.json()["message"]
    assert http.get("/api/v1/namespaces/list-a/kaiwojobs/one/logs", params={"pod": "x"}).status_code == 404


def test_submit_yaml_then_delete(env: OperatorSandbox, http: httpx.Client) -> None:
    manifest = yaml.safe_dump(kaiwojob("from-yaml", "default", entrypoint="sleep 1"))
    response = http.post("/api/v1/workloads", content=manifest, headers={"Content-Type": "application/yaml"})
    assert response.status_code == 201, response.text
    assert response.json()["name"] == "from-yaml"
    again = http.post("/api/v1/workloads", content=manifest, headers={"Content-Type": "application/yaml"})
    assert again.status_code == 409 and again.json()["reason"] == "AlreadyExists"
    wait_for(lambda: http.get("/api/v1/namespaces/default/kaiwojobs/from-yaml").status_code == 200, 30,
             "the cache sees the submitted job")
    deleted = http.delete("/api/v1/namespaces/default/kaiwojobs/from-yaml")
    assert deleted.status_code == 200 and deleted.json()["deleted"]
    wait_for(lambda: http.get("/api/v1/namespaces/default/kaiwojobs/from-yaml").status_code == 404, 30,
             "the job is gone")
    assert http.delete("/api/v1/namespaces/default/kaiwojobs/from-yaml").status_code == 404


def test_bad_manifests(http: httpx.Client) -> None:
    invalid = kaiwojob("bad", "default", gpus=-1, replicas="x")
    response = submit(http, invalid)
    assert response.status_code == 422, response.text
    body = response.json()
    assert {c["field"]: c["reason"] for c in body["details"]["causes"]} == {
        "spec.gpus": "FieldValueInvalid", "spec.replicas": "FieldValueTypeInvalid"}  # the API server's cause types
    storage = {"storageEnabled": True, "data": {"storageSize": "1Gi", "download": {"s3": [{"buckets": []}]}}}
    missing = submit(http, kaiwojob("no-endpoint", "default", storage=storage))
    assert missing.status_code == 422, missing.text
    causes = {c["field"]: c["reason"] for c in missing.json()["details"]["causes"]}
    assert causes.get("spec.storage.data.download.s3[0].endpointUrl") == "FieldValueRequired", causes
    assert body["details"]["kind"] == "KaiwoJob" and body["details"]["name"] == "bad"
    broken = http.post("/api/v1/workloads", content="kind: [", headers={"Content-Type": "application/yaml"})
    assert broken.status_code == 400 and "invalid YAML at line" in broken.json()["message"]
    assert http.post("/api/v1/workloads", content="{", headers={"Content-Type": "application/json"}).status_code == 400
    yaml_headers = {"Content-Type": "application/yaml"}
    nested = http.post("/api/v1/workloads", content="[" * 200_000, headers=yaml_headers)
    assert nested.status_code == 400 and "nesting deeper than 100 levels" in nested.json()["message"]
    deep_json = http.post("/api/v1/workloads", content="[" * 200_000, headers={"Content-Type": "application/json"})
    assert deep_json.status_code == 400 and "nested deeper" in deep_json.json()["message"]
    laughs = http.post("/api/v1/workloads", content=BILLION_LAUGHS, headers=yaml_headers)
    assert laughs.status_code == 400 and "expands to more than" in laughs.json()["message"]
    wrong_kind = submit(http, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}})
    assert wrong_kind.status_code == 422 and wrong_kind.json()["details"]["causes"][0]["field"] == "kind"
    two = http.post("/api/v1/workloads", content="a: 1\n---\nb: 2\n", headers={"Content-Type": "application/yaml"})
    assert two.status_code == 422


def test_wrong_method_and_oversized_body(http: httpx.Client) -> None:
    wrong = http.put("/api/v1/workloads", json={})
    assert wrong.status_code == 405 and wrong.json()["reason"] == "MethodNotAllowed"
    big = http.post("/api/v1/workloads", content=b"x" * (2 << 20), headers={"Content-Type": "application/yaml"})
    assert big.status_code == 413 and big.json()["reason"] == "RequestEntityTooLarge"

    def chunks() -> Any:
        for _ in range(40):
            yield b"y" * 65536

    chunked = http.post("/api/v1/workloads", content=chunks(), headers={"Content-Type": "application/yaml"})
    assert chunked.status_code == 413
    assert http.get("/api/v1/queues").status_code == 200  # the app is still serving


def test_explain_over_quota_through_the_api(env: OperatorSandbox, http: httpx.Client) -> None:
    env.sb.http("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                "metadata": {"name": "api-explain"}})
    try:
        _explain_over_quota(http)
    finally:  # give the GPUs back to the other tests, whatever happened here
        for name in ("gpu-a", "gpu-b", "gpu-c"):
            http.delete(f"/api/v1/namespaces/api-explain/kaiwojobs/{name}")


def _explain_over_quota(http: httpx.Client) -> None:
    for name in ("gpu-a", "gpu-b"):
        assert submit(http, kaiwojob(name, "api-explain", gpus=8, gpuModels=["mi300x"])).status_code == 201
        wait_for(lambda n=name: http.get(f"/api/v1/namespaces/api-explain/kaiwojobs/{n}/explain").json().get("running"),
                 30, f"{name} running")
    assert submit(http, kaiwojob("gpu-c", "api-explain", gpus=8, gpuModels=["mi300x"])).status_code == 201
    result = wait_for(lambda: (r := http.get("/api/v1/namespaces/api-explain/kaiwojobs/gpu-c/explain").json())
                      .get("phase") == "PENDING" and r["reasons"] and r, 30, "gpu-c explained")
    assert result["reasons"][0]["code"] == "InsufficientQuota"
    assert result["queue_position"] == 1

    def mi300_gpus(queue: dict[str, Any]) -> dict[str, Any]:
        mi300 = next(f for f in queue["flavors"] if f["flavor"].startswith("amd-mi300x"))
        return next(r for r in mi300["resources"] if r["resource"] == "amd.com/gpu")

    # The ClusterQueue's usage is Kueue's status, written apart from admission (as a real Kueue does):
    # the view shows it once written.
    queue = wait_for(lambda: (q := http.get("/api/v1/queues/kaiwo").json()) and mi300_gpus(q)["free"] == 0.0 and q,
                     30, "the queue's usage written")
    assert [p["kaiwo_workload"] for p in queue["pending"]][:1] == ["gpu-c"]
    assert mi300_gpus(queue)["nominal"] == 16.0
    for name in ("gpu-a", "gpu-b", "gpu-c"):
        assert http.delete(f"/api/v1/namespaces/api-explain/kaiwojobs/{name}").status_code == 200


def test_nodes_overview_and_live_stream(http: httpx.Client, listed: None) -> None:
    nodes = http.get("/api/v1/nodes").json()
    assert nodes["totals"]["gpus"] == 24
    assert {n["name"] for n in nodes["items"]} >= {"gpu-amd-mi300x-01", "gpu-nvidia-h100-01"}
    overview = http.get("/api/v1/overview").json()
    assert overview["phases"].get("RUNNING", 0) >= 5 and overview["queues"][0]["name"] == "kaiwo"
    with http.stream("GET", "/api/v1/stream") as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = response.iter_lines()
        assert next(lines) == "event: overview"
        assert next(lines).startswith("id: ")
        data = next(lines)
    assert json.loads(data.removeprefix("data: "))["workloads"] >= 5


def test_metrics_parse_and_name_controller_runtime_series(http: httpx.Client, listed: None) -> None:
    response = http.get("/metrics")
    assert response.status_code == 200
    families = {f.name: f for f in text_string_to_metric_families(response.text)}
    for name in ("controller_runtime_reconcile", "controller_runtime_reconcile_errors",
                 "controller_runtime_reconcile_time_seconds", "workqueue_depth", "workqueue_adds",
                 "workqueue_queue_duration_seconds", "workqueue_work_duration_seconds", "workqueue_retries",
                 "rest_client_requests", "leader_election_master_status", "kaiwo_workloads",
                 "kaiwo_workload_phase_transitions", "kaiwo_workload_time_to_running_seconds",
                 "kaiwo_queue_pending_workloads"):
        assert name in families, name
    reconciles = {(s.labels["controller"], s.labels["result"]): s.value
                  for s in families["controller_runtime_reconcile"].samples if s.name.endswith("_total")}
    assert reconciles[("kaiwojob", "success")] > 0
    assert any(s.labels.get("code") == "201" and s.labels.get("method") == "POST"
               for s in families["rest_client_requests"].samples)
    running = [s for s in families["kaiwo_workloads"].samples
               if s.labels["namespace"] == "list-a" and s.labels["phase"] == "RUNNING"]
    assert [s.value for s in running] == [3.0]
    counts = [s for s in families["kaiwo_workload_time_to_running_seconds"].samples
              if s.name.endswith("_count") and s.labels["kind"] == "KaiwoJob"]
    assert counts and counts[0].value >= 5


def test_openapi_has_typed_models(http: httpx.Client) -> None:
    spec = http.get("/openapi.json").json()
    schemas = spec["components"]["schemas"]
    assert {"WorkloadList", "WorkloadSummary", "Explanation", "Reason", "QuotaGap", "ClusterQueueView",
            "NodeList", "Overview"} <= set(schemas)
    listing = spec["paths"]["/api/v1/workloads"]["get"]["responses"]["200"]["content"]["application/json"]
    assert listing["schema"]["$ref"].endswith("/WorkloadList")


def test_logs_follow_until_the_pod_goes(env: OperatorSandbox, http: httpx.Client) -> None:
    env.sb.http("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "logs"}})
    assert submit(http, kaiwojob("follow-me", "logs")).status_code == 201
    wait_for(lambda: http.get("/api/v1/namespaces/logs/kaiwojobs/follow-me").json().get("summary", {}).get("phase")
             == "RUNNING", 30, "follow-me RUNNING")
    with http.stream("GET", "/api/v1/namespaces/logs/kaiwojobs/follow-me/logs", params={"follow": "true"}) as response:
        assert response.status_code == 200
        lines = response.iter_lines()
        assert "simulated container 'workload'" in next(lines)
        # still open: the container runs; deleting the workload ends the stream with the reason
        assert http.delete("/api/v1/namespaces/logs/kaiwojobs/follow-me").status_code == 200
        rest = list(lines)
    assert rest and rest[-1].startswith(("[kaiwo-ray sandbox] pod deleted", "[kaiwo-ray sandbox] terminated"))


def test_gpu_samples_seam_reaches_nodes_and_overview(env: OperatorSandbox) -> None:
    """Where telemetry plugs in: a sample source given to the app shows per GPU, with its pod."""
    sample = GpuReading(node="gpu-amd-mi300x-02", index=3, utilization=42.0,
                       pod={"kind": "Pod", "name": "p", "namespace": "default"})
    running = serve_app(AdminSettings(kubeconfig=str(env.sb.kubeconfig_path), auth="none",
                                      gpu_samples=lambda: [sample]))
    try:
        with running.client() as http:
            nodes = {n["name"]: n for n in http.get("/api/v1/nodes").json()["items"]}
            assert nodes["gpu-amd-mi300x-02"]["gpus"] == [sample.model_dump(mode="json")]
            assert nodes["gpu-nvidia-h100-01"]["gpus"] == []
    finally:
        running.stop()
