"""The admin API as an aggregated API (issue 34): the sandbox aggregates as kube-apiserver does
(APIService, availability checks, the front-proxy certificate, X-Remote-* headers, discovery, 503), and
the admin API's TLS listener trusts only the requestheader CA's certificate for an allowed name.
kubectl and the `kubernetes` client reach the group with a user's own token; RBAC answers twice: the
sandbox for `workloadsummaries`, the admin API's SubjectAccessReviews for the workloads shown."""

from __future__ import annotations

import json
import ssl
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import kubernetes
import pytest
from admin_support import RunningApp, free_port, kaiwojob, serve_app
from aggregation_support import (
    APISERVICE,
    APISERVICES,
    DISCOVERY_V2,
    GROUP,
    VERSION,
    apiservice,
    available,
    discovered,
    expose,
    register,
)

from kaiwo_sandbox.apiserver.aggregation import certs
from kaiwo_sandbox.testing import RunningSandbox, eventually, start_sandbox
from serve.state import AdminSettings

KAIWO = "kaiwo.silogen.ai"
PREFIX = f"/apis/{GROUP}/{VERSION}"


SUMMARIES_RULE = {"apiGroups": [GROUP], "resources": ["workloadsummaries", "workloadsummaries/explain"],
                  "verbs": ["get", "list", "watch"]}
WORKLOADS_RULE = {"apiGroups": [KAIWO], "resources": ["kaiwojobs", "kaiwoservices"], "verbs": ["get", "list", "watch"]}


@pytest.fixture(scope="module")
def world() -> Iterator[tuple[RunningSandbox, RunningApp, int]]:
    """team-a and team-b with two KaiwoJobs each; alice may see team-a's workloads and summaries, bob
    team-a's summaries but not its workloads; the admin API registered as the group's backend."""
    with start_sandbox(nodes=[], authorization="RBAC") as sb:
        for ns in ("team-a", "team-b"):
            assert sb.http("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                          "metadata": {"name": ns}})[0] == 201
            for name in ("one", "two"):
                code, _, body = sb.http("POST", f"/apis/{KAIWO}/v1alpha1/namespaces/{ns}/kaiwojobs", kaiwojob(name, ns))
                assert code == 201, body
        sb.grant("alice", "team-a", [SUMMARIES_RULE, WORKLOADS_RULE], role="reader")
        sb.grant("bob", "team-a", [SUMMARIES_RULE], role="summaries-only")
        port = free_port()
        app = serve_app(AdminSettings(kubeconfig=str(sb.kubeconfig_path), auth="kubernetes",
                                      aggregated_bind=f"127.0.0.1:{port}"))
        try:
            register(sb, port)
            yield sb, app, port
        finally:
            app.stop()


def kubectl(sb: RunningSandbox, kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["kubectl", "--kubeconfig", str(kubeconfig), *args], capture_output=True, text=True,
                          timeout=60, env={"PATH": "/usr/bin:/bin:/usr/local/bin", "HOME": str(kubeconfig.parent)})


def user_config(sb: RunningSandbox, user: str, tmp_path: Path) -> Path:
    (tmp_path / user).mkdir(exist_ok=True)
    return sb.kubeconfig_for(sb.mint_token(user), tmp_path / user / "kubeconfig")


def test_the_apiservice_is_available_by_its_health_check_and_the_requestheader_ca_is_published(
        world: tuple[RunningSandbox, RunningApp, int]) -> None:
    sb, _, _ = world
    condition = available(sb, APISERVICE)
    assert (condition["status"], condition["reason"], condition["message"]) == ("True", "Passed", "all checks passed")
    code, _, body = sb.http("GET", "/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication")
    assert code == 200, body
    data = json.loads(body)["data"]
    assert data["requestheader-client-ca-file"] == certs.front_proxy().ca_pem.decode()
    assert json.loads(data["requestheader-allowed-names"]) == ["front-proxy-client"]
    assert json.loads(data["requestheader-username-headers"]) == ["X-Remote-User"]
    assert json.loads(data["requestheader-group-headers"]) == ["X-Remote-Group"]
    assert json.loads(data["requestheader-extra-headers-prefix"]) == ["X-Remote-Extra-"]


def test_kubectl_lists_the_group_and_prints_the_table(world: tuple[RunningSandbox, RunningApp, int],
                                                     tmp_path: Path) -> None:
    sb, _, _ = world
    alice = user_config(sb, "alice", tmp_path)
    resources = kubectl(sb, sb.kubeconfig_path, "api-resources", f"--api-group={GROUP}")
    assert resources.returncode == 0, resources.stderr
    assert resources.stdout.splitlines()[1].split() == ["workloadsummaries", "kws", f"{GROUP}/{VERSION}", "true",
                                                        "WorkloadSummary"]
    table = kubectl(sb, alice, "get", "workloadsummaries", "-n", "team-a")
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["NAME", "PHASE", "QUEUE", "POSITION", "WHY-PENDING", "AGE"]
    assert [line.split()[0] for line in lines[1:]] == ["job.one", "job.two"]
    wide = kubectl(sb, alice, "get", "kws", "job.one", "-n", "team-a", "-o", "wide")
    assert wide.returncode == 0, wide.stderr
    assert wide.stdout.splitlines()[0].split()[-3:] == ["USER", "GPUS", "ESTIMATED-START"]
    assert "ann@example.com" in wide.stdout.splitlines()[1]
    as_json = kubectl(sb, alice, "get", "kws", "-n", "team-a", "-o", "json")
    assert as_json.returncode == 0, as_json.stderr
    items = json.loads(as_json.stdout)["items"]
    assert [(i["kind"], i["metadata"]["name"], i["workload"]["kind"], i["queue"]) for i in items] == [
        ("WorkloadSummary", "job.one", "KaiwoJob", "kaiwo"), ("WorkloadSummary", "job.two", "KaiwoJob", "kaiwo")]


def test_kubectl_api_resources_reads_aggregated_discovery(world: tuple[RunningSandbox, RunningApp, int],
                                                          tmp_path: Path) -> None:
    """kubectl asks `/api` and `/apis` for apidiscovery.k8s.io/v2 and, answered so, never fetches a
    group/version's legacy document: the admin group's resources come from the merged document."""
    sb, _, _ = world
    alice = user_config(sb, "alice", tmp_path)
    run = kubectl(sb, alice, "api-resources", f"--api-group={GROUP}", "-v=8", f"--cache-dir={tmp_path / 'cache'}")
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[1].split() == ["workloadsummaries", "kws", f"{GROUP}/{VERSION}", "true",
                                                  "WorkloadSummary"]
    log = run.stderr
    assert f'"Request" verb="GET" url="{sb.url}/apis?timeout=32s"' in log or f"GET {sb.url}/apis?timeout=32s" in log, log
    assert f"Accept: {DISCOVERY_V2}" in log, log
    assert f"Content-Type: {DISCOVERY_V2}" in log, log
    assert f"/apis/{GROUP}/{VERSION}?" not in log and f"/apis/{GROUP}/{VERSION}\"" not in log, log


def test_aggregated_discovery_documents(world: tuple[RunningSandbox, RunningApp, int]) -> None:
    """`/api` and `/apis` as APIGroupDiscoveryList (v2, and v2beta1 for older kubectl): built-in groups,
    CRDs and the aggregated group with its subresources; ETag and 304; plain JSON stays legacy."""
    sb, _, _ = world
    code, headers, body = sb.http("GET", "/api", headers={"Accept": f"{DISCOVERY_V2},application/json"})
    assert code == 200 and headers["content-type"] == DISCOVERY_V2, body
    core = json.loads(body)
    assert (core["kind"], core["apiVersion"]) == ("APIGroupDiscoveryList", "apidiscovery.k8s.io/v2")
    [item] = core["items"]
    assert "name" not in item["metadata"] and item["versions"][0]["version"] == "v1"
    pods = next(r for r in item["versions"][0]["resources"] if r["resource"] == "pods")
    assert (pods["responseKind"], pods["scope"], pods["singularResource"]) == (
        {"group": "", "version": "", "kind": "Pod"}, "Namespaced", "pod")
    assert {"subresource": "eviction", "responseKind": {"group": "policy", "version": "v1", "kind": "Eviction"},
            "verbs": ["create"]} in pods["subresources"]
    beta = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
    code, headers, body = sb.http("GET", "/apis", headers={"Accept": beta})
    assert code == 200 and headers["content-type"] == beta
    document = json.loads(body)
    assert document["apiVersion"] == "apidiscovery.k8s.io/v2beta1"
    names = [i["metadata"]["name"] for i in document["items"]]
    assert names.index("apps") < names.index(KAIWO) < names.index(GROUP)
    ours = next(i for i in document["items"] if i["metadata"]["name"] == GROUP)
    [version] = ours["versions"]
    assert (version["version"], version["freshness"]) == (VERSION, "Current")
    [summaries] = version["resources"]
    assert (summaries["resource"], summaries["scope"], summaries["shortNames"]) == ("workloadsummaries", "Namespaced",
                                                                                    ["kws"])
    assert [s["subresource"] for s in summaries["subresources"]] == ["explain", "events", "gpus"]
    code, again, _ = sb.http("GET", "/apis", headers={"Accept": beta, "If-None-Match": headers["etag"]})
    assert code == 304 and again["etag"] == headers["etag"]
    code, headers, body = sb.http("GET", "/apis")
    assert code == 200 and headers["content-type"] == "application/json"
    assert json.loads(body)["kind"] == "APIGroupList"


def test_rbac_answers_403_at_the_aggregator_and_at_the_admin_api(world: tuple[RunningSandbox, RunningApp, int],
                                                               tmp_path: Path) -> None:
    sb, _, _ = world
    alice, bob = user_config(sb, "alice", tmp_path), user_config(sb, "bob", tmp_path)
    elsewhere = kubectl(sb, alice, "get", "--raw", f"{PREFIX}/namespaces/team-b/workloadsummaries")
    assert elsewhere.returncode != 0
    assert "forbidden" in elsewhere.stderr.lower(), elsewhere.stderr
    # bob's RBAC lets the aggregator pass him, but he may not list the workloads themselves
    denied = kubectl(sb, bob, "get", "--raw", f"{PREFIX}/namespaces/team-a/workloadsummaries")
    assert denied.returncode != 0
    assert 'User "bob" cannot list resource "kaiwojobs"' in denied.stderr, denied.stderr
    audited = [r for r in sb.audit.records(user="alice") if r.resource == "workloadsummaries"]
    assert {(r.verb, r.namespace, r.code) for r in audited} >= {("list", "team-b", 403)}


def test_the_kubernetes_client_reaches_the_group_with_a_users_token(world: tuple[RunningSandbox, RunningApp, int],
                                                                   tmp_path: Path) -> None:
    sb, app, _ = world
    token = sb.mint_token("alice")
    client = sb.api_client(token)
    try:
        api = kubernetes.client.CustomObjectsApi(client)
        listed = api.list_namespaced_custom_object(GROUP, VERSION, "team-a", "workloadsummaries")
        assert isinstance(listed, dict)
        assert [i["metadata"]["name"] for i in listed["items"]] == ["job.one", "job.two"]
        one = api.get_namespaced_custom_object(GROUP, VERSION, "team-a", "workloadsummaries", "job.one")
        assert isinstance(one, dict) and one["workload"] == {"apiVersion": f"{KAIWO}/v1alpha1", "kind": "KaiwoJob", "name": "one"}
        with pytest.raises(kubernetes.client.ApiException) as refused:
            api.list_namespaced_custom_object(GROUP, VERSION, "team-b", "workloadsummaries")
        assert refused.value.status == 403
        with pytest.raises(kubernetes.client.ApiException) as missing:
            api.get_namespaced_custom_object(GROUP, VERSION, "team-a", "workloadsummaries", "job.absent")
        assert missing.value.status == 404
        # its dynamic client discovers the group (legacy discovery: it asks for plain JSON)
        dynamic = kubernetes.dynamic.DynamicClient(client)
        summaries = dynamic.resources.get(api_version=f"{GROUP}/{VERSION}", kind="WorkloadSummary")
        assert summaries.name == "workloadsummaries" and summaries.namespaced
        assert [i.metadata.name for i in summaries.get(namespace="team-a").items] == ["job.one", "job.two"]
    finally:
        client.close()
    # both paths give the same answers: the subresource through the aggregator, /api/v1 directly
    through = kubectl(sb, user_config(sb, "alice", tmp_path), "get", "--raw",
                      f"{PREFIX}/namespaces/team-a/workloadsummaries/job.one/explain")
    assert through.returncode == 0, through.stderr
    with app.client(headers={"Authorization": f"Bearer {token}"}) as direct:
        answer = direct.get("/api/v1/namespaces/team-a/kaiwojobs/one/explain")
        assert answer.status_code == 200, answer.text
        assert json.loads(through.stdout) == answer.json()
        again = direct.get(f"{PREFIX}/namespaces/team-a/workloadsummaries")
        assert [i["metadata"]["name"] for i in again.json()["items"]] == ["job.one", "job.two"]


def test_kubectl_watch_shows_a_new_workload(world: tuple[RunningSandbox, RunningApp, int], tmp_path: Path) -> None:
    sb, _, _ = world
    alice = user_config(sb, "alice", tmp_path)
    process = subprocess.Popen(["kubectl", "--kubeconfig", str(alice), "get", "kws", "-n", "team-a", "--watch"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={"PATH": "/usr/bin:/bin:/usr/local/bin", "HOME": str(alice.parent)})
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(process.stdout.readline, "")), daemon=True)  # type: ignore[union-attr]
    reader.start()
    try:
        eventually(lambda: any(line.startswith("job.two") for line in lines), 30, "the initial list")
        code, _, body = sb.http("POST", f"/apis/{KAIWO}/v1alpha1/namespaces/team-a/kaiwojobs", kaiwojob("three", "team-a"))
        assert code == 201, body
        eventually(lambda: any(line.startswith("job.three") for line in lines), 30, "job.three watched")
    finally:
        process.kill()
        process.wait(timeout=10)
        sb.http("DELETE", f"/apis/{KAIWO}/v1alpha1/namespaces/team-a/kaiwojobs/three")


def test_a_watch_resumed_from_a_lists_version_sends_a_workload_created_in_between(
        world: tuple[RunningSandbox, RunningApp, int]) -> None:
    """kubectl lists, then watches from the list's resourceVersion: a workload created in that gap
    must reach the watch (it is already in the view the watch starts from)."""
    sb, _, _ = world
    path = f"{PREFIX}/namespaces/team-a/workloadsummaries"
    code, _, body = sb.http("GET", path)
    assert code == 200, body
    listed = json.loads(body)["metadata"]["resourceVersion"]
    code, _, body = sb.http("POST", f"/apis/{KAIWO}/v1alpha1/namespaces/team-a/kaiwojobs", kaiwojob("gap", "team-a"))
    assert code == 201, body
    try:
        eventually(lambda: b"job.gap" in sb.http("GET", path)[2], 30, "job.gap in the admin API's view")
        code, _, body = sb.http("GET", f"{path}?watch=true&resourceVersion={listed}&timeoutSeconds=1")
        assert code == 200, body
        events = [json.loads(line) for line in body.splitlines() if line.strip()]
        assert [e["object"]["metadata"]["name"] for e in events] == ["job.gap"], events
        assert events[0]["type"] == "MODIFIED"
    finally:
        sb.http("DELETE", f"/apis/{KAIWO}/v1alpha1/namespaces/team-a/kaiwojobs/gap")


def test_forged_identity_headers_sent_straight_to_the_backend_are_refused(
        world: tuple[RunningSandbox, RunningApp, int], tmp_path: Path) -> None:
    _, app, port = world
    forged = {"X-Remote-User": "kaiwo-admin", "X-Remote-Group": "system:masters"}
    path = f"{PREFIX}/namespaces/team-b/workloadsummaries"
    with httpx.Client(base_url=f"https://127.0.0.1:{port}", verify=False, timeout=30) as no_certificate:
        answer = no_certificate.get(path, headers=forged)
        assert answer.status_code == 401 and answer.json()["reason"] == "Unauthorized"
    with app.client() as plain:
        assert plain.get(path, headers=forged).status_code == 401
    # a client certificate from another CA does not get through the handshake
    other = certs.generate()
    (tmp_path / "tls.crt").write_bytes(other.cert_pem)
    (tmp_path / "tls.key").write_bytes(other.key_pem)
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
    # the server refuses the certificate in the handshake (under TLS 1.3 the client learns it on its first
    # read: the server closes without an answer)
    with (httpx.Client(base_url=f"https://127.0.0.1:{port}", verify=context, timeout=30) as intruder,
          pytest.raises((httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError))):
        intruder.get(path, headers=forged)


def test_an_unavailable_backend_is_503_with_its_condition_saying_why(world: tuple[RunningSandbox, RunningApp, int],
                                                                   tmp_path: Path) -> None:
    sb, _, _ = world
    name = "v1.broken.example.com"
    code, _, body = sb.http("POST", APISERVICES, apiservice(name, "broken.example.com", "v1", "missing"))
    assert code == 201, body
    try:
        condition = eventually(lambda: available(sb, name) or None, 30, "a condition")
        assert (condition["status"], condition["reason"], condition["message"]) == (
            "False", "ServiceNotFound", 'service/missing in "kaiwo-system" is not present')
        code, headers, body = sb.http("GET", "/apis/broken.example.com/v1/namespaces/x/things")
        assert (code, body, headers["content-type"]) == (503, b"service unavailable\n", "text/plain; charset=utf-8")
        shown = kubectl(sb, sb.kubeconfig_path, "get", "--raw", "/apis/broken.example.com/v1/things")
        assert "the server is currently unable to handle the request" in shown.stderr, shown.stderr
        # the group is in discovery all the same, as kube-aggregator lists every APIService's group
        groups = [g["name"] for g in json.loads(sb.http("GET", "/apis")[2])["groups"]]
        assert GROUP in groups and "broken.example.com" in groups
        # ... and in aggregated discovery as Stale, with no resources: client-go leaves a stale version
        # out of the groups it converts (SplitGroupsAndResources), so kubectl lists every other group
        stale = eventually(lambda: discovered(sb, "broken.example.com", "v1") or None, 30, "a stale entry")
        assert stale == {"version": "v1", "freshness": "Stale"}
        listed = kubectl(sb, sb.kubeconfig_path, "api-resources", f"--cache-dir={tmp_path / 'cache'}")
        assert listed.returncode == 0, listed.stderr
        assert "workloadsummaries" in listed.stdout and "broken.example.com" not in listed.stdout
        # a Service whose endpoint does not listen: the discovery check fails with the dial error
        expose(sb, "kaiwo-system", "missing", free_port())
        def failed_check() -> dict[str, Any] | None:
            found = available(sb, name)
            return found if found.get("reason") == "FailedDiscoveryCheck" else None

        condition = eventually(failed_check, 30, "FailedDiscoveryCheck")
        assert "connect: connection refused" in condition["message"], condition
    finally:
        sb.http("DELETE", f"{APISERVICES}/{name}")


def test_apiservice_validation_names_the_fields(world: tuple[RunningSandbox, RunningApp, int]) -> None:
    sb, _, _ = world
    bad = apiservice("v1.wrong.example.com", "other.example.com", "v1", "svc")
    bad["spec"].update(groupPriorityMinimum=0, caBundle="eA==")
    code, _, body = sb.http("POST", APISERVICES, bad)
    assert code == 422, body
    fields = [c["field"] for c in json.loads(body)["details"]["causes"]]
    assert fields == ["metadata.name", "spec.groupPriorityMinimum", "spec.insecureSkipTLSVerify"]
