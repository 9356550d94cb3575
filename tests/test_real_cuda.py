# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""pipeprof on a real CUDA training loop (tools/workloads/cuda_train.py): real libcudart,
libcuda and libtorch_cuda, a real device. Skipped, saying why, where the interpreter's torch
sees no GPU (the development VMs and CI); run on a GPU machine with

    PIPEPROF_TEST_PYTHON=/path/to/python3-with-cuda-torch python3 -m pytest tests/test_real_cuda.py

Each loop is attached three times, and each attach must give the loop's verdict, the trainer's
shares within 5 points of the loop's own record, the steps the loop made, and the GPU API calls
it made: one .item() sync a step, every kernel of the launch loop, and in a one-rank NCCL process
group the real libnccl's one all-reduce a step and its bytes. PIPEPROF_REAL_CUDA_OUT names
a folder to keep each loop's text report in (for the notes).
"""
import os
import subprocess

import pytest

from conftest import PIPEPROF, PYTHON, attach_repeatedly, finish_workload, groundtruth, \
    start_workload
from test_scenarios import check_attaches, sync_calls

ATTACHES = 3
SECONDS = 5


def _cuda_or_skip():
    try:
        r = subprocess.run([PYTHON, "-c", "import torch, sys; sys.exit(0 if "
                            "torch.cuda.is_available() else 3)"],
                           capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        pytest.skip("%s could not say whether torch sees a GPU: %s" % (PYTHON, e))
    if r.returncode != 0:
        pytest.skip("no CUDA device for %s's torch (set PIPEPROF_TEST_PYTHON on a GPU machine)%s"
                    % (PYTHON, (": " + r.stderr.strip().splitlines()[-1]) if r.stderr.strip()
                       else ""))


def _steps_match(report, truth, window):
    """The report's steps against the loop's own step ends in the window (+-2)."""
    st = report.get("steps") or {}
    w = report["window"]
    want = sum(1 for t in truth.get("steps", []) if w["start_ns"] <= t <= w["end_ns"])
    got = st.get("count") or 0
    return abs(got - want) <= 2, "steps: pipeprof %d (source %s), the loop %d in the window" % (
        got, st.get("source"), want)


def _syncs_per_step(n):
    def check(report, truth, window):
        g = (report.get("steps") or {}).get("gpu") or {}
        lo, hi = g.get("syncs_min"), g.get("syncs_max")
        return lo == n and hi == n, "syncs a step %s..%s (want %d)" % (lo, hi, n)
    return check


def _launches_per_step(lo_want, hi_want=None):
    hi_want = hi_want or lo_want

    def check(report, truth, window):
        g = (report.get("steps") or {}).get("gpu") or {}
        lo, hi = g.get("launches_min"), g.get("launches_max")
        ok = lo is not None and lo >= lo_want and hi <= hi_want
        return ok, "launches a step %s..%s (want %d..%d)" % (lo, hi, lo_want, hi_want)
    return check


def _h2d_pinned(report, truth, window):
    """pin_memory=True: the batches come from PyTorch's caching host allocator, pinned long
    before the attach (known from the driver's mappings): no H2D copy is pageable, and
    pin_memory is not advised."""
    copies = ((report.get("steps") or {}).get("gpu") or {}).get("copies") or {}
    share = (copies.get("HtoD") or {}).get("pageable_share")
    recs = [r.get("id") for r in report.get("recommendations") or []]
    ok = share == 0 and "pin_memory" not in recs
    return ok, "H2D pageable share %r (want 0), pinned regions before the attach %s, recs %s" % (
        share, (report.get("steps") or {}).get("pinned_regions_before_attach"), recs)


def _launch_bound_said(report, truth, window):
    ids = [r.get("id") for r in report.get("recommendations") or []]
    return "launch_bound" in " ".join(str(i) for i in ids), "recommendations %s" % ids


def _device_sync_calls(report, truth, window):
    calls = {a["name"]: a["calls"] for a in (report.get("gpu") or {}).get("apis", [])}
    got = calls.get("cudaDeviceSynchronize")
    want = groundtruth.count_segments(truth, "gpu", report["window"]["start_ns"],
                                      report["window"]["end_ns"])
    return got is not None and abs(got - want) <= 2, \
        "cudaDeviceSynchronize: pipeprof %s, the loop %.1f (+-2)" % (got, want)


ALLREDUCE_BYTES = 4 << 20


def _nccl_allreduce(report, truth, window):
    """The real libnccl, probed where libtorch_cuda loaded it: one ncclAllReduce of 4 MiB of
    float32 a step, and nothing else, in the NCCL section and per step."""
    nccl = report.get("nccl") or {}
    libs = [l.get("path", "") for l in nccl.get("libraries") or []]
    calls = {c["name"]: c for c in nccl.get("calls") or []}
    ar = calls.get("ncclAllReduce") or {}
    per = (report.get("steps") or {}).get("nccl") or {}
    n = (report.get("steps") or {}).get("count") or 0
    ok = (nccl.get("traced") and any("libnccl" in l for l in libs)
          and set(calls) == {"ncclAllReduce"} and ar.get("calls", 0) > 0
          and ar.get("bytes") == ar["calls"] * ALLREDUCE_BYTES and not ar.get("unsized_calls")
          and n >= 5 and per.get("calls_min") == per.get("calls_max") == 1
          and per.get("bytes") == ALLREDUCE_BYTES * n)
    return ok, "nccl libraries %s, calls %s, per step %s over %d steps" % (
        libs, {k: (v.get("calls"), v.get("bytes"), v.get("unsized_calls"))
               for k, v in calls.items()}, per, n)


SCENARIOS = {
    # mode: (workload args, pipeprof args, verdict, evidence)
    "gpu": ([], [], "GPU-BOUND", [_steps_match, sync_calls, _syncs_per_step(1)]),
    "data": (["--workers", "2"], [], "DATA-LOADING BOUND", [_steps_match, _syncs_per_step(1),
                                                             _h2d_pinned]),
    "nccl": (["--allreduce-mb", str(ALLREDUCE_BYTES >> 20)], [], "GPU-BOUND",
             [_steps_match, _syncs_per_step(1), _nccl_allreduce]),
    "launch": (["--ops", "300"], ["--step-symbol", "libcudart.so:cudaDeviceSynchronize"],
               "CPU-BOUND", [_steps_match, _device_sync_calls, _launches_per_step(300),
                             _launch_bound_said]),
}


def _keep_text(mode, pid, extra):
    out = os.environ.get("PIPEPROF_REAL_CUDA_OUT")
    if not out:
        return
    r = subprocess.run([PIPEPROF, "-p", str(pid), "-d", str(SECONDS)] + list(extra),
                       capture_output=True, text=True, timeout=120)
    with open(os.path.join(out, "cuda_%s.txt" % mode), "w") as f:
        f.write(r.stdout + "\n--- stderr (exit %d)\n" % r.returncode + r.stderr)


@pytest.mark.parametrize("mode", sorted(SCENARIOS))
def test_real_cuda_loop(procs, pipeprof_bin, tmp_path, mode):
    _cuda_or_skip()
    args, extra, verdict, evidence = SCENARIOS[mode]
    truth = str(tmp_path / "truth.json")
    w, pid, tid = start_workload(procs, "cuda_train.py", ["--mode", mode] + args, truth,
                                 duration=SECONDS * (ATTACHES + 2) + 60)
    runs = attach_repeatedly(w, pid, ATTACHES, SECONDS, extra)
    _keep_text(mode, pid, extra)
    t = finish_workload(w, truth)
    check_attaches("cuda_" + mode, runs, t, tid, verdict, evidence)
