# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""NCCL probes, held against a rank whose every NCCL call is known (tools/workloads/nccl_job.py
on the fake libnccl.so.2 of tools/fakecuda), in each of ATTACHES attaches to one running job.

A call is counted when its entry and return both fall inside pipeprof's window. The workload
brackets each call with its own clock reads, so a call wholly inside the window must be
counted and one wholly outside must not; only a call cut by an edge of the window may go
either way. Per API the reported (calls, bytes, calls of unknown size) must then be exactly
what some choice for those edge calls gives: exact, with no tolerance. An AllGather's bytes
received need its communicator's size, seen only when the communicator is created: a call on
one made after the window opened is sized, one made before READY (so before any attach) is
not, and one between may be either.

- The job re-creates its communicator every step: every API's calls and bytes exact, its time
  inside within the workload's brackets, the trainer's COMM_WAIT (and its THREAD_WAIT, which
  the peer thread's wakeups would read as without the probes) within TOLERANCE of the range
  the truth allows (state_range), and the verdict COMMUNICATION BOUND.
- The job's one communicator comes before the attach: every AllGather is counted, as unsized,
  and no bytes are made up for it.
- A libnccl without ncclReduce: the report names what it could not probe, and still counts the
  rest exactly.
- Per step (each step begins with a small autograd backward pass, the step probe's boundary,
  and makes its calls after it): every whole step holds exactly one call of each API and
  STEP_BYTES bytes.
"""
import itertools
import os

import pytest

from conftest import attach_repeatedly, finish_workload, groundtruth, save_result, start_workload

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ATTACHES = 3
WINDOW_S = 3
TOLERANCE = 0.05
APIS = ("ncclAllReduce", "ncclAllGather", "ncclReduceScatter", "ncclBroadcast", "ncclReduce",
        "ncclSend", "ncclRecv", "ncclGroupStart", "ncclGroupEnd")
# Calls that wait for the peer (FAKENCCL_LATENCY_US at least): their time inside is most of
# their brackets. Group start, and Send/Recv inside a group, return at once.
BLOCKING = ("ncclAllReduce", "ncclAllGather", "ncclReduceScatter", "ncclBroadcast",
            "ncclReduce", "ncclGroupEnd")
MAX_EDGE_CALLS = 8
# One step of nccl_job.py with its default 4 ranks: AllReduce 1 MiB, AllGather 16384 bf16 x 4
# received, ReduceScatter 256 KiB, Broadcast 100000, Reduce 5000 int64, Send and Recv 4 KiB.
STEP_BYTES = 262144 * 4 + 16384 * 2 * 4 + 32768 * 8 + 100000 + 5000 * 8 + 2 * 1024 * 4


def outcomes(calls, start, end, ready_ns):
    """Every (calls, bytes, unsized) pipeprof may report for these calls of one API, and the
    sum of the brackets of those surely inside and of those possibly inside."""
    base = [0, 0, 0]
    edge = []
    sure_ns = possible_ns = 0
    for name, t0, t1, nbytes, comm_t0 in calls:
        if t1 < start or t0 > end:
            continue
        inside = t0 >= start and t1 <= end
        if name != "ncclAllGather":
            sizes = [(nbytes, 0)]
        elif comm_t0 >= start:
            sizes = [(nbytes, 0)]
        elif comm_t0 < ready_ns:
            sizes = [(0, 1)]
        else:
            sizes = [(nbytes, 0), (0, 1)]
        possible_ns += t1 - t0
        if inside and len(sizes) == 1:
            sure_ns += t1 - t0
            base = [base[0] + 1, base[1] + sizes[0][0], base[2] + sizes[0][1]]
            continue
        if inside:
            sure_ns += t1 - t0
            edge.append([(1,) + s for s in sizes])
        else:
            edge.append([(0, 0, 0)] + [(1,) + s for s in sizes])
    if len(edge) > MAX_EDGE_CALLS:
        pytest.fail("%d calls of one API at the window's edges: the workload's calls are too "
                    "slow for its window" % len(edge), pytrace=False)
    got = set()
    for choice in itertools.product(*edge):
        got.add(tuple(base[k] + sum(c[k] for c in choice) for k in range(3)))
    return got, sure_ns, possible_ns


def fmt_states(d):
    return " ".join("%s %.3f" % (s, d[s]) for s in groundtruth.STATES if d[s] >= 0.0005)


def state_range(truth, start, end):
    """The trainer's shares as the truth bounds them. An 'nccl' segment brackets the call with
    the workload's own overhead: its CPU time is partly the call's (COMM_WAIT to pipeprof),
    partly Python's around it (RUNNING), so COMM_WAIT lies between the segment's off-CPU time
    and its whole. And a call already running when the window opened is not timed (pipeprof
    names it under Not traced): its part of the window reads as the wait its wakeup by the
    peer thread names, THREAD_WAIT."""
    part = groundtruth.shares(truth, start, end)
    whole = groundtruth.shares(truth, start, end, whole=groundtruth.WHOLE + ("nccl",))
    running = sum(min(seg[2], end) - start for seg in truth["segments"]
                  if seg[0] == "nccl" and seg[1] < start < seg[2]) / (end - start)
    lo = {s: min(part[s], whole[s]) for s in groundtruth.STATES}
    hi = {s: max(part[s], whole[s]) for s in groundtruth.STATES}
    lo["COMM_WAIT"] -= running
    hi["THREAD_WAIT"] += running
    return lo, hi


def check_report(i, report, truth, stolen, want_missing=(), absent=()):
    """Problems with one attach's NCCL figures and states, as lines."""
    problems = []
    nccl = report["nccl"]
    w = report["window"]
    start, end = w["start_ns"], w["end_ns"]
    if not groundtruth.covers(truth, start, end):
        return ["attach %d: the workload's record does not cover the window" % i]
    libs = nccl["libraries"]
    if not nccl["traced"] or len(libs) != 1 or not libs[0]["path"].endswith("libnccl.so.2"):
        problems.append("attach %d: nccl traced %r, libraries %r" % (
            i, nccl["traced"], [l["path"] for l in libs]))
        return problems
    probed = {p["name"] for p in libs[0]["probes"] if p["attached"]}
    for api in APIS:
        if api not in absent and api not in probed:
            problems.append("attach %d: %s not probed" % (i, api))
    if sorted(libs[0]["missing"]) != sorted(want_missing):
        problems.append("attach %d: missing %r, want %r" % (i, libs[0]["missing"],
                                                             sorted(want_missing)))
    for name in want_missing:
        if not any(name in n and "NCCL" in n for n in report["not_traced"]):
            problems.append("attach %d: Not traced does not name %s: %r" % (
                i, name, report["not_traced"]))
    got = {c["name"]: c for c in nccl["calls"]}
    for api in APIS:
        calls = [c for c in truth["extra"]["calls"] if c[0] == api]
        if api in absent:
            if api in got:
                problems.append("attach %d: %s counted though not probed" % (i, api))
            continue
        want, sure_ns, possible_ns = outcomes(calls, start, end, truth["ready_ns"])
        c = got.get(api, {"calls": 0, "bytes": 0, "unsized_calls": 0, "total_ns": 0})
        have = (c["calls"], c["bytes"], c["unsized_calls"])
        if have not in want:
            problems.append("attach %d: %s (calls, bytes, unsized) %r, want one of %r" % (
                i, api, have, sorted(want)))
        if c["total_ns"] > possible_ns:
            problems.append("attach %d: %s %.3f s inside, more than the %.3f s the workload "
                            "saw" % (i, api, c["total_ns"] / 1e9, possible_ns / 1e9))
        if api in BLOCKING and c["total_ns"] < 0.85 * sure_ns:
            problems.append("attach %d: %s %.3f s inside, under 85%% of the %.3f s the "
                            "workload saw" % (i, api, c["total_ns"] / 1e9, sure_ns / 1e9))
    states = (report.get("trainer") or {}).get("states") or {}
    got = {s: states.get(s, {}).get("fraction", 0.0) for s in groundtruth.STATES}
    lo, hi = state_range(truth, start, end)
    tol = TOLERANCE + stolen
    for s in ("COMM_WAIT", "THREAD_WAIT"):
        if got[s] < lo[s] - tol or got[s] > hi[s] + tol:
            problems.append("attach %d: trainer %s %.3f vs truth %.3f..%.3f (> %.3f off)\n"
                            "  pipeprof %s\n  truth lo %s\n  truth hi %s" % (
                                i, s, got[s], lo[s], hi[s], tol, fmt_states(got),
                                fmt_states(lo), fmt_states(hi)))
    if report["verdict"]["name"] != "COMMUNICATION BOUND":
        problems.append("attach %d: verdict %r" % (i, report["verdict"]["name"]))
    return problems


def run_job(procs, tmp_path, lib, args):
    truth_path = str(tmp_path / "truth.json")
    w, pid, _ = start_workload(procs, "nccl_job.py", ["--lib", lib] + args, truth_path,
                               duration=120)
    runs = attach_repeatedly(w, pid, ATTACHES, WINDOW_S)
    truth = finish_workload(w, truth_path)
    return runs, truth


def check_runs(runs, truth, **kw):
    problems = []
    for i, run in enumerate(runs):
        if run["report"] is None:
            problems.append("attach %d failed: %s" % (i, run["error"]))
            continue
        problems += check_report(i, run["report"], truth, run["stolen"], **kw)
    return problems


def summary(label, runs):
    out, lines = [], [label]
    for i, run in enumerate(runs):
        rep = run["report"] or {}
        calls = {c["name"]: [c["calls"], c["bytes"], c["unsized_calls"], c["total_ns"]]
                 for c in (rep.get("nccl") or {}).get("calls", [])}
        comm = (((rep.get("trainer") or {}).get("states") or {}).get("COMM_WAIT") or {})
        out.append({"verdict": (rep.get("verdict") or {}).get("name"), "calls": calls,
                    "comm_wait": comm.get("fraction")})
        lines.append("  attach %d: %s, COMM_WAIT %s, %s" % (
            i, out[-1]["verdict"], comm.get("fraction"),
            " ".join("%s %d" % (k[4:], v[0]) for k, v in calls.items())))
    return {"attaches": out, "table": "\n".join(lines)}


def test_nccl_counts_bytes_time_and_comm_wait(procs, pipeprof_bin, fakenccl, tmp_path):
    runs, truth = run_job(procs, tmp_path, fakenccl, ["--comm-every", "1"])
    save_result("nccl_exact", summary("nccl: exact counts, COMM_WAIT", runs))
    problems = check_runs(runs, truth)
    assert not problems, "\n".join(problems)


def test_nccl_allgather_on_a_communicator_made_before_the_attach(procs, pipeprof_bin, fakenccl,
                                                                 tmp_path):
    runs, truth = run_job(procs, tmp_path, fakenccl, ["--comm-every", "0"])
    save_result("nccl_unsized", summary("nccl: AllGather unsized", runs))
    problems = check_runs(runs, truth)
    for i, run in enumerate(runs):
        ag = {c["name"]: c for c in (run["report"] or {}).get("nccl", {}).get("calls", [])}
        ag = ag.get("ncclAllGather")
        if not ag or ag["bytes"] != 0 or ag["unsized_calls"] != ag["calls"]:
            problems.append("attach %d: AllGather %r, want every call unsized" % (i, ag))
    assert not problems, "\n".join(problems)


def test_nccl_library_without_a_collective_is_named(procs, pipeprof_bin, tmp_path):
    lib = os.path.join(ROOT, ".output", "fakecuda", "noreduce", "libnccl.so.2")
    if not os.path.exists(lib):
        pytest.fail("%s is missing: build the fixtures with `make fixtures`" % lib,
                    pytrace=False)
    runs, truth = run_job(procs, tmp_path, lib, ["--comm-every", "1", "--no-reduce"])
    save_result("nccl_missing", summary("nccl: libnccl without ncclReduce", runs))
    problems = check_runs(runs, truth, want_missing=("ncclReduce",), absent=("ncclReduce",))
    assert not problems, "\n".join(problems)


def test_nccl_per_step(procs, pipeprof_bin, fakenccl, tmp_path):
    runs, truth = run_job(procs, tmp_path, fakenccl, ["--comm-every", "1", "--torch-steps"])
    save_result("nccl_steps", summary("nccl: per step", runs))
    problems = check_runs(runs, truth)
    for i, run in enumerate(runs):
        steps = (run["report"] or {}).get("steps") or {}
        n, per = steps.get("count", 0), steps.get("nccl")
        if n < 10 or per is None:
            problems.append("attach %d: %d steps, nccl %r" % (i, n, per))
            continue
        if not per["calls_min"] == per["calls_max"] == len(APIS) or \
                per["calls"] != len(APIS) * n:
            problems.append("attach %d: %d calls in %d steps, %d..%d a step, want %d" % (
                i, per["calls"], n, per["calls_min"], per["calls_max"], len(APIS)))
        if per["calls_by_api"] != {api: 1.0 for api in APIS}:
            problems.append("attach %d: calls by API a step %r" % (i, per["calls_by_api"]))
        if per["bytes"] != STEP_BYTES * n:
            problems.append("attach %d: %d bytes in %d steps, want %d" % (
                i, per["bytes"], n, STEP_BYTES * n))
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("edge", ["OPEN", "CLOSE"])
def test_nccl_counts_stay_exact_when_an_edge_is_preempted(procs, pipeprof_bin, fakenccl,
                                                          tmp_path, edge):
    """pipeprof preempted between choosing an edge of the window and telling the programs
    (PIPEPROF_TEST_<edge>_DELAY_MS: 50 ms, a dozen calls of each API): the calls made meanwhile
    must count on the side of the edge the report states. With the end stamped and stored
    after, they counted past it: ncclGroupStart 536 times against the workload's 535, once in a
    CI run, without the delay; with the start so, every API read 9 calls short."""
    truth_path = str(tmp_path / "truth.json")
    w, pid, _ = start_workload(procs, "nccl_job.py", ["--lib", fakenccl, "--comm-every", "1"],
                               truth_path, duration=120)
    runs = attach_repeatedly(w, pid, ATTACHES, WINDOW_S,
                             env=dict(os.environ, **{"PIPEPROF_TEST_%s_DELAY_MS" % edge: "50"}))
    truth = finish_workload(w, truth_path)
    problems = check_runs(runs, truth)
    assert not problems, "\n".join(problems)
