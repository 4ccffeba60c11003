"""The admin API against its own OpenAPI document: a short, seeded schemathesis run with a user's token
(a namespaced Role, so 403s happen too). Every answer must be a status the document lists for the
operation, in the content type and shape it lists, and none a server error. The longer run
(KAIWO_SCHEMATHESIS_EXAMPLES=200) and its result are in docs/admin-api.md."""

from __future__ import annotations

import copy
import os
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from admin_support import RunningApp, kaiwojob, serve_app
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import negative_data_rejection, positive_data_acceptance

from kaiwo_sandbox.testing import RunningSandbox, start_sandbox
from serve.app import build_app
from serve.state import AdminSettings

KAIWO = "kaiwo.silogen.ai"
TOKENS: dict[str, str] = {}
KAIWO_USER_RULES = [{"apiGroups": [KAIWO], "resources": ["kaiwojobs", "kaiwoservices"],
                     "verbs": ["get", "list", "watch", "create", "delete"]},
                    {"apiGroups": [""], "resources": ["events", "pods", "pods/log"], "verbs": ["get", "list"]}]


@pytest.fixture(scope="module")
def secured() -> Iterator[tuple[RunningSandbox, RunningApp]]:
    with start_sandbox(nodes=[], authorization="RBAC") as sb:
        code, _, body = sb.http("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                               "metadata": {"name": "team-a"}})
        assert code == 201, body
        code, _, body = sb.http("POST", f"/apis/{KAIWO}/v1alpha1/namespaces/team-a/kaiwojobs", kaiwojob("one", "team-a"))
        assert code == 201, body
        TOKENS["alice"] = sb.grant("alice", "team-a", KAIWO_USER_RULES, role="kaiwo-user")
        app = serve_app(AdminSettings(kubeconfig=str(sb.kubeconfig_path), auth="kubernetes", auth_cache_seconds=60))
        try:
            yield sb, app
        finally:
            app.stop()


# The document the app serves at /openapi.json, built from the code (test_the_served_document_is_this_one
# checks the two are the same): loaded at collection, so each operation is a test of its own.
DOCUMENT = build_app().openapi()


def _without_watch(document: dict[str, Any]) -> dict[str, Any]:
    """The document less the `watch` parameter: a watch answers a stream of JSON documents (none at all
    when nothing changes), which no JSON check can read as one. `kubectl get --watch` is tested in
    test_aggregated.py."""
    fuzzed = copy.deepcopy(document)
    for operations in fuzzed["paths"].values():
        for operation in operations.values():
            operation["parameters"] = [p for p in operation.get("parameters", []) if p["name"] != "watch"]
    return fuzzed


schema = schemathesis.openapi.from_dict(_without_watch(DOCUMENT))


def test_the_served_document_is_this_one(secured: tuple[RunningSandbox, RunningApp]) -> None:
    _, app = secured
    with app.client() as http:
        assert http.get("/openapi.json").json() == DOCUMENT


@schema.exclude(path_regex=r"/stream$|/logs$").parametrize()  # endless streams: no answer ever completes
@settings(max_examples=int(os.environ.get("KAIWO_SCHEMATHESIS_EXAMPLES", "10")), deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
def test_every_answer_is_one_the_document_lists(case: schemathesis.Case,  # type: ignore[type-arg]
                                                secured: tuple[RunningSandbox, RunningApp]) -> None:
    _, app = secured
    # Every check but two. positive_data_acceptance: label selectors, continue tokens and manifests
    # have grammars a JSON schema does not state, so a schema-valid value can still be refused, with a
    # documented 400, 410 or 422 and its Status (status_code_conformance holds us to that).
    # negative_data_rejection: a query parameter is a string whatever was generated (`user=0.0` for
    # an "array"), so a free-text filter accepts every "negative" value.
    case.call_and_validate(base_url=app.url, headers={"Authorization": f"Bearer {TOKENS['alice']}"}, timeout=30,
                           excluded_checks=[positive_data_acceptance, negative_data_rejection])
