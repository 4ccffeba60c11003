"""Every Serve config kaiwo-ray ships names applications Ray Serve can build: each `import_path` is
resolved and built the way Serve's controller does it (Ray's own `import_attr`, then its builder call
with the application's `args`), so a path that names nothing, or a builder that refuses its args, fails
here instead of in a cluster's RayService status."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from deploy_support import DEPLOY
from ray._common.utils import import_attr
from ray.serve import Application
from ray.serve._private.api import call_user_app_builder_with_args_if_necessary
from ray.serve.schema import ServeDeploySchema

REPO = DEPLOY.parent


def _serve_configs() -> list[tuple[str, dict[str, Any]]]:
    """(where, config) for every serveConfigV2 of a RayService in deploy/ (sources and install.yaml) and
    every Serve config file we ship."""
    found: list[tuple[str, dict[str, Any]]] = []
    for path in sorted(DEPLOY.rglob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind") == "RayService":
                found.append((str(path.relative_to(REPO)), yaml.safe_load(doc["spec"]["serveConfigV2"])))
    found.append(("serve/config.yaml", yaml.safe_load((REPO / "serve" / "config.yaml").read_text())))
    return found


CONFIGS = _serve_configs()


def test_the_shipped_configs_are_found() -> None:
    assert {where for where, _ in CONFIGS} >= {"deploy/base/rayservice.yaml", "deploy/install.yaml",
                                              "serve/config.yaml"}


@pytest.mark.parametrize(("where", "config"), CONFIGS, ids=[where for where, _ in CONFIGS])
def test_every_import_path_builds_a_serve_application(where: str, config: dict[str, Any]) -> None:
    schema = ServeDeploySchema.model_validate(config)
    assert schema.applications, where
    for app in schema.applications:
        target = import_attr(app.import_path)  # ImportError/AttributeError: the path names nothing
        built = call_user_app_builder_with_args_if_necessary(target, app.args)
        assert isinstance(built, Application), f"{where}: {app.name} ({app.import_path})"


def test_the_deployed_admin_app_runs_in_cluster_with_kubernetes_auth() -> None:
    config = next(c for where, c in CONFIGS if where == "deploy/base/rayservice.yaml")
    (admin,) = [a for a in config["applications"] if a["name"] == "admin"]
    built = call_user_app_builder_with_args_if_necessary(import_attr(admin["import_path"]), admin.get("args", {}))
    (options,) = built._bound_deployment.init_args  # AdminAPI(options): what each replica is built from
    assert options["in_cluster"] is True and options["kubeconfig"] is None
    assert options["auth"] == "kubernetes"
    operator_env = yaml.safe_load((DEPLOY / "base" / "rayservice.yaml").read_text())["spec"]["rayClusterConfig"][
        "headGroupSpec"]["template"]["spec"]["containers"][0]["env"]
    ray_namespace = {e["name"]: e.get("value") for e in operator_env}.get("KAIWO_RAY_NAMESPACE") or "kaiwo"
    assert options["ray_namespace"] == ray_namespace  # the controllers' stats feed the admin's /metrics


def test_a_path_that_names_nothing_fails_as_serve_would() -> None:
    with pytest.raises(AttributeError):
        import_attr("serve.deployment:app")  # what deploy/ named before: no such attribute
