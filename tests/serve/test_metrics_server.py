"""The operator's own metrics endpoint (serve/metrics_server.py) as controller-runtime serves it, against a
sandbox enforcing RBAC: over HTTPS with a self-signed certificate, a token whose user may `get` the
non-resource URL /metrics scrapes every controller-runtime and kaiwo_* series (and promtool accepts the
scrape); no token is 401, a user without the rule is 403 — the filter's TokenReview + SubjectAccessReview."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from admin_support import CONTROLLER_RUNTIME_SERIES, operator_stats
from e2e_harness import OperatorSandbox, operator_sandbox
from e2e_support import wait_for
from prometheus_client.parser import text_string_to_metric_families
from promtool_support import assert_scrapeable, needs_promtool

from serve.metrics_server import (
    MetricsServer,
    MetricsServerOptions,
    MetricsSources,
    options_from_env,
    parse_bind_address,
)

RBAC = "/apis/rbac.authorization.k8s.io/v1"


@pytest.fixture(scope="module")
def rbac_env() -> Iterator[OperatorSandbox]:
    with operator_sandbox(authorization="rbac") as env:
        # kubebuilder's metrics-reader ClusterRole, bound to the scraper only
        role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": "metrics-reader"},
                "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]}
        binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                   "metadata": {"name": "prometheus-metrics-reader"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                               "name": "metrics-reader"},
                   "subjects": [{"kind": "User", "name": "prometheus", "apiGroup": "rbac.authorization.k8s.io"}]}
        for path, body in (("clusterroles", role), ("clusterrolebindings", binding)):
            code, _, text = env.sb.http("POST", f"{RBAC}/{path}", body)
            assert code == 201, text
        yield env


@pytest.fixture(scope="module")
def secure(rbac_env: OperatorSandbox) -> Iterator[MetricsServer]:
    server = MetricsServer(MetricsServerOptions(bind_address="127.0.0.1:0", secure=True),
                           MetricsSources(kubeconfig=str(rbac_env.sb.kubeconfig_path),
                                          stats_source=operator_stats(rbac_env)))
    server.start()
    yield server
    server.stop()


def scrape(server: MetricsServer, token: str | None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    # the default certificate is self-signed, as a ServiceMonitor's insecureSkipVerify expects
    return httpx.get(server.url, headers=headers, verify=False, timeout=30)


def test_bind_addresses_read_as_controller_runtime_reads_them() -> None:
    assert parse_bind_address("0") is None
    assert parse_bind_address(":8443") == ("0.0.0.0", 8443)
    assert parse_bind_address("127.0.0.1:8080") == ("127.0.0.1", 8080)
    assert parse_bind_address("[::1]:8443") == ("::1", 8443)
    with pytest.raises(ValueError, match="expected host:port"):
        parse_bind_address("8443")


@needs_promtool
def test_a_token_that_may_get_metrics_scrapes_every_series_over_https(rbac_env: OperatorSandbox,
                                                                     secure: MetricsServer) -> None:
    assert secure.url.startswith("https://")
    token = rbac_env.sb.mint_token("prometheus")
    # the controllers count their first reconciles (the default queue's) once they have run
    wait_for(lambda: 'controller_runtime_reconcile_total{controller="kaiwoqueueconfig",result="success"} 0'
             not in scrape(secure, token).text, 30, "a kaiwoqueueconfig reconcile counted")
    response = scrape(secure, token)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=")
    text = response.text
    assert_scrapeable(text)
    samples: dict[str, list[dict[str, Any]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append(sample.labels)
    for name, labels in CONTROLLER_RUNTIME_SERIES.items():
        assert name in samples, name
        assert all(set(found) == labels for found in samples[name]), (name, samples[name][:2])
    for name in ("kaiwo_queue_pending_workloads", "kaiwo_node_gpus"):
        assert name in samples, name


def test_no_token_or_a_forged_one_is_401(secure: MetricsServer) -> None:
    for token in (None, "not-a-token"):
        response = scrape(secure, token)
        assert (response.status_code, response.text) == (401, "Unauthorized\n")


def test_a_user_without_the_rule_is_403(rbac_env: OperatorSandbox, secure: MetricsServer) -> None:
    response = scrape(secure, rbac_env.sb.mint_token("mallory"))
    assert (response.status_code, response.text) == (403, "Authorization denied for user mallory\n")


def test_without_secure_it_is_plain_http_with_no_filter(rbac_env: OperatorSandbox) -> None:
    server = MetricsServer(MetricsServerOptions(bind_address="127.0.0.1:0"),
                           MetricsSources(kubeconfig=str(rbac_env.sb.kubeconfig_path),
                                          stats_source=operator_stats(rbac_env)))
    server.start()
    try:
        assert server.url.startswith("http://")
        response = httpx.get(server.url, timeout=30)
        assert response.status_code == 200 and "controller_runtime_reconcile_total" in response.text
    finally:
        server.stop()


def test_a_cert_dir_without_its_files_is_refused_before_listening(rbac_env: OperatorSandbox,
                                                                   tmp_path: Any) -> None:
    server = MetricsServer(MetricsServerOptions(bind_address="127.0.0.1:0", secure=True, cert_dir=str(tmp_path)),
                           MetricsSources(kubeconfig=str(rbac_env.sb.kubeconfig_path)))
    with pytest.raises(ValueError, match=r"tls\.crt does not exist"):
        server.start()


def test_the_deployed_switches_come_from_the_environment() -> None:
    assert options_from_env({}) is None
    assert options_from_env({"KAIWO_METRICS_BIND_ADDRESS": "0"}) is None
    assert options_from_env({"KAIWO_METRICS_BIND_ADDRESS": ":8443"}) == MetricsServerOptions(":8443", True, None)
    assert options_from_env({"KAIWO_METRICS_BIND_ADDRESS": ":8080", "KAIWO_METRICS_SECURE": "false",
                             "KAIWO_METRICS_CERT_DIR": "/certs"}) == MetricsServerOptions(":8080", False, "/certs")
    with pytest.raises(ValueError, match="KAIWO_METRICS_BIND_ADDRESS"):
        options_from_env({"KAIWO_METRICS_BIND_ADDRESS": "8443"})
    with pytest.raises(ValueError, match="KAIWO_METRICS_SECURE"):
        options_from_env({"KAIWO_METRICS_BIND_ADDRESS": ":8443", "KAIWO_METRICS_SECURE": "maybe"})
