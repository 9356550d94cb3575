# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""tools/bench/compare.py's arithmetic, without running a loop: the rate of each window from the
loop's own step times, in steps/s, or launches/s for the launch-heavy loop. No root needed."""
import importlib.util
import json
import os
import shutil

import pytest

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


_spec = importlib.util.spec_from_file_location("bench_stolen",
                                               os.path.join(ROOT, "tools", "bench", "stolen.py"))
stolen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(stolen)
STOLEN = os.path.join(ROOT, ".output", "bench", "stolen")


def test_stolen_run_fraction_and_its_8us_reading():
    line = "WINDOW 1000000000 1030 %d %s %s" % (
        1000 * 1500 + 30 * 20000, " ".join(["1000", "0", "0", "0", "30"] + ["0"] * 7),
        " ".join(["1500000", "0", "0", "0", "600000"] + ["0"] * 7))
    w = stolen.parse_window(line)
    assert w["gaps"] == 1030 and w["count"][4] == 30 and w["ns"][0] == 1500000, w
    assert abs(stolen.run_fraction(w) - (1 - 0.0021)) < 1e-12
    # The 1-2 us pauses (the host's) left out: only the 20 us ones count.
    assert abs(stolen.run_fraction(w, stolen.LONG_FROM) - (1 - 0.0006)) < 1e-12
    for bad in ("WINDOW 1 2 3", "READY pid=1", "WINDOW " + " ".join(["x"] * 27)):
        try:
            stolen.parse_window(bad)
        except ValueError:
            continue
        raise AssertionError("parsed %r" % bad)


def test_stolen_counts_what_it_is_given_to_spin():
    """The C spinner itself: a window of its stated length whose pauses add up, bucket by
    bucket, to the total; and one of its own, a sleep of the whole process, found in the right
    bucket. No root needed."""
    import signal
    import subprocess
    import time
    subprocess.run(["make", "-s", os.path.relpath(STOLEN, ROOT)], cwd=ROOT, check=True)
    p = subprocess.Popen([STOLEN, "--threshold-ns", "1000"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().startswith("READY pid=")
        p.stdin.write("0.3\n")
        p.stdin.flush()
        w = stolen.parse_window(p.stdout.readline())
        assert 0.3e9 <= w["wall_ns"] < 0.5e9, w
        assert sum(w["count"]) == w["gaps"] and sum(w["ns"]) == w["gap_ns"], w
        assert 0 <= w["gap_ns"] < w["wall_ns"], w
        # Stopped for 50 ms mid-window: a pause in the last bucket (2 ms and more).
        p.stdin.write("0.5\n")
        p.stdin.flush()
        time.sleep(0.15)
        os.kill(p.pid, signal.SIGSTOP)
        time.sleep(0.05)
        os.kill(p.pid, signal.SIGCONT)
        w = stolen.parse_window(p.stdout.readline())
        assert w["count"][-1] >= 1 and w["ns"][-1] >= 45e6, w
        assert 1 - stolen.run_fraction(w) >= 0.09, w
    finally:
        p.stdin.close()
        p.wait(10)


def test_targets_tails_fisher_exact():
    # 3 of 4 traced windows slow, 0 of 4 control: p = C(3,3) C(5,1) / C(8,4) = 5 / 70.
    k, kc, p = targets.tails([1.03, 1.03, 1.03, 1.0], [1.0] * 4)
    assert (k, kc) == (3, 0) and abs(p - 5 / 70) < 1e-12, (k, kc, p)
    # Alike: as many slow on each side leaves p well over 0.05; none at all, 1.
    assert targets.tails([1.03, 1.0, 1.0], [1.03, 1.0, 1.0])[2] > 0.5
    assert targets.tails([1.0] * 5, [1.0] * 5) == (0, 0, 1.0)


def test_window_step_ms_tells_a_stall_from_a_slow_window():
    steps = [i * 10_000_000 for i in range(50)]          # 10 ms steps
    steps = steps[:30] + [s + 60_000_000 for s in steps[30:]]   # one step of 70 ms
    st = compare.window_step_ms(steps, 0, steps[-1])
    assert st == {"median": 10.0, "p90": 10.0, "max": 70.0}, st
    assert compare.window_step_ms(steps, 1, 2) is None


def test_targets_slow_windows_name_their_longest_step():
    order = targets.schedule(["A/A control", "T"], 3)
    ws = windows_of([100.0 if c != "T" else 95.0 for c in order], order)
    for w in ws:
        w["step_ms"] = {"median": 10.0, "p90": 10.5, "max": 12.0 if w["config"] == "T" else 11.0}
    s = targets.summarize(ws, 1.005)
    assert s["T"]["slow_windows_longest_step_ms"] == 12.0, s["T"]
    assert "slow_windows_longest_step_ms" not in s["A/A control"]
    assert s["T"]["tails"]["windows"] == 3 and s["T"]["tails"]["control_windows"] == 0
    assert "their longest step 12.0 ms" in targets.result_line(s["T"], "pipeprof -p", 1.005)


def slow_in(order, slow_cycles):
    """Rates in schedule order: 100, but 100 / 1.03 for each (config, cycle) in slow_cycles."""
    per_cycle = 2 * len({c for c in order if c != targets.BASELINE})
    return [100.0 / 1.03 if (c, i // per_cycle) in slow_cycles else 100.0
            for i, c in enumerate(order)]


def test_targets_paired_tails_sign_test_on_cycles():
    """The host's spells slow both windows of a cycle alike: only the cycles where one alone was
    slow tell the tracer from the host."""
    order = targets.schedule(["A/A control", "T"], 6)
    slow = {("T", 0), ("A/A control", 0), ("T", 2), ("T", 3), ("T", 4), ("A/A control", 5)}
    ws = windows_of(slow_in(order, slow), order)
    targets.bracketed_slowdowns(ws)
    only, reverse, p = targets.paired_tails(ws, "T")
    # 3 cycles with T alone slow, 1 with the control alone: P(Binomial(4, 1/2) >= 3) = 5/16.
    assert (only, reverse) == (3, 1) and abs(p - 5 / 16) < 1e-12, (only, reverse, p)
    s = targets.summarize(ws, 1.005)
    assert s["T"]["paired_tails"] == {"only_traced": 3, "only_control": 1, "p": 5 / 16}
    assert s["T"]["tails"]["windows"] == 4 and s["T"]["tails"]["control_windows"] == 2
    assert targets.paired_tails(ws, "T", threshold=1.05) == (0, 0, 1.0)


def test_targets_pool_counts_every_run_once_and_brackets_within_a_run(tmp_path):
    """Runs saved by --json, pooled: each window once, cycles paired within their run, and a
    run cut short (its loop exited after a traced window) bracketed by nothing of the next."""
    order = targets.schedule(["A/A control", "T"], 3)
    first = windows_of(slow_in(order, {("T", 1)}), order)
    cut = windows_of(slow_in(order, {("T", 0), ("A/A control", 1)}), order)[:-1]
    paths = []
    for i, ws in enumerate((cut, first)):
        path = tmp_path / ("run%d.json" % i)
        path.write_text(json.dumps({"loops": {"cpu-bound": {"windows": ws}}}))
        paths.append(str(path))
    pooled = targets.pooled_windows(paths)["cpu-bound"]
    assert len(pooled) == len(first) + len(cut)
    s = targets.summarize(pooled, 1.005)
    # The cut run's last T window has no untraced window after it in its own run.
    assert s["T"]["n"] == 5 and s["T"]["unbracketed"] == 1, s["T"]
    assert s["A/A control"]["n"] == 6
    assert s["T"]["paired_tails"]["only_traced"] == 2, s["T"]["paired_tails"]
    assert s["T"]["paired_tails"]["only_control"] == 1, s["T"]["paired_tails"]
    lines = targets.pooled_lines(paths)
    assert any(line.startswith("cpu-bound, T: mean") for line in lines), lines


def test_targets_another_tracer_gets_its_slow_windows_but_no_verdict():
    # bpftrace's own sampler beside -p: whether a cost is pipeprof's or any sampler's is read
    # from its slow windows, but the targets are pipeprof's, so it gets no verdict.
    order = targets.schedule(["A/A control", "bpftrace profile"], 3)
    ws = windows_of([100.0 if c != "bpftrace profile" else 95.0 for c in order], order)
    line = targets.result_line(targets.summarize(ws, 1.005)["bpftrace profile"],
                               "bpftrace profile", 1.005)
    assert "windows over 1.02: 3, A/A control 0" in line, line
    assert "cycles with only it slow 3, only the A/A control 0" in line, line
    assert "target" not in line, line


def test_targets_paired_difference_reads_one_tracer_against_another():
    # The loop slows by 1% a window; pipeprof -p costs 3%, the other tracer 1%: cycle by cycle
    # the difference is 0.02 in every cycle, whatever the drift.
    order = targets.schedule(["A/A control", "pipeprof -p", "bpftrace profile"], 4)
    cost = {"pipeprof -p": 1.03, "bpftrace profile": 1.01}
    ws = windows_of([100.0 * (1 - 0.01 * i) / cost.get(c, 1.0) for i, c in enumerate(order)],
                    order)
    targets.summarize(ws, 1.005)
    mean, half, n = targets.paired_difference(ws, "pipeprof -p", "bpftrace profile")
    assert n == 4 and abs(mean - 0.02) < 2e-4 and half < 2e-4, (mean, half, n)
    lines = targets.versus_lines("cpu-bound", ws, ["A/A control", "pipeprof -p",
                                                  "bpftrace profile"])
    assert lines == ["cpu-bound, pipeprof -p minus bpftrace profile, cycle by cycle: +0.0200 "
                     "(95% CI +0.0200 to +0.0200), n=4"], lines


def shifted_run(cost_of_cycle, cycles=60):
    """A run whose untraced rate never moves, the A/A control's slowdowns spread evenly over
    0.970-1.017 (none over 1.02), T's the same window by window plus cost_of_cycle(cycle, its
    control's slowdown)."""
    order = targets.schedule(["A/A control", "T"], cycles)
    noise = [0.97005 + 0.0008 * c for c in range(cycles)]
    rates = []
    for i, config in enumerate(order):
        c = i // 4
        if config == "A/A control":
            rates.append(100.0 / noise[c])
        elif config == "T":
            rates.append(100.0 / (noise[c] + cost_of_cycle(c, noise[c])))
        else:
            rates.append(100.0)
    return windows_of(rates, order)


def test_targets_a_uniform_cost_is_not_a_tail():
    # A tracer that slows every window by 1% moves 10 of 60 over 1.02 where the control has none:
    # the fixed-threshold tests flag it, though it slows no window more than the rest.
    s = targets.summarize(shifted_run(lambda c, x: 0.01), 1.005)["T"]
    assert (s["tails"]["windows"], s["tails"]["control_windows"]) == (10, 0), s["tails"]
    assert s["paired_tails"]["p"] < 0.01, s["paired_tails"]
    b = s["beyond_shift"]
    assert abs(b["shift"] - 0.01) < 1e-9, b
    assert b["tails"] == {"windows": 10, "control_windows": 10, "p": b["tails"]["p"]}, b
    assert b["tails"]["p"] > 0.5, b
    assert b["paired_tails"] == {"only_traced": 0, "only_control": 0, "p": 1.0}, b
    line = targets.result_line(s, "pipeprof -p", 1.005)
    assert "beyond its median's shift (the A/A control's windows moved by +0.0100): " \
           "A/A control 10" in line, line


def test_targets_a_tail_beyond_the_shift_is_still_found():
    # Six windows of 60 slowed to 1.06, the rest untouched: the median barely moves, and the
    # six stand out against the moved control too.
    tail = {5, 15, 25, 35, 45, 55}
    s = targets.summarize(shifted_run(lambda c, x: 1.06 - x if c in tail else 0.0), 1.005)["T"]
    b = s["beyond_shift"]
    assert 0 < b["shift"] < 0.003, b
    assert b["tails"]["windows"] == 6 and b["tails"]["control_windows"] == 0, b
    assert b["paired_tails"] == {"only_traced": 6, "only_control": 0, "p": 1 / 64}, b


def test_loop_python_finds_a_bare_name_in_path(tmp_path):
    # "--python python3" once made a link to the relative name "python3": the loop could not
    # start, and the run ended in a traceback.
    link = compare.loop_python("python3", str(tmp_path))
    assert os.path.isabs(os.readlink(link)), os.readlink(link)
    assert os.path.realpath(link) == os.path.realpath(shutil.which("python3"))
    with pytest.raises(SystemExit, match="--python no-such-python: no such executable"):
        compare.loop_python("no-such-python", str(tmp_path / "x"))
