"""How the benchmarks send load and judge it (benchmarks/_stats.py, _load.py, _machine.py): the percentile intervals must
cover the true percentile about as often as they claim, stay open above when the samples are too few
for the percentile, and bracket the ratio a run prints; the paced creates' send times are steady by
default and, with BENCH_ARRIVALS=poisson, the same Poisson draw for every party."""

from __future__ import annotations

import itertools
import math
import random
import sys

import pytest
from test_chaos_soak import BENCHMARKS, load  # (benchmarks/ is not a package)

stats = load("_stats")
machine = load("_machine")
sys.path.insert(0, str(BENCHMARKS))  # _load imports its siblings
try:
    loading = load("_load")
finally:
    sys.path.remove(str(BENCHMARKS))


def test_interval_covers_the_true_p99_about_nine_times_in_ten() -> None:
    rng = random.Random(13)
    true_p99 = -math.log(0.01)  # of the exponential distribution with mean 1
    covered = 0
    trials = 400
    for _ in range(trials):
        low, high = stats.quantile_interval([rng.expovariate(1.0) for _ in range(600)], 99)
        covered += low <= true_p99 <= high
    assert 0.85 <= covered / trials <= 0.99  # (the ranks are rounded outwards: a little over 90%)


def test_interval_of_a_median_is_narrow_and_brackets_it() -> None:
    values = [float(v) for v in range(1, 1001)]
    low, high = stats.quantile_interval(values, 50)
    assert low <= 500 <= high
    assert high - low < 60


def test_too_few_samples_leave_a_p99_unbounded_above() -> None:
    low, high = stats.quantile_interval([float(v) for v in range(200)], 99)
    assert math.isinf(high)
    assert low < stats.percentile([float(v) for v in range(200)], 99)
    low, high = stats.quantile_interval([float(v) for v in range(400)], 99)
    assert low < high < 400


def test_ratio_interval_brackets_the_printed_ratio() -> None:
    rng = random.Random(7)
    mine = [rng.lognormvariate(1.0, 0.4) for _ in range(400)]
    theirs = [rng.lognormvariate(0.9, 0.4) for _ in range(400)]
    low, high = stats.ratio_interval(mine, theirs, 99)
    point = stats.percentile(mine, 99) / stats.percentile(theirs, 99)  # 400 samples: bounded
    assert low <= point <= high
    assert low < high


def test_no_samples_give_no_interval() -> None:
    low, high = stats.quantile_interval([], 99)
    assert math.isnan(low) and math.isnan(high)


def test_steady_arrivals_are_one_interval_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BENCH_ARRIVALS", raising=False)
    assert loading.arrival_offsets(4, 20.0) == [0.0, 0.05, 0.1, 0.15]


def test_poisson_arrivals_keep_the_rate_and_are_the_same_for_every_party(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BENCH_ARRIVALS", "poisson")
    first = loading.arrival_offsets(2000, 100.0)
    assert first == loading.arrival_offsets(2000, 100.0)
    gaps = [b - a for a, b in itertools.pairwise(first)]
    assert 0.009 < sum(gaps) / len(gaps) < 0.011  # mean 10 ms
    assert min(gaps) < 0.001 < 0.03 < max(gaps)  # not steady: bursts and lulls


def test_path_overlaps_places_each_write_in_the_part_of_the_path_it_was_answered_in() -> None:
    # Three samples: sent at 0, KaiwoJob stored at 1, child stored at 2, the watcher's event at 3 (+10 each).
    samples = [(f"j{i}", 10.0 * i, 10.0 * i + 3, 3000.0 + i) for i in range(3)]
    stored = {f"j{i}": 10.0 * i + 1 for i in range(3)}
    child = {f"j{i}": 10.0 * i + 2 for i in range(3)}
    writes = [(10.0 * i + 2, "create jobs", f"j{i}") for i in range(3)]  # each sample's own child
    writes += [(1.5, "patch kaiwojobs/status", "j9"),  # j0: between stored and child stored
               (12.5, "create events", "j1.abc"), (12.7, "create events", "j1.def"),  # j1: after its child
               (23.0, "create events", "j2.abc"),  # j2: at the watcher's event itself: not inside
               (40.0, "create events", "late")]  # no sample's
    found = stats.path_overlaps(samples, stored, child, writes)
    assert found.counted == 3
    (before_hit, before_rest), (middle_hit, middle_rest), (after_hit, after_rest) = found.parts
    assert before_hit == [] and len(before_rest) == 3
    assert middle_hit == [3000.0] and middle_rest == [3001.0, 3002.0]
    assert after_hit == [3001.0] and after_rest == [3000.0, 3002.0]  # its own child write is not counted
    assert found.writes == {"patch kaiwojobs/status": 1, "create events": 2}


def test_path_overlaps_leaves_out_samples_the_audit_log_has_no_stamps_for() -> None:
    found = stats.path_overlaps([("gone", 0.0, 3.0, 3000.0)], {}, {}, [(1.5, "create events", "x")])
    assert found.counted == 0 and all(hit == rest == [] for hit, rest in found.parts)


@pytest.mark.parametrize(("value", "pinned"), [(None, False), ("", False), ("0", False), ("false", False),
                                                ("1", True), ("yes", True)])
def test_bench_pin_decides_whether_sandboxes_are_pinned_apart(monkeypatch: pytest.MonkeyPatch, value: str | None,
                                                               pinned: bool) -> None:
    if value is None:
        monkeypatch.delenv("BENCH_PIN", raising=False)
    else:
        monkeypatch.setenv("BENCH_PIN", value)
    assert machine.pinned_apart() is pinned
