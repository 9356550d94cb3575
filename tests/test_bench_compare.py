# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""tools/bench/compare.py's arithmetic, without running a loop: the rate of each window from the
loop's own step times, in steps/s, or launches/s for the launch-heavy loop. No root needed."""
import importlib.util
import os

from conftest import ROOT

_spec = importlib.util.spec_from_file_location("bench_compare",
                                               os.path.join(ROOT, "tools", "bench", "compare.py"))
compare = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(compare)

SECOND = 1_000_000_000


def truth_of(scenario, extra, steps):
    return {"scenario": scenario, "extra": extra, "steps": steps, "segments": []}


def test_window_rate_counts_whole_steps_inside():
    steps = [i * SECOND // 10 for i in range(100)]     # 10 a second
    rate, n = compare.window_rate(steps, 2 * SECOND, 4 * SECOND, 1)
    assert n == 21 and abs(rate - 10.0) < 1e-9, (rate, n)
    assert compare.window_rate(steps, 2 * SECOND + 1, 2 * SECOND + 2, 1) == (None, 0)


def test_dataloader_rate_is_steps_whatever_its_launches():
    """data_bound.py records launches_per_step (its --launches, 0 by default): read as the
    unit, it made every rate of the DataLoader row 0 and the row 'failed'."""
    steps = [i * SECOND // 20 for i in range(200)]     # 20 a second
    for launches in (0, 3):
        rec = {"t0_ns": SECOND, "t1_ns": 5 * SECOND}
        compare.rate_of(rec, truth_of("data_bound", {"launches_per_step": launches}, steps))
        assert abs(rec["rate"] - 20.0) < 1e-9, (launches, rec)
        assert rec["loop_runq"] is None


def test_launch_heavy_rate_is_launches():
    steps = [i * SECOND // 500 for i in range(5000)]   # 500 syncs a second, 100 launches each
    rec = {"t0_ns": SECOND, "t1_ns": 3 * SECOND}
    compare.rate_of(rec, truth_of("launch_heavy", {"launches_per_step": 100}, steps))
    assert abs(rec["rate"] - 50000.0) < 1e-6, rec


_tspec = importlib.util.spec_from_file_location("bench_targets",
                                                os.path.join(ROOT, "tools", "bench", "targets.py"))
targets = importlib.util.module_from_spec(_tspec)
_tspec.loader.exec_module(targets)


def test_targets_schedule_brackets_every_window_and_rotates():
    order = targets.schedule(["A", "B", "C"], 3)
    assert order[0::2] == ["untraced"] * 10, order
    assert order[1::2] == ["A", "B", "C", "B", "C", "A", "C", "A", "B"], order


def windows_of(rates_by_slot, configs, period=SECOND):
    """Windows of equal length, one a period, in schedule order."""
    return [{"config": c, "rate": r, "t0_ns": i * period, "t1_ns": i * period + period // 2}
            for i, (c, r) in enumerate(zip(configs, rates_by_slot))]


def test_targets_linear_drift_cancels():
    """The loop slows by 1% a window; a tracer costing exactly 2% reads 1.02 in every window,
    where a baseline from one side only would read 1.01 or 1.03."""
    order = targets.schedule(["A/A control", "T"], 4)
    rates = []
    for i, c in enumerate(order):
        speed = 100.0 * (1 - 0.01 * i)
        rates.append(speed / 1.02 if c == "T" else speed)
    slow, unbracketed = targets.bracketed_slowdowns(windows_of(rates, order))
    assert unbracketed == {}
    assert len(slow["T"]) == 4 and all(abs(s - 1.02) < 1e-9 for s in slow["T"]), slow
    assert all(abs(s - 1.0) < 1e-9 for s in slow["A/A control"]), slow


def test_targets_interpolates_at_the_window_midpoint():
    """A traced window nearer its later neighbour takes more of that neighbour's rate."""
    w = [{"config": "untraced", "rate": 100.0, "t0_ns": 0, "t1_ns": 2},
         {"config": "T", "rate": 100.0, "t0_ns": 7, "t1_ns": 9},
         {"config": "untraced", "rate": 110.0, "t0_ns": 10, "t1_ns": 12}]
    slow, _ = targets.bracketed_slowdowns(w)
    assert abs(slow["T"][0] - 1.07) < 1e-9, slow    # 100 + 10 * (8 - 1) / (11 - 1)


def test_targets_failed_neighbour_drops_the_window_and_counts_it():
    order = targets.schedule(["T"], 3)        # U T U T U T U
    rates = [100.0] * len(order)
    rates[2] = None                             # the untraced window between T 1 and T 2 failed
    rates[5] = None                             # T 3 failed
    slow, unbracketed = targets.bracketed_slowdowns(windows_of(rates, order))
    assert slow["T"] == [] and unbracketed == {"T": 3}, (slow, unbracketed)


def test_targets_mean_ci_and_verdict():
    mean, half = targets.mean_ci([1.0, 1.01, 1.02])
    # sd 0.01, n 3: 4.303 * 0.01 / sqrt(3)
    assert abs(mean - 1.01) < 1e-12 and abs(half - 4.303 * 0.01 / 3 ** 0.5) < 1e-12, (mean, half)
    assert targets.mean_ci([1.0]) == (1.0, None)
    assert targets.verdict(0.99, 1.004, 1.005) == "pass"
    assert targets.verdict(1.006, 1.02, 1.005) == "MISS"
    assert targets.verdict(0.999, 1.011, 1.005) == "not resolved"


def test_targets_median_ci_is_the_order_statistics():
    # n = 30: P(B(30, 1/2) <= 9) = 2.1%, <= 10 = 4.9%: the 10th and 21st values.
    lo, hi = targets.median_ci([float(i) for i in range(30, 0, -1)])
    assert (lo, hi) == (10.0, 21.0), (lo, hi)
    # n = 6: only the extremes (P(B(6, 1/2) = 0) = 1.6%); n = 5 has no 95% interval.
    assert targets.median_ci([3.0, 1.0, 2.0, 6.0, 5.0, 4.0]) == (1.0, 6.0)
    assert targets.median_ci([1.0, 2.0, 3.0, 4.0, 5.0]) is None
