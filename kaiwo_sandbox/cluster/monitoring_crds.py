"""The Prometheus operator's PodMonitor and ServiceMonitor CRDs (monitoring.coreos.com/v1), preinstalled
so that deploy/'s monitoring component applies to the sandbox as to a cluster running kube-prometheus.
Loose schemas like the other third-party CRDs (thirdparty_crds.py): stored and served, nothing scrapes."""

from __future__ import annotations

from kaiwo_sandbox.cluster.crds import crd
from kaiwo_sandbox.contracts import JsonObj

GROUP = "monitoring.coreos.com"


def monitoring_crds() -> list[JsonObj]:
    v1 = [("v1", True)]
    return [
        crd(GROUP, "PodMonitor", "podmonitors", versions=v1, short_names=("pmon",),
            categories=("prometheus-operator",)),
        crd(GROUP, "ServiceMonitor", "servicemonitors", versions=v1, short_names=("smon",),
            categories=("prometheus-operator",)),
    ]
