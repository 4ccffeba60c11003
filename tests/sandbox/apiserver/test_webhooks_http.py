"""The sandbox calls admission webhooks as kube-apiserver does (cluster-mechanics reference, section 2):
through kubectl and the `kubernetes` client, against small TLS webhook servers on 127.0.0.1."""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
from webhook_harness import JsonObj, WebhookServer, allow, ca_bundle, make_ca, patch

from kaiwo_sandbox.apiserver.webhooks.matching import Request, by_rules
from kaiwo_sandbox.contracts import GVR
from kaiwo_sandbox.testing import RunningSandbox

Kubectl = Callable[..., subprocess.CompletedProcess[str]]
MUTATING = ("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations")
VALIDATING = ("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations")

CONFIGMAP = """apiVersion: v1
kind: ConfigMap
metadata: {name: settings, labels: {app: demo}}
data: {mode: fast}
"""


@pytest.fixture
def kubectl(sandbox: RunningSandbox, kubectl_bin: str, tmp_path: Path) -> Kubectl:
    """kubectl as user alice (group devs), so reviews carry an identity the test chose."""
    token = sandbox.mint_token("alice", ["devs"])
    config = sandbox.kubeconfig_for(token, tmp_path / "alice.kubeconfig")

    def run(*args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run([kubectl_bin, "--kubeconfig", str(config), "--cache-dir", str(tmp_path / "c"),
                                 *args], input=stdin, capture_output=True, text=True, timeout=60)
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {result.stderr}")
        return result

    return run


@pytest.fixture
def servers() -> Iterator[list[WebhookServer]]:
    started: list[WebhookServer] = []
    yield started
    for server in started:
        server.stop()


def serve(servers: list[WebhookServer], handler: Any, names: list[str] | None = None) -> WebhookServer:
    server = WebhookServer(handler, names)
    servers.append(server)
    return server


def service_for(sandbox: RunningSandbox, server: WebhookServer | None, name: str = "hook",
                port: int | None = None) -> None:
    """A selectorless Service `default/<name>` on 443, and Endpoints at the test server (if any)."""
    core = kubernetes.client.CoreV1Api(sandbox.api_client())
    core.create_namespaced_service("default", {"metadata": {"name": name}, "spec": {
        "ports": [{"name": "https", "port": 443, "targetPort": 9443}]}})
    if server is not None or port is not None:
        core.create_namespaced_endpoints("default", {"metadata": {"name": name}, "subsets": [{
            "addresses": [{"ip": "127.0.0.1"}],
            "ports": [{"name": "https", "port": port or server.port}]}]})  # type: ignore[union-attr]


def webhook(name: str, ca: str, *, path: str = "/hook", resources: tuple[str, ...] = ("configmaps",),
            operations: tuple[str, ...] = ("CREATE", "UPDATE"), url: str | None = None, **extra: Any) -> JsonObj:
    client: JsonObj = {"caBundle": ca}
    if url:
        client["url"] = url
    else:
        client["service"] = {"name": "hook", "namespace": "default", "path": path}
    return {"name": name, "clientConfig": client, "sideEffects": "None", "admissionReviewVersions": ["v1"],
            "rules": [{"operations": list(operations), "apiGroups": [""], "apiVersions": ["v1"],
                       "resources": list(resources)}], **extra}


def configure(sandbox: RunningSandbox, plural: tuple[str, str, str], name: str, hooks: list[JsonObj]) -> JsonObj:
    custom = kubernetes.client.CustomObjectsApi(sandbox.api_client())
    kind = "MutatingWebhookConfiguration" if "mutating" in plural[2] else "ValidatingWebhookConfiguration"
    created: JsonObj = custom.create_cluster_custom_object(*plural, {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": kind, "metadata": {"name": name},
        "webhooks": hooks})
    return created


def post(sandbox: RunningSandbox, path: str, body: JsonObj) -> tuple[int, JsonObj]:
    status, _, raw = sandbox.http("POST", path, body)
    return status, json.loads(raw)


def configmap(sandbox: RunningSandbox, name: str = "settings") -> JsonObj | None:
    found = sandbox.store.find_ref(GVR("", "v1", "configmaps"), "default", name)
    return None if found is None else dict(found)


# ---------------------------------------------------------------------------------------------------------
def test_mutating_webhook_patches_the_object_and_sees_the_review_the_real_server_sends(
        sandbox: RunningSandbox, kubectl: Kubectl, servers: list[WebhookServer]) -> None:
    async def label(request: JsonObj) -> JsonObj:
        return {**patch([{"op": "add", "path": "/metadata/labels/stamped", "value": "yes"}]),
                "warnings": ["stamped by \"label.example.com\""]}

    server = serve(servers, label)
    service_for(sandbox, server)
    config = configure(sandbox, MUTATING, "stamp", [webhook("label.example.com", server.ca_bundle)])
    defaulted = config["webhooks"][0]
    assert (defaulted["failurePolicy"], defaulted["matchPolicy"], defaulted["timeoutSeconds"],
            defaulted["reinvocationPolicy"], defaulted["clientConfig"]["service"]["port"]) == \
        ("Fail", "Equivalent", 10, "Never", 443)

    result = kubectl("create", "-f", "-", stdin=CONFIGMAP)

    assert 'Warning: stamped by "label.example.com"' in result.stderr
    stored = configmap(sandbox)
    assert stored is not None and stored["metadata"]["labels"] == {"app": "demo", "stamped": "yes"}
    review = server.reviews[0]
    assert review["apiVersion"] == "admission.k8s.io/v1" and review["kind"] == "AdmissionReview"
    request = review["request"]
    assert request["operation"] == "CREATE" and request["dryRun"] is False
    assert request["kind"] == {"group": "", "version": "v1", "kind": "ConfigMap"}
    assert request["resource"] == {"group": "", "version": "v1", "resource": "configmaps"}
    assert request["requestResource"] == request["resource"]
    assert request["namespace"] == "default" and request["name"] == "settings"
    assert request["userInfo"]["username"] == "alice" and "devs" in request["userInfo"]["groups"]
    assert request["object"]["data"] == {"mode": "fast"} and request["oldObject"] is None
    assert "uid" not in request["object"]["metadata"]  # set after mutating admission
    assert request["options"]["kind"] == "CreateOptions"
    assert server.paths[0] == "/hook?timeout=10s"


def test_validating_webhook_refusal_is_the_real_servers_error_and_nothing_is_stored(
        sandbox: RunningSandbox, kubectl: Kubectl, servers: list[WebhookServer]) -> None:
    async def deny(request: JsonObj) -> JsonObj:
        return {"allowed": False, "status": {"code": 403, "reason": "Forbidden", "message": "mode fast is banned"}}

    server = serve(servers, deny)
    service_for(sandbox, server)
    configure(sandbox, VALIDATING, "guard", [webhook("guard.example.com", server.ca_bundle)])

    result = kubectl("create", "-f", "-", stdin=CONFIGMAP, check=False)

    assert result.returncode == 1
    assert ('Error from server (Forbidden): error when creating "STDIN": admission webhook "guard.example.com" '
            "denied the request: mode fast is banned") in result.stderr
    assert configmap(sandbox) is None
    assert server.reviews[0]["request"]["object"]["metadata"]["uid"]  # validating sees the object to store


def test_denial_without_a_code_is_400_and_without_a_message_says_so(
        sandbox: RunningSandbox, servers: list[WebhookServer]) -> None:
    async def deny(request: JsonObj) -> JsonObj:
        return {"allowed": False}

    server = serve(servers, deny)
    service_for(sandbox, server)
    configure(sandbox, VALIDATING, "guard", [webhook("guard.example.com", server.ca_bundle)])
    status, body = post(sandbox, "/api/v1/namespaces/default/configmaps",
                                {"metadata": {"name": "settings"}})
    assert status == 400
    assert body["message"] == 'admission webhook "guard.example.com" denied the request without explanation'


def test_mutating_webhooks_run_in_configuration_name_order_and_if_needed_ones_run_again(
        sandbox: RunningSandbox, kubectl: Kubectl, servers: list[WebhookServer]) -> None:
    calls: list[str] = []

    def hook(name: str, ops: list[JsonObj] | None) -> Any:
        async def answer(request: JsonObj) -> JsonObj:
            calls.append(name)
            if ops is None or name in (request["object"]["metadata"].get("labels") or {}):
                return {"allowed": True}
            return patch(ops)
        return answer

    first = serve(servers, hook("first", None))
    second = serve(servers, hook("second", [{"op": "add", "path": "/metadata/labels/second", "value": "1"}]))
    configure(sandbox, MUTATING, "b-later", [webhook("second.example.com", second.ca_bundle,
                                                     url=f"https://127.0.0.1:{second.port}/m")])
    configure(sandbox, MUTATING, "a-first", [webhook("first.example.com", first.ca_bundle, reinvocationPolicy="IfNeeded",
                                                     url=f"https://127.0.0.1:{first.port}/m")])

    kubectl("create", "-f", "-", stdin=CONFIGMAP)

    # a-first before b-later; second's patch changed the object, so IfNeeded first runs once more.
    assert calls == ["first", "second", "first"]
    assert len(first.reviews) == 2 and first.reviews[1]["request"]["object"]["metadata"]["labels"]["second"] == "1"


def test_failure_policy_fail_gives_the_real_servers_500_and_ignore_lets_the_write_through(
        sandbox: RunningSandbox, kubectl: Kubectl) -> None:
    ca = base64.b64encode(b"").decode()
    service_for(sandbox, None, port=1)  # nothing listens on 127.0.0.1:1
    configure(sandbox, VALIDATING, "down", [webhook("down.example.com", ca)])

    result = kubectl("create", "-f", "-", stdin=CONFIGMAP, check=False)

    assert ('Error from server (InternalError): error when creating "STDIN": Internal error occurred: failed '
            'calling webhook "down.example.com": failed to call webhook: Post '
            '"https://hook.default.svc:443/hook?timeout=10s": dial tcp 127.0.0.1:1: connect: connection refused'
            ) in result.stderr
    assert configmap(sandbox) is None

    kubectl("patch", "validatingwebhookconfiguration", "down", "--type=json",
            "-p", '[{"op": "replace", "path": "/webhooks/0/failurePolicy", "value": "Ignore"}]')
    kubectl("create", "-f", "-", stdin=CONFIGMAP)
    assert configmap(sandbox) is not None
    record = sandbox.audit.records(verb="create", resource="configmaps")[-1]
    assert record.annotations == {"failed-open.validating.webhook.admission.k8s.io/round_0_index_0":
                                  "down.example.com"}


def test_a_webhook_that_outlives_its_timeout_is_context_deadline_exceeded(
        sandbox: RunningSandbox, servers: list[WebhookServer]) -> None:
    release = asyncio.Event()

    async def stall(request: JsonObj) -> JsonObj:
        await asyncio.wait_for(release.wait(), 5)  # never set: the API server must give up first
        return {"allowed": True}

    server = serve(servers, stall)
    service_for(sandbox, server)
    configure(sandbox, VALIDATING, "slow", [webhook("slow.example.com", server.ca_bundle, timeoutSeconds=1)])
    status, body = post(sandbox, "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "settings"}})
    assert status == 500 and body["reason"] == "InternalError"
    assert body["message"] == ('Internal error occurred: failed calling webhook "slow.example.com": failed to call '
                               'webhook: Post "https://hook.default.svc:443/hook?timeout=1s": context deadline '
                               "exceeded")


def test_the_certificate_is_verified_against_ca_bundle_and_the_service_name(
        sandbox: RunningSandbox, servers: list[WebhookServer]) -> None:
    server = serve(servers, allow)
    service_for(sandbox, server)
    configure(sandbox, VALIDATING, "tls", [webhook("tls.example.com", ca_bundle(make_ca()))])
    status, body = post(sandbox, "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "a"}})
    assert status == 500
    assert body["message"].endswith("tls: failed to verify certificate: x509: certificate signed by unknown "
                                    "authority")
    assert server.reviews == []

    wrong_name = serve(servers, allow, names=["other.default.svc"])
    custom = kubernetes.client.CustomObjectsApi(sandbox.api_client())
    custom.delete_cluster_custom_object(*VALIDATING, "tls")
    core = kubernetes.client.CoreV1Api(sandbox.api_client())
    core.patch_namespaced_endpoints("hook", "default", {"subsets": [{
        "addresses": [{"ip": "127.0.0.1"}], "ports": [{"name": "https", "port": wrong_name.port}]}]})
    configure(sandbox, VALIDATING, "tls", [webhook("tls.example.com", wrong_name.ca_bundle)])
    status, body = post(sandbox, "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "b"}})
    assert status == 500 and "certificate is valid for other names, not hook.default.svc" in body["message"]


def test_no_endpoints_and_no_service_are_the_real_servers_messages(sandbox: RunningSandbox) -> None:
    service_for(sandbox, None)
    configure(sandbox, VALIDATING, "none", [webhook("none.example.com", "")])
    status, body = post(sandbox, "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "a"}})
    assert status == 500 and body["message"].endswith(
        'Post "https://hook.default.svc:443/hook?timeout=10s": no endpoints available for service "hook"')


def test_namespace_and_object_selectors_choose_which_writes_are_sent(
        sandbox: RunningSandbox, servers: list[WebhookServer]) -> None:
    server = serve(servers, allow)
    service_for(sandbox, server)
    configure(sandbox, VALIDATING, "picky", [webhook(
        "picky.example.com", server.ca_bundle,
        namespaceSelector={"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                                                 "values": ["kube-system"]}]},
        objectSelector={"matchLabels": {"watched": "yes"}})])
    for namespace, labels in (("kube-system", {"watched": "yes"}), ("default", {}), ("default", {"watched": "yes"})):
        status, _ = post(sandbox, f"/api/v1/namespaces/{namespace}/configmaps",
                                 {"metadata": {"generateName": "c-", "labels": labels}})
        assert status == 201
    assert len(server.reviews) == 1
    assert server.reviews[0]["request"]["namespace"] == "default"


def test_server_side_dry_run_is_passed_to_webhooks_and_stores_nothing(
        sandbox: RunningSandbox, kubectl: Kubectl, servers: list[WebhookServer]) -> None:
    server = serve(servers, allow)
    service_for(sandbox, server)
    configure(sandbox, MUTATING, "m", [webhook("m.example.com", server.ca_bundle)])
    configure(sandbox, VALIDATING, "v", [webhook("v.example.com", server.ca_bundle)])

    kubectl("apply", "--dry-run=server", "-f", "-", stdin=CONFIGMAP)

    assert configmap(sandbox) is None
    assert [r["request"]["dryRun"] for r in server.reviews] == [True, True]
    assert server.reviews[0]["request"]["options"]["dryRun"] == ["All"]


def test_updates_patches_and_deletes_are_admitted_with_the_old_object(
        sandbox: RunningSandbox, kubectl: Kubectl, servers: list[WebhookServer]) -> None:
    async def no_delete_of_kept(request: JsonObj) -> JsonObj:
        if request["operation"] == "DELETE" and request["oldObject"]["metadata"]["labels"].get("keep"):
            return {"allowed": False, "status": {"code": 403, "reason": "Forbidden", "message": "kept"}}
        return {"allowed": True}

    server = serve(servers, no_delete_of_kept)
    service_for(sandbox, server)
    kubectl("create", "-f", "-", stdin=CONFIGMAP)
    configure(sandbox, VALIDATING, "v", [webhook("v.example.com", server.ca_bundle,
                                                 operations=("UPDATE", "DELETE"))])

    kubectl("label", "configmap", "settings", "keep=1")
    update = server.reviews[-1]["request"]
    assert update["operation"] == "UPDATE" and update["options"]["kind"] == "UpdateOptions"
    assert update["oldObject"]["metadata"]["labels"] == {"app": "demo"}
    assert update["object"]["metadata"]["labels"] == {"app": "demo", "keep": "1"}

    refused = kubectl("delete", "configmap", "settings", check=False)
    assert 'admission webhook "v.example.com" denied the request: kept' in refused.stderr
    assert server.reviews[-1]["request"]["object"] is None
    assert configmap(sandbox) is not None


def test_a_response_for_another_request_is_an_invalid_webhook_response(
        sandbox: RunningSandbox, servers: list[WebhookServer]) -> None:
    async def stale(request: JsonObj) -> JsonObj:
        return {"raw": {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                        "response": {"uid": "not-yours", "allowed": True}}}

    server = serve(servers, stale)
    service_for(sandbox, server)
    configure(sandbox, VALIDATING, "v", [webhook("v.example.com", server.ca_bundle)])
    status, body = post(sandbox, "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "a"}})
    uid = server.reviews[0]["request"]["uid"]
    assert status == 500 and body["message"].endswith(
        f'failed calling webhook "v.example.com": received invalid webhook response: expected '
        f'response.uid="{uid}", got "not-yours"')


def test_configurations_are_validated_as_the_real_server_does(sandbox: RunningSandbox) -> None:
    hook = webhook("bad", "")
    del hook["sideEffects"]
    hook["timeoutSeconds"] = 31
    status, body = post(sandbox, "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
                                {"apiVersion": "admissionregistration.k8s.io/v1",
                                 "kind": "ValidatingWebhookConfiguration", "metadata": {"name": "bad"},
                                 "webhooks": [hook]})
    assert status == 422
    fields = {cause["field"] for cause in body["details"]["causes"]}
    assert fields == {"webhooks[0].name", "webhooks[0].sideEffects", "webhooks[0].timeoutSeconds"}


def test_equivalent_match_policy_matches_another_version_of_the_same_resource() -> None:
    hook = webhook("w.example.com", "", resources=("widgets",))
    hook["rules"][0].update(apiGroups=["example.com"], apiVersions=["v1"])
    config = {"metadata": {"name": "c"}, "webhooks": [dict(hook, matchPolicy="Equivalent")]}
    request = Request("CREATE", GVR("example.com", "v2", "widgets"), "", True, ("v1",))
    [candidate] = by_rules([config], request)
    assert candidate.gvr == GVR("example.com", "v1", "widgets")
    config["webhooks"][0]["matchPolicy"] = "Exact"
    assert by_rules([config], request) == []
    status_request = Request("UPDATE", GVR("example.com", "v1", "widgets"), "status", True)
    assert by_rules([config], status_request) == []  # "widgets" does not cover widgets/status
