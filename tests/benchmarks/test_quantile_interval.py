"""The benchmarks' percentile intervals (benchmarks/_common.py): they must cover the true percentile
about as often as they claim, reach the worst sample when the samples are too few for the
percentile, and bracket the ratio a run prints."""

from __future__ import annotations

import math
import random

from test_chaos_soak import load  # (benchmarks/ is not a package)

common = load("_common")


def test_interval_covers_the_true_p99_about_nine_times_in_ten() -> None:
    rng = random.Random(13)
    true_p99 = -math.log(0.01)  # of the exponential distribution with mean 1
    covered = 0
    trials = 400
    for _ in range(trials):
        low, high = common.quantile_interval([rng.expovariate(1.0) for _ in range(600)], 99)
        covered += low <= true_p99 <= high
    assert 0.85 <= covered / trials <= 0.99  # (the ranks are rounded outwards: a little over 90%)


def test_interval_of_a_median_is_narrow_and_brackets_it() -> None:
    values = [float(v) for v in range(1, 1001)]
    low, high = common.quantile_interval(values, 50)
    assert low <= 500 <= high
    assert high - low < 60


def test_too_few_samples_leave_a_p99_unbounded_above() -> None:
    low, high = common.quantile_interval([float(v) for v in range(200)], 99)
    assert math.isinf(high)
    assert low < common.percentile([float(v) for v in range(200)], 99)
    low, high = common.quantile_interval([float(v) for v in range(400)], 99)
    assert low < high < 400


def test_ratio_interval_brackets_the_printed_ratio() -> None:
    rng = random.Random(7)
    mine = [rng.lognormvariate(1.0, 0.4) for _ in range(400)]
    theirs = [rng.lognormvariate(0.9, 0.4) for _ in range(400)]
    low, high = common.ratio_interval(mine, theirs, 99)
    point = common.percentile(mine, 99) / common.percentile(theirs, 99)  # 400 samples: bounded
    assert low <= point <= high
    assert low < high


def test_no_samples_give_no_interval() -> None:
    low, high = common.quantile_interval([], 99)
    assert math.isnan(low) and math.isnan(high)
