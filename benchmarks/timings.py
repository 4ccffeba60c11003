"""Benchmark: the wall-clock figures of four mechanisms whose behaviour the tests check (order,
counts, states) without timing them, since a timing fails on a busy 2-core machine for reasons
that are not the code's:

* the simulated cluster's ControllerRunner: how far past its budget a slice runs, when each key
  costs 1 ms (tests/sandbox/cluster/test_runner.py checks the slice ends after one batch);
* the Event recorder, against a sandbox that holds every Event create `--latency` seconds:
  how long emitting six Events takes (the reconcile's cost: emit never waits on the API server),
  and a backlog's span against what one sender alone would take (tests/kube/test_events.py checks
  that a backlog gets more than one sender);
* the lean transport against malformed answers: the slowest exchange against its request timeout
  (tests/kube/test_transport_fuzz.py checks each ends with a value or a typed error).

Failover after a crash is benchmarks/failover.py's. Prints each figure with its target; never fails
on a missed target.

    .venv/bin/python benchmarks/timings.py [--repeats N] [--latency S]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import Any, cast

import orjson
from kubernetes.aio import client as aio_client

from kaiwo_ray.kube import events as events_module
from kaiwo_ray.kube.client import KubeClient
from kaiwo_ray.kube.errors import KubeError
from kaiwo_ray.kube.events import EventRecorder
from kaiwo_sandbox.cluster.base import SLICE_KEYS, ClusterSettings, Controller, ControllerRunner, Key
from kaiwo_sandbox.contracts import Clock, Store
from kaiwo_sandbox.testing import start_sandbox

KEY_COST_S = 0.001
SLICE_BUDGET_S = 0.005
TRANSPORT_TIMEOUT_S = 0.3


class _Busy(Controller):
    """Spends KEY_COST_S of wall time on every key."""

    name = "busy"
    watches = ()

    def __init__(self) -> None:
        super().__init__(cast(Store, None), cast(Clock, None), ClusterSettings())

    def reconcile(self, key: Key) -> float | None:
        until = time.perf_counter() + KEY_COST_S
        while time.perf_counter() < until:
            pass
        return None


class _Runner(ControllerRunner):
    def __init__(self) -> None:
        super().__init__(cast(Store, None), cast(Clock, None))

    def _schedule(self, controller: Controller, key: Key, delay: float) -> None:
        pass


def slice_overrun_ms(repeats: int) -> float:
    """The worst time a slice ran past its budget, less the one batch it must finish, in ms."""
    worst = 0.0
    for _ in range(repeats):
        runner, busy = _Runner(), _Busy()
        runner.add(busy)
        for n in range(200):
            runner.enqueue(busy, n)
        began = time.perf_counter()
        runner.drain_slice(SLICE_BUDGET_S)
        took = time.perf_counter() - began
        worst = max(worst, took - SLICE_BUDGET_S - SLICE_KEYS * KEY_COST_S)
    return worst * 1000


def _involved(name: str) -> dict[str, Any]:
    return {"apiVersion": "kaiwo.silogen.ai/v1alpha1", "kind": "KaiwoJob",
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "resourceVersion": "7"}}


def event_figures(latency: float, repeats: int) -> tuple[float, float]:
    """(the worst time six emits took, in ms; the worst backlog span over one sender's least)."""
    worst_emit, worst_ratio = 0.0, 0.0
    with start_sandbox() as sandbox:
        sandbox.faults.delay(latency, resources="events", verbs="create")
        kubeconfig = str(sandbox.kubeconfig_path)
        for r in range(repeats):
            count = 3 * events_module.SENDER_PER_QUEUED

            async def main(r: int = r, count: int = count) -> float:
                client = await KubeClient.from_kubeconfig(kubeconfig)
                try:
                    recorder = EventRecorder(client, "timings")
                    began = time.monotonic()
                    for i in range(6):
                        recorder.emit(_involved(f"e{r}-{i}"), "Normal", "Step", f"step {i}")
                    emitted = time.monotonic() - began
                    await recorder.flush()
                    began = time.monotonic()
                    for i in range(count):
                        recorder.emit(_involved(f"b{r}-{i}"), "Normal", "Backlog", f"backlog {i}")
                    await recorder.flush()
                    span = time.monotonic() - began
                    nonlocal worst_emit, worst_ratio
                    worst_emit = max(worst_emit, emitted)
                    worst_ratio = max(worst_ratio, span / ((count - 1) * latency))
                    return span
                finally:
                    await client.close()

            asyncio.run(main())
    return worst_emit * 1000, worst_ratio


_BODY = orjson.dumps({"kind": "ConfigMap", "metadata": {"name": "x", "resourceVersion": "1"}, "data": {}})
_ANSWERS = [
    b"HTTP/1.1 200 X\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nab\r\n",
    b"HTTP/1.1 200 X\r\nContent-Length: 1000\r\n\r\n" + _BODY,
    b"HTTP/1.1 200 X\r\nX-Big: " + b"a" * 200_000 + b"\r\n\r\n",
    b"\xff\x00garbage",
    b"HTTP/1.1 200 X\r\nContent-Length: %d\r\n\r\n" % len(_BODY) + _BODY,
]


async def _exchange(answer: bytes, hold: bool) -> float:
    handlers: list[tuple[asyncio.Task[Any], asyncio.StreamWriter]] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        handlers.append((cast("asyncio.Task[Any]", asyncio.current_task()), writer))
        try:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(answer)
            await writer.drain()
            if hold:
                await reader.read()
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = KubeClient(aio_client.ApiClient(aio_client.Configuration(host=f"http://127.0.0.1:{port}")),
                        request_timeout=TRANSPORT_TIMEOUT_S)
    began = time.monotonic()
    try:
        await client.request("GET", "/api/v1/configmaps")
    except KubeError:
        pass
    finally:
        took = time.monotonic() - began
        await client.close()
        server.close()
        for _, writer in handlers:
            writer.close()  # a held connection's read ends: its handler returns
        await asyncio.gather(*(task for task, _ in handlers), return_exceptions=True)
    return took


def transport_worst_s(repeats: int) -> float:
    async def main() -> float:
        return max([await _exchange(a, hold) for _ in range(repeats) for a in _ANSWERS for hold in (False, True)])

    return asyncio.run(main())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--latency", type=float, default=0.05, help="seconds the sandbox holds each Event create")
    args = parser.parse_args()
    overrun = slice_overrun_ms(args.repeats)
    print(f"runner_slice_overrun_worst: {overrun:.1f} ms past budget and one batch (target < 10 ms)")
    emit_ms, backlog_ratio = event_figures(args.latency, args.repeats)
    print(f"event_emit_six_worst: {emit_ms:.2f} ms (target < {args.latency * 1000:.0f} ms, the create latency)")
    print(f"event_backlog_span_vs_one_sender_worst: {backlog_ratio:.2f} (target < 0.7)")
    worst = transport_worst_s(args.repeats)
    print(f"transport_malformed_exchange_worst: {worst:.3f} s "
          f"(target < {TRANSPORT_TIMEOUT_S * 4:.1f} s, 4x the request timeout)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
