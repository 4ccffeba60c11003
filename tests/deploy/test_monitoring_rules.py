"""deploy/components/monitoring's alerts and dashboard: the PrometheusRule's groups pass `promtool check
rules` and `promtool test rules` (tests/deploy/monitoring/rules_test.yaml: each alert fires on its case,
not on a healthy one), and the dashboard queries only series the operator serves."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import yaml
from promtool_support import PROMTOOL, needs_promtool

MONITORING = Path(__file__).resolve().parents[2] / "deploy" / "components" / "monitoring"
RULES_TEST = Path(__file__).resolve().parent / "monitoring" / "rules_test.yaml"
ALERTS = {"KaiwoRayControllerDown", "KaiwoRayReconcileErrors", "KaiwoRayQueueBackingUp", "KaiwoRayGpusIdle"}


def _rule_file(tmp_path: Path) -> Path:
    """The PrometheusRule's spec (its `groups`), as the Prometheus rule file the operator would generate."""
    rule = yaml.safe_load((MONITORING / "prometheusrule.yaml").read_text())
    assert rule["kind"] == "PrometheusRule"
    path = tmp_path / "kaiwo-ray.rules.yaml"
    path.write_text(yaml.safe_dump(rule["spec"]))
    return path


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=120, check=False)


def test_the_rule_ships_with_the_monitoring_component() -> None:
    kustomization = yaml.safe_load((MONITORING / "kustomization.yaml").read_text())
    assert "prometheusrule.yaml" in kustomization["resources"]
    alerts = {r["alert"] for g in yaml.safe_load((MONITORING / "prometheusrule.yaml").read_text())["spec"]["groups"]
              for r in g["rules"]}
    assert alerts == ALERTS


@needs_promtool
def test_promtool_checks_the_rules(tmp_path: Path) -> None:
    done = _promtool("check", "rules", str(_rule_file(tmp_path)))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 4 rules found" in done.stdout, done.stdout


@needs_promtool
def test_promtool_tests_every_alert(tmp_path: Path) -> None:
    rules = _rule_file(tmp_path)
    cases = yaml.safe_load(RULES_TEST.read_text())
    cases["rule_files"] = [str(rules)]
    tested = {t["alertname"] for case in cases["tests"] for t in case["alert_rule_test"] if t["exp_alerts"]}
    assert tested == ALERTS
    test_file = tmp_path / "rules_test.yaml"
    test_file.write_text(yaml.safe_dump(cases))
    done = _promtool("test", "rules", str(test_file))
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_dashboard_queries_the_operator_queue_and_gpu_series() -> None:
    dashboard = json.loads((MONITORING / "dashboards" / "kaiwo-ray.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    names = {m for e in exprs for m in re.findall(r"\b((?:controller_runtime|workqueue|kaiwo)_[a-z_]+)", e)}
    assert {"controller_runtime_reconcile_total", "controller_runtime_reconcile_errors_total",
            "controller_runtime_reconcile_time_seconds_bucket", "workqueue_depth", "kaiwo_queue_pending_workloads",
            "kaiwo_queue_admitted_workloads", "kaiwo_node_gpu_utilization_percent",
            "kaiwo_gpu_memory_used_bytes"} == names
    assert {p["title"] for p in dashboard["panels"] if p["type"] == "row"} == {"Operator", "Queues", "GPUs"}
