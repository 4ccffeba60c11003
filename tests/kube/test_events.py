"""The Event recorder against the sandbox: one sender, in the order the Events were emitted, never
two at once (client-go's broadcaster), so a burst of Events cannot crowd a controller's own writes;
a reconcile never waits on one; `flush` waits for all."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import kubernetes

from kaiwo_ray.kube import events as events_module
from kaiwo_ray.kube.client import KubeClient
from kaiwo_ray.kube.events import EventRecorder
from kaiwo_sandbox.testing import RunningSandbox

LATENCY = 0.05  # the sandbox holds every Event create this long before it answers


def involved(name: str) -> dict[str, Any]:
    return {"apiVersion": "kaiwo.silogen.ai/v1alpha1", "kind": "KaiwoJob",
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "resourceVersion": "7"}}


def test_events_go_out_one_at_a_time_in_the_order_emitted(sandbox: RunningSandbox) -> None:
    sandbox.faults.delay(LATENCY, resources="events", verbs="create")
    count = 6

    async def main() -> None:
        client = await KubeClient.from_kubeconfig(str(sandbox.kubeconfig_path))
        try:
            recorder = EventRecorder(client, "test-controller")
            for i in range(count):
                recorder.emit(involved(f"w{i}"), "Normal", "Step", f"step {i}")
            # emit only queues: nothing was sent before the caller yielded (how long the six emits
            # take is benchmarks/timings.py's event_emit_six_worst)
            assert recorder.recorded == 0, "emit waited on the API server"
            await recorder.flush()
            assert recorder.recorded == count
        finally:
            await client.close()

    asyncio.run(main())
    creates = [r for r in sandbox.audit.records() if r.resource == "events" and r.verb == "create"]
    assert len(creates) == count
    listed = kubernetes.client.CoreV1Api(sandbox.api_client()).list_namespaced_event("default").items
    events = sorted(listed, key=lambda e: int(e.metadata.resource_version))
    assert [e.involved_object.name for e in events] == [f"w{i}" for i in range(count)]
    assert [e.message for e in events] == [f"step {i}" for i in range(count)]
    # One at a time: each create was held LATENCY by the server, so n of them in a row span at least
    # (n - 1) * LATENCY from the first answer to the last (sent together, they would all end at once).
    span = creates[-1].timestamp - creates[0].timestamp
    assert span >= (count - 1) * LATENCY * 0.9, f"{count} Events answered within {span:.3f} s: sent concurrently"


def test_events_beyond_the_queue_bound_are_dropped_and_counted(sandbox: RunningSandbox,
                                                               monkeypatch: Any) -> None:
    """An API server that cannot keep up must not grow the operator: past the bound, Events are
    dropped (counted), as client-go's broadcaster drops them; what was queued is still sent."""
    monkeypatch.setattr(events_module, "MAX_QUEUED_EVENTS", 2)

    async def main() -> EventRecorder:
        client = await KubeClient.from_kubeconfig(str(sandbox.kubeconfig_path))
        try:
            recorder = EventRecorder(client, "test-controller")
            for i in range(5):
                recorder.emit(involved(f"d{i}"), "Warning", "Burst", f"burst {i}")
            await recorder.flush()
            return recorder
        finally:
            await client.close()

    recorder = asyncio.run(main())
    assert (recorder.recorded, recorder.dropped) == (2, 3)
    listed = kubernetes.client.CoreV1Api(sandbox.api_client()).list_namespaced_event("default").items
    assert sorted(e.involved_object.name for e in listed) == ["d0", "d1"]


def test_a_backlog_of_events_gets_more_senders(sandbox: RunningSandbox) -> None:
    """A thousand new workloads at once queue two thousand Events: one sender would trail them for
    a minute, so a backlog gets more senders (one per SENDER_PER_QUEUED waiting, up to MAX_SENDERS)."""
    sandbox.faults.delay(LATENCY, resources="events", verbs="create")
    count = 3 * events_module.SENDER_PER_QUEUED

    in_flight: list[int] = [0, 0]  # (now, most at once)

    class Counting:
        """A real client that counts the Event creates awaiting their answer at once."""

        def __init__(self, real: KubeClient) -> None:
            self.real = real

        async def create(self, *args: Any, **kwargs: Any) -> Any:
            in_flight[0] += 1
            in_flight[1] = max(in_flight[1], in_flight[0])
            try:
                return await self.real.create(*args, **kwargs)
            finally:
                in_flight[0] -= 1

    async def main() -> None:
        client = await KubeClient.from_kubeconfig(str(sandbox.kubeconfig_path))
        try:
            recorder = EventRecorder(cast(KubeClient, Counting(client)), "test-controller")
            for i in range(count):
                recorder.emit(involved(f"b{i}"), "Normal", "Backlog", f"backlog {i}")
            await recorder.flush()
            assert recorder.recorded == count
        finally:
            await client.close()

    asyncio.run(main())
    creates = [r for r in sandbox.audit.records() if r.resource == "events" and r.verb == "create"]
    assert len(creates) == count
    # each create is held LATENCY by the server, so senders overlap: the backlog's span against one
    # sender's is benchmarks/timings.py's event_backlog_span_vs_one_sender_worst
    assert 1 < in_flight[1] <= events_module.MAX_SENDERS, in_flight


class AfterCreate:
    """A real client that runs `hook` once, right after its first Event create has been answered."""

    def __init__(self, real: KubeClient, hook: Any) -> None:
        self.real, self.hook = real, hook

    async def create(self, *args: Any, **kwargs: Any) -> Any:
        created = await self.real.create(*args, **kwargs)
        if self.hook is not None:
            hook, self.hook = self.hook, None
            hook()
        return created


def test_an_event_emitted_as_the_last_sender_finishes_is_sent(sandbox: RunningSandbox) -> None:
    """The sender finds its queue empty and ends; an Event emitted in that same instant (before any
    done callback could run) must get a sender of its own, not wait for the next emit."""

    async def main() -> EventRecorder:
        client = await KubeClient.from_kubeconfig(str(sandbox.kubeconfig_path))
        try:
            loop = asyncio.get_running_loop()
            late = ("Normal", "Late", "emitted as the sender ends")
            hooked = AfterCreate(client, lambda: loop.call_soon(recorder.emit, involved("late"), *late))
            recorder = EventRecorder(hooked, "test-controller")  # type: ignore[arg-type]
            recorder.emit(involved("first"), "Normal", "First", "the only one queued")
            await recorder.flush()
            await asyncio.sleep(0)  # the hook's emit runs on the next turn of the loop
            await recorder.flush()
            return recorder
        finally:
            await client.close()

    recorder = asyncio.run(main())
    assert recorder.recorded == 2, f"{recorder.recorded} of 2 Events sent"
