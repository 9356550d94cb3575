# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""pipeprof against labelled workloads.

Each scenario starts a real PyTorch loop from tools/workloads/ that records what its trainer
thread is doing (tools/workloads/groundtruth.py), attaches `pipeprof -p PID -d 5 -j` once the
loop is warm, and compares the report with the workload's own record over pipeprof's window:

- the verdict is the scenario's;
- every one of the 8 states of the trainer is within TOLERANCE (5 points) of the ground truth;
- scenario evidence: busy DataLoader workers, a spinning GPU wait that is not mistaken for
  running, the number of cudaStreamSynchronize calls, both halves of a mixed loop.

Needs root, ./pipeprof (make) and .output/fakecuda (make fixtures). The tables of both sides
are printed (pytest -s, and in the terminal summary) and written to .output/scenario-results.json.
"""
import os
import time

import pytest

from conftest import (PYTHON, WORKLOADS, cpu_steal_ticks, finish_workload, groundtruth,
                      run_pipeprof, save_result, start_workload, steal_fraction)

STATES = groundtruth.STATES
TOLERANCE = 0.05
WINDOW_S = 5
HOGS = 3  # CPU hogs beside the contention trainer on this 2-CPU machine


def busy_workers(report, truth, window):
    """DataLoader workers busy preprocessing: the WORKER role's on-CPU time is more than half of
    the window per worker process. (Each worker process also has idle helper threads, the queue
    feeder and the fd sharer, so the role's RUNNING share of *summed thread time* is at most
    1/threads; on-CPU seconds per process are what says the workers are busy.)"""
    w = report["roles"].get("WORKER") or {}
    procs = w.get("processes") or 0
    on_cpu = (w.get("states", {}).get("RUNNING", {}).get("fraction", 0.0) *
              w.get("thread_seconds", 0.0))
    per_proc = on_cpu / (procs * window) if procs else 0.0
    # The report's own evidence: the workers' main threads, where the loader loop runs.
    loops = report.get("evidence", {}).get("worker_loops", {})
    loop_running = loops.get("states", {}).get("RUNNING", {}).get("fraction", 0.0)
    ok = procs >= 1 and w.get("threads", 0) >= 1 and per_proc > 0.5 and loop_running > 0.5
    return ok, "WORKER: %d process(es), %d thread(s), role RUNNING %.3f of thread time, " \
        "on-CPU %.2f of the window per process, worker loops RUNNING %.3f (want > 0.5)" % (
            procs, w.get("threads", 0), w.get("states", {}).get("RUNNING", {}).get("fraction", 0),
            per_proc, loop_running)


def sync_calls(report, truth, window):
    """pipeprof counted the cudaStreamSynchronize calls the workload made in the window (+-2)."""
    gpu = report.get("gpu") or {}
    if not gpu.get("traced"):
        return False, "gpu not traced: %s" % gpu.get("why_not")
    calls = {a["name"]: a["calls"] for a in gpu.get("apis", [])}
    got = calls.get("cudaStreamSynchronize")
    want = groundtruth.count_segments(truth, "gpu", report["window"]["start_ns"],
                                      report["window"]["end_ns"])
    ok = got is not None and abs(got - want) <= 2
    return ok, "cudaStreamSynchronize: pipeprof %s calls, workload %.1f in the window (+-2)" % (
        got, want)


def spin_is_gpu_wait(report, truth, window):
    """A spinning sync stays on-CPU, yet must be GPU_WAIT, not RUNNING/RUNQ/OTHER."""
    f = trainer_fractions(report)
    ok = f["RUNQ"] + f["OTHER"] < 0.05 and f["GPU_WAIT"] == max(f.values()) and \
        f["GPU_WAIT"] > 0.6
    return ok, "spin: GPU_WAIT %.3f (want largest, > 0.6), RUNQ+OTHER %.3f (want < 0.05)" % (
        f["GPU_WAIT"], f["RUNQ"] + f["OTHER"])


def both_halves(report, truth, window):
    f = trainer_fractions(report)
    ok = f["DATA_WAIT"] >= 0.3 and f["RUNNING"] >= 0.3
    return ok, "mixed: DATA_WAIT %.3f and RUNNING %.3f (want both >= 0.3)" % (
        f["DATA_WAIT"], f["RUNNING"])


# id: (script, args, expected verdict, CPU hogs beside it, evidence checks)
SCENARIOS = {
    "cpu_bound": ("cpu_bound.py", [], "CPU-BOUND", 0, []),
    "data_bound": ("data_bound.py", [], "DATA-LOADING BOUND", 0, [busy_workers]),
    "io_bound": ("io_bound.py", [], "I/O BOUND", 0, []),
    "gpu_spin": ("gpu.py", ["--sync", "spin"], "GPU-BOUND", 0, [spin_is_gpu_wait, sync_calls]),
    "gpu_block": ("gpu.py", ["--sync", "block"], "GPU-BOUND", 0, [sync_calls]),
    "contention": ("contention.py", [], "CPU CONTENTION", HOGS, []),
    "mixed": ("mixed.py", [], "DATA-LOADING BOUND", 0, [both_halves]),
    "demo_train": ("demo_train.py", [], "DATA-LOADING BOUND", 0, [busy_workers]),
}


def trainer_fractions(report):
    states = (report.get("trainer") or {}).get("states") or {}
    return {s: float(states.get(s, {}).get("fraction", 0.0)) for s in STATES}


def comparison_table(name, report, got, want, alt=None):
    diff = {s: got[s] - want[s] for s in STATES}
    w = report["window"]
    rows = [("pipeprof", got), ("truth", want)] + ([("truth late", alt)] if alt else [])
    lines = [groundtruth.format_table(
        rows,
        "%s: window %.2f s, verdict %r" % (name, (w["end_ns"] - w["start_ns"]) / 1e9,
                                           report["verdict"]["name"]))]
    lines.append("%-12s" % "diff (pts)" + "".join("%12s" % ("%+.1f" % (100 * diff[s]))
                                                  for s in STATES))
    return "\n".join(lines)


def check_scenario(name, report, truth, tid, verdict, evidence, extra=None, alt_truth=None,
                   stolen=0.0):
    """All assertions of one scenario, collected so that a failure shows every problem.

    With alt_truth, a state passes when it is within TOLERANCE of the range between the two
    truths' shares. stolen: the share of the window the hypervisor took from a CPU
    (conftest.steal_fraction), by which the truth itself is uncertain; it widens the
    tolerance, and is printed."""
    problems = []
    w = report["window"]
    start, end = w["start_ns"], w["end_ns"]
    window = (end - start) / 1e9
    if not groundtruth.covers(truth, start, end):
        problems.append("the workload's record [%s, %s] does not cover pipeprof's window "
                        "[%d, %d]" % (truth.get("ready_ns"), truth.get("end_ns"), start, end))
    got = trainer_fractions(report)
    want = groundtruth.shares(truth, start, end)
    alt = groundtruth.shares(alt_truth, start, end) if alt_truth else want
    table = comparison_table(name, report, got, want, alt if alt_truth else None)
    print("\n" + table)

    trainer = report.get("trainer") or {}
    if trainer.get("tid") != tid:
        problems.append("trainer tid %s, want %d" % (trainer.get("tid"), tid))
    if report.get("target_exited"):
        problems.append("report says the target exited during the window")
    if report["verdict"]["name"] != verdict:
        problems.append("verdict %r, want %r" % (report["verdict"]["name"], verdict))
    tolerance = TOLERANCE + stolen
    if stolen:
        print("hypervisor steal: up to %.1f%% of the window on one CPU; tolerance %.3f" % (
            100 * stolen, tolerance))
    for s in STATES:
        lo, hi = min(want[s], alt[s]), max(want[s], alt[s])
        off = max(lo - got[s], got[s] - hi, 0.0)
        if off > tolerance:
            problems.append("%s: pipeprof %.3f vs truth %s (off by %.3f > %.2f)" % (
                s, got[s], "%.3f" % want[s] if lo == hi else "%.3f..%.3f" % (lo, hi), off,
                tolerance))
    notes = []
    for check in evidence:
        ok, msg = check(report, truth, window)
        notes.append(("ok   " if ok else "FAIL ") + msg)
        if not ok:
            problems.append(msg)
    for n in notes:
        print("  " + n)

    result = {
        "verdict": report["verdict"]["name"], "want_verdict": verdict,
        "window_s": window, "start_ns": start, "end_ns": end,
        "pipeprof": got, "truth": want,
        "max_abs_diff": max(abs(got[s] - want[s]) for s in STATES),
        "truth_if_attached_late": alt if alt_truth else None,
        "evidence": notes, "problems": problems, "passed": not problems,
        "workers": report["roles"].get("WORKER"),
        "gpu_apis": (report.get("gpu") or {}).get("apis"),
        "recommendations": report.get("recommendations"),
        "truth_extra": truth.get("extra"),
        "table": table + "".join("\n  " + n for n in notes),
    }
    result.update(extra or {})
    save_result(name, result)
    if problems:
        pytest.fail("%s:\n  - %s\n\n%s\n\nrecommendations: %s\npipeprof stderr:\n%s" % (
            name, "\n  - ".join(problems), table,
            [r.get("text") for r in report.get("recommendations", [])],
            report.get("_stderr", "")[-2000:]), pytrace=False)


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_scenario(name, procs, pipeprof_bin, tmp_path, request):
    script, args, verdict, hogs, evidence = SCENARIOS[name]
    if script == "gpu.py":
        request.getfixturevalue("fakecuda")
    truth_path = str(tmp_path / ("%s.truth.json" % name))
    w, pid, tid = start_workload(procs, script, args, truth_path)
    for i in range(hogs):
        # started here, not by the workload: pipeprof counts the trainer's descendants as workers
        h = procs([PYTHON, os.path.join(WORKLOADS, "cpu_hog.py")], name="cpu_hog.%d" % i)
        if h.wait_line(r"^READY", 30) is None:
            pytest.fail("cpu_hog.py did not start\n" + h.output(), pytrace=False)
    if hogs:
        time.sleep(0.5)
    steal0 = cpu_steal_ticks()
    report = run_pipeprof(pid, WINDOW_S)
    stolen = steal_fraction(steal0, cpu_steal_ticks(), WINDOW_S)
    if not w.alive():
        pytest.fail("%s exited before pipeprof finished\n%s" % (script, w.output()),
                    pytrace=False)
    truth = finish_workload(w, truth_path)
    check_scenario(name, report, truth, tid, verdict, evidence, stolen=stolen)


# How long pipeprof may take to notice a library mapped while it traces and to attach its probes:
# it polls /proc/PID/maps every 500 ms and attaching the uprobes takes ~250 ms.
PICKUP_S = 1.0


def test_gpu_library_loaded_after_attach(procs, pipeprof_bin, fakecuda, tmp_path):
    """libcudart mapped 2 s after pipeprof attached is found and probed: its sync calls are
    counted and the trainer's wait in them is GPU_WAIT (the sleep before it, OTHER).

    pipeprof finds new libraries by polling, so calls in the first PICKUP_S after the load may
    be missed: the count must lie between the calls made from load + PICKUP_S on and all calls
    in the window (+2), and each state between the truth and the truth as seen by a tracer that
    attached PICKUP_S after the load (those early blocking syncs are then plain sleeps, OTHER),
    with the usual tolerance."""
    name = "gpu_load_after"
    truth_path = str(tmp_path / "load_after.truth.json")
    w, pid, tid = start_workload(procs, "gpu.py", ["--sync", "block", "--load-after", "2"],
                                 truth_path)
    report = run_pipeprof(pid, WINDOW_S)
    truth = finish_workload(w, truth_path)
    loaded = (truth.get("extra") or {}).get("loaded_ns")
    start, end = report["window"]["start_ns"], report["window"]["end_ns"]
    if not loaded or loaded <= start:
        pytest.fail("the library was loaded before pipeprof's window began (loaded %s, window "
                    "start %d): the test proves nothing" % (loaded, start), pytrace=False)
    pickup = loaded + int(PICKUP_S * 1e9)
    late = dict(truth)
    late["segments"] = [["other"] + list(seg[1:]) if seg[0] == "gpu" and seg[1] < pickup
                        else seg for seg in truth["segments"]]

    def picked_up(report, truth, window):
        gpu = report.get("gpu") or {}
        if not gpu.get("traced"):
            return False, "gpu not traced: %s" % gpu.get("why_not")
        got = {a["name"]: a["calls"] for a in gpu.get("apis", [])}.get("cudaStreamSynchronize")
        lo = groundtruth.count_segments(late, "gpu", start, end)
        hi = groundtruth.count_segments(truth, "gpu", start, end)
        ok = got is not None and lo - 2 <= got <= hi + 2
        return ok, "cudaStreamSynchronize: pipeprof %s calls; workload %.1f in the window, " \
            "%.1f from %.1f s after the load on (want in between, +-2)" % (got, hi, lo, PICKUP_S)

    extra = {"library_loaded_s_into_window": (loaded - start) / 1e9, "pickup_s": PICKUP_S}
    check_scenario(name, report, truth, tid, "GPU-BOUND", [picked_up], extra, alt_truth=late)
