"""The ledger's ConfigMap store against the sandbox's API server: days every watermark has passed are
sealed into their own ConfigMaps and leave the head, a reader adds them up once, a crash between a
seal and the head's write counts nothing twice, and a second writer's stale head is refused."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from kaiwo_ray.kube.client import KubeClient
from kaiwo_ray.telemetry.ledger import Holder, Ledger, Owner
from kaiwo_ray.telemetry.ledger_store import (
    DAY,
    HEAD,
    LABEL,
    LedgerConflict,
    LedgerStore,
    assemble,
    slice_state,
)
from kaiwo_sandbox.testing import RunningSandbox, start_sandbox

NS = "kube-system"


@pytest.fixture(scope="module")
def sb() -> Iterator[RunningSandbox]:
    with start_sandbox(nodes=[]) as sandbox:
        yield sandbox


def stored(sb: RunningSandbox) -> list[dict[str, Any]]:
    code, _, body = sb.http("GET", f"/api/v1/namespaces/{NS}/configmaps?labelSelector={LABEL}")
    assert code == 200
    items: list[dict[str, Any]] = json.loads(body)["items"]
    return items


def allocated(ledger: Ledger) -> float:
    return sum(v[0] for v in ledger.rows.values())


def three_days(now: float) -> Ledger:
    """One GPU held for the last 50 hours, a sample every 10 minutes."""
    ledger = Ledger(stale_after=700)
    ledger.owners["w"] = Owner("w", "team", "KaiwoJob", "train", user="alice")
    start = now - 50 * 3600
    t = start
    while t <= now:
        ledger.observe("n1", t, [Holder("w", "amd", "MI300X", 50.0, 1.0, "team/train-0")])
        t += 600
    return ledger


def test_sealed_days_leave_the_head_and_are_read_once(sb: RunningSandbox) -> None:
    now = time.time()

    async def scenario() -> tuple[float, float, LedgerStore]:
        client = await KubeClient.from_kubeconfig(str(sb.kubeconfig_path))
        try:
            ledger = three_days(now)
            expected = allocated(ledger)
            store = LedgerStore(client, NS)
            await store.save(ledger, now)
            kept = allocated(ledger)
            again = Ledger()
            await LedgerStore(client, NS).load(again)  # what a new leader starts from: the head only
            assert again.nodes["n1"].until == ledger.nodes["n1"].until
            return expected, kept, store
        finally:
            await client.close()

    expected, kept, store = asyncio.run(scenario())
    items = stored(sb)
    names = sorted(i["metadata"]["name"] for i in items)
    assert HEAD in names and len(names) >= 3, names  # the head and the two (or three) days before today
    whole, head = assemble(items)
    assert allocated(whole) == pytest.approx(expected, abs=0.01)
    today = int(now // DAY * DAY)
    assert all(r[0] >= today for r in head["rows"]) and kept < expected  # sealed rows left the controller too
    assert whole.owners["w"].user == "alice"

    # a crash after sealing a day but before the head's write: that day is in a day ConfigMap with a
    # generation the head never committed, and in the head. Readers count it once (the head's).
    yesterday = today - DAY
    ledger = Ledger(stale_after=700)
    ledger.owners["x"] = Owner("x", "team", user="bob")
    ledger.observe("n2", yesterday + 100, [Holder("x", "amd", "MI300X", 10.0)])
    ledger.observe("n2", yesterday + 700, [Holder("x", "amd", "MI300X", 10.0)])
    head_state = {**ledger.to_state(), "generation": store.generation, "bucket_seconds": 3600}
    day_name = next(n for n in names if n != HEAD and n.endswith(time.strftime("%Y%m%d", time.gmtime(yesterday))))
    day = next(i for i in items if i["metadata"]["name"] == day_name)
    from kaiwo_ray.telemetry.ledger_store import decode, encode

    sealed = decode(day)
    merged = Ledger()
    merged.load(sealed, with_nodes=False)
    merged.load(ledger.to_state(), with_nodes=False)
    crashed = {**slice_state(merged, yesterday, yesterday + DAY), "generations": [*sealed["generations"],
                                                                                 store.generation + 1]}
    day = {**day, "binaryData": {"ledger.json.gz": encode(crashed)}}
    head_item = {"metadata": {"name": HEAD, "resourceVersion": "x"},
                 "binaryData": {"ledger.json.gz": encode(head_state)}}
    others = [i for i in items if i["metadata"]["name"] not in (HEAD, day_name)]
    whole_after_crash, _ = assemble([*others, day, head_item])
    x_seconds = sum(v[0] for k, v in whole_after_crash.rows.items() if k[1] == "x")
    assert x_seconds == pytest.approx(600)  # once, from the head; not 1,200


def test_a_writer_with_a_stale_head_is_refused(sb: RunningSandbox) -> None:
    async def scenario() -> None:
        client = await KubeClient.from_kubeconfig(str(sb.kubeconfig_path))
        try:
            first, second = LedgerStore(client, NS), LedgerStore(client, NS)
            a, b = Ledger(), Ledger()
            await first.load(a)
            await second.load(b)
            await first.save(a, time.time())
            with pytest.raises(LedgerConflict):
                await second.save(b, time.time())  # it read the head before `first` wrote it
            third, c = LedgerStore(client, NS), Ledger()
            await third.load(c)  # reads the head `first` wrote ...
            await first.save(a, time.time())  # ... which `first` writes again
            with pytest.raises(LedgerConflict):
                await third.save(c, time.time())  # a patch with the resourceVersion it read: refused
            await first.save(a, time.time())  # the writer that read last keeps writing
        finally:
            await client.close()

    asyncio.run(scenario())
