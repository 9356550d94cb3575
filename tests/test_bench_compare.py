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
