"""The Ray-free half of hosting the operator: the health report of a controller actor, its
rendering, the `--controllers` parser and SIGINT/SIGTERM handling for the long-running commands.

Kept apart from `actors/` so that the CLI can validate arguments and print reports without paying
for `import ray` (seconds on a small machine), and so that these decisions are testable without it.
"""

from __future__ import annotations

import difflib
import signal
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

from pydantic import BaseModel, ConfigDict

from kaiwo_ray.controllers.manager import CONTROLLERS


class ActorHealth(BaseModel):
    """One controller actor as the supervisor last saw it.

    `alive` is False when the actor could not be reached (dead, restarting, or not answering in
    time); `error` then says why. `restarts` counts the restarts the supervisor noticed (a new pid,
    or an actor it had to recreate).
    """

    model_config = ConfigDict(frozen=True, extra="ignore")

    name: str
    alive: bool
    identity: str = ""  # the Lease holder identity the actor runs with
    started: bool = False
    pid: int | None = None
    leader: bool = False
    writing: bool = False
    synced: bool = False
    queue: int = 0
    in_flight: int = 0
    reconciles: int = 0
    errors: int = 0
    retries: int = 0
    writes: int | None = None
    last_error: str = ""
    rss_bytes: int = 0
    uptime_s: float = 0.0
    batch_scheduling: bool = False  # its loop's thread never preempts on wakeup (hosts.runtime.cpu_policy)
    restarts: int = 0
    error: str = ""

    @classmethod
    def from_report(cls, name: str, report: dict[str, Any], restarts: int = 0) -> ActorHealth:
        """From the dict an actor's `health()` returns (the controller's own keys plus the actor's)."""
        fields = {k: v for k, v in report.items() if k in cls.model_fields and k not in ("name", "restarts")}
        fields.setdefault("alive", True)
        return cls(name=name, restarts=restarts, **fields)

    @classmethod
    def unreachable(cls, name: str, error: str, restarts: int = 0) -> ActorHealth:
        return cls(name=name, alive=False, error=error, restarts=restarts)

    @property
    def healthy(self) -> bool:
        return self.alive and self.started and not self.error


def parse_controller_names(text: str | None) -> list[str]:
    """`--controllers kaiwojob,kaiwoservice` -> names in `CONTROLLERS` order; None/"" -> all of them.

    Raises ValueError naming the unknown entry and the closest known name.
    """
    if text is None or not text.strip():
        return list(CONTROLLERS)
    wanted: list[str] = []
    for raw in text.split(","):
        name = raw.strip().lower()
        if not name:
            continue
        if name not in CONTROLLERS:
            close = difflib.get_close_matches(name, CONTROLLERS, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ValueError(f"unknown controller {raw.strip()!r}{hint} (choose from {', '.join(CONTROLLERS)})")
        if name not in wanted:
            wanted.append(name)
    if not wanted:
        raise ValueError(f"no controller named (choose from {', '.join(CONTROLLERS)})")
    return [n for n in CONTROLLERS if n in wanted]


def adopted(rows: Iterable[ActorHealth], identity: str) -> list[ActorHealth]:
    """Actors that were already running under another identity (found by name, `get_if_exists`):
    they keep the settings they were started with, whatever this instance was told."""
    return [row for row in rows if row.identity and row.identity != identity]


def _mib(size: int) -> str:
    return f"{size / (1 << 20):.0f}" if size else "-"


def format_health(rows: Sequence[ActorHealth]) -> str:
    """A fixed-width table, one line per actor, then one line per actor that reports an error."""
    header = ("CONTROLLER", "ALIVE", "LEADER", "SYNCED", "QUEUE", "IN-FLIGHT", "RECONCILES", "ERRORS",
              "RESTARTS", "RSS-MIB", "PID")
    table: list[tuple[str, ...]] = [header]
    for row in rows:
        table.append((row.name, _yes(row.alive), _yes(row.leader) if row.alive else "-",
                      _yes(row.synced) if row.alive else "-", str(row.queue), str(row.in_flight),
                      str(row.reconciles), str(row.errors), str(row.restarts), _mib(row.rss_bytes),
                      str(row.pid) if row.pid else "-"))
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(line)).rstrip() for line in table]
    for row in rows:
        if row.error:
            lines.append(f"{row.name}: {row.error}")
        elif row.last_error:
            lines.append(f"{row.name}: last reconcile error: {row.last_error}")
    return "\n".join(lines)


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def health_changes(before: Iterable[ActorHealth], after: Iterable[ActorHealth]) -> list[str]:
    """One line per notable change between two reports (what a long-running `up` logs)."""
    old = {row.name: row for row in before}
    lines: list[str] = []
    for row in after:
        prev = old.get(row.name)
        if prev is None:
            continue
        if prev.alive and not row.alive:
            lines.append(f"{row.name}: not reachable ({row.error or 'no answer'})")
        elif not prev.alive and row.alive:
            lines.append(f"{row.name}: reachable again (pid {row.pid})")
        elif prev.pid and row.pid and prev.pid != row.pid:
            lines.append(f"{row.name}: restarted (pid {prev.pid} -> {row.pid})")
        if row.alive and prev.alive and prev.leader != row.leader:
            lines.append(f"{row.name}: {'became leader' if row.leader else 'lost the lease; standing by'}")
    return lines


class ProcessMemory(BaseModel):
    model_config = ConfigDict(frozen=True)

    label: str
    pid: int
    rss_bytes: int


def _label(process: Any) -> str:
    name = str(process.name())
    if not name.startswith("python"):
        return name  # gcs_server, raylet, and workers that retitle themselves ("ray::ControllerActor")
    argv = list(process.cmdline()[1:])
    if "-m" in argv:  # python -m hosts.cli.main sandbox ... -> "hosts.cli.main sandbox"
        return " ".join(argv[argv.index("-m") + 1:][:2])
    args = [a for a in argv if not a.startswith("-")]
    return Path(args[0]).name if args else name


def process_tree_memory(pid: int | None = None) -> list[ProcessMemory]:
    """RSS of every descendant of `pid` (default: this process). For a local Ray started by this
    driver that is Ray's daemons (gcs_server, raylet, agents, monitors) and its workers, the
    controller actors among them — the figures to put beside each actor's own RSS."""
    import psutil

    found: list[ProcessMemory] = []
    for child in psutil.Process(pid).children(recursive=True):
        try:
            found.append(ProcessMemory(label=_label(child), pid=child.pid, rss_bytes=child.memory_info().rss))
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def format_memory(processes: Sequence[ProcessMemory]) -> str:
    """One line: the controller actors, the rest of Ray, anything else (e.g. the sandbox)."""
    actors = [p for p in processes if "ControllerActor" in p.label]
    others = [p for p in processes if p not in actors]
    parts = [f"controller actors {sum(p.rss_bytes for p in actors) / (1 << 20):.0f} MiB in {len(actors)}"]
    parts += [f"{p.label} {p.rss_bytes / (1 << 20):.0f}" for p in sorted(others, key=lambda p: -p.rss_bytes)]
    return "RSS (MiB): " + ", ".join(parts)


class StopSignal:
    """SIGINT/SIGTERM set an event instead of raising, so the main loop can stop the operator
    gracefully; a second signal falls through to the previous handler (a stuck stop can be forced).
    Use as a context manager on the main thread; handlers are restored on exit."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.event = threading.Event()
        self.received: int | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopSignal:
        self.install()
        return self

    def install(self) -> None:
        """(Re)take the signals; call again after something else installed its own handler
        (`ray.init` replaces the driver's SIGTERM handler with one that exits at once)."""
        for signum in self.SIGNALS:
            previous = signal.signal(signum, self._handle)
            self._previous.setdefault(signum, previous)

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.event.is_set():
            previous = self._previous.get(signum)
            if callable(previous):
                previous(signum, frame)
                return
            raise KeyboardInterrupt
        self.received = signum
        self.event.set()

    def wait(self, timeout: float) -> bool:
        """True once a stop signal arrived; otherwise returns after `timeout` seconds."""
        return self.event.wait(timeout)
