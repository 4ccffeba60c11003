"""Workers never die (issue 14, item 2), against the sandbox through the real client: a worker that
crashes is counted and replaced, a half-open watch is noticed within its idle timeout, and a
controller that cannot list a kind (missing CRD, 403) fails its start-up with one line instead of
hanging."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from hosts.runtime.controller_host import ControllerHost
from kaiwo_ray.controllers.base import Controller, Key, StartupError, Watch
from kaiwo_ray.controllers.manager import HostSettings
from kaiwo_ray.kube import resources as R
from kaiwo_ray.kube.client import KubeClient
from kaiwo_ray.kube.errors import Invalid
from kaiwo_ray.kube.informer import Informer, InformerSettings
from kaiwo_ray.kube.workqueue import Backoff, WorkQueue
from kaiwo_sandbox.apiserver.server import PRE_DEADLINE_BOOKMARK_SECONDS
from kaiwo_sandbox.testing import RunningSandbox, start_sandbox

NS = "default"


@pytest.fixture(scope="module")
def sandbox() -> Iterator[RunningSandbox]:
    with start_sandbox(nodes=[], bookmark_interval=3600.0) as sb:
        yield sb


class BrokenBackoff(Backoff):
    """A backoff whose arithmetic fails, as 2.0**1024 did: the error surfaces inside the worker's
    own error handling, outside any reconcile."""

    def next_delay(self, key: Any) -> float:
        if key == (NS, "poison"):
            raise OverflowError("(34, 'Numerical result out of range')")
        return super().next_delay(key)


class ConfigMapController(Controller):
    name = "configmap-test-controller"

    def __init__(self, client: KubeClient) -> None:
        super().__init__(client, workers=2)
        self.queue = WorkQueue(backoff=BrokenBackoff())
        self.seen: list[Key] = []

    def watches(self) -> list[Watch]:
        return [Watch(R.CONFIGMAPS, lambda event, obj, old: [(obj["metadata"].get("namespace") or "",
                                                              obj["metadata"]["name"])])]

    async def reconcile(self, key: Key) -> float | None:
        self.seen.append(key)
        if key[1] == "poison":
            raise Invalid(422, "Invalid", "a permanent error")
        return None


async def _poll(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout}s: {what}")
        await asyncio.sleep(0.02)


def test_a_crashed_worker_is_counted_and_replaced(sandbox: RunningSandbox) -> None:
    async def body() -> None:
        client = await KubeClient.from_kubeconfig(str(sandbox.kubeconfig_path))
        controller = ConfigMapController(client)
        try:
            await controller.start()
            await client.create(R.CONFIGMAPS, {"metadata": {"name": "poison", "namespace": NS}}, NS)
            await _poll(lambda: controller.health()["worker_crashes"] >= 2, 20, "two crashes")
            await client.create(R.CONFIGMAPS, {"metadata": {"name": "fine", "namespace": NS}}, NS)
            await _poll(lambda: (NS, "fine") in controller.seen, 20, "a later key is still reconciled")
            health = controller.health()
            assert health["workers"] == 2, health  # every worker replaced
            # the crashed key was not lost either: it keeps being retried
            assert controller.seen.count((NS, "poison")) >= 2
        finally:
            await controller.stop(grace_seconds=1)
            await client.close()

    asyncio.run(body())


class BlackholeProxy:
    """A TCP proxy in front of the sandbox that can go silent on the connections it holds (as a
    half-open connection does: nothing arrives, nothing is closed); new connections work."""

    def __init__(self, port: int) -> None:
        self.upstream_port = port
        self.silenced: set[asyncio.StreamWriter] = set()
        self.live: set[asyncio.StreamWriter] = set()
        self.server: asyncio.Server | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        port: int = self.server.sockets[0].getsockname()[1]
        return port

    def blackhole(self) -> None:
        self.silenced |= self.live

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        self.live.add(writer)

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter, towards_client: bool) -> None:
            try:
                while data := await src.read(65536):
                    if towards_client and writer in self.silenced:
                        continue  # swallowed: the client hears nothing, and nothing is closed
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                if not (towards_client and writer in self.silenced):
                    dst.close()

        await asyncio.gather(pump(reader, up_writer, False), pump(up_reader, writer, True))
        self.live.discard(writer)

    def close(self) -> None:
        if self.server is not None:
            self.server.close()
        for writer in self.live:
            writer.transport.abort()


def _kubeconfig_via(sandbox: RunningSandbox, port: int, tmp_path: Path) -> str:
    config = yaml.safe_load(sandbox.kubeconfig_path.read_text())
    for cluster in config["clusters"]:
        cluster["cluster"]["server"] = f"https://127.0.0.1:{port}"
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return str(path)


def test_a_half_open_watch_is_noticed_within_its_idle_timeout(sandbox: RunningSandbox, tmp_path: Path) -> None:
    async def body() -> None:
        proxy = BlackholeProxy(sandbox.sandbox.port)
        port = await proxy.start()
        client = await KubeClient.from_kubeconfig(_kubeconfig_via(sandbox, port, tmp_path))
        informer = Informer(client, R.CONFIGMAPS, lambda *a: None, namespace="idle",
                            settings=InformerSettings(watch_idle_seconds=1.0))
        task = asyncio.create_task(informer.run())
        try:
            await asyncio.wait_for(informer.synced.wait(), 20)
            proxy.blackhole()  # the open watch now hears nothing, and is never closed
            await asyncio.to_thread(sandbox.http, "POST", "/api/v1/namespaces",
                                    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "idle"}})
            await asyncio.to_thread(sandbox.http, "POST", "/api/v1/namespaces/idle/configmaps",
                                    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "late"}})
            began = time.monotonic()
            await _poll(lambda: informer.cache.get("idle", "late") is not None, 20, "the new ConfigMap cached")
            assert time.monotonic() - began < 10  # idle timeout (1 s) + reconnect, not the 330 s stream deadline
            assert informer.reconnects >= 1
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await client.close()
            proxy.close()

    asyncio.run(body())


def test_the_default_watch_is_never_silent_for_its_idle_timeout() -> None:
    """A watch ends (server-side) after `watch_timeout_seconds`, with a bookmark 2 s before; the API
    server's other bookmarks come once a minute. So a live stream is silent at most timeout - 2 s,
    which must stay under the idle timeout, itself at most a minute (half-open noticed within 60 s)."""
    settings = InformerSettings()
    assert settings.watch_timeout_seconds - PRE_DEADLINE_BOOKMARK_SECONDS < settings.watch_idle_seconds <= 60.0


def test_a_quiet_watch_ends_on_a_bookmark_and_resumes_without_a_reconnect_or_a_relist() -> None:
    """A quiet kind's watch, asked to end after 3 s with an idle timeout of 2.5 s, on a server whose
    periodic bookmarks are a minute apart: it lives because of the bookmark the server sends 2 s
    before the deadline, then resumes from it. Without that bookmark the stream is silent 3 s, is cut
    as dead, and (its resourceVersion too old by then on a busy server) relists."""
    with start_sandbox(nodes=[]) as sb:
        async def body() -> None:
            client = await KubeClient.from_kubeconfig(str(sb.kubeconfig_path))
            informer = Informer(client, R.CONFIGMAPS, lambda *a: None, namespace="quiet",
                                settings=InformerSettings(watch_timeout_seconds=3, watch_idle_seconds=2.5))
            task = asyncio.create_task(informer.run())
            try:
                await asyncio.wait_for(informer.synced.wait(), 20)
                listed_at = informer.cache.resource_version
                await asyncio.to_thread(sb.http, "POST", "/api/v1/namespaces",
                                        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "busy"}})
                end = time.monotonic() + 7.0  # two watch lifetimes and a bit
                while time.monotonic() < end:
                    await asyncio.sleep(0.1)  # letting the watch run: what is checked is what did not happen
                assert informer.reconnects == 0
                assert informer.relists == 1
                assert int(informer.cache.resource_version) > int(listed_at)  # moved on by the bookmarks
            finally:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
                await client.close()

        asyncio.run(body())


def _host(sandbox: RunningSandbox, name: str) -> ControllerHost:
    return ControllerHost(name, HostSettings(kubeconfig=str(sandbox.kubeconfig_path), lease=False))


def test_start_up_without_a_crd_fails_in_one_line_naming_it() -> None:
    with start_sandbox(nodes=[]) as sb:
        status, _, text = sb.http("DELETE", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
                                            "workloads.kueue.x-k8s.io")
        assert status == 200, text
        host = _host(sb, "kaiwojob")

        async def body() -> None:
            try:
                await asyncio.wait_for(host.start(), 30)
            finally:
                await host.stop(grace_seconds=1)

        began = time.monotonic()
        with pytest.raises(StartupError) as caught:
            asyncio.run(body())
        message = str(caught.value)
        assert time.monotonic() - began < 30
        assert "\n" not in message
        assert "cannot list workloads.kueue.x-k8s.io" in message and "CRD installed" in message, message


def test_start_up_that_is_forbidden_fails_in_one_line_naming_resource_and_verb(sandbox: RunningSandbox) -> None:
    rule = sandbox.faults.fail(code=403, verbs="list", resources="appwrappers.workload.codeflare.dev",
                               message='appwrappers.workload.codeflare.dev is forbidden: User "kaiwo" cannot '
                                       'list resource "appwrappers"')
    host = _host(sandbox, "kaiwoservice")

    async def body() -> None:
        try:
            await asyncio.wait_for(host.start(), 30)
        finally:
            await host.stop(grace_seconds=1)

    try:
        with pytest.raises(StartupError) as caught:
            asyncio.run(body())
    finally:
        sandbox.faults.remove(rule)
    message = str(caught.value)
    assert "\n" not in message
    assert "cannot list appwrappers.workload.codeflare.dev" in message and "403" in message, message


def test_health_says_unsynced_while_a_cache_is_broken(sandbox: RunningSandbox) -> None:
    async def body() -> None:
        client = await KubeClient.from_kubeconfig(str(sandbox.kubeconfig_path))
        controller = ConfigMapController(client)
        rule = 0
        try:
            await controller.start()
            assert controller.health()["synced"]
            # every list and watch of ConfigMaps now fails: the cache cannot follow the cluster
            rule = sandbox.faults.fail(code=500, verbs=["list", "watch"], resources="configmaps")
            sandbox.faults.cut_watches()
            await _poll(lambda: not controller.health()["synced"], 20, "health to say unsynced")
            sandbox.faults.remove(rule)
            await _poll(lambda: controller.health()["synced"], 40, "synced again once the API answers")
        finally:
            sandbox.faults.remove(rule)
            await controller.stop(grace_seconds=1)
            await client.close()

    asyncio.run(body())
