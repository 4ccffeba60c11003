"""The peers benchmarks/operator.py measures kaiwo-ray against (benchmarks/peers/): the kopf
operators doing the same work and the children only, the floor operator (watch, render, apply), its
A/A twin and the same-work floor, each with the writes per KaiwoJob it must make and whether the
targets are judged against it; `check_writes` says whether a run's writes matched.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Peer:
    key: str  # prefix of its figures
    module: str  # in benchmarks/peers/
    what: str
    expected_writes: dict[str, int]  # per KaiwoJob, by "verb resource[/sub]"
    target: bool  # whether the targets are judged against it


SAME_WORK = Peer("kopf_same_work", "kopf_equivalent", "same work as kaiwo-ray to PENDING",
                 {"create events": 2, "patch jobs": 1, "patch kaiwojobs": 1, "patch kaiwojobs/status": 1}, True)
CHILDREN_ONLY = Peer("kopf_children_only", "kopf_operator", "children only, reference",
                     {"patch jobs": 1, "patch kaiwojobs": 1}, False)
FLOOR = Peer("floor_operator", "floor_operator", "watch + render + apply, nothing else: the reachable floor",
             {"patch jobs": 1}, False)
# A/A calibration (phase floor-twin, not in the default run): a second floor operator, identical code on
# a sandbox of its own, measured in turn with the others. Its ratio to the floor operator has nothing to
# find, so how far it strays from 1.0x is how far this machine moves one run's ratio by itself.
FLOOR_TWIN = Peer("floor_operator_twin", "floor_operator", "the floor operator again (A/A): this machine's own spread",
                  {"patch jobs": 1}, False)
FLOOR_SAME_WORK = Peer("floor_same_work", "floor_same_work",
                       "the floor operator plus kaiwo-ray's three other writes (status, 2 Events), no "
                       "framework: what those writes cost here",
                       {"create events": 2, "patch jobs": 1, "patch kaiwojobs/status": 1}, False)


def check_writes(peer: Peer, writes: Counter[str], crs: int) -> str:
    """'as expected', or how the writes per CR differ from what the peer should do."""
    got = {k: v / crs for k, v in writes.items()}
    wrong = {k: got.get(k, 0.0) for k in set(got) | set(peer.expected_writes)
             if abs(got.get(k, 0.0) - peer.expected_writes.get(k, 0)) > 0.005}
    if not wrong:
        return "as expected"
    return "UNEXPECTED: " + ", ".join(f"{k}: {v:.2f} (expected {peer.expected_writes.get(k, 0)})"
                                      for k, v in sorted(wrong.items()))
