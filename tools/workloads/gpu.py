#!/usr/bin/python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""GPU-bound trainer on the fake CUDA runtime (tools/fakecuda, built by `make fixtures`).

Each step: a little on-CPU torch work (a small MLP forward/backward), then cudaLaunchKernel of
a "kernel" whose simulated duration is --gpu-ms (the fake device runs grid x block threads at
1 ns each), then cudaStreamSynchronize(NULL), which waits for it. --sync spin makes the wait a
busy loop (the thread never leaves the CPU; CUDA's default), --sync block a sleep
(cudaDeviceScheduleBlockingSync). --load-after S sleeps S seconds after READY before loading
the library, to check that a library mapped after pipeprof attached is still traced.
--sync-every N synchronises every N steps only.

Ground truth: the torch work is a 'compute' segment, each cudaStreamSynchronize call a 'gpu'
segment (its whole wall time is GPU_WAIT, on-CPU or not), the --load-after sleep 'other'
segments. Expected verdict: GPU-BOUND.
"""
import argparse
import ctypes
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import groundtruth  # noqa: E402
from cpu_bound import make_mlp_step  # noqa: E402

DEFAULT_LIB = os.path.join(ROOT, ".output", "fakecuda", "libcudart.so.13")
SCHEDULE = {"spin": 1, "block": 4}  # cudaDeviceScheduleSpin, cudaDeviceScheduleBlockingSync


class dim3(ctypes.Structure):
    _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint), ("z", ctypes.c_uint)]


class FakeCuda:
    def __init__(self, path, sync_mode):
        if not os.path.exists(path):
            raise SystemExit("gpu.py: %s not found (run `make fixtures`, or pass --lib)" % path)
        self.path = path
        rt = self.rt = ctypes.CDLL(path)
        vp, sz = ctypes.c_void_p, ctypes.c_size_t
        for name, args in {
            "cudaSetDeviceFlags": [ctypes.c_uint],
            "cudaSetDevice": [ctypes.c_int],
            "cudaLaunchKernel": [vp, dim3, dim3, ctypes.POINTER(vp), sz, vp],
            "cudaStreamSynchronize": [vp],
        }.items():
            fn = getattr(rt, name)
            fn.argtypes = args
            fn.restype = ctypes.c_int
        self.check("cudaSetDevice", rt.cudaSetDevice(0))
        self.check("cudaSetDeviceFlags", rt.cudaSetDeviceFlags(SCHEDULE[sync_mode]))
        self._func = ctypes.c_void_p(id(self))  # not looked at by the fake

    @staticmethod
    def check(name, err):
        if err != 0:
            raise RuntimeError("%s failed: %d" % (name, err))

    def launch(self, gpu_ns):
        """Queues a kernel lasting gpu_ns on the NULL stream (1 ns per thread, us granularity)."""
        us = max(1, int(round(gpu_ns / 1000)))
        self.check("cudaLaunchKernel", self.rt.cudaLaunchKernel(
            self._func, dim3(us, 1, 1), dim3(1000, 1, 1), None, 0, None))

    def sync(self):
        self.check("cudaStreamSynchronize", self.rt.cudaStreamSynchronize(None))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    groundtruth.add_common_args(p)
    p.add_argument("--sync", choices=sorted(SCHEDULE), default="spin",
                   help="how cudaStreamSynchronize waits (default %(default)s)")
    p.add_argument("--gpu-ms", type=float, default=20.0,
                   help="simulated GPU time per step (default %(default)s)")
    p.add_argument("--width", type=int, default=128,
                   help="MLP width of the CPU part of the step (default %(default)s)")
    p.add_argument("--batch", type=int, default=32, help="batch of the CPU part (default %(default)s)")
    p.add_argument("--load-after", type=float, default=0.0, metavar="SECONDS",
                   help="load the CUDA library only this long after READY (default: before)")
    p.add_argument("--lib", default=DEFAULT_LIB, help="CUDA runtime to load (default %(default)s)")
    p.add_argument("--sync-every", type=int, default=1, metavar="N",
                   help="synchronise every N steps only, as a loop that reads its loss every N "
                   "steps does; the fake queue is unbounded, so with more GPU than CPU time a "
                   "step the GPU falls behind (default %(default)s)")
    args = p.parse_args(argv)
    rec = groundtruth.Recorder("gpu_" + args.sync, args.truth)
    st = {"cuda": None, "syncs": 0, "launches": 0}

    def load():
        st["cuda"] = FakeCuda(args.lib, args.sync)
        st["loaded_ns"] = groundtruth._mono()
        rec.extra["loaded_ns"] = st["loaded_ns"]

    def warmup():
        import torch
        torch.set_num_threads(1)
        torch.set_num_interop_threads(1)
        st["step"] = make_mlp_step(torch, args.width, args.batch, depth=2)
        for _ in range(5):
            st["step"]()
        if args.load_after <= 0:
            load()
            for _ in range(3):
                st["cuda"].launch(args.gpu_ms * 1e6)
                st["cuda"].sync()
        return {"sync": args.sync, "gpu_ms": args.gpu_ms, "lib": args.lib,
                "load_after": args.load_after, "flags": SCHEDULE[args.sync]}

    def step():
        cuda = st["cuda"]
        if cuda is None:
            rec.sleep(args.load_after - (groundtruth._mono() - rec.ready_ns) / 1e9)
            if rec.stop:
                return
            load()
            cuda = st["cuda"]
        with rec.seg("compute"):
            st["step"]()
        cuda.launch(args.gpu_ms * 1e6)
        st["launches"] += 1
        if st["launches"] % args.sync_every:
            return
        with rec.seg("gpu"):
            cuda.sync()
        st["syncs"] += 1

    def cleanup():
        rec.extra["launches"] = st["launches"]
        rec.extra["sync_calls"] = st["syncs"]

    return groundtruth.run(rec, args, warmup, step, cleanup)


if __name__ == "__main__":
    sys.exit(main())
