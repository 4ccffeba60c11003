"""Helpers shared by the admin API tests."""

from __future__ import annotations

import asyncio
import socket
import threading
from dataclasses import dataclass
from typing import Any

import httpx
import uvicorn
from e2e_harness import OperatorSandbox
from e2e_support import wait_for

from serve.app import build_app
from serve.state import AdminSettings, StatsSource

# controller-runtime v0.24's default registry (reference/cluster-mechanics.md 4.1), series by series,
# with their labels; the webhook series exist only where a webhook server runs (none here).
CONTROLLER_RUNTIME_SERIES: dict[str, set[str]] = {
    "controller_runtime_reconcile_total": {"controller", "result"},
    "controller_runtime_reconcile_errors_total": {"controller"},
    "controller_runtime_terminal_reconcile_errors_total": {"controller"},
    "controller_runtime_reconcile_panics_total": {"controller"},
    "controller_runtime_reconcile_timeouts_total": {"controller"},
    "controller_runtime_reconcile_time_seconds_bucket": {"controller", "le"},
    "controller_runtime_max_concurrent_reconciles": {"controller"},
    "controller_runtime_active_workers": {"controller"},
    "workqueue_depth": {"name", "controller", "priority"},
    "workqueue_adds_total": {"name", "controller"},
    "workqueue_queue_duration_seconds_bucket": {"name", "controller", "le"},
    "workqueue_work_duration_seconds_bucket": {"name", "controller", "le"},
    "workqueue_unfinished_work_seconds": {"name", "controller"},
    "workqueue_longest_running_processor_seconds": {"name", "controller"},
    "workqueue_retries_total": {"name", "controller"},
    "rest_client_requests_total": {"code", "method", "host"},
    "leader_election_master_status": {"name"},
    "certwatcher_read_certificate_total": set(),
    "certwatcher_read_certificate_errors_total": set(),
    "process_cpu_seconds_total": set(),
    "process_open_fds": set(),
    "process_max_fds": set(),
    "process_virtual_memory_bytes": set(),
    "process_virtual_memory_max_bytes": set(),
    "process_resident_memory_bytes": set(),
    "process_start_time_seconds": set(),
    "process_network_receive_bytes_total": set(),
    "process_network_transmit_bytes_total": set(),
}


def operator_stats(env: OperatorSandbox) -> StatsSource:
    """The in-process operator's stats, read on its own loop (as the Ray actors answer theirs)."""
    async def collect() -> list[dict[str, Any]]:
        async def on_operator_loop() -> list[dict[str, Any]]:
            return [host.stats() for host in env.operator.hosts]

        future = asyncio.run_coroutine_threadsafe(on_operator_loop(), env.loop)
        return await asyncio.wrap_future(future)

    return collect


def kaiwojob(name: str, namespace: str, *, user: str = "ann@example.com", labels: dict[str, str] | None = None,
             **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "kaiwo.silogen.ai/v1alpha1", "kind": "KaiwoJob",
            "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
            "spec": {"user": user, "image": "busybox", "entrypoint": "sleep 100000", **spec}}


def submit(http: httpx.Client, obj: dict[str, Any]) -> httpx.Response:
    return http.post("/api/v1/workloads", json=obj)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class RunningApp:
    url: str
    server: uvicorn.Server
    thread: threading.Thread

    def client(self, **kwargs: Any) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=30.0, **kwargs)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)


def serve_app(settings: AdminSettings) -> RunningApp:
    """The admin app under uvicorn on a thread (its own event loop), once its cache has synced."""
    port = free_port()
    config = uvicorn.Config(build_app(settings), host="127.0.0.1", port=port, log_level="warning",
                            lifespan="on", timeout_graceful_shutdown=2)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name=f"admin-{port}", daemon=True)
    thread.start()
    wait_for(lambda: server.started or not thread.is_alive(), 60, "the admin app started")
    assert thread.is_alive(), "the admin app failed to start"
    return RunningApp(f"http://127.0.0.1:{port}", server, thread)


# nine anchors, each aliasing the previous nine times: 9**9 strings once expanded
BILLION_LAUGHS = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True))
