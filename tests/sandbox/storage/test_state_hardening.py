"""`--state` as a durable store: private files written durably, and no resourceVersion of a previous
run (including writes a crash lost after clients saw them) ever resumes a watch or list: 410, relist."""

from __future__ import annotations

import json
import os
import shutil
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kubernetes
import pytest

from kaiwo_sandbox.pytest_plugin import SandboxFactory
from kaiwo_sandbox.storage import persistence


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_state_files_are_private(sandbox_factory: SandboxFactory, tmp_path: Path) -> None:
    state = tmp_path / "state"
    old_umask = os.umask(0o022)
    try:
        sb = sandbox_factory(nodes=[], state_dir=state)
        kubernetes.client.CoreV1Api(sb.api_client()).create_namespaced_config_map(
            "default", {"metadata": {"name": "a"}})
        sb.stop()
    finally:
        os.umask(old_umask)
    assert _mode(state) == 0o700
    for name in ("objects.json", "token", "tls.key", "tls.crt"):
        assert _mode(state / name) == 0o600, name
    assert not list(state.glob("*.tmp"))


def test_save_state_fsyncs_the_file_and_its_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[str] = []
    real_fsync = os.fsync

    def spy(fd: int) -> None:
        synced.append("dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file")
        real_fsync(fd)

    monkeypatch.setattr(persistence.os, "fsync", spy)
    persistence.save_state(tmp_path / "state", {"objects": [], "resourceVersion": "7"})
    assert synced == ["file", "dir"]
    assert json.loads((tmp_path / "state" / "objects.json").read_text())["resourceVersion"] == "7"


def test_versions_a_crash_lost_get_410_after_the_restore(sandbox_factory: SandboxFactory, tmp_path: Path) -> None:
    state = tmp_path / "state"
    first = sandbox_factory(nodes=[], state_dir=state)
    core = kubernetes.client.CoreV1Api(first.api_client())
    core.create_namespaced_config_map("default", {"metadata": {"name": "kept"}})
    first.stop()
    saved = state / "objects.json"
    snapshot = tmp_path / "snapshot.json"

    second = sandbox_factory(nodes=[], state_dir=state)
    shutil.copy(saved, snapshot)  # what reached the disk: the state as restored, saved at start-up
    core = kubernetes.client.CoreV1Api(second.api_client())
    for name in ("lost-1", "lost-2"):
        core.create_namespaced_config_map("default", {"metadata": {"name": name}})
    seen = core.list_namespaced_config_map("default").metadata.resource_version  # what a client remembers
    second.stop()
    shutil.copy(snapshot, saved)  # a crash: the last writes never reached the disk

    third = sandbox_factory(nodes=[], state_dir=state)
    core = kubernetes.client.CoreV1Api(third.api_client())
    for name in ("new-1", "new-2", "new-3"):  # enough writes to pass the remembered version without the gap
        core.create_namespaced_config_map("default", {"metadata": {"name": name}})
    names = {cm.metadata.name for cm in core.list_namespaced_config_map("default").items}
    assert "lost-1" not in names and "new-1" in names

    # The client's watch from its remembered version must not resume (it would miss new-*, or see
    # versions reused for other objects): one ERROR event with 410, then the stream ends.
    events: list[Any] = list(third.stream(
        f"/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={seen}", timeout=5))
    assert len(events) == 1 and events[0]["type"] == "ERROR"
    assert events[0]["object"]["code"] == 410
    status, _, body = third.http(
        "GET", f"/api/v1/namespaces/default/configmaps?resourceVersion={seen}&resourceVersionMatch=Exact")
    assert status == 410, body
    # The list's own version is newer than every version of the previous runs.
    current = core.list_namespaced_config_map("default").metadata.resource_version
    assert int(current) > int(seen)


def test_a_watch_from_a_version_not_reached_yet_is_504_too_large(sandbox_factory: SandboxFactory) -> None:
    sb = sandbox_factory(nodes=[])
    current = int(kubernetes.client.CoreV1Api(sb.api_client()).list_namespaced_config_map(
        "default").metadata.resource_version)
    events = list(sb.stream(f"/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={current + 50}"))
    assert len(events) == 1 and events[0]["object"]["code"] == 504
    assert events[0]["object"]["message"] == f"Too large resource version: {current + 50}, current: {current}"


def test_a_foreground_deletion_under_way_at_a_restart_still_finishes(sandbox_factory: SandboxFactory,
                                                                      tmp_path: Path, eventually: Any) -> None:
    """As a restarted kube-controller-manager rebuilds its garbage collector's graph from the cluster:
    an owner whose foreground deletion was waiting for a dependent when the sandbox stopped goes away
    once that dependent does (found by benchmarks/chaos.py: a KaiwoJob deleted during the restart
    waited forever on its Job's `foregroundDeletion` finalizer)."""
    state = tmp_path / "state"
    first = sandbox_factory(nodes=[], state_dir=state)
    core = kubernetes.client.CoreV1Api(first.api_client())
    owner = core.create_namespaced_config_map("default", {"metadata": {"name": "owner"}})
    core.create_namespaced_config_map("default", {"metadata": {
        "name": "dependent", "finalizers": ["example.com/hold"],
        "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.metadata.uid,
                             "blockOwnerDeletion": True}]}})
    core.delete_namespaced_config_map("owner", "default", propagation_policy="Foreground")
    eventually(lambda: core.read_namespaced_config_map("dependent", "default").metadata.deletion_timestamp)
    first.stop()

    second = sandbox_factory(nodes=[], state_dir=state)
    core = kubernetes.client.CoreV1Api(second.api_client())
    assert core.read_namespaced_config_map("owner", "default").metadata.finalizers == ["foregroundDeletion"]
    core.patch_namespaced_config_map("dependent", "default", {"metadata": {"finalizers": None}})

    def owner_gone() -> bool:
        try:
            core.read_namespaced_config_map("owner", "default")
        except kubernetes.client.ApiException as err:
            return err.status == 404
        return False

    eventually(owner_gone)


def test_saving_a_large_store_takes_at_most_a_tenth_of_the_loop(tmp_path: Path) -> None:
    """A snapshot that costs 50 ms is not taken every `interval` (1 ms here) but after pauses nine
    times its cost: the API server and the simulated cluster keep the loop."""
    import asyncio
    import time

    from kaiwo_sandbox.storage.persistence import Persister, pause_after_save

    assert pause_after_save(1.0, 0.01) == 1.0
    assert pause_after_save(1.0, 0.5) == pytest.approx(4.5)

    class SlowStore:  # what a Persister uses of the store: its listeners and a costly dump
        write_listeners: list[Callable[[], None]] = []

        def __init__(self) -> None:
            self.dumps = 0

        def dump(self) -> dict:
            self.dumps += 1
            time.sleep(0.05)  # the cost of a snapshot, spent on the loop as the real one is
            return {"items": []}

    async def run() -> int:
        store = SlowStore()
        persister = Persister(store.dump, store.write_listeners, tmp_path / "state", interval=0.001)
        persister.start()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 1.0
        while loop.time() < deadline:  # a store written all the time
            persister._mark()
            await asyncio.sleep(0.005)
        await persister.stop()
        return store.dumps

    dumps = asyncio.run(run())
    assert 1 <= dumps <= 5, dumps  # every 1 ms it would be ~19 in the second
