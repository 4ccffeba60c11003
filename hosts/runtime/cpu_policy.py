"""The CPU scheduling class of a controller's thread: SCHED_BATCH, so that it never preempts on wakeup.

A controller is background work: nothing waits on its next microsecond, while what shares its node
often is latency-bound (the admin API and Serve's proxy in the same Ray cluster; the API server
itself on a one-node cluster). Under Linux's fair scheduler a thread woken by its socket (an answer,
a watch event) may preempt whatever runs on the CPU it was woken onto, and a loopback wakeup puts it
on the CPU of the process that woke it: the API server, which had more to send. SCHED_BATCH keeps
the thread's fair share of CPU (the same weight as SCHED_OTHER at its nice value) and only gives up
that preemption: the woken controller waits for the running thread's slice or another CPU.

Measured in benchmarks/operator.py (2 cores, API server beside the operator): with the operator's
thread preempting, the API server wrote the child Job's watch event to other clients 1.3-1.9 ms after
storing it, against 0.4-0.5 ms when either ran on a CPU of its own.

Linux only, and per thread (threads inherit it from their creator); elsewhere, or where a seccomp
profile refuses the call, it is a no-op: the policy is a courtesy, not a requirement.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

log = logging.getLogger(__name__)

BATCH_VARIABLE = "KAIWO_BATCH_SCHEDULING"
"""Set false to keep the controllers in the default class (a node where the few ms a woken controller
may wait matter more than what it shares the node with): read by the deployed actors, `kaiwo-ray up`
and `kaiwo-ray dev` alike."""


def batch_wanted(env: Mapping[str, str]) -> bool:
    """Whether the operator's controllers should run batch: BATCH_VARIABLE, true when unset or empty.
    ValueError naming the variable for anything but true/false, 1/0 or yes/no (any case)."""
    return env_flag(env, BATCH_VARIABLE, default=True)


def env_flag(env: Mapping[str, str], name: str, *, default: bool) -> bool:
    """A boolean variable: true/false, 1/0 or yes/no (any case); unset or empty is `default`."""
    raw = (env.get(name) or "").strip().lower()
    if not raw:
        return default
    if raw in ("1", "true", "yes"):
        return True
    if raw in ("0", "false", "no"):
        return False
    raise ValueError(f"{name} must be true or false, not {env.get(name)!r}")


def run_as_batch() -> bool:
    """Put the calling thread (and the threads it starts from now on) in SCHED_BATCH; whether it is."""
    setter = getattr(os, "sched_setscheduler", None)
    batch = getattr(os, "SCHED_BATCH", None)
    if setter is None or batch is None:
        return False
    try:
        setter(0, batch, os.sched_param(0))
    except OSError as err:  # EPERM under a restrictive seccomp profile: keep the default class
        log.info("SCHED_BATCH refused (%s); the controller keeps the default CPU scheduling class", err)
        return False
    return True


def is_batch() -> bool:
    """Whether the calling thread runs in SCHED_BATCH."""
    getter = getattr(os, "sched_getscheduler", None)
    batch = getattr(os, "SCHED_BATCH", None)
    return getter is not None and batch is not None and getter(0) == batch
