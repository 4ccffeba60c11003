"""AIMNamespaceConfig put to work, through the sandbox (seed 004): downloads that name no credentials
take the namespace's, its image pull secrets reach every pod kaiwo-ray creates there, a Ray
KaiwoService gets an HTTPRoute to its gateway, the config's status says what it references that is
missing, a workload says which Secret and key it waits for, and only one config per namespace counts."""

from __future__ import annotations

import base64
from typing import Any

import yaml
from e2e_harness import OperatorSandbox
from e2e_scenarios import kaiwo_job, kaiwo_service
from e2e_support import KAIWO_API, condition, wait_for

CONFIG_API = "config.kaiwo.silogen.ai/v1alpha1"
GATEWAY_API = "gateway.networking.k8s.io/v1"
ENDPOINT = "https://s3.example.com"


def _secret(name: str, namespace: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": namespace},
            "data": {key: base64.b64encode(value.encode()).decode() for key, value in data.items()}}


def _config(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": CONFIG_API, "kind": "AIMNamespaceConfig", "metadata": {"name": name, "namespace": namespace},
            "spec": spec}


def _s3_credentials(secret: str) -> dict[str, Any]:
    return {"s3": [{"endpointUrl": ENDPOINT, "accessKeyId": {"secretName": secret, "secretKey": "accessKeyId"},
                    "secretAccessKey": {"secretName": secret, "secretKey": "secretAccessKey"}}]}


def _s3_job(name: str, namespace: str) -> dict[str, Any]:
    """A KaiwoJob downloading from S3 with no credentials of its own."""
    return kaiwo_job(name, namespace, storage={"storageEnabled": True, "data": {
        "storageSize": "1Gi", "download": {"s3": [{"endpointUrl": ENDPOINT, "buckets": [
            {"name": "models", "files": [{"path": "m.bin", "targetPath": "m.bin"}]}]}]}}})


def _cond(kube: Any, api: str, kind: str, name: str, namespace: str, cond_type: str,
          status: str | None = None) -> dict[str, Any]:
    def found() -> dict[str, Any] | None:
        cond = condition(kube.get(api, kind, name, namespace), cond_type)
        return cond if cond is not None and (status is None or cond["status"] == status) else None
    got: dict[str, Any] = wait_for(found, 30, f"{kind} {name} condition {cond_type}={status}")
    return got


def test_an_s3_download_takes_its_credentials_from_the_namespace(operator_env: OperatorSandbox) -> None:
    kube = operator_env.target.kube
    namespace = operator_env.target.namespace("aim-s3")
    kube.create(_secret("s3-creds", namespace, accessKeyId="AKIA", secretAccessKey="shh"))
    kube.create(_config("tenant", namespace, credentials=_s3_credentials("s3-creds"),
                        images={"imagePullSecrets": ["regcred"]}))
    kube.create(_secret("regcred", namespace, **{".dockerconfigjson": "{}"}))
    kube.create(_s3_job("fetch", namespace))

    config_map = wait_for(lambda: kube.get("v1", "ConfigMap", "fetch-download", namespace), 30, "the download ConfigMap")
    s3 = yaml.safe_load(config_map["data"]["config.yaml"])["s3"][0]
    assert s3["accessKeyId"] == {"file": "/app/secrets/s3-creds/accessKeyId", "secretName": "s3-creds",
                                 "secretKey": "accessKeyId"}
    assert s3["secretKey"]["secretName"] == "s3-creds" and s3["secretKey"]["secretKey"] == "secretAccessKey"
    job = wait_for(lambda: kube.get("batch/v1", "Job", "fetch-download", namespace), 30, "the download Job")
    pod = job["spec"]["template"]["spec"]
    secret_volumes = [v["secret"] for v in pod["volumes"] if "secret" in v]
    # (defaultMode is the API server's default, there or not depending on the server)
    assert [{k: v for k, v in s.items() if k != "defaultMode"} for s in secret_volumes] == [
        {"secretName": "s3-creds", "items": [{"key": "accessKeyId", "path": "accessKeyId"},
                                             {"key": "secretAccessKey", "path": "secretAccessKey"}]}]
    assert pod["imagePullSecrets"] == [{"name": "regcred"}]

    used = _cond(kube, KAIWO_API, "KaiwoJob", "fetch", namespace, "CredentialsFound", "True")
    assert "Secret s3-creds key accessKeyId" in used["message"] and "tenant" in used["message"]
    found = _cond(kube, CONFIG_API, "AIMNamespaceConfig", "tenant", namespace, "SecretsFound", "True")
    assert found["reason"] == "SecretsFound"


def test_a_hugging_face_download_takes_the_namespace_token(operator_env: OperatorSandbox) -> None:
    kube = operator_env.target.kube
    namespace = operator_env.target.namespace("aim-hf")
    kube.create(_secret("hf-creds", namespace, token="hf_abc"))
    kube.create(_config("tenant", namespace, credentials={"huggingFaceToken": {"secretName": "hf-creds",
                                                                               "secretKey": "token"}}))
    kube.create(kaiwo_job("cache", namespace, storage={"storageEnabled": True, "huggingFace": {
        "storageSize": "1Gi", "preCacheRepos": [{"repoId": "org/model"}]}}))

    job = wait_for(lambda: kube.get("batch/v1", "Job", "cache-download", namespace), 30, "the download Job")
    env = job["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-creds", "key": "token"}}} in env
    used = _cond(kube, KAIWO_API, "KaiwoJob", "cache", namespace, "CredentialsFound", "True")
    assert "Secret hf-creds key token" in used["message"]


def test_missing_secrets_are_reported_by_the_config_and_by_the_workload(operator_env: OperatorSandbox) -> None:
    kube = operator_env.target.kube
    namespace = operator_env.target.namespace("aim-missing")
    kube.create(_config("tenant", namespace, credentials=_s3_credentials("s3-late")))
    kube.create(_s3_job("waits", namespace))

    missing = _cond(kube, CONFIG_API, "AIMNamespaceConfig", "tenant", namespace, "SecretsFound", "False")
    assert missing["reason"] == "SecretNotFound"
    assert "spec.credentials.s3[0].accessKeyId: Secret s3-late (key accessKeyId) not found" in missing["message"]
    status = kube.get(CONFIG_API, "AIMNamespaceConfig", "tenant", namespace)["status"]
    assert {"field": "spec.credentials.s3[0].secretAccessKey", "secretName": "s3-late",
            "secretKey": "secretAccessKey", "reason": "SecretNotFound"} in status["missingSecrets"]
    wait_for(lambda: "SecretNotFound" in kube.event_reasons(namespace, "tenant", "AIMNamespaceConfig"), 30,
             "the SecretNotFound event")
    waiting = _cond(kube, KAIWO_API, "KaiwoJob", "waits", namespace, "CredentialsFound", "False")
    assert "Secret s3-late key accessKeyId" in waiting["message"]
    assert "Secret s3-late key secretAccessKey" in waiting["message"]

    # A Secret with one key of two: the other is said to be missing from it.
    kube.create(_secret("s3-late", namespace, accessKeyId="AKIA"))
    wait_for(lambda: "accessKeyId" not in (condition(kube.get(KAIWO_API, "KaiwoJob", "waits", namespace),
                                                     "CredentialsFound") or {}).get("message", "accessKeyId"),
             30, "only the missing key named")
    partial = _cond(kube, KAIWO_API, "KaiwoJob", "waits", namespace, "CredentialsFound", "False")
    assert partial["reason"] == "SecretKeyNotFound" and "key secretAccessKey" in partial["message"]

    kube.patch("v1", "Secret", "s3-late", {"stringData": {"secretAccessKey": "shh"}}, namespace)
    _cond(kube, CONFIG_API, "AIMNamespaceConfig", "tenant", namespace, "SecretsFound", "True")
    _cond(kube, KAIWO_API, "KaiwoJob", "waits", namespace, "CredentialsFound", "True")


def test_only_the_oldest_config_of_a_namespace_counts(operator_env: OperatorSandbox) -> None:
    kube = operator_env.target.kube
    namespace = operator_env.target.namespace("aim-two")
    kube.create(_config("first", namespace, images={"imagePullSecrets": ["first-cred"]}))
    _cond(kube, CONFIG_API, "AIMNamespaceConfig", "first", namespace, "Accepted", "True")
    kube.create(_config("second", namespace, images={"imagePullSecrets": ["second-cred"]}))
    ignored = _cond(kube, CONFIG_API, "AIMNamespaceConfig", "second", namespace, "Accepted", "False")
    assert ignored["reason"] == "DuplicateConfig" and "AIMNamespaceConfig first" in ignored["message"]
    wait_for(lambda: "DuplicateConfig" in kube.event_reasons(namespace, "second", "AIMNamespaceConfig"), 30,
             "the DuplicateConfig event")

    kube.create(kaiwo_job("pulls", namespace))
    job = wait_for(lambda: kube.get("batch/v1", "Job", "pulls", namespace), 30, "the Job")
    assert job["spec"]["template"]["spec"]["imagePullSecrets"] == [{"name": "first-cred"}]

    kube.delete(CONFIG_API, "AIMNamespaceConfig", "first", namespace)
    _cond(kube, CONFIG_API, "AIMNamespaceConfig", "second", namespace, "Accepted", "True")


def test_a_ray_service_gets_an_http_route_to_the_namespace_gateway(operator_env: OperatorSandbox) -> None:
    kube = operator_env.target.kube
    namespace = operator_env.target.namespace("aim-gw")
    infra = operator_env.target.namespace("aim-gw-infra")
    kube.create(_config("tenant", namespace, gateway={"name": "shared", "namespace": infra}))
    absent = _cond(kube, CONFIG_API, "AIMNamespaceConfig", "tenant", namespace, "GatewayFound", "False")
    assert absent["reason"] == "GatewayNotFound" and f"{infra}/shared" in absent["message"]
    kube.create({"apiVersion": GATEWAY_API, "kind": "Gateway", "metadata": {"name": "shared", "namespace": infra},
                 "spec": {"gatewayClassName": "kgateway", "listeners": [
                     {"name": "http", "protocol": "HTTP", "port": 80, "allowedRoutes": {"namespaces": {"from": "All"}}}]}})
    _cond(kube, CONFIG_API, "AIMNamespaceConfig", "tenant", namespace, "GatewayFound", "True")

    service = kube.create(kaiwo_service("serve", namespace, ray=True, image="rayproject/ray:2.47.1-py311",
                                        entrypoint="app:deployment"))
    route = wait_for(lambda: kube.get(GATEWAY_API, "HTTPRoute", "serve", namespace), 30, "the HTTPRoute")
    owner = route["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "KaiwoService", "serve", service["metadata"]["uid"], True)
    assert route["spec"]["parentRefs"] == [{"group": "gateway.networking.k8s.io", "kind": "Gateway",
                                            "name": "shared", "namespace": infra}]
    assert route["spec"]["rules"][0]["backendRefs"] == [{"group": "", "kind": "Service", "name": "serve-serve-svc",
                                                         "port": 8000, "weight": 1}]

    # The gateway removed from the config: the route goes.
    kube.patch(CONFIG_API, "AIMNamespaceConfig", "tenant", {"spec": {"gateway": None}}, namespace)
    wait_for(lambda: kube.get(GATEWAY_API, "HTTPRoute", "serve", namespace) is None, 30, "the HTTPRoute deleted")
