"""`--state DIR`: objects survive restarts. The whole store is written as one JSON snapshot,
atomically (temp file + rename), at most once per `interval` while something changed and again on
shutdown, so a crash loses at most `interval` seconds of writes and never leaves a torn file.
resourceVersions continue from the saved counter, so clients never see one go backwards."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

import orjson

from kaiwo_sandbox.contracts import JsonObj

log = logging.getLogger(__name__)

STATE_FILE = "objects.json"
TOKEN_FILE = "token"


def load_state(state_dir: Path) -> JsonObj | None:
    path = state_dir / STATE_FILE
    if not path.exists():
        return None
    try:
        state: JsonObj = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise ValueError(f"cannot read sandbox state {path}: {exc}; move it away to start empty") from exc
    return state


def private_dir(state_dir: Path) -> None:
    """The state directory, created 0700 (it holds the admin token and the TLS key). A directory that
    already exists keeps its mode: the user chose it."""
    if not state_dir.exists():
        state_dir.mkdir(parents=True, mode=0o700, exist_ok=True)
        state_dir.chmod(0o700)  # mkdir's mode is filtered by the umask


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_private(path: Path, data: bytes) -> None:
    """Write `path` atomically and durably: a temp file created 0600 (never readable by others, not
    even for a moment), fsync'd, renamed over `path`, then the directory fsync'd so the rename
    itself survives a power cut."""
    private_dir(path.parent)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # an older temp file may have had another mode
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def save_state(state_dir: Path, state: JsonObj) -> None:
    write_private(state_dir / STATE_FILE, orjson.dumps(state))


def load_or_create_token(state_dir: Path, make: str) -> str:
    """Keep the bearer token across restarts so an exported kubeconfig stays valid."""
    path = state_dir / TOKEN_FILE
    with contextlib.suppress(OSError):
        token = path.read_text().strip()
        if token:
            return token
    write_private(path, make.encode())
    return make


# A save is a whole snapshot taken on the event loop, and its cost grows with the store: at 10,000
# KaiwoJobs with their Jobs, pods, Workloads and Events it is about half a second, so saving every
# second would starve the API server and the simulated cluster (benchmarks/chaos.py --scale 10000).
# The pause after a save therefore grows with what the save cost, so saving stays under a tenth of
# the loop's time; `stop` still saves last, so only a crash loses the writes of the last pause.
SAVE_SHARE = 0.1


def pause_after_save(interval: float, took: float) -> float:
    """Seconds to wait before the next save: `interval`, or longer when the last save was slow."""
    return max(interval, took * (1 - SAVE_SHARE) / SAVE_SHARE)


class Persister:
    """Saves the store while it runs (debounced, at most a tenth of the time) and once more on `stop`:
    `dump` takes the snapshot (`snapshot.dump`), `write_listeners` are the store's ("something changed")."""

    def __init__(self, dump: Callable[[], JsonObj], write_listeners: list[Callable[[], None]], state_dir: Path,
                 interval: float = 1.0) -> None:
        self.dump = dump
        self.state_dir = state_dir
        self.interval = interval
        self._dirty = False
        self._task: asyncio.Task[None] | None = None
        write_listeners.append(self._mark)

    def _mark(self) -> None:
        self._dirty = True

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop(), name="sandbox-persist")

    async def _loop(self) -> None:
        pause = self.interval
        while True:
            await asyncio.sleep(pause)
            if self._dirty:
                started = time.perf_counter()
                self.save()
                pause = pause_after_save(self.interval, time.perf_counter() - started)

    def save(self) -> None:
        self._dirty = False
        try:
            save_state(self.state_dir, self.dump())
        except OSError as exc:
            log.error("sandbox: saving state to %s failed: %s", self.state_dir, exc)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self.save()
