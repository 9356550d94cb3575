# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""`pipeprof record`: a Chrome trace-event JSON timeline of a data-loading job (data_bound.py),
held against the JSON report of the same window that the same run writes (--report).

The trace must be JSON with a traceEvents array; every slice on a thread that has thread_name
metadata naming its role as the report gives it; one thread's slices never overlap; per thread
and state, the slices sum to the report's seconds within 1% of the window; there are flows, each
starting inside a slice of the waker and ending inside the wait it ended (the same state), a
nanosecond before that wait's end, and on the trainer those waits are DATA_WAIT followed at once
by RUNQ (or RUNNING); no episode was dropped, and the metadata says so; the file stays under
TRACE_MB_PER_10S for ten seconds of this job. Perfetto's trace_processor is not packaged for
Debian: where it is on PATH the trace is also loaded by it, else that check is skipped.

On the fake CUDA runtime (gpu.py): each synchronising call a slice on the trainer's GPU track;
each kernel launch an instant there, as many inside the trainer's steps as the report counts in
them, recorded twice; and record --html writes the page of the same window.
"""
import json
import os
import shutil
import subprocess
from collections import defaultdict

import pytest

from conftest import PIPEPROF, ROOT, Proc, finish_workload, start_workload

WINDOW_S = 5
# Bound on the trace of a 10 s window of data_bound.py (a few thousand switches a second):
# 3.5 to 5.5 MB here, so 20 MB leaves room for a slower or busier machine.
TRACE_MB_PER_10S = 20
# JSON timestamps are microseconds with three decimals: slack for float rounding.
EPS_US = 0.002

STATES = ("RUNNING", "RUNQ", "GPU_WAIT", "IO_WAIT", "DATA_WAIT", "THREAD_WAIT", "COMM_WAIT",
          "OTHER")


@pytest.fixture(scope="module")
def recorded(tmp_path_factory, pipeprof_bin):
    tmp = tmp_path_factory.mktemp("record")
    truth = str(tmp / "truth.json")
    started = []

    # One recording for every check: the procs fixture is per test, so its pattern here.
    def start(argv, name=None, env=None):
        p = Proc(argv, name or os.path.basename(argv[1]), env=env)
        started.append(p)
        return p

    w, pid, _ = start_workload(start, "data_bound.py", [], truth, duration=120)
    trace_path, report_path = str(tmp / "trace.json"), str(tmp / "report.json")
    try:
        r = subprocess.run([PIPEPROF, "record", "-p", str(pid), "-d", str(WINDOW_S), "-o",
                            trace_path, "--report", report_path],
                           capture_output=True, text=True, timeout=120, cwd=ROOT)
        finish_workload(w, truth)
    finally:
        for p in started:
            p.kill_group()
    assert r.returncode == 0, r.stderr
    with open(trace_path, "rb") as f:
        raw = f.read()
    trace = json.loads(raw.decode("utf-8"))
    with open(report_path) as f:
        report = json.load(f)
    return {"trace": trace, "report": report, "size": len(raw), "path": trace_path,
            "stderr": r.stderr}


def slices_by_thread(trace):
    by = defaultdict(list)
    for e in trace["traceEvents"]:
        if e["ph"] == "X" and e.get("cat") == "state":
            by[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"], e["name"]))
    for v in by.values():
        v.sort()
    return by


def slice_at(slices, ts):
    for s in slices:
        if s[0] - EPS_US <= ts <= s[1] + EPS_US:
            return s
    return None


def test_trace_is_a_trace(recorded):
    t = recorded["trace"]
    assert isinstance(t["traceEvents"], list) and t["traceEvents"]
    assert t["otherData"]["dropped_episodes"] == 0, recorded["stderr"]
    assert recorded["report"]["counters"]["episodes_dropped"] == 0
    assert recorded["report"]["counters"]["episodes_recorded"] > 0
    assert abs(t["otherData"]["window_ns"] / 1e9 - recorded["report"]["window"]["seconds"]) < 1e-6


def test_every_slice_on_a_named_thread(recorded):
    t, rep = recorded["trace"], recorded["report"]
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in t["traceEvents"]
             if e["ph"] == "M" and e["name"] == "thread_name"}
    procs = {e["pid"] for e in t["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name"}
    for e in t["traceEvents"]:
        if e["ph"] in ("X", "s", "f"):
            assert (e["pid"], e["tid"]) in names, e
            assert e["pid"] in procs, e
    for th in rep["threads"]:
        name = names.get((th["pid"], th["tid"]))
        assert name is not None, th["tid"]
        assert name.startswith(th["role"] + " "), (name, th["role"])


def test_slices_never_overlap(recorded):
    for key, slices in slices_by_thread(recorded["trace"]).items():
        for a, b in zip(slices, slices[1:]):
            assert b[0] >= a[1] - EPS_US, (key, a, b)


def test_slices_sum_to_the_report(recorded):
    rep = recorded["report"]
    window_s = rep["window"]["seconds"]
    by = slices_by_thread(recorded["trace"])
    worst = (0, None)
    for th in rep["threads"]:
        sums = defaultdict(float)
        for s in by.get((th["pid"], th["tid"]), []):
            sums[s[2]] += (s[1] - s[0]) / 1e6
        for st in STATES:
            off = abs(sums[st] - th["states"][st]["seconds"])
            if off > worst[0]:
                worst = (off, (th["tid"], th["role"], st, sums[st], th["states"][st]["seconds"]))
    assert worst[0] <= 0.01 * window_s, worst


def test_flows_from_waker_to_wait(recorded):
    t, rep = recorded["trace"], recorded["report"]
    by = slices_by_thread(t)
    starts = {e["id"]: e for e in t["traceEvents"] if e["ph"] == "s"}
    ends = {e["id"]: e for e in t["traceEvents"] if e["ph"] == "f"}
    assert starts and set(starts) == set(ends)
    trainer = rep["trainer"]["tid"]
    data_to_runq = 0
    for fid, s in starts.items():
        f = ends[fid]
        assert s.get("bp") == "e" and f.get("bp") == "e"
        assert (s["pid"], s["tid"]) != (f["pid"], f["tid"])
        waker = slice_at(by[(s["pid"], s["tid"])], s["ts"])
        assert waker is not None, s
        wakee = by[(f["pid"], f["tid"])]
        wait = slice_at(wakee, f["ts"])
        assert wait is not None and wait[2] == f["name"], (f, wait)
        # A nanosecond before the wait ends, where the next slice begins.
        assert abs(wait[1] - (f["ts"] + 0.001)) <= EPS_US, (f, wait)
        nxt = [x for x in wakee if abs(x[0] - wait[1]) <= EPS_US and x is not wait]
        if f["tid"] == trainer and wait[2] == "DATA_WAIT" and nxt and nxt[0][2] in ("RUNQ", "RUNNING"):
            data_to_runq += 1
    assert data_to_runq > 0, "no flow ends at a DATA_WAIT..RUNQ boundary of the trainer"


def test_trace_size_bounded(recorded):
    window_s = recorded["report"]["window"]["seconds"]
    per_10s_mb = recorded["size"] / window_s * 10 / 1e6
    assert per_10s_mb < TRACE_MB_PER_10S, per_10s_mb


def test_trace_processor_loads_it(recorded):
    tp = shutil.which("trace_processor_shell") or shutil.which("trace_processor")
    if not tp:
        pytest.skip("Perfetto's trace_processor is not installed (not packaged for Debian)")
    r = subprocess.run([tp, "-q", "/dev/stdin", recorded["path"]],
                       input="select count(*) from slice;", capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr


def test_usage_errors(pipeprof_bin, tmp_path):
    """No trace file, or standard output for it (the report's with -j): exit 2, nothing traced."""
    for argv in (["-p", "1"], ["-p", "1", "-o", "-"], ["-p", "1", "-o", str(tmp_path / "t"),
                                                       "--report", "-"], ["-o", "x"]):
        r = subprocess.run([PIPEPROF, "record"] + argv, capture_output=True, text=True, timeout=30)
        assert r.returncode == 2, (argv, r)
    r = subprocess.run([PIPEPROF, "record", "-p", str(2**22 + 1), "-d", "1", "-o",
                        str(tmp_path / "t")], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "no such process" in r.stderr, r
    assert not os.path.exists(tmp_path / "t")


def test_gpu_calls_on_their_own_track(procs, pipeprof_bin, fakecuda, tmp_path):
    """The fake runtime's loop (gpu.py, one cudaStreamSynchronize a step): each synchronising
    call is a slice named by its API on the trainer's GPU track, as many as the report of the
    same window counts (+-2 at the window's edges), each over a GPU_WAIT slice of the trainer."""
    truth = str(tmp_path / "truth.json")
    w, pid, tid = start_workload(procs, "gpu.py", ["--gpu-ms", "5"], truth, duration=60)
    trace_path, report_path = str(tmp_path / "trace.json"), str(tmp_path / "report.json")
    r = subprocess.run([PIPEPROF, "record", "-p", str(pid), "-d", "3", "-o", trace_path,
                        "--report", report_path], capture_output=True, text=True, timeout=120,
                       cwd=ROOT)
    finish_workload(w, truth)
    assert r.returncode == 0, r.stderr
    trace = json.load(open(trace_path))
    report = json.load(open(report_path))
    calls = {a["name"]: a["calls"] for a in report["gpu"]["apis"]}
    gpu = [e for e in trace["traceEvents"] if e["ph"] == "X" and e.get("cat") == "gpu"]
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in trace["traceEvents"]
             if e["ph"] == "M" and e["name"] == "thread_name"}
    waits = [s for s in slices_by_thread(trace)[(pid, tid)] if s[2] == "GPU_WAIT"]
    assert gpu and {e["name"] for e in gpu} == {"cudaStreamSynchronize"}, gpu[:3]
    assert abs(len(gpu) - calls["cudaStreamSynchronize"]) <= 2, (len(gpu), calls)
    for e in gpu:
        assert e["pid"] == pid and e["tid"] != tid, e
        assert names.get((e["pid"], e["tid"])) == "GPU calls of %d" % tid, e
        s = slice_at(waits, e["ts"] + e["dur"] / 2)
        assert s and s[0] - EPS_US <= e["ts"] and e["ts"] + e["dur"] <= s[1] + EPS_US, (e, s)


def test_launches_are_instants_counted_as_the_report(procs, pipeprof_bin, fakecuda, tmp_path):
    """gpu.py --launches 6: every kernel launch an instant ("ph":"i", thread scope) named
    cudaLaunchKernel on the trainer's GPU track; those inside the trainer's steps (the steps
    track's first start to its last end) exactly as many as the report's steps.gpu.launches of
    the same window, 6 a step, in each of two recordings; none dropped. With --html, the page
    of that window: self-contained, the report's verdict, its launches a step."""
    from test_html import page_problems

    truth = str(tmp_path / "truth.json")
    w, pid, tid = start_workload(procs, "gpu.py", ["--gpu-ms", "2", "--launches", "6"], truth,
                                 duration=60)
    runs = []
    for i in range(2):
        paths = [str(tmp_path / ("%s%d.%s" % (n, i, ext)))
                 for n, ext in (("trace", "json"), ("report", "json"), ("page", "html"))]
        r = subprocess.run([PIPEPROF, "record", "-p", str(pid), "-d", "3", "-o", paths[0],
                            "--report", paths[1], "--html", paths[2]],
                           capture_output=True, text=True, timeout=120, cwd=ROOT)
        assert r.returncode == 0, r.stderr
        runs.append((json.load(open(paths[0])), json.load(open(paths[1])), paths[2], r.stderr))
    finish_workload(w, truth)
    for trace, report, page, stderr in runs:
        assert trace["otherData"]["dropped_episodes"] == 0, stderr
        ev = trace["traceEvents"]
        launches = [e for e in ev if e["ph"] == "i"]
        assert launches, stderr
        for e in launches:
            assert e["s"] == "t" and e["name"] == "cudaLaunchKernel" and "dur" not in e, e
            assert e["pid"] == pid and e["tid"] == tid | 0x20000000, e
        steps = [e for e in ev if e["ph"] == "X" and e.get("cat") == "step"]
        g = report["steps"]["gpu"]
        assert steps and g and g["launches_per_step"] == 6, (len(steps), g)
        lo, hi = min(e["ts"] for e in steps), max(e["ts"] + e["dur"] for e in steps)
        inside = [e for e in launches if lo <= e["ts"] < hi]
        assert len(inside) == g["launches"], (len(inside), g["launches"], len(launches))
        assert "%d kernel launches" % len(launches) in stderr, stderr
        # The page of the same window.
        raw = open(page, "rb").read()
        problems, p = page_problems(raw)
        assert not problems, problems
        assert p.by_id["verdict"].split(":")[0] == report["verdict"]["name"], p.by_id["verdict"]
        assert '<tr><td>kernel launches</td><td>6</td><td>6 to 6</td><td>%d</td></tr>' % \
            g["launches"] in raw.decode(), p.by_id["gpu-steps"]


def test_html_usage_error(pipeprof_bin, tmp_path):
    """record --html - is refused (exit 2) and traces nothing."""
    r = subprocess.run([PIPEPROF, "record", "-p", "1", "-o", str(tmp_path / "t"), "--html",
                        "-"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "--html needs a file name" in r.stderr, r
    assert not os.path.exists(tmp_path / "t")
