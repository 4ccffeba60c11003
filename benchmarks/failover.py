"""Benchmark: leader failover (issue 14, item 4). Two kaiwo-ray instances (each hosting the KaiwoConfig
controller with its Lease, each in a process of its own) against a sandbox in a third process.

* after a crash: the leader's process is SIGKILLed (nothing released); time until the standby leads.
  client-go's bound is lease duration + one retry period; target <= lease duration + 2 s.
* after a graceful stop (the Lease is released): time until the standby leads; target <= retry + 1 s.

The lease duration is the ratio's baseline: a crash failover is printed as a multiple of it.

    .venv/bin/python benchmarks/failover.py [--lease-seconds 15] [--scale N (crash rounds, default 2)]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from _runtime import CONTEXT, run_deployed
from _sandbox import sandbox_process


def _instance_main(conn: Connection, kubeconfig: str, identity: str, lease_seconds: float, retry: float) -> None:
    """One kaiwo-ray instance: reports `leading` as soon as it holds its Lease, then serves
    `stop` (graceful) until killed."""
    from hosts.runtime.controller_host import Operator
    from kaiwo_ray.controllers.manager import HostSettings

    async def main() -> None:
        operator = Operator(["kaiwoconfig"], HostSettings(kubeconfig=kubeconfig, identity=identity,
                                                          lease_seconds=lease_seconds, renew_every=retry))
        await operator.start()
        conn.send("started")
        loop = asyncio.get_running_loop()
        elector = operator.hosts[0].elector
        assert elector is not None
        waiter = loop.run_in_executor(None, conn.recv)
        leading = asyncio.ensure_future(elector.leading.wait())
        done, _ = await asyncio.wait({waiter, leading}, return_when=asyncio.FIRST_COMPLETED)
        if leading in done:
            conn.send(("leading", time.time()))
            await waiter
        await operator.stop()
        conn.send("stopped")

    run_deployed(main())


class Instance:
    def __init__(self, kubeconfig: Path, identity: str, lease_seconds: float, retry: float) -> None:
        self.conn, child = CONTEXT.Pipe()
        self.process: Any = CONTEXT.Process(target=_instance_main, daemon=True, name=identity,
                                            args=(child, str(kubeconfig), identity, lease_seconds, retry))
        self.process.start()
        if not self.conn.poll(60) or self.conn.recv() != "started":
            raise RuntimeError(f"instance {identity} did not start")

    def leading_at(self, timeout: float) -> float | None:
        if not self.conn.poll(timeout):
            return None
        message = self.conn.recv()
        return float(message[1]) if isinstance(message, tuple) else None

    def stop(self) -> None:
        if self.process.is_alive():
            self.conn.send("stop")
            self.conn.poll(30)
        self.process.join(timeout=10)

    def kill(self) -> float:
        self.process.kill()  # SIGKILL: no release, no goodbye
        killed = time.time()
        self.process.join(timeout=10)
        return killed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lease-seconds", type=float, default=15.0)
    parser.add_argument("--retry", type=float, default=2.0, help="renew/retry period (client-go's RetryPeriod)")
    parser.add_argument("--scale", type=int, default=2, help="crash rounds")
    args = parser.parse_args()
    lease, retry = args.lease_seconds, args.retry
    crash_times: list[float] = []
    with sandbox_process(users=("a", "b")) as sb:
        leader = Instance(sb.kubeconfigs["a"], "instance-a", lease, retry)
        if leader.leading_at(lease + 10) is None:
            print("the first instance never led", file=sys.stderr)
            return 1
        names = ["a", "b"]
        for round_ in range(args.scale):
            standby_user = names[(round_ + 1) % 2]
            standby = Instance(sb.kubeconfigs[standby_user], f"instance-{standby_user}-{round_}", lease, retry)
            time.sleep(retry * 2)  # the standby has observed the live Lease a few times (as in production)
            killed = leader.kill()
            took_over = standby.leading_at(lease * 3)
            if took_over is None:
                print(f"round {round_}: the standby never led", file=sys.stderr)
                return 1
            crash_times.append(took_over - killed)
            leader = standby
        standby = Instance(sb.kubeconfigs["a"], "instance-final", lease, retry)
        time.sleep(retry * 2)
        stopped = time.time()
        leader.stop()
        took_over = standby.leading_at(lease * 3)
        graceful = (took_over - stopped) if took_over is not None else float("nan")
        standby.stop()
    worst = max(crash_times)
    print(f"lease duration: {lease:.1f} s, retry period {retry:.1f} s, renew deadline {lease * 2 / 3:.1f} s")
    for n, took in enumerate(crash_times):
        print(f"failover_after_crash_{n}: {took:.2f} s (target <= {lease + 2:.1f} s)")
    print(f"failover_after_crash_worst_vs_lease: {worst / lease:.2f}x (target <= {(lease + 2) / lease:.2f}x)")
    print(f"failover_after_graceful_stop: {graceful:.2f} s (target <= {retry + 1:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
