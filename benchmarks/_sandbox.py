"""The sandbox in a child process, from the benchmark's side: `sandbox_process` starts it (pinned to
a CPU of its own unless BENCH_PIN says otherwise) and yields a `SandboxProcess`, whose methods ask
the child (`_sandbox_child`) for kubeconfigs per user, RSS and CPU, the audit log's writes and
traffic, the store's changes, seeding, faults and restarts.
"""

from __future__ import annotations

import tempfile
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from _machine import MACHINE, pin_apart, pinned_apart
from _objects import GROUP, UNRELATED_KINDS, VERSION, kaiwojob
from _runtime import CONTEXT
from _sandbox_child import sandbox_main


class SandboxProcess:
    """Handle on the sandbox child: kubeconfigs per user, RSS/CPU, and the audit log's writes."""

    def __init__(self, conn: Connection, process: Any, kubeconfigs: dict[str, Path]) -> None:
        self._conn = conn
        self.process = process
        self.kubeconfigs = kubeconfigs
        self._lock = threading.Lock()

    def ask(self, *command: Any) -> Any:
        with self._lock:
            self._conn.send(command)
            return self._conn.recv()

    def rss_mb(self) -> float:
        return float(self.ask("rss_mb"))

    def cpu_s(self) -> float:
        return float(self.ask("cpu_s"))

    def stalls(self) -> tuple[int, float, list[tuple[str, int]], list[tuple[float, float]]]:
        """The sandbox's event-loop stalls since the last call (BENCH_STALLS=1; `LoopStalls.take`)."""
        count, longest, where, worst = self.ask("stalls")
        return count, longest, list(where), list(worst)

    def gc_pauses(self) -> dict[int, tuple[float, float, float]]:
        """The collector's pauses in the sandbox since the last call: (count, total ms, longest ms) by
        generation."""
        return dict(self.ask("gc_pauses"))

    def writes(self, user: str, since: float = 0.0) -> list[tuple[str, str, str, str, str]]:
        return list(self.ask("writes", user, since))

    def timed_writes(self, user: str, since: float = 0.0) -> list[tuple[float, str, str]]:
        """`user`'s successful writes since `since`: (when the server answered, "verb resource[/sub]",
        object name), oldest first."""
        return [tuple(w) for w in self.ask("timed_writes", user, since)]

    def stacks(self, spans: list[tuple[float, float]]) -> dict[str, int]:
        """BENCH_SAMPLE=1: the sandbox loop's sampled stacks within `spans` (`StackSampler.between`)."""
        return dict(self.ask("stacks", spans))

    def store_changes_by_tenth(self, start: float, end: float) -> dict[int, Counter[str]]:
        """Every change committed in the tenths of a second from `start`'s to `end`'s (int(wall time *
        10)), the simulated cluster's own included, by type and resource."""
        return {tenth: Counter(kinds) for tenth, kinds in self.ask("store_changes_by_tenth", start, end).items()}

    def store_changes(self, start: float, end: float) -> tuple[Counter[str], float]:
        """`store_changes_by_tenth` summed, and the seconds its whole tenths cover."""
        total = Counter[str]()
        for kinds in self.store_changes_by_tenth(start, end).values():
            total.update(kinds)
        return total, (int(end * 10) - int(start * 10) + 1) / 10

    def traffic_by_tenth(self, start: float, end: float) -> dict[int, Counter[str]]:
        """`traffic` per tenth of a second (int(wall time * 10)) from `start`'s to `end`'s, in one scan."""
        return {tenth: Counter(keys) for tenth, keys in self.ask("traffic_by_tenth", start, end).items()}

    def connections_made(self, start: float, end: float) -> int:
        """Connections the sandbox accepted between two wall times (a TLS handshake each)."""
        return int(self.ask("connections_made", start, end))

    def traffic(self, start: float, end: float) -> Counter[str]:
        """Every request the server answered between two wall times, by "user verb resource[/sub]"."""
        return Counter(self.ask("traffic", start, end))

    def failed_writes(self, user: str) -> dict[str, int]:
        """"code verb resource[/subresource]" -> writes by `user` the server answered with that error
        (injected faults included)."""
        return dict(self.ask("failed_writes", user))

    def set_faults(self, rules: list[dict[str, Any]]) -> None:
        """Replace the fault rules (FaultInjector.add_json specs, docs/sandbox.md); kept across `restart`."""
        self.ask("faults", rules)

    def fault_hits(self) -> dict[int, int]:
        return dict(self.ask("fault_hits"))

    def cut_watches(self, expire: bool = False) -> int:
        """Close every open watch; `expire`: each resumed watch then gets 410 Gone. Returns streams cut."""
        return int(self.ask("cut_watches", expire))

    def restart(self) -> float:
        """Stop the sandbox and start it again from its `--state` (needs `state=True`): clients keep
        their URL and tokens, every resourceVersion they hold gets 410. Returns the seconds it took."""
        return float(self.ask("restart"))

    def seed_unrelated(self, count: int, kinds: tuple[str, ...] = UNRELATED_KINDS, first: int = 0) -> float:
        """`count` unrelated objects (numbered from `first`) created in the sandbox's own process;
        returns the seconds it took."""
        return float(self.ask("seed_unrelated", count, kinds, first))

    def seed_kaiwojobs(self, namespace: str, names: list[str], entrypoint: str = "sleep 600") -> float:
        """KaiwoJobs created in the sandbox's own process (for a backlog of 10,000 and more: as the
        load client would create them, 10x faster); returns the seconds it took."""
        return float(self.ask("seed", [(GROUP, VERSION, "kaiwojobs", kaiwojob(name, namespace, entrypoint))
                                       for name in names]))


@contextmanager
def sandbox_process(*, cluster: bool | list[str] = False, time_factor: float = 1.0,
                    users: tuple[str, ...] = ("kaiwo-ray", "loader"), state: bool = False,
                    cpu_nodes: int = 1) -> Iterator[SandboxProcess]:
    """The sandbox in a child process; `state`: persisted in a temporary `--state` directory, so that
    `SandboxProcess.restart()` restores it (same URL, same tokens) as a restarted `kaiwo-ray sandbox`.
    `cpu_nodes`: how many CPU nodes the cluster has (`sized_nodes`)."""
    with tempfile.TemporaryDirectory(prefix="kaiwo-opbench-") as tmp:
        parent, child = CONTEXT.Pipe()
        process = CONTEXT.Process(target=sandbox_main, args=(child, tmp, cluster, time_factor, list(users), state, cpu_nodes),
                                  daemon=True, name="sandbox")
        process.start()
        MACHINE.label(process.pid, f"sandbox {process.pid}")
        if pinned_apart() and process.pid is not None:
            pin_apart(process.pid)
        if not parent.poll(90):
            process.kill()
            raise RuntimeError("the sandbox process did not start within 90 s")
        paths = parent.recv()
        handle = SandboxProcess(parent, process, {user: Path(p) for user, p in paths.items()})
        try:
            yield handle
        finally:
            try:
                parent.send(("stop",))
                parent.poll(15)
            except (BrokenPipeError, OSError):
                pass
            process.join(timeout=15)
            if process.is_alive():
                process.kill()
