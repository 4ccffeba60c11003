"""YAML request bodies cannot take the server down: alias bombs ("billion laughs") and nesting that
would overflow libyaml's composer are refused with 400 before anything is built (raw HTTP, as
`kubectl create --raw` or any client sending application/yaml would)."""

from __future__ import annotations

import json

from kaiwo_sandbox.testing import RunningSandbox

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
YAML = {"Content-Type": "application/yaml"}


def _laughs(levels: int) -> str:
    lines = ["apiVersion: v1", "kind: ConfigMap", "metadata: {name: lol}", "spec:",
             '  a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, levels):
        lines.append(f"  a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def test_an_alias_bomb_is_400_excessive_aliasing(sandbox: RunningSandbox) -> None:
    for levels in (6, 9):  # 9^6 and 9^9 nodes once expanded
        status, _, body = sandbox.http("POST", CONFIGMAPS, _laughs(levels), headers=YAML)
        assert status == 400, body[:200]
        error = json.loads(body)
        assert error["reason"] == "BadRequest"
        assert error["message"] == "error decoding YAML: yaml: document contains excessive aliasing"
    status, _, _ = sandbox.http("GET", f"{CONFIGMAPS}/lol")
    assert status == 404


def test_nesting_that_would_crash_the_yaml_composer_is_400(sandbox: RunningSandbox) -> None:
    deep = "metadata: {name: deep}\nspec: " + "[" * 100_000 + "]" * 100_000 + "\n"
    status, _, body = sandbox.http("POST", CONFIGMAPS, deep, headers=YAML)
    assert status == 400
    assert json.loads(body)["message"] == "error decoding YAML: nesting deeper than 1000 levels"
    status, _, _ = sandbox.http("GET", "/api/v1/namespaces/default/configmaps")  # still serving
    assert status == 200


def test_ordinary_aliases_still_work(sandbox: RunningSandbox) -> None:
    body = ("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: shared\n  labels: &labels {app: web, tier: front}\n"
            "  annotations: *labels\ndata: {k: v}\n")
    status, _, raw = sandbox.http("POST", CONFIGMAPS, body, headers=YAML)
    assert status == 201, raw
    created = json.loads(raw)
    assert created["metadata"]["annotations"] == {"app": "web", "tier": "front"}
    # Server-side apply bodies are YAML too: the same bound.
    bomb = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bomb}\nspec:\n" + _laughs(6).split("spec:\n", 1)[1]
    status, _, raw = sandbox.http("PATCH", f"{CONFIGMAPS}/bomb?fieldManager=t", bomb,
                                  headers={"Content-Type": "application/apply-patch+yaml"})
    assert status == 400, raw[:200]
