"""controller-runtime's webhook server series (`pkg/webhook/internal/metrics`), for the admission
webhooks served in this process (serve/webhook_server.py): requests by webhook path and HTTP code,
latency, requests in flight. Written into this process's /metrics (the admin API's and the operator
metrics endpoint's, serve/metrics.py) once a webhook server has started here, as controller-runtime
registers them only when its webhook server is used."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

DEFAULT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)  # client_golang's DefBuckets

REGISTRY = CollectorRegistry(auto_describe=False)
REQUESTS = Counter("controller_runtime_webhook_requests", "Total number of admission requests by HTTP status code.",
                   ["webhook", "code"], registry=REGISTRY)
LATENCY = Histogram("controller_runtime_webhook_latency_seconds",
                    "Histogram of the latency of processing admission requests", ["webhook"],
                    buckets=DEFAULT_BUCKETS, registry=REGISTRY)
IN_FLIGHT = Gauge("controller_runtime_webhook_requests_in_flight",
                  "Current number of admission requests being served.", ["webhook"], registry=REGISTRY)

_serving = [False]


def mark_serving() -> None:
    """A webhook server runs in this process: /metrics writes the series from now on."""
    _serving[0] = True


def exposition() -> bytes:
    """The series in text format; empty where no webhook server has run in this process."""
    return generate_latest(REGISTRY) if _serving[0] else b""
