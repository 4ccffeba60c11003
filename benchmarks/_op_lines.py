"""The report lines benchmarks/operator.py prints about a party's latency samples: a percentile
against its target (`lat_line`), where each sample's time went between the audit log's stamps
(`segments_line`), which other writes met a sample's path (`overlaps_line`), the slow spells with
what the machine and the sandbox did meanwhile (`spells_line`), the threads' waits for a CPU
(`waits_line`) and the collector's pauses (`gc_pauses_line`).
"""

from __future__ import annotations

import statistics
from collections import Counter

from _machine import MACHINE
from _op_figures import TARGET_P99_100_MS
from _sandbox import SandboxProcess
from _stats import PATH_PARTS, Latency, path_overlaps, percentile


def lat_line(label: str, lat: Latency, rate: int, q: float, target: float | None, floor: str) -> str:
    value = lat.p(q)
    verdict = "" if target is None else (" MISSED" if value > target else "")
    target_text = f"target <= {target:.0f} ms; " if target is not None else ""
    return (f"{label}_p{q:.0f}_{rate}cps: {value:.1f} ms ({target_text}n={lat.observed}/{lat.sent}{floor})"
            f"{verdict}")


def segments_line(sandbox: SandboxProcess, lat: Latency, user: str, child_write: str) -> str:
    """Where each 100 CR/s sample's time went, from the sandbox's audit log (stamped as each write is
    answered): the load client's create to the KaiwoJob stored, stored to the operator's child Job
    stored (its watch, queue, reconcile and write), and that to the Job watcher's event. p50/p99 of
    each, and their medians over the samples slower than the p99 target."""
    rows = sample_rows(sandbox, lat, user, child_write)
    if not rows:
        return "  (where the time went: no audit records matched)"
    names = ("create -> stored", "stored -> child Job stored", "child stored -> watcher")
    parts = []
    for i, what in enumerate(names):
        values = [r[i] for r in rows]
        slow = [r[i] for r in rows if r[3] > TARGET_P99_100_MS]
        tail = f", {statistics.median(slow):.1f} in the {len(slow)} slow samples" if slow else ""
        parts.append(f"{what} p50 {percentile(values, 50):.1f} p99 {percentile(values, 99):.1f}{tail}")
    return f"  (where the time went at 100 CR/s, ms, from the audit log: {'; '.join(parts)})"


def overlaps_line(sandbox: SandboxProcess, lat: Latency, rate: int, user: str, child_write: str) -> str:
    """How often the one-core API server answered another write of `user` (a status patch, an Event,
    another CR's child) inside each part of a sample's path, from the audit log (`_stats.path_overlaps`):
    the share of samples such a write met, their median against the others', and which writes they
    were: where the writes an operator owes meet the next KaiwoJob."""
    stored, child, writes = _audit_stamps(sandbox, lat, user, child_write)
    samples = [(name, at, at + ms / 1000, ms) for name, at, ms in zip(lat.names, lat.at, lat.ms, strict=True)]
    overlaps = path_overlaps(samples, stored, child, writes)
    if not overlaps.counted:
        return f"  (other writes inside a sample's path at {rate} CR/s: no audit records matched)"
    texts = []
    for label, (hit, rest) in zip(PATH_PARTS, overlaps.parts, strict=True):
        medians = (f", median {statistics.median(hit):.1f} ms against {statistics.median(rest):.1f}"
                   if hit and rest else "")
        texts.append(f"{label} {len(hit) / overlaps.counted * 100:.0f}%{medians}")
    kinds = ", ".join(f"{what} {n}" for what, n in overlaps.writes.most_common())
    return (f"  (samples whose path met another write of this operator, at {rate} CR/s, of {overlaps.counted}: "
            f"{'; '.join(texts)}; the writes met: {kinds or 'none'})")


def _audit_stamps(sandbox: SandboxProcess, lat: Latency, user: str,
                  child_write: str) -> tuple[dict[str, float], dict[str, float], list[tuple[float, str, str]]]:
    """From the sandbox's audit log, since `lat`'s first sample: when each KaiwoJob's create was answered,
    when `user`'s first `child_write` of each name was, and every write of `user`."""
    since = min(lat.at, default=0.0) - 1.0
    stored = {name: t for t, what, name in sandbox.timed_writes("loader", since) if what == "create kaiwojobs"}
    writes = sandbox.timed_writes(user, since)
    child: dict[str, float] = {}
    for t, what, name in writes:
        if what == child_write:
            child.setdefault(name, t)
    return stored, child, writes


def sample_rows(sandbox: SandboxProcess, lat: Latency, user: str,
                 child_write: str) -> list[tuple[float, float, float, float]]:
    """Each sample of `lat` split at the sandbox's audit stamps, ms: (load client's create -> KaiwoJob
    stored, -> `user`'s child Job stored, -> the Job watcher's event, the whole); samples the audit
    log has no record of are left out."""
    stored, child, _ = _audit_stamps(sandbox, lat, user, child_write)
    return [((stored[n] - at) * 1000, (child[n] - stored[n]) * 1000, (at + ms / 1000 - child[n]) * 1000, ms)
            for n, at, ms in zip(lat.names, lat.at, lat.ms, strict=True) if n in stored and n in child]


def spells_line(lat: Latency, sandbox: SandboxProcess) -> str:
    """Where the 100 CR/s tail came from: one long spell is a stall (a pause, a relist), many short
    ones are load. For each of the worst spells: the host's steal and the busiest processes meanwhile
    (`MachineSampler`), and the API requests the sandbox answered then beyond the slice's own mix (the
    audit log: those more frequent in the spell than over the whole 100 CR/s measurement)."""
    spells = lat.slow_spells(TARGET_P99_100_MS)
    slow = sum(n for _, _, n, _ in spells)
    first = min(lat.at, default=0.0)
    pauses = "; ".join(f"{who} {ms:.0f} ms at t={t - first:.1f} s" for t, ms, who in sorted(lat.instrument_pauses))
    spans = lat.spans()
    whole = Counter[str]()  # the usual mix: every request over the 100 CR/s slices
    changes = Counter[str]()  # and every change committed, the simulated cluster's own included
    changes_s = 0.0  # the seconds `changes` covers (whole tenths)
    connections = 0
    if spells:
        for a, b in spans:
            whole.update(sandbox.traffic(a, b))
            seen, seconds = sandbox.store_changes(a, b)
            changes.update(seen)
            changes_s += seconds
            connections += sandbox.connections_made(a, b)
    measured_s = max(sum(b - a for a, b in spans), 1e-9)

    def beyond(usual: Counter[str], seen: Counter[str], scale: float) -> str:
        extra = sorted(((k, n - usual[k] * scale) for k, n in seen.items() if n - usual[k] * scale >= 2),
                       key=lambda kv: -kv[1])[:4]
        return ", ".join(f"{k} +{n:.0f}" for k, n in extra) or "none"

    def extra_traffic(start: float, end: float) -> str:
        scale = (end - start) / measured_s
        seen, seconds = sandbox.store_changes(start, end)
        return (f"; requests beyond the usual mix: {beyond(whole, sandbox.traffic(start, end), scale)}"
                f"; changes beyond the usual mix: {beyond(changes, seen, seconds / max(changes_s, 1e-9))}"
                f"; connections made {sandbox.connections_made(start, end)} (usual {connections * scale:.1f})")

    worst = "; ".join(f"{n} from t={start:.1f} s over {length:.2f} s, worst {ms:.0f} ms ("
                      f"{MACHINE.during(first + start - 0.1, first + start + length)}"
                      f"{extra_traffic(first + start - 0.1, first + start + length)})"
                      for start, length, n, ms in spells[:3])
    if spells:
        worst += "; " + _spell_timeline(first + spells[0][0], first + spells[0][0] + spells[0][1], sandbox)
    steal = sum(MACHINE.steal_ms(a, b) for a, b in spans)
    return (f"  (samples over {TARGET_P99_100_MS:.0f} ms at 100 CR/s: {slow} of {lat.observed} in {len(spells)} "
            f"spells{': ' + worst if spells else ''}; t=0 is {first:.3f} on the wall clock; host steal over "
            f"the 100 CR/s slices: {steal:.0f} ms; "
            f"the benchmark's own collector pauses over 10 ms: {pauses or 'none'})")


def waits_line(who: str, lat: Latency, sandbox: SandboxProcess, operator_pid: int | None) -> str:
    """Over the 100 CR/s slices: how long the sandbox's and the operator's threads were runnable but had
    no CPU (schedstat), beside the CPU each used: on 2 cores, what sharing them costs."""
    parts = []
    spans = lat.spans()
    for name, pid in (("the sandbox", sandbox.process.pid), ("the operator", operator_pid)):
        if pid is None:
            continue
        waited = used = 0.0
        for a, b in spans:
            w, u = MACHINE.waited_ms(pid, a, b)
            waited, used = waited + w, used + u
        parts.append(f"{name} {waited:.0f} ms waiting for a CPU beside {used:.0f} ms on one")
    return f"  ({who} at 100 CR/s, threads: {'; '.join(parts)})"


def _spell_timeline(start: float, end: float, sandbox: SandboxProcess) -> str:
    """In each tenth of a second from half a second before the worst spell to its end: the changes the
    store committed (the simulated cluster's own included) and the requests each user had answered
    (watches aside): whether a burst of some work came first, and from whom."""
    series = sandbox.store_changes_by_tenth(start - 0.5, end)
    traffic = sandbox.traffic_by_tenth(start - 0.5, end)
    cells = []
    for tenth in range(int((start - 0.5) * 10), int(end * 10) + 1):
        by_user = Counter[str]()
        for what, n in traffic.get(tenth, Counter[str]()).items():
            user, verb, _ = what.split(" ", 2)
            if verb != "watch":
                by_user[user] += n
        users = ", ".join(f"{user} {n}" for user, n in sorted(by_user.items()))
        cells.append(f"{sum(series.get(tenth, Counter[str]()).values())} ({users})")
    return "changes committed (requests answered) per tenth of a second from 0.5 s before the worst spell: " + \
        " | ".join(cells)


def gc_pauses_line(pauses: dict[int, tuple[float, float, float]]) -> str:
    return ", ".join(f"gen {gen}: {int(n)} x, {total:.0f} ms in all, longest {longest:.0f} ms"
                     for gen, (n, total, longest) in pauses.items()) or "none"
