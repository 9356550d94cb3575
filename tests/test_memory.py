# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""The report's host memory: resident memory per role from /proc through the window, and growth
that holds all window flagged as a probable leak, per step where steps are found.

A DataLoader whose Dataset keeps 64 KiB of every sample it loads (data_bound.py --leak-kb 64,
batch 8: 512 KiB a step in the worker) is flagged in every attach of ATTACHES, at the rate the
workload leaks within 20%, with the leak advice; its trainer, and the same job without the leak,
and a CPU-bound loop with no workers are flagged in none.
"""
from conftest import (attach_repeatedly, finish_workload, save_result, start_workload)

ATTACHES = 3
WINDOW_S = 4
RATE_TOLERANCE = 0.20


def leak_lines(runs):
    lines = []
    for i, run in enumerate(runs, 1):
        rep = run["report"]
        assert rep is not None, "attach %d failed: %s" % (i, run["error"])
        mem = rep["memory"]
        assert mem["readings"] >= 10 and 0.2 <= mem["interval_s"] <= 0.5, mem
        g = mem["groups"]
        lines.append("attach %d: %d readings every %.2f s; TRAINER %.0f MB leak=%s; WORKERS %d "
                     "process(es) %.0f MB (peak %.0f MB) leak=%s, %.0f kB/step" % (
                         i, mem["readings"], mem["interval_s"], g["TRAINER"]["rss_bytes"] / 1e6,
                         g["TRAINER"]["leak"], g["WORKERS"]["processes"],
                         g["WORKERS"]["rss_bytes"] / 1e6, g["WORKERS"]["peak_bytes"] / 1e6,
                         g["WORKERS"]["leak"], (g["WORKERS"]["growth_bytes_per_step"] or 0) / 1e3))
    return lines


def test_worker_leak_is_flagged_at_its_rate(procs, tmp_path):
    truth_path = str(tmp_path / "truth.json")
    w, pid, _ = start_workload(procs, "data_bound.py", ["--leak-kb", "64"], truth_path,
                               duration=120)
    runs = attach_repeatedly(w, pid, ATTACHES, WINDOW_S)
    truth = finish_workload(w, truth_path)
    want = truth["extra"]["leak_bytes_per_step"]
    lines, problems = leak_lines(runs), []
    for i, run in enumerate(runs, 1):
        rep = run["report"]
        g = rep["memory"]["groups"]
        got = g["WORKERS"]["growth_bytes_per_step"]
        if not g["WORKERS"]["leak"] or got is None:
            problems.append("attach %d: the workers' leak not flagged" % i)
        elif abs(got / want - 1) > RATE_TOLERANCE:
            problems.append("attach %d: %.0f kB/step, the workload leaks %.0f" % (
                i, got / 1e3, want / 1e3))
        if g["TRAINER"]["leak"]:
            problems.append("attach %d: the trainer flagged" % i)
        if g["WORKERS"]["peak_bytes"] < g["WORKERS"]["rss_bytes"]:
            problems.append("attach %d: peak under the last size" % i)
        ids = [r["id"] for r in rep["recommendations"]]
        if "worker_memory_leak" not in ids:
            problems.append("attach %d: no leak advice: %s" % (i, ids))
    save_result("memory_leak", {"lines": lines, "problems": problems, "truth_bytes_per_step": want})
    print("\nleak %.0f kB/step:\n  %s" % (want / 1e3, "\n  ".join(lines)))
    assert not problems, "\n".join(problems + lines)


def no_leak(name, script, args, procs, tmp_path):
    truth_path = str(tmp_path / "truth.json")
    w, pid, _ = start_workload(procs, script, args, truth_path, duration=120)
    runs = attach_repeatedly(w, pid, ATTACHES, WINDOW_S)
    finish_workload(w, truth_path)
    lines, problems = leak_lines(runs), []
    for i, run in enumerate(runs, 1):
        rep = run["report"]
        flagged = [k for k, g in rep["memory"]["groups"].items() if g["leak"]]
        if flagged:
            problems.append("attach %d: %s flagged as leaking" % (i, flagged))
    save_result("memory_steady_" + name, {"lines": lines, "problems": problems})
    print("\n%s:\n  %s" % (name, "\n  ".join(lines)))
    assert not problems, "\n".join(problems + lines)


def test_steady_dataloader_is_not_flagged(procs, tmp_path):
    no_leak("data_bound", "data_bound.py", [], procs, tmp_path)


def test_steady_cpu_bound_is_not_flagged(procs, tmp_path):
    no_leak("cpu_bound", "cpu_bound.py", [], procs, tmp_path)
