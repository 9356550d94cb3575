# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""pipeprof against labelled workloads.

Each scenario starts a real PyTorch loop from tools/workloads/ that records what its trainer
thread is doing (tools/workloads/groundtruth.py), and once the loop is warm attaches
`pipeprof -p PID -d 5 -j` ATTACHES times in a row to that one running workload (an attach-time
race once made half the attaches wrong, and one attach per scenario passed by luck). Every
attach's report is compared with the workload's own record over that attach's window:

- the verdict is the scenario's;
- every one of the 8 states of the trainer is within TOLERANCE (5 points) of the ground truth
  (widened by the hypervisor's steal time over that attach);
- scenario evidence: busy DataLoader workers and the WORKER the trainer waited on most, a
  spinning GPU wait that is not mistaken for running, the number of cudaStreamSynchronize
  calls, both halves of a mixed loop.

A scenario passes only if every attach does; a failure lists every attach's verdict and table
and says which attaches failed.

Needs root, ./pipeprof (make) and .output/fakecuda (make fixtures). The tables of both sides
are printed (pytest -s, and in the terminal summary) and written, per attach, to
.output/scenario-results.json with each scenario's verdicts and worst share error.

check_attaches() and run_attach_scenario() are shared with test_new_scenarios.py and
test_attach_stress.py.
"""
import os
import time

import pytest

from conftest import (PYTHON, WORKLOADS, attach_repeatedly, finish_workload, groundtruth,
                      run_pipeprof, save_result, start_workload, untraced_switch_ins)

STATES = groundtruth.STATES
TOLERANCE = 0.05
WINDOW_S = 5
ATTACHES = 5  # attaches per scenario, all to one running workload
# Wall time one attach may take beyond its window (loading and attaching the BPF programs and
# uprobes, detaching, the report; ~0.4 s measured) with a wide margin: the workload runs
# ATTACHES * (window + ATTACH_SLACK_S) + START_SLACK_S seconds after READY, and is stopped with
# SIGTERM as soon as the last attach is done, so the margin costs no test time.
ATTACH_SLACK_S = 15
START_SLACK_S = 30
HOGS = 3  # CPU hogs beside the contention trainer on this 2-CPU machine
ROLES = ("TRAINER", "WORKER", "HELPER", "UNTRACKED", "INTERRUPT")


def workload_duration(attaches, window):
    """--duration for a workload that must outlive `attaches` attaches of `window` seconds."""
    return attaches * (window + ATTACH_SLACK_S) + START_SLACK_S


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


def waited_on_entries(report):
    """report['waited_on'] checked against its contract: a non-empty list sorted by 'seconds'
    descending, each entry {'tid','pid','comm','role','seconds','share','wakeups','causes',
    'states'} with a known role, causes keyed by states, shares of the trainer's off-CPU time
    summing to at most 1. Returns (entries, None) or (None, what is wrong)."""
    wo = report.get("waited_on")
    if not isinstance(wo, list):
        return None, "report has no 'waited_on' list (got %s)" % type(wo).__name__
    if not wo:
        return None, "report's waited_on is empty: the trainer waited on nobody"
    for i, e in enumerate(wo):
        if not isinstance(e, dict):
            return None, "waited_on[%d] is %r, not an object" % (i, e)
        missing = [k for k in ("tid", "pid", "comm", "role", "seconds", "share", "wakeups",
                               "causes", "states") if k not in e]
        if missing:
            return None, "waited_on[%d] lacks %s: %r" % (i, ", ".join(missing), e)
        if e["role"] not in ROLES:
            return None, "waited_on[%d] has role %r, not one of %s" % (i, e["role"], ROLES)
        if not isinstance(e["seconds"], (int, float)) or e["seconds"] < 0 or \
                not isinstance(e["share"], (int, float)) or not 0 <= e["share"] <= 1.0001:
            return None, "waited_on[%d]: seconds %r, share %r" % (i, e["seconds"], e["share"])
        if not isinstance(e["causes"], dict) or set(e["causes"]) - set(STATES):
            return None, "waited_on[%d]: causes %r are not {STATE: seconds}" % (i, e["causes"])
    secs = [e["seconds"] for e in wo]
    if secs != sorted(secs, reverse=True):
        return None, "waited_on is not sorted by seconds, descending: %s" % secs
    total = sum(e["share"] for e in wo)
    if total > 1.01:
        return None, "waited_on shares sum to %.3f > 1" % total
    return wo, None


def describe_waker(e):
    return "tid %s pid %s comm %r role %s, %.3f s (share %.3f), %s wakeups, causes %s" % (
        e.get("tid"), e.get("pid"), e.get("comm"), e.get("role"), e.get("seconds", 0.0),
        e.get("share", 0.0), e.get("wakeups"),
        {k: round(v, 3) for k, v in (e.get("causes") or {}).items()})


def waited_most_on_worker(report, truth, window):
    """The trainer waited most on a DataLoader worker: waited_on[0] has role WORKER."""
    wo, why = waited_on_entries(report)
    if why:
        return False, "waited_on: %s" % why
    return wo[0]["role"] == "WORKER", "waited_on[0]: %s (want role WORKER)" % (
        describe_waker(wo[0]))


def no_unclaimed_time(report, truth, window):
    """A trainer that never blocks has no OTHER: every stretch between its events is placed,
    even where the kernel emitted no switch-in (switch_ins_missed: on a Firecracker guest the
    switch-outs of the guest agent's threads, about once a second, are never traced). Tighter
    than TOLERANCE: unplaced stretches cost about 1% of a 5 s window, and would pass it."""
    got = trainer_fractions(report)["OTHER"]
    start, end = report["window"]["start_ns"], report["window"]["end_ns"]
    want = groundtruth.shares(truth, start, end)["OTHER"]
    c = report["counters"]
    return abs(got - want) <= 0.005 and not c["switch_ins_unplaced"], (
        "unclaimed: OTHER %.4f vs truth %.4f (want within 0.005); switch-ins missed %d, "
        "unplaced %d (want 0)" % (got, want, c["switch_ins_missed"], c["switch_ins_unplaced"]))


# id: (script, args, expected verdict, CPU hogs beside it, evidence checks)
SCENARIOS = {
    "cpu_bound": ("cpu_bound.py", [], "CPU-BOUND", 0, [no_unclaimed_time]),
    "data_bound": ("data_bound.py", [], "DATA-LOADING BOUND", 0,
                   [busy_workers, waited_most_on_worker]),
    "io_bound": ("io_bound.py", [], "I/O BOUND", 0, []),
    "gpu_spin": ("gpu.py", ["--sync", "spin"], "GPU-BOUND", 0, [spin_is_gpu_wait, sync_calls]),
    "gpu_block": ("gpu.py", ["--sync", "block"], "GPU-BOUND", 0, [sync_calls]),
    "contention": ("contention.py", [], "CPU CONTENTION", HOGS, [no_unclaimed_time]),
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


def evaluate_attach(label, report, truth, tid, verdict, evidence, alt_truth=None, stolen=0.0):
    """All assertions on one attach's report, collected so that a failure shows every problem;
    returns that attach's result (problems empty when it passed) and prints its table.

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
    table = comparison_table(label, report, got, want, alt if alt_truth else None)
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
    max_off = 0.0
    for s in STATES:
        lo, hi = min(want[s], alt[s]), max(want[s], alt[s])
        off = max(lo - got[s], got[s] - hi, 0.0)
        max_off = max(max_off, off)
        if off > tolerance:
            problems.append("%s: pipeprof %.3f vs truth %s (off by %.3f > %.3f)" % (
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
    diffs = {s: abs(got[s] - want[s]) for s in STATES}
    worst_state = max(STATES, key=lambda s: diffs[s])
    return {
        "verdict": report["verdict"]["name"], "want_verdict": verdict,
        "window_s": window, "start_ns": start, "end_ns": end,
        "pipeprof": got, "truth": want,
        "max_abs_diff": diffs[worst_state], "max_abs_diff_state": worst_state,
        "max_off_tolerance_range": max_off,
        "stolen": stolen, "tolerance": tolerance,
        "truth_if_attached_late": alt if alt_truth else None,
        "evidence": notes, "problems": problems, "passed": not problems,
        "workers": report["roles"].get("WORKER"),
        "gpu_apis": (report.get("gpu") or {}).get("apis"),
        "waited_on": report.get("waited_on"),
        "verdict_detail": {k: v for k, v in report["verdict"].items()},
        "recommendations": report.get("recommendations"),
        "pipeprof_stderr": report.get("_stderr", "")[-2000:],
        "table": table + "".join("\n  " + n for n in notes),
    }


def check_attaches(name, runs, truth, tid, verdict, evidence, extra=None, alt_truth=None,
                   headline="%(name)s: %(right)d of %(n)d attaches right"):
    """Checks every attach of one scenario (runs: conftest.attach_repeatedly's list) with
    evaluate_attach, saves them all (per attach, plus the verdicts and the worst share error over
    the attaches) to the results JSON, and fails unless every attach passed, listing every
    attach's verdict and table and which attaches failed. headline: the summary's first words
    (%(name)s, %(right)d, %(n)d)."""
    if not runs:
        pytest.fail("%s: no attach was made: nothing was checked" % name, pytrace=False)
    n = len(runs)
    results = []
    for i, run in enumerate(runs, 1):
        label = "%s attach %d/%d" % (name, i, n)
        if run["report"] is None:
            res = {"verdict": None, "want_verdict": verdict, "passed": False,
                   "problems": ["no report: %s" % run["error"]], "max_abs_diff": None,
                   "stolen": run["stolen"], "table": "%s: NO REPORT\n%s" % (
                       label, run["error"][-1500:])}
            print("\n" + res["table"])
        else:
            res = evaluate_attach(label, run["report"], truth, tid, verdict, evidence,
                                  alt_truth=alt_truth, stolen=run["stolen"])
        res["attach"] = i
        res["wall_s"] = run.get("wall_s")
        results.append(res)

    verdicts = [r["verdict"] for r in results]
    failed = [r["attach"] for r in results if not r["passed"]]
    measured = [r for r in results if r["max_abs_diff"] is not None]
    worst = max(measured, key=lambda r: r["max_abs_diff"]) if measured else None
    summary = "%s\n  verdicts %s (want %r); worst share error %s" % (
        headline % {"name": name, "right": n - len(failed), "n": n}, verdicts, verdict,
        "%.1f pts (%s, attach %d)" % (100 * worst["max_abs_diff"], worst["max_abs_diff_state"],
                                      worst["attach"]) if worst else "n/a (no report)")
    print("\n" + summary)
    result = {
        "attaches": n, "want_verdict": verdict, "verdicts": verdicts,
        "attaches_right": n - len(failed), "failed_attaches": failed,
        "worst_share_error": worst["max_abs_diff"] if worst else None,
        "worst_share_error_state": worst["max_abs_diff_state"] if worst else None,
        "worst_share_error_attach": worst["attach"] if worst else None,
        "per_attach": [{k: v for k, v in r.items() if k not in ("table", "pipeprof_stderr")}
                       for r in results],
        "truth_extra": truth.get("extra"),
        "passed": not failed,
        "summary": summary,
        "table": "\n".join([summary] + [r["table"] for r in results]),
    }
    result.update(extra or {})
    save_result(name, result)
    if failed:
        details = []
        for r in results:
            if r["passed"]:
                continue
            details.append("attach %d/%d (verdict %r):\n  - %s" % (
                r["attach"], n, r["verdict"], "\n  - ".join(r["problems"])))
            if r.get("pipeprof_stderr"):
                details.append("  pipeprof stderr (attach %d):\n%s" % (
                    r["attach"], r["pipeprof_stderr"][-1000:]))
            report = runs[r["attach"] - 1]["report"]
            if report:
                # What the tracer saw go missing (switch-ins placed from the clock, waits no
                # wakeup ended, drops): a failure on a host that loses events says so.
                details.append("  counters (attach %d, non-zero): %s" % (r["attach"], ", ".join(
                    "%s=%s" % (k, v) for k, v in sorted(report.get("counters", {}).items())
                    if isinstance(v, int) and not isinstance(v, bool) and v)))
                # What the report itself said it could not see (a wait still open after the
                # naming grace, waits no wakeup ended): a failure it owned up to says so.
                for note in report.get("not_traced") or []:
                    details.append("  not traced (attach %d): %s" % (r["attach"], note))
        pytest.fail("%s\nfailed attaches: %s of %d\n\n%s\n\nevery attach:\n%s" % (
            summary, ", ".join(map(str, failed)), n, "\n".join(details),
            "\n\n".join(r["table"] for r in results)), pytrace=False)


def check_scenario(name, report, truth, tid, verdict, evidence, extra=None, alt_truth=None,
                   stolen=0.0):
    """check_attaches for a single attach."""
    check_attaches(name, [{"report": report, "error": None, "stolen": stolen, "wall_s": None}],
                   truth, tid, verdict, evidence, extra=extra, alt_truth=alt_truth)


def start_hogs(procs, n):
    """n cpu_hog.py processes, started here, not by the workload: pipeprof counts the trainer's
    descendants as workers."""
    for i in range(n):
        h = procs([PYTHON, os.path.join(WORKLOADS, "cpu_hog.py")], name="cpu_hog.%d" % i)
        if h.wait_line(r"^READY", 30) is None:
            pytest.fail("cpu_hog.py did not start\n" + h.output(), pytrace=False)
    if n:
        time.sleep(0.5)


def run_attach_scenario(name, procs, tmp_path, script, args, verdict, evidence, hogs=0,
                        attaches=ATTACHES, window=WINDOW_S, untraced=0):
    """Starts tools/workloads/SCRIPT once (failing clearly if it does not exist), attaches
    `attaches` times with `window`-second windows, then `untraced` times more with one switch-in
    in three untraced (conftest.untraced_switch_ins), stops it and checks every attach against
    its truth. Returns the READY (pid, tid)."""
    if not os.path.exists(os.path.join(WORKLOADS, script)):
        pytest.fail("tools/workloads/%s does not exist: the %s scenario cannot run" % (
            script, name), pytrace=False)
    truth_path = str(tmp_path / ("%s.truth.json" % name))
    w, pid, tid = start_workload(procs, script, args, truth_path,
                                 duration=workload_duration(attaches + untraced, window))
    start_hogs(procs, hogs)
    runs = attach_repeatedly(w, pid, attaches, window)
    untraced_runs = attach_repeatedly(w, pid, untraced, window, env=untraced_switch_ins(3))
    truth = finish_workload(w, truth_path)
    check_attaches(name, runs, truth, tid, verdict, evidence)
    if untraced:
        check_attaches(name + "_untraced_switch_ins", untraced_runs, truth, tid, verdict,
                       evidence)
    return pid, tid


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_scenario(name, procs, pipeprof_bin, tmp_path, request):
    """ATTACHES attaches to one running workload; each must be right."""
    script, args, verdict, hogs, evidence = SCENARIOS[name]
    if script == "gpu.py":
        request.getfixturevalue("fakecuda")
    run_attach_scenario(name, procs, tmp_path, script, args, verdict, evidence, hogs=hogs)


# How long pipeprof may take to notice a library mapped while it traces and to attach its probes:
# it polls /proc/PID/maps every 500 ms and attaching the uprobes takes ~250 ms.
# The loader's dlopen hook sends a note and pipeprof probes the library within milliseconds;
# the periodic scan (every 5 s) would miss this bound.
PICKUP_S = 0.25


def test_gpu_library_loaded_after_attach(procs, pipeprof_bin, fakecuda, tmp_path):
    """libcudart mapped 2 s after pipeprof attached is found and probed: its sync calls are
    counted and the trainer's wait in them is GPU_WAIT (the sleep before it, OTHER).

    pipeprof learns of the new library from the dynamic loader's hook, so only calls in the
    first PICKUP_S after the load may be missed: the count must lie between the calls made from load + PICKUP_S on and all calls
    in the window (+2), and each state between the truth and the truth as seen by a tracer that
    attached PICKUP_S after the load (those early blocking syncs are then plain sleeps, OTHER),
    with the usual tolerance."""
    name = "gpu_load_after"
    truth_path = str(tmp_path / "load_after.truth.json")
    w, pid, tid = start_workload(procs, "gpu.py", ["--sync", "block", "--load-after", "2"],
                                 truth_path)
    report = run_pipeprof(pid, WINDOW_S)
    truth = finish_workload(w, truth_path)
    # dlopen sends a note before and after the link map changes: that, not a timer, found it.
    assert report["counters"]["library_notes"] >= 2, report["counters"]
    assert report["counters"]["library_notes_lost"] == 0, report["counters"]
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
