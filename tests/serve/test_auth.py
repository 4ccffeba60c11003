"""Authentication and authorization end to end: the sandbox enforcing RBAC (`authorization="rbac"`),
the admin app with `auth="kubernetes"` checking every request with a TokenReview and a
SubjectAccessReview. A user with a namespaced Role sees only that namespace and gets 403 elsewhere."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from admin_support import RunningApp, kaiwojob, serve_app

from kaiwo_sandbox.testing import RunningSandbox, start_sandbox
from serve.state import AdminSettings

GROUP = "kaiwo.silogen.ai"


@pytest.fixture(scope="module")
def rbac_sandbox() -> Iterator[RunningSandbox]:
    with start_sandbox(nodes=[], authorization="rbac") as sb:
        for ns in ("team-a", "team-b"):
            assert sb.http("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                          "metadata": {"name": ns}})[0] == 201
            for name in ("one", "two"):
                code, _, body = sb.http("POST", f"/apis/{GROUP}/v1alpha1/namespaces/{ns}/kaiwojobs",
                                        kaiwojob(name, ns))
                assert code == 201, body
        sb.grant("alice", "team-a", [
            {"apiGroups": [GROUP], "resources": ["kaiwojobs", "kaiwoservices"],
             "verbs": ["get", "list", "watch", "create", "delete"]},
            {"apiGroups": [""], "resources": ["events", "pods", "pods/log"], "verbs": ["get", "list"]}], role="kaiwo-user")
        yield sb


@pytest.fixture(scope="module")
def secured(rbac_sandbox: RunningSandbox) -> Iterator[RunningApp]:
    running = serve_app(AdminSettings(kubeconfig=str(rbac_sandbox.kubeconfig_path), auth="kubernetes",
                                      auth_cache_seconds=30.0))
    yield running
    running.stop()


def as_user(app: RunningApp, token: str | None) -> httpx.Client:
    return app.client(headers={"Authorization": f"Bearer {token}"} if token else {})


def test_no_or_bad_token_is_401(secured: RunningApp) -> None:
    with as_user(secured, None) as anonymous:
        response = anonymous.get("/api/v1/workloads")
        assert response.status_code == 401 and response.json()["reason"] == "Unauthorized"
    with as_user(secured, "not-a-token") as forged:
        assert forged.get("/api/v1/workloads").status_code == 401


def test_a_namespaced_role_sees_only_its_namespace(rbac_sandbox: RunningSandbox, secured: RunningApp) -> None:
    token = rbac_sandbox.mint_token("alice")
    with as_user(secured, token) as alice:
        listed = alice.get("/api/v1/workloads")
        assert listed.status_code == 200, listed.text
        assert sorted(f"{i['namespace']}/{i['name']}" for i in listed.json()["items"]) == [
            "team-a/one", "team-a/two"]
        assert alice.get("/api/v1/namespaces/team-a/kaiwojobs/one").status_code == 200
        assert alice.get("/api/v1/namespaces/team-a/kaiwojobs/one/explain").status_code == 200
        # her workload's GPUs need no rights on nodes (empty here: this app has no telemetry)
        assert alice.get("/api/v1/namespaces/team-a/kaiwojobs/one/gpus").json() == {"items": []}
        assert alice.get("/api/v1/namespaces/team-b/kaiwojobs/one/gpus").status_code == 403

        elsewhere = alice.get("/api/v1/workloads", params={"namespace": "team-b"})
        assert elsewhere.status_code == 403
        message = elsewhere.json()["message"]
        assert 'User "alice" cannot list resource "kaiwojobs"' in message and 'namespace "team-b"' in message
        other = alice.get("/api/v1/namespaces/team-b/kaiwojobs/one")
        assert other.status_code == 403 and 'cannot get resource "kaiwojobs"' in other.json()["message"]
        queues = alice.get("/api/v1/queues")
        assert queues.status_code == 403 and "at the cluster scope" in queues.json()["message"]
        assert alice.get("/metrics").status_code == 403

        forged = kaiwojob("mine", "team-a", user="boss@example.com")
        forged["metadata"]["annotations"] = {"kaiwo.silogen.ai/submitted-by": "boss@example.com"}
        assert alice.post("/api/v1/workloads", json=forged).status_code == 201
        code, _, raw = rbac_sandbox.http("GET", f"/apis/{GROUP}/v1alpha1/namespaces/team-a/kaiwojobs/mine")
        # GPU-hours are charged to the authenticated caller (docs/accounting.md), whatever the manifest says
        assert code == 200 and json.loads(raw)["metadata"]["annotations"]["kaiwo.silogen.ai/submitted-by"] == "alice"
        denied = alice.post("/api/v1/workloads", json=kaiwojob("theirs", "team-b"))
        assert denied.status_code == 403 and 'cannot create resource "kaiwojobs"' in denied.json()["message"]
        assert alice.delete("/api/v1/namespaces/team-b/kaiwojobs/one").status_code == 403


def test_the_admin_sees_everything(rbac_sandbox: RunningSandbox, secured: RunningApp) -> None:
    with as_user(secured, rbac_sandbox.token) as admin:
        namespaces = {i["namespace"] for i in admin.get("/api/v1/workloads").json()["items"]}
        assert {"team-a", "team-b"} <= namespaces
        assert admin.get("/api/v1/queues").status_code == 200
        assert admin.get("/metrics").status_code == 200


def test_decisions_are_cached_briefly(rbac_sandbox: RunningSandbox, secured: RunningApp) -> None:
    token = rbac_sandbox.mint_token("bob")  # no bindings: denied everywhere
    with as_user(secured, token) as bob:
        before = rbac_sandbox.audit.count("create", "subjectaccessreviews")
        reviews_before = rbac_sandbox.audit.count("create", "tokenreviews")
        for _ in range(5):
            assert bob.get("/api/v1/namespaces/team-a/kaiwojobs/one").status_code == 403
        assert rbac_sandbox.audit.count("create", "subjectaccessreviews") - before == 1
        assert rbac_sandbox.audit.count("create", "tokenreviews") - reviews_before == 1


def test_the_live_stream_takes_its_token_as_a_query_parameter(rbac_sandbox: RunningSandbox,
                                                               secured: RunningApp) -> None:
    """EventSource cannot send headers: the dashboard passes `access_token`, checked like a header."""
    with secured.client() as client:
        with client.stream("GET", "/api/v1/stream", params={"access_token": rbac_sandbox.token}) as response:
            assert response.status_code == 200
            assert next(response.iter_lines()) == "event: overview"
        alice = rbac_sandbox.mint_token("alice")  # her stream carries her overview: team-a only, no queues
        with client.stream("GET", "/api/v1/stream", params={"access_token": alice}) as response:
            lines = response.iter_lines()
            assert next(lines) == "event: overview" and next(lines).startswith("id: ")
            event = json.loads(next(lines).removeprefix("data: "))
        assert event["queues"] == [] and event["nodes"] is None
        assert event["workloads"] == client.get("/api/v1/workloads", headers={
            "Authorization": f"Bearer {alice}"}).json()["total"]
        assert client.get("/api/v1/stream").status_code == 401


def test_the_overview_shows_what_the_user_may_see(rbac_sandbox: RunningSandbox, secured: RunningApp) -> None:
    with as_user(secured, rbac_sandbox.mint_token("alice")) as alice:
        mine = alice.get("/api/v1/overview")
        assert mine.status_code == 200, mine.text
        body = mine.json()
        team_a = alice.get("/api/v1/workloads").json()["total"]
        assert body["workloads"] == team_a and sum(body["phases"].values()) == team_a
        assert body["queues"] == [] and body["nodes"] is None  # she may list neither
    with as_user(secured, rbac_sandbox.token) as admin:
        everything = admin.get("/api/v1/overview").json()
        assert everything["workloads"] > team_a and everything["nodes"] is not None
