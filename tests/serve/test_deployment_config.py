"""serve/config.yaml is a valid Ray Serve config naming our application builder, which builds the
application from its args and names unknown ones."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ray.serve.schema import ServeDeploySchema

from serve.deployment import AdminOptions, app_builder

CONFIG = Path(__file__).resolve().parents[2] / "serve" / "config.yaml"


def test_config_file_is_a_serve_deploy_config_for_our_builder() -> None:
    config = ServeDeploySchema.model_validate(yaml.safe_load(CONFIG.read_text()))
    [app] = config.applications
    assert (app.import_path, app.route_prefix) == ("serve.deployment:app_builder", "/")
    assert app_builder(app.args) is not None
    assert AdminOptions(**app.args).settings().auth == "kubernetes"


def test_builder_names_unknown_options() -> None:
    with pytest.raises(ValueError, match="unknown admin API option"):
        app_builder({"kubeconfig": "/x", "authentication": "none"})
