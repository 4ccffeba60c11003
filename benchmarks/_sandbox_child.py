"""The sandbox's side of `_sandbox.sandbox_process`: the child process that starts a sandbox, mints a
kubeconfig per user (so the audit log tells who wrote what), then answers the benchmark's commands over
a pipe until told to stop (`SandboxChild`): its RSS and CPU, the audit log's writes and traffic, the
store's changes per tenth of a second, the collector's pauses, objects seeded straight into the store,
fault rules, cut watches and a restart from its `--state`. The product's modules are imported here, in
the child, never in the benchmark's process.
"""

from __future__ import annotations

import asyncio
import cProfile
import os
import time
from collections import Counter
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from _diagnosis import GcPauses, LoopStalls, StackSampler, toggle_profile
from _objects import sized_nodes, unrelated_objects
from _runtime import run_deployed

if TYPE_CHECKING:
    from kaiwo_sandbox.apiserver.audit import AuditRecord
    from kaiwo_sandbox.contracts import WatchEvent
    from kaiwo_sandbox.instance import Sandbox, SandboxConfig

WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})


def sandbox_main(conn: Connection, workdir: str, cluster: bool | list[str], time_factor: float,
                 users: list[str], state: bool = False, cpu_nodes: int = 1) -> None:
    """The child process: a sandbox of `cpu_nodes` CPU nodes (with the simulated cluster if `cluster`),
    a kubeconfig per user in `workdir` sent back as {user: path}, then commands until "stop"."""
    child = SandboxChild(_sandbox_config(Path(workdir), cluster, time_factor, state, cpu_nodes))
    run_deployed(_serve(conn, child, Path(workdir), users))


def _sandbox_config(workdir: Path, cluster: bool | list[str], time_factor: float, state: bool,
                    cpu_nodes: int) -> SandboxConfig:
    from kaiwo_ray.api.config import KaiwoConfigSpec
    from kaiwo_ray.api.crd import all_crds
    from kaiwo_ray.nodes import with_pool_labels
    from kaiwo_sandbox.instance import SandboxConfig

    # the node-pool labels the KaiwoQueueConfig controller would have put on the nodes
    nodes = with_pool_labels(sized_nodes(cpu_nodes), KaiwoConfigSpec())
    return SandboxConfig(nodes=nodes, cluster=cluster, time_factor=time_factor,
                         kubeconfig_path=workdir / "admin.kubeconfig", extra_crds=list(all_crds()),
                         state_dir=workdir / "state" if state else None)


async def _serve(conn: Connection, child: SandboxChild, workdir: Path, users: list[str]) -> None:
    await child.start()
    conn.send(child.write_kubeconfigs(workdir, users))
    loop = asyncio.get_running_loop()
    while True:
        command, *args = await loop.run_in_executor(None, conn.recv)
        if command == "stop":
            break
        conn.send(await child.answer(command, args))
    await child.sandbox.stop()
    conn.send("stopped")


def _what(r: AuditRecord) -> str:
    return f"{r.verb} {r.resource}{'/' + r.subresource if r.subresource else ''}"


def _by_tenth(counted: list[tuple[tuple[int, str], int]], start: float, end: float) -> dict[int, dict[str, int]]:
    """{tenth: {what: n}} for the tenths of a second from `start`'s to `end`'s (int(wall time * 10))."""
    series: dict[int, Counter[str]] = {}
    for (tenth, key), n in counted:
        if int(start * 10) <= tenth <= int(end * 10):
            series.setdefault(tenth, Counter())[key] += n
    return {tenth: dict(keys) for tenth, keys in series.items()}


class SandboxChild:
    """The sandbox and what the benchmark asks of it; one method per command of `SandboxProcess.ask`,
    each returning the answer sent back. The audit records and fault hits of the incarnations before a
    `restart` are kept, so every answer covers the whole run."""

    def __init__(self, config: SandboxConfig) -> None:
        import psutil

        self.config = config
        self.gc_pauses = GcPauses()  # the collector's pauses in the sandbox's process
        # every committed change, the simulated cluster's own included (the audit log has only HTTP
        # requests), counted per 100 ms: {(tenth of a second, "TYPE resource"): count}
        self.store_changes: Counter[tuple[int, str]] = Counter()
        self.stalls = LoopStalls("kaiwo_sandbox")
        self.stacks = StackSampler("kaiwo_sandbox")
        self.process = psutil.Process()
        self.tokens: dict[str, str] = {}
        self.earlier: list[AuditRecord] = []  # the audit records of the incarnations before a restart
        self.fault_rules: list[dict[str, Any]] = []  # applied again after a restart
        self.earlier_hits: Counter[int] = Counter()  # requests the rules hit before a restart
        self.profiler: cProfile.Profile | None = None  # diagnosis only: the "profile" command
        self.sandbox: Sandbox

    async def start(self) -> None:
        from hosts.runtime.gc_tuning import tune_for_long_lived_caches
        from kaiwo_sandbox.instance import Sandbox

        self.sandbox = Sandbox(self.config)
        await self.sandbox.start()
        tune_for_long_lived_caches(freeze_after=0)  # as `kaiwo-ray sandbox` runs it
        if os.environ.get("BENCH_STALLS"):
            self.stalls.start()
        if os.environ.get("BENCH_SAMPLE"):
            self.stacks.start()
        self.sandbox.store.subscribe(self._count_change)

    def _count_change(self, event: WatchEvent) -> None:
        self.store_changes[(int(time.time() * 10), f"{event.type} {event.gvr.resource}")] += 1

    def write_kubeconfigs(self, workdir: Path, users: list[str]) -> dict[str, str]:
        """A token and a kubeconfig per user; {user: path}, the admin's included."""
        from kaiwo_sandbox.instance import write_kubeconfig

        sandbox = self.sandbox
        paths = {"admin": str(workdir / "admin.kubeconfig")}
        for user in users:
            path = workdir / f"{user}.kubeconfig"
            self.tokens[user] = sandbox.mint_token(user)
            write_kubeconfig(path, sandbox.url, self.tokens[user], sandbox.cert.cert_pem if sandbox.cert else None)
            paths[user] = str(path)
        return paths

    async def answer(self, command: str, args: list[Any]) -> Any:
        if command == "restart":
            return await self.restart()
        handler: Callable[..., Any] | None = getattr(self, f"do_{command}", None)
        return None if handler is None else handler(*args)

    # -- the audit log and the store --

    def _records(self, user: str | None = None) -> list[AuditRecord]:
        if user is None:
            return [*self.earlier, *self.sandbox.audit.records()]
        return [r for r in self.earlier if r.user == user] + self.sandbox.audit.records(user=user)

    def _written(self, user: str, since: float) -> list[AuditRecord]:
        """`user`'s successful writes since `since`."""
        return [r for r in self._records(user) if r.verb in WRITE_VERBS and r.timestamp >= since and r.code < 300]

    def do_rss_mb(self) -> float:
        return float(self.process.memory_info().rss / 2**20)

    def do_cpu_s(self) -> float:
        times = self.process.cpu_times()
        return float(times.user + times.system)

    def do_writes(self, user: str, since: float) -> list[tuple[str, str, str, str, str]]:
        """[(verb, resource, subresource, namespace, name)] of `user`'s successful writes since `since`."""
        return [(r.verb, r.resource, r.subresource, r.namespace, r.name) for r in self._written(user, since)]

    def do_timed_writes(self, user: str, since: float) -> list[tuple[float, str, str]]:
        """[(timestamp, "verb resource[/sub]", name)] of `user`'s successful writes since `since`."""
        return [(r.timestamp, _what(r), r.name) for r in self._written(user, since)]

    def do_write_counts(self, user: str, since: float) -> dict[str, int]:
        """{"verb resource[/sub]": count} of `user`'s successful writes since `since`."""
        return dict(Counter(_what(r) for r in self._written(user, since)))

    def do_requests(self, user: str, since: float) -> dict[str, int]:
        """{"verb resource[/sub]": count} of `user`'s requests since `since`, every verb."""
        return dict(Counter(_what(r) for r in self._records(user) if r.timestamp >= since))

    def do_traffic(self, start: float, end: float) -> dict[str, int]:
        """{"user verb resource[/sub]": count} of every user's requests between two wall times."""
        return dict(Counter(f"{r.user} {_what(r)}" for r in self._records() if start <= r.timestamp <= end))

    def do_store_changes_by_tenth(self, start: float, end: float) -> dict[int, dict[str, int]]:
        """{tenth: {"TYPE resource": n}}"""
        return _by_tenth(list(self.store_changes.items()), start, end)

    def do_traffic_by_tenth(self, start: float, end: float) -> dict[int, dict[str, int]]:
        """{tenth: {"user verb resource[/sub]": n}}"""
        first, last = int(start * 10), int(end * 10)
        return _by_tenth([((tenth, f"{r.user} {_what(r)}"), 1) for r in self._records()
                          if first <= (tenth := int(r.timestamp * 10)) <= last], start, end)

    def do_connections_made(self, start: float, end: float) -> int:
        """Connections the lean front accepted between two wall times."""
        return sum(1 for t in self.sandbox.lean.made_at if start <= t <= end)

    def do_failed_writes(self, user: str) -> dict[str, int]:
        """{"code verb resource[/sub]": count} of `user`'s writes answered >= 400."""
        return dict(Counter(f"{r.code} {_what(r)}"
                            for r in self._records(user) if r.verb in WRITE_VERBS and r.code >= 400))

    def do_errors(self) -> Any:
        return self.sandbox.cluster.errors if self.sandbox.cluster else 0

    # -- this process's instruments --

    def do_gc_pauses(self) -> dict[int, tuple[float, ...]]:
        """Since the last ask, then reset."""
        return self.gc_pauses.take()

    def do_stalls(self) -> tuple[int, float, list[tuple[str, int]], list[tuple[float, float]]]:
        """BENCH_STALLS: since the last ask, then reset."""
        return self.stalls.take()

    def do_stacks(self, spans: list[tuple[float, float]]) -> dict[str, int]:
        """BENCH_SAMPLE: {stack: samples} within `spans`."""
        return self.stacks.between(spans)

    def do_profile(self, path: str | None) -> None:
        """Diagnosis: see `toggle_profile`."""
        self.profiler = toggle_profile(self.profiler, path)

    # -- seeding --

    def do_seed(self, objects: list[tuple[str, str, str, dict[str, Any]]]) -> float:
        """[(group, version, resource, object)] -> seconds it took."""
        return _seed(self.sandbox.store, objects)

    def do_seed_unrelated(self, *args: Any) -> float:
        """`unrelated_objects`' arguments (count, kinds, first) -> seconds it took."""
        return _seed(self.sandbox.store, unrelated_objects(*args))

    # -- faults and restarts --

    def _count_hits(self) -> None:
        for rule in self.sandbox.faults.rules():
            self.earlier_hits[rule.code] += rule.hits

    def do_faults(self, rules: list[dict[str, Any]]) -> list[Any]:
        """[FaultInjector.add_json specs]: replace the rules (kept across restarts)."""
        self.fault_rules = list(rules)
        self._count_hits()
        self.sandbox.faults.clear()
        return [self.sandbox.faults.add_json(spec) for spec in self.fault_rules]

    def do_fault_hits(self) -> dict[int, int]:
        """code -> requests hit."""
        hits = Counter(self.earlier_hits)
        for rule in self.sandbox.faults.rules():
            hits[rule.code] += rule.hits
        return dict(hits)

    def do_cut_watches(self, expire: bool) -> int:
        """Streams cut; `expire`: every resumed watch gets 410."""
        cut = self.sandbox.faults.cut_watches()
        if expire:
            self.sandbox.faults.expire_next(max(cut, 1))
        return cut

    async def restart(self) -> float:
        """Stop, then start from --state on the same port and tokens; seconds it took."""
        from kaiwo_sandbox.apiserver.auth.authn import AUTHENTICATED, UserInfo
        from kaiwo_sandbox.instance import Sandbox

        began = time.perf_counter()
        self.earlier.extend(self.sandbox.audit.records())
        self._count_hits()
        self.config.port = self.sandbox.port
        await self.sandbox.stop()
        self.sandbox = Sandbox(self.config)
        await self.sandbox.start()
        for user, token in self.tokens.items():
            self.sandbox.access.authn.add_static(token, UserInfo(user, (AUTHENTICATED,)))
        for spec in self.fault_rules:
            self.sandbox.faults.add_json(spec)
        return time.perf_counter() - began


def _seed(store: Any, objects: Any) -> float:
    """Create `objects` straight in the store, in the sandbox's process: what 100,000 HTTP creates
    would leave (defaulted, validated, with a resourceVersion and watch history), in a fraction of the
    time; the audit log does not see them, and they are all created by the loader's user."""
    from kaiwo_sandbox.contracts import GVR as SandboxGVR

    began = time.perf_counter()
    for group, version, resource, obj in objects:
        store.create_owned(SandboxGVR(group, version, resource), obj, field_manager="seed", user="seed")
    return time.perf_counter() - began
