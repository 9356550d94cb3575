#!/usr/bin/python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Launch-heavy loop on the fake CUDA runtime (tools/fakecuda, built by `make fixtures`): tiny
kernels launched with cudaLaunchKernel through ctypes in a tight loop, a cudaStreamSynchronize
every --sync-every launches. About 50k launches/s on the 2-CPU development VM.

Between two launches the thread does --host-work iterations of a little integer arithmetic in
Python: a fixed amount of work standing in for a framework's per-op dispatch, so the loop is
CPU-bound on the launching thread (a kernel lasts --kernel-us, far less than the host time per
launch, so a sync finds the device idle) and any cost a tracer adds to a launch shows in full.
The work is counted in iterations, not timed: a CPU-time budget would absorb what a probe adds.

One step is --sync-every launches and their sync; the summary line gives steps/s and
launches/s (steps/s x --sync-every).

Ground truth: each cudaStreamSynchronize call a 'gpu' segment (GPU_WAIT), the rest RUNNING.
Expected verdict: CPU-BOUND.
"""
import argparse
import ctypes
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import groundtruth  # noqa: E402
from gpu import DEFAULT_LIB, SCHEDULE, FakeCuda, dim3  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    groundtruth.add_common_args(p)
    p.add_argument("--sync-every", type=int, default=100,
                   help="launches per cudaStreamSynchronize (default %(default)s)")
    p.add_argument("--host-work", type=int, default=350,
                   help="Python loop iterations between two launches (default %(default)s: "
                   "~50k launches/s on the 2-CPU VM)")
    p.add_argument("--kernel-us", type=int, default=1,
                   help="simulated duration of each kernel, us (default %(default)s)")
    p.add_argument("--sync", choices=sorted(SCHEDULE), default="spin",
                   help="how cudaStreamSynchronize waits (default %(default)s)")
    p.add_argument("--lib", default=DEFAULT_LIB, help="CUDA runtime to load (default %(default)s)")
    args = p.parse_args(argv)
    rec = groundtruth.Recorder("launch_heavy", args.truth)
    st = {"steps": 0}

    def warmup():
        cuda = FakeCuda(args.lib, args.sync)
        rt = cuda.rt
        # The fast path: the bound functions, argument objects built once, as a framework would.
        launch, sync = rt.cudaLaunchKernel, rt.cudaStreamSynchronize
        func, grid, block = cuda._func, dim3(args.kernel_us, 1, 1), dim3(1000, 1, 1)
        n, work = args.sync_every, range(args.host_work)

        def one_step():
            x = 1
            for _ in range(n):
                for _ in work:
                    x = (x * 1103515245 + 12345) & 0xffffffff
                if launch(func, grid, block, None, 0, None):
                    raise RuntimeError("cudaLaunchKernel failed")
            with rec.seg("gpu"):
                if sync(None):
                    raise RuntimeError("cudaStreamSynchronize failed")

        st["one_step"] = one_step
        for _ in range(20):
            one_step()
        return {"sync_every": args.sync_every, "host_work": args.host_work,
                "kernel_us": args.kernel_us, "sync": args.sync, "lib": args.lib,
                "launches_per_step": args.sync_every}

    def step():
        st["one_step"]()
        st["steps"] += 1

    def cleanup():
        rec.extra["launches"] = st["steps"] * args.sync_every

    rc = groundtruth.run(rec, args, warmup, step, cleanup)
    n = len(rec.steps)
    if not args.quiet and n > 1 and rec.steps[-1] > rec.steps[0]:
        sys.stderr.write("launch_heavy: %.0f launches/s\n" % (
            (n - 1) * args.sync_every * 1e9 / (rec.steps[-1] - rec.steps[0])))
    return rc


if __name__ == "__main__":
    sys.exit(main())
