"""The token controller fills a legacy service-account token Secret, as kube-controller-manager does, and
the token it writes authenticates as the ServiceAccount (what the shipped ServiceMonitor's scrape
credentials rely on)."""

from __future__ import annotations

import base64
import json

from kaiwo_sandbox.testing import eventually, start_sandbox

SECRET = "/api/v1/namespaces/default/secrets/reader-token"


def test_a_token_secret_is_filled_once_its_service_account_exists() -> None:
    with start_sandbox(nodes=[], cluster=["token-controller"], authorization="RBAC") as sb:
        def data() -> dict[str, str]:
            status, _, body = sb.http("GET", SECRET)
            assert status == 200
            return dict(json.loads(body).get("data") or {})

        secret = {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
                  "metadata": {"name": "reader-token", "namespace": "default",
                               "annotations": {"kubernetes.io/service-account.name": "reader"}}}
        assert sb.http("POST", "/api/v1/namespaces/default/secrets", secret)[0] == 201
        assert "token" not in data()  # no such ServiceAccount yet
        assert sb.http("POST", "/api/v1/namespaces/default/serviceaccounts",
                       {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "reader"}})[0] == 201
        token = base64.b64decode(eventually(lambda: data().get("token"), timeout=10, message="token")).decode()
        filled = data()
        assert base64.b64decode(filled["namespace"]).decode() == "default"
        assert b"BEGIN CERTIFICATE" in base64.b64decode(filled["ca.crt"])
        status, _, body = sb.http("GET", "/api/v1/namespaces/default/pods", token=token)
        assert status == 403  # authenticated as the ServiceAccount, which may do nothing
        assert "system:serviceaccount:default:reader" in body.decode()
