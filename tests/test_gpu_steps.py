# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""The report's per-step GPU API figures, held exactly against a fake-runtime training loop
(tools/workloads/gpu.py on tools/fakecuda) whose every step makes a known set of calls.

Each step boundary is the start of a backward pass, and the workload makes all its CUDA calls
after the step's torch work, so every whole step in the window holds exactly one step's calls:
the counts per step are asserted exactly, in every whole step (min and max), in each of ATTACHES
attaches. The workload's per-step truth is itself checked against the fake runtime's own call
counts (FAKECUDA_STATS) over the run.

- A mixed loop: 40 launches a step, 3 of them through cudaLaunchKernelExC, 2 through
  cudaGraphLaunch and 5 straight through the driver's cuLaunchKernel (as Triton does; the
  runtime's calls reach the driver too, and must count once); 2 cudaStreamSynchronize, 1
  cudaDeviceSynchronize and 1 blocking cudaMemcpy DtoH (4 syncs: the `.item()` pattern named);
  3 H2D copies of 1 MB from pageable memory (all pageable, and pin_memory advised), 1 D2H of
  4 kB, 2 D2D of 64 kB.
- The same copies from host memory pinned each step (cudaHostAlloc/cudaMallocHost, or
  cudaHostRegister), two of the three from inside the region: 0% pageable, no pin_memory;
  and from memory pinned once before the attach (as PyTorch's caching host allocator does),
  known from the driver's shared mapping in /proc/PID/maps: the same.
- Device memory: allocations and frees a step exactly, through runtime and driver APIs (the
  runtime's nested driver calls once), a leak of 256 kB a step flagged within 20%, and none on
  a loop that frees what it allocates, nor on the loops above.
- Launch-bound: 300 tiny launches a step on a CPU-BOUND trainer is named and advised CUDA
  graphs; the GPU-bound loop is not.
- Launches in bursts: where the launch probes are hit over 1000 times a second, launches are
  counted in the steps a burst spans whole, each exactly (the figures above are over those
  steps); with --all-launches in every step; a loop just over the budget gets several bursts
  a window, every re-attach working; an inference loop whose steps are known only from its
  waits for batches gets bursts of 2 s, long enough to span several of its 162 ms steps.
"""
import json
import os

import pytest

from conftest import attach_repeatedly, finish_workload, save_result, start_workload

ATTACHES = 3
WINDOW_S = 3
MB = 1000000


def run(procs, tmp_path, args):
    truth_path = str(tmp_path / "truth.json")
    stats_path = str(tmp_path / "fakecuda.json")
    env = dict(os.environ, FAKECUDA_STATS=stats_path)
    w, pid, _ = start_workload(procs, "gpu.py", ["--gpu-ms", "2"] + args, truth_path,
                               duration=120, env=env)
    runs = attach_repeatedly(w, pid, ATTACHES, WINDOW_S)
    truth = finish_workload(w, truth_path)
    with open(stats_path) as f:
        stats = json.load(f)
    return runs, truth, stats


def check_truth(truth, stats, per_api):
    """The workload's per-step calls are what the fake runtime saw: calls per API over the run
    = per step x its steps begun (plus the warm-up's 3 launches and syncs)."""
    steps = truth["extra"]["launches"]
    warm = {"cudaLaunchKernel": 3, "cudaStreamSynchronize": 3}
    for api, n in per_api.items():
        want = n * steps + warm.get(api, 0)
        assert stats[api]["calls"] == want, (api, stats[api], n, steps)


def per_step_problems(i, rep, want):
    st = rep["steps"]
    g = st["gpu"]
    out = []
    if st["count"] < 10 or g is None:
        return ["attach %d: %d steps, gpu %r" % (i, st["count"], g)]
    # Launches are counted over the steps a burst of the launch probes spanned (all of them
    # while the probes are hit less than 1000 times a second), syncs over every step.
    if g["launch_steps"] < 3 or g["launch_steps"] > st["count"] or \
            g["launches_sampled"] != (g["launch_steps"] < st["count"]):
        out.append("attach %d: launches counted in %d of %d steps (sampled %r)" % (
            i, g["launch_steps"], st["count"], g["launches_sampled"]))
    for key in ("launches", "syncs"):
        n = g["launch_steps"] if key == "launches" else st["count"]
        if not g[key + "_min"] == g[key + "_max"] == want[key]:
            out.append("attach %d: %s per step %s..%s, want %d" % (
                i, key, g[key + "_min"], g[key + "_max"], want[key]))
        if g[key] != want[key] * n:
            out.append("attach %d: %s %d over %d steps, want %d" % (
                i, key, g[key], n, want[key] * n))
    if g["syncs_by_api"] != {k: float(v) for k, v in want["syncs_by_api"].items()}:
        out.append("attach %d: syncs by API %r, want %r" % (i, g["syncs_by_api"],
                                                            want["syncs_by_api"]))
    for d, (calls, nbytes) in want["copies"].items():
        c = g["copies"][d]
        if c["calls"] != calls * st["count"] or c["bytes"] != nbytes * st["count"]:
            out.append("attach %d: %s %d calls %d bytes over %d steps, want %d and %d a step" % (
                i, d, c["calls"], c["bytes"], st["count"], calls, nbytes))
    h2d = g["copies"]["HtoD"]
    if h2d["pageable_share"] != want["h2d_pageable"]:
        out.append("attach %d: H2D pageable %r, want %r" % (i, h2d["pageable_share"],
                                                             want["h2d_pageable"]))
    if g["many_syncs"] != (want["syncs"] >= 3):
        out.append("attach %d: many_syncs %r with %d a step" % (i, g["many_syncs"],
                                                                 want["syncs"]))
    return out


def reported(runs, problems):
    """(attach number, report) of each attach that reported; a failed one is a problem."""
    for i, r in enumerate(runs, 1):
        if r["report"] is None:
            problems.append("attach %d failed: %s" % (i, r["error"]))
        else:
            yield i, r["report"]


def check(name, runs, want, pin_advice):
    problems, lines = [], []
    for i, rep in reported(runs, problems):
        st, g = rep["steps"], rep["steps"]["gpu"] or {}
        h2d = (g.get("copies") or {}).get("HtoD") or {}
        recs = [x["id"] for x in rep["recommendations"]]
        lines.append("attach %d: %d steps, launches %s..%s/step in %s steps (%.0f/s, gap %s s), "
                     "syncs %s..%s %r, H2D %.0f B/step pageable %r, recs %s" % (
                         i, st["count"], g.get("launches_min"), g.get("launches_max"),
                         g.get("launch_steps"),
                         g.get("launches_per_second") or 0, g.get("launch_gap_s"),
                         g.get("syncs_min"), g.get("syncs_max"), g.get("syncs_by_api"),
                         h2d.get("bytes_per_step") or 0, h2d.get("pageable_share"), recs))
        problems += per_step_problems(i, rep, want)
        if ("pin_memory" in recs) != pin_advice:
            problems.append("attach %d: pin_memory advice %s, want %s" % (
                i, "pin_memory" in recs, pin_advice))
        if g.get("launch_bound") or rep["gpu_memory"]["leak"]:
            problems.append("attach %d: launch-bound %r, device leak %r on a GPU-bound loop" % (
                i, g.get("launch_bound"), rep["gpu_memory"]["leak"]))
        window_h2d = rep["gpu"]["copies"]["HtoD"]
        if window_h2d["bytes"] < h2d.get("bytes", 0):
            problems.append("attach %d: the window's H2D bytes %d under the steps' %d" % (
                i, window_h2d["bytes"], h2d.get("bytes", 0)))
    save_result("gpu_steps_" + name, {"lines": lines, "problems": problems})
    print("\n" + name + ":\n  " + "\n  ".join(lines))
    assert not problems, "\n".join(problems + lines)


def test_gpu_calls_per_step(procs, tmp_path, fakecuda):
    runs, truth, stats = run(procs, tmp_path, [
        "--launches", "40", "--ex-launches", "3", "--graph-launches", "2",
        "--driver-launches", "5", "--syncs", "2", "--device-syncs", "1", "--d2h-copies", "1",
        "--d2h-bytes", "4096", "--h2d-copies", "3", "--h2d-bytes", str(MB), "--host",
        "pageable", "--d2d-copies", "2", "--d2d-bytes", "65536"])
    check_truth(truth, stats, {"cudaLaunchKernel": 30, "cudaLaunchKernelExC": 3,
                               "cudaGraphLaunch": 2, "cudaStreamSynchronize": 2,
                               "cudaDeviceSynchronize": 1, "cudaMemcpy": 1,
                               "cudaMemcpyAsync": 5})
    check("mixed", runs, {
        "launches": 40, "syncs": 4,
        "syncs_by_api": {"cudaStreamSynchronize": 2, "cudaDeviceSynchronize": 1,
                         "cudaMemcpy": 1},
        "copies": {"HtoD": (3, 3 * MB), "DtoH": (1, 4096), "DtoD": (2, 2 * 65536),
                   "HtoH": (0, 0)},
        "h2d_pageable": 1.0}, pin_advice=True)


@pytest.mark.parametrize("host", ["hostalloc", "register", "cached"])
def test_pinned_copies(procs, tmp_path, fakecuda, host):
    runs, truth, stats = run(procs, tmp_path, ["--h2d-copies", "3", "--h2d-bytes", str(MB),
                                               "--host", host])
    steps = truth["extra"]["launches"]
    if host == "cached":
        # Pinned once before READY: only the driver's mapping tells pipeprof it is pinned.
        assert stats["cudaHostAlloc"]["calls"] == 1 and not stats.get("cudaFreeHost", {}).get(
            "calls"), stats
        seeded = [(r["report"] or {}).get("steps", {}).get("pinned_regions_before_attach")
                  for r in runs]
        assert all(n and n >= 1 for n in seeded), seeded
    elif host == "hostalloc":
        allocs = stats["cudaHostAlloc"]["calls"] + stats["cudaMallocHost"]["calls"]
        assert allocs == steps == stats["cudaFreeHost"]["calls"], stats
    else:
        assert stats["cudaHostRegister"]["calls"] == steps == stats["cudaHostUnregister"]["calls"]
    check("pinned_" + host, runs, {
        "launches": 1, "syncs": 1, "syncs_by_api": {"cudaStreamSynchronize": 1},
        "copies": {"HtoD": (3, 3 * MB)}, "h2d_pageable": 0.0}, pin_advice=False)


# Device memory: a loop that allocates N buffers of B bytes a step through several APIs in
# turn (runtime and driver, whose nesting must count once) and frees all but K of them.
ALLOC_B = 262144


def device_memory_problems(i, rep, allocs, frees, leak_bytes):
    st, g = rep["steps"], (rep["steps"]["gpu"] or {})
    d, gm = g.get("device_memory") or {}, rep["gpu_memory"]
    n = st["count"]
    out = []
    if n < 10 or not d:
        return ["attach %d: %d steps, device_memory %r" % (i, n, d)]
    if not d["allocations_min"] == d["allocations_max"] == allocs:
        out.append("attach %d: allocations a step %s..%s, want %d" % (
            i, d["allocations_min"], d["allocations_max"], allocs))
    if not d["frees_min"] == d["frees_max"] == frees:
        out.append("attach %d: frees a step %s..%s, want %d" % (
            i, d["frees_min"], d["frees_max"], frees))
    if d["allocated_bytes"] != allocs * ALLOC_B * n or d["freed_bytes"] != frees * ALLOC_B * n:
        out.append("attach %d: %d bytes allocated, %d freed over %d steps, want %d and %d a step"
                   % (i, d["allocated_bytes"], d["freed_bytes"], n, allocs * ALLOC_B,
                      frees * ALLOC_B))
    if not gm["traced"]:
        out.append("attach %d: gpu_memory not traced" % i)
    if gm["leak"] != bool(leak_bytes) or d["leak"] != bool(leak_bytes):
        out.append("attach %d: leak %r (steps %r), want %r" % (i, gm["leak"], d["leak"],
                                                                bool(leak_bytes)))
    rate = gm["growth_bytes_per_step"] or 0
    if leak_bytes and abs(rate - leak_bytes) > 0.2 * leak_bytes:
        out.append("attach %d: grows %.0f B/step, want %d within 20%%" % (i, rate, leak_bytes))
    if not leak_bytes and abs(rate) > 0.05 * ALLOC_B:
        out.append("attach %d: grows %.0f B/step, want none" % (i, rate))
    # The window's own figures: what the steps leaked shows between its start and end; a
    # window edge inside a step may hold that step's buffers not yet freed.
    grew = gm["end_bytes"] - gm["start_bytes"]
    want = leak_bytes * n
    if abs(grew - want) > leak_bytes * 2 + allocs * ALLOC_B + 0.05 * want:
        out.append("attach %d: outstanding %d -> %d (%+d), want about %+d" % (
            i, gm["start_bytes"], gm["end_bytes"], grew, want))
    if gm["peak_bytes"] < max(gm["start_bytes"], gm["end_bytes"]):
        out.append("attach %d: peak %d under start %d or end %d" % (
            i, gm["peak_bytes"], gm["start_bytes"], gm["end_bytes"]))
    recs = [x["id"] for x in rep["recommendations"]]
    if ("device_memory_leak" in recs) != bool(leak_bytes):
        out.append("attach %d: device_memory_leak advice %r" % (i, recs))
    if gm["lost"]:
        out.append("attach %d: %d allocations lost" % (i, gm["lost"]))
    return out


def check_device_memory(name, runs, allocs, frees, leak_bytes):
    problems, lines = [], []
    for i, rep in reported(runs, problems):
        d, gm = (rep["steps"]["gpu"] or {}).get("device_memory") or {}, rep["gpu_memory"]
        lines.append("attach %d: %d steps, allocations %s..%s, frees %s..%s a step, grows %.0f "
                     "B/step (R^2 %s), outstanding %d -> %d peak %d, leak %r" % (
                         i, rep["steps"]["count"], d.get("allocations_min"),
                         d.get("allocations_max"), d.get("frees_min"), d.get("frees_max"),
                         gm.get("growth_bytes_per_step") or 0, gm.get("growth_r2"),
                         gm.get("start_bytes") or 0, gm.get("end_bytes") or 0,
                         gm.get("peak_bytes") or 0, gm.get("leak")))
        problems += device_memory_problems(i, rep, allocs, frees, leak_bytes)
    save_result("gpu_steps_" + name, {"lines": lines, "problems": problems})
    print("\n" + name + ":\n  " + "\n  ".join(lines))
    assert not problems, "\n".join(problems + lines)


def test_device_memory_leak(procs, tmp_path, fakecuda):
    """4 allocations a step (cudaMalloc, cudaMallocPitch, the driver's cuMemAllocAsync straight,
    cudaMallocFromPoolAsync), the cudaMalloc one kept: a leak of 256 kB a step."""
    runs, truth, stats = run(procs, tmp_path, [
        "--allocs-per-step", "4", "--leak-allocs-per-step", "1", "--alloc-bytes", str(ALLOC_B),
        "--alloc-apis", "cudaMalloc,cudaMallocPitch,cuMemAllocAsync,cudaMallocFromPoolAsync"])
    steps = truth["extra"]["launches"]
    # The loop's 2 buffers at load, then one of each a step; the runtime's two freed in turn.
    assert stats["cudaMalloc"]["calls"] == steps + 2, stats["cudaMalloc"]
    assert stats["cudaMallocPitch"]["calls"] == stats["cudaMallocFromPoolAsync"]["calls"] == steps
    assert stats["cudaFree"]["calls"] + stats["cudaFreeAsync"]["calls"] == 2 * steps
    assert truth["extra"]["per_step"]["dev_leak_bytes"] == ALLOC_B
    check_device_memory("device_leak", runs, 4, 3, ALLOC_B)


def test_device_memory_steady(procs, tmp_path, fakecuda):
    """All ten allocation APIs a step, runtime and driver, every buffer freed in its step."""
    runs, truth, stats = run(procs, tmp_path, [
        "--allocs-per-step", "10", "--alloc-bytes", str(ALLOC_B), "--alloc-apis", "all"])
    steps = truth["extra"]["launches"]
    for api in ("cudaMallocAsync", "cudaMallocManaged", "cudaMallocPitch",
                "cudaMallocFromPoolAsync"):
        assert stats[api]["calls"] == steps, (api, stats[api], steps)
    check_device_memory("device_steady", runs, 10, 10, 0)


def launch_problems(runs, want):
    problems, lines = [], []
    for i, rep in reported(runs, problems):
        g = rep["steps"]["gpu"] or {}
        recs = [x["id"] for x in rep["recommendations"]]
        graphs = [x["id"] for x in rep["recommendations"] if "CUDA graphs" in x["text"]]
        lines.append("attach %d: %s, %d steps, %s launches a step, gap %s s, launch share %.2f, "
                     "launch-bound %r, recs %s" % (
                         i, rep["verdict"]["name"], rep["steps"]["count"],
                         g.get("launches_per_step"), g.get("launch_gap_s"),
                         g.get("launch_share") or 0, g.get("launch_bound"), recs))
        if g.get("launch_bound") != want or ("launch_bound" in recs) != want:
            problems.append("attach %d: launch-bound %r, advice %r; want %r" % (
                i, g.get("launch_bound"), recs, want))
        if want and not (g.get("launch_bound_text") or "").startswith("launch-bound (CPU-side)"):
            problems.append("attach %d: launch_bound_text %r" % (i, g.get("launch_bound_text")))
        if not want and graphs:
            problems.append("attach %d: CUDA graphs advised by %s" % (i, graphs))
    return problems, lines


@pytest.mark.parametrize("loop", ["launch_heavy", "gpu_bound"])
def test_launch_bound(procs, tmp_path, fakecuda, loop):
    """300 tiny kernels a step after a little torch work: the trainer spends its step issuing
    launches (CPU-BOUND, launch-bound). The GPU-bound loop (one 20 ms kernel a step, synced)
    is not."""
    args = ["--gpu-ms", "0.05", "--launches", "300"] if loop == "launch_heavy" else ["--gpu-ms", "20"]
    truth_path = str(tmp_path / "truth.json")
    w, pid, _ = start_workload(procs, "gpu.py", args, truth_path, duration=120)
    runs = attach_repeatedly(w, pid, ATTACHES, WINDOW_S)
    every = attach_repeatedly(w, pid, 1, WINDOW_S, extra=["--all-launches"])
    finish_workload(w, truth_path)
    problems, lines = launch_problems(runs + every, loop == "launch_heavy")
    # ~90k launch probe hits a second: probed in bursts by default, each step a burst spans
    # counted whole; with --all-launches every step. The GPU-bound loop's one launch a step
    # is under the budget: every step, by default too.
    for i, r in enumerate(runs + every, 1):
        rep = r["report"]
        if rep is None:
            continue
        g, count = rep["steps"]["gpu"] or {}, rep["steps"]["count"]
        sampled = loop == "launch_heavy" and i <= ATTACHES
        want = 300 if loop == "launch_heavy" else 1
        got = (g.get("launches_sampled"), rep["counters"]["launch_probe_pauses"] > 0,
               g.get("launch_steps") == count, g.get("launches_min"), g.get("launches_max"))
        lines.append("attach %d%s: launches counted in %s of %d steps, %s probe pauses" % (
            i, " (--all-launches)" if i > ATTACHES else "", g.get("launch_steps"), count,
            rep["counters"]["launch_probe_pauses"]))
        if got != (sampled, sampled, not sampled, want, want) or not g.get("launch_steps"):
            problems.append("attach %d: (sampled, paused, every step, min, max) %r, want %r" % (
                i, got, (sampled, sampled, not sampled, want, want)))
    save_result("gpu_steps_launch_" + loop, {"lines": lines, "problems": problems})
    print("\n" + loop + ":\n  " + "\n  ".join(lines))
    assert not problems, "\n".join(problems + lines)


def test_launch_bursts_come_back(procs, tmp_path, fakecuda):
    """6 launches a step at ~1.7k launches/s: the launch probes (runtime and driver twin, ~3.4k
    hits/s) are over the 1000 hits/s budget by little, so their pauses are short and each
    window holds several bursts. Every burst's whole steps count exactly 6; steps that straddle
    a pause are left out, not counted short; every re-attach works."""
    runs, truth, stats = run(procs, tmp_path, ["--launches", "6"])
    assert stats["cudaLaunchKernel"]["calls"] == 6 * truth["extra"]["launches"] + 3, stats
    problems, lines = [], []
    for i, rep in reported(runs, problems):
        st, c = rep["steps"], rep["counters"]
        g = st["gpu"] or {}
        lines.append("attach %d: %d steps, launches %s in %s steps (%s..%s a step), %d pauses, "
                     "%.2f s off, %d re-attach failures" % (
                         i, st["count"], g.get("launches"), g.get("launch_steps"),
                         g.get("launches_min"), g.get("launches_max"),
                         c["launch_probe_pauses"], c["launch_probes_off_s"],
                         c["launch_probe_reattach_failures"]))
        if c["launch_probe_pauses"] < 2 or c["launch_probe_reattach_failures"] or \
                not c["launch_probes_in_bursts"] or not 0 < c["launch_probes_off_s"] < WINDOW_S:
            problems.append("attach %d: not several bursts" % i)
        if not (g.get("launches_sampled") and 10 <= g["launch_steps"] < st["count"] and
                g["launches_min"] == g["launches_max"] == 6 and
                g["launches"] == 6 * g["launch_steps"]):
            problems.append("attach %d: launches not exact over the bursts' steps" % i)
        if not g.get("syncs_min") == g.get("syncs_max") == 1 or g["syncs"] != st["count"]:
            problems.append("attach %d: syncs %r over %d steps" % (i, g.get("syncs"), st["count"]))
    save_result("gpu_steps_launch_bursts", {"lines": lines, "problems": problems})
    print("\nlaunch bursts:\n  " + "\n  ".join(lines))
    assert not problems, "\n".join(problems + lines)


def test_launch_bursts_on_data_wait_steps(procs, tmp_path, fakecuda):
    """An inference loop fed by a DataLoader (data_bound.py --eval --launches 300): no backward
    pass, so its steps are its batches, known from its waits for them, 162 ms each. Those
    boundaries come several to a batch and cannot time a burst, so a burst runs its longest
    (2 s) and spans several whole steps, each counted exactly; the verdict stays the loop's."""
    truth_path = str(tmp_path / "truth.json")
    w, pid, _ = start_workload(procs, "data_bound.py", ["--eval", "--launches", "300",
                                                       "--item-ms", "20"], truth_path,
                               duration=120)
    runs = attach_repeatedly(w, pid, ATTACHES, 4)
    finish_workload(w, truth_path)
    problems, lines = [], []
    for i, rep in reported(runs, problems):
        st = rep["steps"]
        g = st["gpu"] or {}
        lines.append("attach %d: %s, %d steps from %s, launches %s in %s steps (%s..%s a step), "
                     "%d pauses" % (i, rep["verdict"]["name"], st["count"], st.get("source"),
                                    g.get("launches"), g.get("launch_steps"),
                                    g.get("launches_min"), g.get("launches_max"),
                                    rep["counters"]["launch_probe_pauses"]))
        if rep["verdict"]["name"] != "DATA-LOADING BOUND" or st.get("source") != "data_waits":
            problems.append("attach %d: verdict or step source" % i)
        if not (g.get("launches_sampled") and g.get("launch_steps", 0) >= 5 and
                g["launches_min"] == g["launches_max"] == 300 and
                g["launches"] == 300 * g["launch_steps"]):
            problems.append("attach %d: launches not exact over 5 or more steps" % i)
    save_result("gpu_steps_launch_bursts_data_waits", {"lines": lines, "problems": problems})
    print("\nlaunch bursts on data-wait steps:\n  " + "\n  ".join(lines))
    assert not problems, "\n".join(problems + lines)
