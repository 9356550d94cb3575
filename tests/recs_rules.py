# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""No recommendation may contradict the report's own evidence (stdlib only).

FORBIDDEN is a table of (what the report measured, advice that measurement rules out): a
CPU-only job gets no GPU advice, a machine with no idle CPU gets no "more workers" or "more
threads", and so on. violations(report) checks one pipeprof.report/v1 document against it and
against the recommendations' own contract (each says what it rests on; a predicted speedup
comes from a model that fits and never exceeds the stall's bound).

conftest.py keeps every report the suite's tests produce and checks each one here when its test
ends; tests/test_recs_rules.py shows the check fails on planted bad reports.
"""
import re

# Less than this many idle CPUs is "no idle CPU" (predict.h, PREDICT_IDLE_CPU).
IDLE_CPU = 0.25


def gpu_library_mapped(report):
    """A GPU library is mapped by the job, probed or not (or could not be read)."""
    gpu = report.get("gpu") or {}
    return bool(gpu.get("libraries")) or "cannot be read" in (gpu.get("why_not") or "")


def idle_cpus(report):
    """Idle CPUs over the window, from the report's machine-wide figures; None if unknown."""
    cpu = report.get("cpu") or {}
    busy, n = cpu.get("busy_fraction"), cpu.get("ncpus")
    if busy is None or not n:
        return None
    return n * (1.0 - busy)


def no_idle_cpu(report):
    idle = idle_cpus(report)
    return idle is not None and idle < IDLE_CPU


def workers_reforked(report):
    """A worker process started inside the window after another ended (an epoch's re-fork)."""
    procs = [p for p in report.get("processes") or [] if not p.get("root")]
    exits = [p["exit_ns"] for p in procs if p.get("exit_ns")]
    return bool(exits) and any((p.get("fork_ns") or 0) > min(exits) for p in procs)


def worker_processes(report):
    return ((report.get("roles") or {}).get("WORKER") or {}).get("processes") or 0


def compute_threads(report):
    return (((report.get("model") or {}).get("inputs") or {}).get("compute_threads")) or 0


def trainer_single_threaded(report):
    """Nine tenths of the trainer's CPU samples (50 at least) are in code that runs on one
    thread whatever torch.set_num_threads says: a second thread buys under 1.06x."""
    t = (((report.get("where") or {}).get("roles") or {}).get("TRAINER")) or {}
    n = t.get("samples") or 0
    serial = (t.get("interpreter_samples") or 0) + (t.get("single_threaded_library_samples") or 0)
    return n >= 50 and serial >= 0.9 * n


def no_pageable_h2d(report):
    """The job's copies to the GPU were traced (gpu.copies, the report's steps) and none of
    their bytes came from host memory not seen pinned: pinning would change nothing."""
    h2d = (((report.get("gpu") or {}).get("copies")) or {}).get("HtoD")
    if not isinstance(h2d, dict):
        return False  # not traced: nothing measured either way
    return (h2d.get("bytes") or 0) - (h2d.get("pinned_bytes") or 0) <= 0


# (name, the evidence: report -> bool, the advice it rules out: regex over a recommendation's
# text, ids it rules out). Each regex names advice, not a statement that it would not help.
FORBIDDEN = [
    ("no GPU library mapped: no GPU advice", lambda r: not gpu_library_mapped(r),
     r"CUDA|pin_memory|\bGPU\b|autocast|mixed precision|host syncs",
     {"pin_memory", "gpu_healthy", "fewer_host_syncs", "probe_gpu"}),
    ("CPU-only job: no pin_memory", lambda r: not gpu_library_mapped(r),
     r"pin_memory", {"pin_memory"}),
    ("no idle CPU: no more workers", no_idle_cpu,
     r"[Rr]aise num_workers|more workers to keep|num_workers>0\) would",
     {"more_workers", "inputs_in_workers"}),
    ("no idle CPU: no more threads", no_idle_cpu,
     r"use the idle CPUs|more loader threads|on the idle CPUs",
     {"intra_op_threads"}),
    ("no worker re-forked in the window: no persistent_workers",
     lambda r: not workers_reforked(r), r"persistent_workers", {"persistent_workers"}),
    ("no DataLoader workers: no fewer or more of them",
     lambda r: worker_processes(r) == 0, r"fewer workers|[Rr]aise num_workers",
     {"more_workers", "oversubscribed_workers"}),
    ("the trainer's CPU in single-threaded code: no more intra-op threads",
     trainer_single_threaded, r"[Tt]ry torch\.set_num_threads\(\d+\) \(or OMP", {"intra_op_threads"}),
    ("one compute thread: no fewer intra-op threads", lambda r: compute_threads(r) <= 1,
     r"fewer intra-op threads", {"fewer_compute_threads"}),
    ("one worker at most: no fewer workers", lambda r: worker_processes(r) <= 1,
     r"fewer workers", set()),
    ("the workers' memory did not grow: no leak advice", lambda r: not memory_leak(r, "WORKERS"),
     r"workers' memory grows", {"worker_memory_leak"}),
    ("the training process's memory did not grow: no leak advice",
     lambda r: not memory_leak(r, "TRAINER"), r"training process's memory grows",
     {"trainer_memory_leak"}),
    ("no H2D copy from pageable memory: no pin_memory", no_pageable_h2d,
     r"pin_memory|pin the buffers|pinned memory", {"pin_memory"}),
    ("no launches measured: no CUDA graphs", lambda r: not launches_measured(r),
     r"CUDA graphs|CUDAGraph|reduce-overhead", {"launch_bound"}),
    ("the steps were not launch-bound: no launch-bound advice", lambda r: not launch_bound(r),
     r"[Ll]aunch-bound", {"launch_bound"}),
    ("device memory did not grow: no device-memory leak advice",
     lambda r: not ((r.get("gpu_memory") or {}).get("leak")),
     r"[Dd]evice memory grows", {"device_memory_leak"}),
]


def launches_measured(report):
    """The trainer's kernel launches were counted over its steps (steps.gpu), and it made some."""
    g = ((report.get("steps") or {}).get("gpu")) or {}
    return (g.get("launches") or 0) > 0


def launch_bound(report):
    return bool((((report.get("steps") or {}).get("gpu")) or {}).get("launch_bound"))


def memory_leak(report, group):
    """The report saw that group's memory grow steadily all window."""
    g = (((report.get("memory") or {}).get("groups") or {}).get(group)) or {}
    return bool(g.get("leak"))


def _recs(report):
    recs = report.get("recommendations")
    return recs if isinstance(recs, list) else []


def violations(report):
    """Every way this report's recommendations contradict its evidence or their contract,
    as lines; empty when none does."""
    out = []
    if not isinstance(report, dict) or report.get("schema") != "pipeprof.report/v1":
        return out
    recs = _recs(report)
    model = report.get("model")
    preds = (model or {}).get("predictions") or []
    fits = ((model or {}).get("derived") or {}).get("fits")
    for name, evidence, pattern, ids in FORBIDDEN:
        if not evidence(report):
            continue
        rx = re.compile(pattern)
        for rec in recs:
            text = rec.get("text") or ""
            if rec.get("id") in ids or rx.search(text):
                out.append("%s, yet recommendation %r says: %s" % (name, rec.get("id"), text))
    for rec in recs:
        rid = rec.get("id")
        if not (rec.get("evidence") or "").strip():
            out.append("recommendation %r gives no evidence: %s" % (rid, rec.get("text")))
        p, bound = rec.get("predicted_speedup"), rec.get("speedup_bound")
        if p is not None:
            if not fits:
                out.append("recommendation %r predicts %.2fx from a model that does not fit "
                           "today's rate" % (rid, p))
            if bound is not None and p > bound + 1e-6:
                out.append("recommendation %r predicts %.2fx, over its own bound %.2fx" % (
                    rid, p, bound))
        k = rec.get("prediction")
        if k is not None and not (isinstance(k, int) and 0 <= k < len(preds)):
            out.append("recommendation %r names prediction %r of %d" % (rid, k, len(preds)))
        elif k is not None and preds[k].get("speedup") != p:
            out.append("recommendation %r's predicted_speedup %r is not its prediction's %r" % (
                rid, p, preds[k].get("speedup")))
    if recs and model is None:
        out.append("recommendations without the model they come from (no 'model')")
    return out
