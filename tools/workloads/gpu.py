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

GPU API figures per step (for the report's steps, tests/test_gpu_steps.py), each step after
the torch work, in this order: --launches N kernel launches in all (cudaLaunchKernel; the first
carries --gpu-ms), of which --ex-launches through cudaLaunchKernelExC, --graph-launches through
cudaGraphLaunch and --driver-launches through the driver's cuLaunchKernel directly (as Triton
does); --h2d-copies C cudaMemcpyAsync HostToDevice of --h2d-bytes B each, from pageable memory
(--host pageable), from a buffer pinned once before READY (--host cached: cudaHostAlloc, as
PyTorch's caching host allocator, so a pipeprof attached later never sees the call), from a
buffer allocated pinned each step (--host hostalloc: cudaHostAlloc,
cudaMallocHost alternating, freed after; copied from its start and, for the second and later
copies, from inside it) or registered each step (--host register: cudaHostRegister of pageable
memory, unregistered after); --d2d-copies cudaMemcpyAsync DeviceToDevice of --d2d-bytes;
--syncs K cudaStreamSynchronize calls (default 1, the wait above), --device-syncs
cudaDeviceSynchronize calls and --d2h-copies blocking cudaMemcpy DeviceToHost of --d2h-bytes
(each a sync). The counts per step go into the truth file's "extra".

Device memory per step (after the copies): --allocs-per-step N allocations of --alloc-bytes B
each, through the APIs of --alloc-apis in turn (runtime and driver, "all" for every one the
fake has; a pitched one as B/4 bytes wide and 4 rows, so B must be a multiple of 2048), then
frees of all but --leak-allocs-per-step K of them (cudaFree and cudaFreeAsync in turn for the
runtime's, cuMemFree_v2 and cuMemFreeAsync for the driver's); the K are kept for good, a leak of
K x B bytes a step.

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


class LaunchConfig(ctypes.Structure):
    _fields_ = [("gridDim", dim3), ("blockDim", dim3), ("dynamicSmemBytes", ctypes.c_size_t),
                ("stream", ctypes.c_void_p), ("attrs", ctypes.c_void_p), ("numAttrs", ctypes.c_uint)]


H2D, D2H, D2D = 1, 2, 3  # cudaMemcpyKind
ALLOC_APIS = ("cudaMalloc", "cudaMallocAsync", "cudaMallocFromPoolAsync", "cudaMallocManaged",
              "cudaMallocPitch", "cuMemAlloc_v2", "cuMemAllocAsync", "cuMemAllocFromPoolAsync",
              "cuMemAllocManaged", "cuMemAllocPitch_v2")


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
            "cudaLaunchKernelExC": [ctypes.POINTER(LaunchConfig), vp, ctypes.POINTER(vp)],
            "cudaGraphLaunch": [vp, vp],
            "cudaStreamSynchronize": [vp],
            "cudaDeviceSynchronize": [],
            "cudaMalloc": [ctypes.POINTER(vp), sz],
            "cudaHostAlloc": [ctypes.POINTER(vp), sz, ctypes.c_uint],
            "cudaMallocHost": [ctypes.POINTER(vp), sz],
            "cudaFreeHost": [vp],
            "cudaHostRegister": [vp, sz, ctypes.c_uint],
            "cudaHostUnregister": [vp],
            "cudaMemcpy": [vp, vp, sz, ctypes.c_int],
            "cudaMemcpyAsync": [vp, vp, sz, ctypes.c_int, vp],
        }.items():
            fn = getattr(rt, name)
            fn.argtypes = args
            fn.restype = ctypes.c_int
        self.check("cudaSetDevice", rt.cudaSetDevice(0))
        self.check("cudaSetDeviceFlags", rt.cudaSetDeviceFlags(SCHEDULE[sync_mode]))
        self._func = ctypes.c_void_p(id(self))  # not looked at by the fake
        # The driver the runtime loaded (NEEDED), for launches that bypass the runtime.
        drv = self.drv = ctypes.CDLL(os.path.join(os.path.dirname(path), "libcuda.so.1"))
        drv.cuLaunchKernel.argtypes = [vp] + [ctypes.c_uint] * 7 + [vp, ctypes.POINTER(vp), ctypes.POINTER(vp)]
        drv.cuLaunchKernel.restype = ctypes.c_int
        self._graph = ctypes.c_void_p(0x6a7e)  # any non-NULL handle is an empty graph
        self._pool = ctypes.c_void_p(0x9001)  # a memory pool handle: not looked at
        self._frees = 0

    def dev_alloc(self, api, n):
        """n bytes of device memory through api; returns (pointer, whose free to use)."""
        lib = self.rt if api.startswith("cuda") else self.drv
        fn = getattr(lib, api)
        fn.restype = ctypes.c_int
        p, pitch = ctypes.c_void_p(), ctypes.c_size_t()
        out = ctypes.byref(p)
        if api.endswith("Pitch") or api.endswith("Pitch_v2"):
            extra = (ctypes.byref(pitch), ctypes.c_size_t(n // 4), ctypes.c_size_t(4))
            if lib is self.drv:
                extra += (ctypes.c_uint(4),)
            err = fn(out, *extra)
            if pitch.value * 4 != n:
                raise RuntimeError("%s: pitch %d for %d bytes" % (api, pitch.value, n))
        elif "FromPool" in api:
            err = fn(out, ctypes.c_size_t(n), self._pool, None)
        elif "Managed" in api:
            err = fn(out, ctypes.c_size_t(n), ctypes.c_uint(1))
        elif "Async" in api:
            err = fn(out, ctypes.c_size_t(n), None)
        else:
            err = fn(out, ctypes.c_size_t(n))
        self.check(api, err)
        return p, lib is self.rt

    def dev_free(self, p, runtime):
        """Frees p with the synchronous and the stream-ordered free in turn."""
        self._frees += 1
        if runtime:
            name = "cudaFree" if self._frees % 2 else "cudaFreeAsync"
            fn = getattr(self.rt, name)
        else:
            name = "cuMemFree_v2" if self._frees % 2 else "cuMemFreeAsync"
            fn = getattr(self.drv, name)
        fn.restype = ctypes.c_int
        self.check(name, fn(p, None) if "Async" in name else fn(p))

    def malloc(self, n):
        p = ctypes.c_void_p()
        self.check("cudaMalloc", self.rt.cudaMalloc(ctypes.byref(p), n))
        return p

    def host_alloc(self, n, which):
        p = ctypes.c_void_p()
        if which:
            self.check("cudaMallocHost", self.rt.cudaMallocHost(ctypes.byref(p), n))
        else:
            self.check("cudaHostAlloc", self.rt.cudaHostAlloc(ctypes.byref(p), n, 0))
        return p

    def free_host(self, p):
        self.check("cudaFreeHost", self.rt.cudaFreeHost(p))

    def register(self, p, n):
        self.check("cudaHostRegister", self.rt.cudaHostRegister(p, n, 0))

    def unregister(self, p):
        self.check("cudaHostUnregister", self.rt.cudaHostUnregister(p))

    def copy_async(self, dst, src, n, kind):
        self.check("cudaMemcpyAsync", self.rt.cudaMemcpyAsync(dst, src, n, kind, None))

    def copy(self, dst, src, n, kind):
        self.check("cudaMemcpy", self.rt.cudaMemcpy(dst, src, n, kind))

    def launch_ex(self):
        cfg = LaunchConfig(dim3(1, 1, 1), dim3(1, 1, 1), 0, None, None, 0)
        self.check("cudaLaunchKernelExC", self.rt.cudaLaunchKernelExC(ctypes.byref(cfg), self._func, None))

    def launch_graph(self):
        self.check("cudaGraphLaunch", self.rt.cudaGraphLaunch(self._graph, None))

    def launch_driver(self):
        self.check("cuLaunchKernel", self.drv.cuLaunchKernel(self._func, 1, 1, 1, 1, 1, 1, 0, None, None, None))

    def device_sync(self):
        self.check("cudaDeviceSynchronize", self.rt.cudaDeviceSynchronize())

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
    p.add_argument("--launches", type=int, default=1, metavar="N",
                   help="kernel launches per step in all (default %(default)s)")
    p.add_argument("--ex-launches", type=int, default=0, metavar="N",
                   help="of them through cudaLaunchKernelExC")
    p.add_argument("--graph-launches", type=int, default=0, metavar="N",
                   help="of them through cudaGraphLaunch")
    p.add_argument("--driver-launches", type=int, default=0, metavar="N",
                   help="of them through the driver's cuLaunchKernel directly")
    p.add_argument("--syncs", type=int, default=1, metavar="K",
                   help="cudaStreamSynchronize calls per step (default %(default)s)")
    p.add_argument("--device-syncs", type=int, default=0, metavar="K",
                   help="cudaDeviceSynchronize calls per step")
    p.add_argument("--h2d-copies", type=int, default=0, metavar="C")
    p.add_argument("--h2d-bytes", type=int, default=1 << 20, metavar="B")
    p.add_argument("--host", choices=("pageable", "hostalloc", "register", "cached"),
                   default="pageable",
                   help="host memory the H2D copies read (default %(default)s)")
    p.add_argument("--d2h-copies", type=int, default=0, metavar="C",
                   help="blocking cudaMemcpy DeviceToHost calls per step")
    p.add_argument("--d2h-bytes", type=int, default=4096, metavar="B")
    p.add_argument("--d2d-copies", type=int, default=0, metavar="C")
    p.add_argument("--d2d-bytes", type=int, default=65536, metavar="B")
    p.add_argument("--allocs-per-step", type=int, default=0, metavar="N")
    p.add_argument("--leak-allocs-per-step", type=int, default=0, metavar="K")
    p.add_argument("--alloc-bytes", type=int, default=1 << 18, metavar="B")
    p.add_argument("--alloc-apis", default="cudaMalloc",
                   help="comma-separated allocation APIs used in turn, or 'all' (default "
                   "%(default)s)")
    args = p.parse_args(argv)
    apis = ALLOC_APIS if args.alloc_apis == "all" else tuple(args.alloc_apis.split(","))
    if any(a not in ALLOC_APIS for a in apis):
        p.error("--alloc-apis: known are " + ",".join(ALLOC_APIS))
    if args.leak_allocs_per_step > args.allocs_per_step:
        p.error("--leak-allocs-per-step cannot exceed --allocs-per-step")
    if any("Pitch" in a for a in apis) and args.alloc_bytes % 2048:
        p.error("--alloc-bytes must be a multiple of 2048 for the pitched APIs")
    others = args.ex_launches + args.graph_launches + args.driver_launches
    if args.launches < 1 or others > args.launches - 1:
        p.error("--launches must be at least 1 and leave one cudaLaunchKernel for --gpu-ms")
    rec = groundtruth.Recorder("gpu_" + args.sync, args.truth)
    st = {"cuda": None, "syncs": 0, "launches": 0}

    def load():
        cuda = st["cuda"] = FakeCuda(args.lib, args.sync)
        st["loaded_ns"] = groundtruth._mono()
        rec.extra["loaded_ns"] = st["loaded_ns"]
        big = max(args.h2d_bytes * max(1, args.h2d_copies), args.d2h_bytes, args.d2d_bytes, 1)
        st["dev"], st["dev2"] = cuda.malloc(big), cuda.malloc(big)
        # Pageable host memory: the interpreter's own heap, as a numpy batch's would be.
        st["pageable"] = ctypes.create_string_buffer(big)
        st["d2h"] = ctypes.create_string_buffer(max(args.d2h_bytes, 1))
        if args.host == "cached":
            # Pinned once, before READY, as PyTorch's caching host allocator pins its blocks.
            st["cached"] = cuda.host_alloc(big, 0)
        rec.extra["per_step"] = {
            "launches": args.launches, "syncs": args.syncs + args.device_syncs + args.d2h_copies,
            "syncs_by_api": {k: v for k, v in (("cudaStreamSynchronize", args.syncs),
                                                ("cudaDeviceSynchronize", args.device_syncs),
                                                ("cudaMemcpy", args.d2h_copies)) if v},
            "h2d_copies": args.h2d_copies, "h2d_bytes": args.h2d_copies * args.h2d_bytes,
            "h2d_pinned_bytes": 0 if args.host == "pageable" else args.h2d_copies * args.h2d_bytes,
            "d2h_copies": args.d2h_copies, "d2h_bytes": args.d2h_copies * args.d2h_bytes,
            "d2d_copies": args.d2d_copies, "d2d_bytes": args.d2d_copies * args.d2d_bytes,
            "dev_allocs": args.allocs_per_step,
            "dev_frees": args.allocs_per_step - args.leak_allocs_per_step,
            "dev_alloc_bytes": args.allocs_per_step * args.alloc_bytes,
            "dev_free_bytes": (args.allocs_per_step - args.leak_allocs_per_step) * args.alloc_bytes,
            "dev_leak_bytes": args.leak_allocs_per_step * args.alloc_bytes,
        }
        st["kept"] = []
        st["alloc_calls"] = 0

    def h2d(cuda):
        n, c = args.h2d_bytes, args.h2d_copies
        if not c:
            return
        total = n * c
        if args.host == "hostalloc":
            buf = cuda.host_alloc(total, st["launches"] % 2)
        elif args.host == "cached":
            buf = st["cached"]
        else:
            buf = ctypes.cast(st["pageable"], ctypes.c_void_p)
            if args.host == "register":
                cuda.register(buf, total)
        for i in range(c):
            # The second and later copies read from inside the region, as a slice would.
            cuda.copy_async(st["dev"], ctypes.c_void_p(buf.value + i * n), n, H2D)
        if args.host == "hostalloc":
            cuda.free_host(buf)
        elif args.host == "register":
            cuda.unregister(buf)

    def api_calls(cuda):
        for _ in range(args.ex_launches):
            cuda.launch_ex()
        for _ in range(args.graph_launches):
            cuda.launch_graph()
        for _ in range(args.driver_launches):
            cuda.launch_driver()
        for _ in range(args.launches - 1 - others):
            cuda.launch(1)
        h2d(cuda)
        for _ in range(args.d2d_copies):
            cuda.copy_async(st["dev2"], st["dev"], args.d2d_bytes, D2D)
        bufs = []
        for _ in range(args.allocs_per_step):
            bufs.append(cuda.dev_alloc(apis[st["alloc_calls"] % len(apis)], args.alloc_bytes))
            st["alloc_calls"] += 1
        # The leaked ones are the first of each step's: kept, never freed.
        st["kept"] += bufs[:args.leak_allocs_per_step]
        for p_, runtime in bufs[args.leak_allocs_per_step:]:
            cuda.dev_free(p_, runtime)

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
        api_calls(cuda)
        st["launches"] += 1
        if st["launches"] % args.sync_every:
            return
        with rec.seg("gpu"):
            for _ in range(args.syncs):
                cuda.sync()
            for _ in range(args.device_syncs):
                cuda.device_sync()
            for _ in range(args.d2h_copies):
                cuda.copy(ctypes.cast(st["d2h"], ctypes.c_void_p), st["dev"], args.d2h_bytes, D2H)
        st["syncs"] += 1

    def cleanup():
        rec.extra["launches"] = st["launches"]
        rec.extra["sync_calls"] = st["syncs"]

    return groundtruth.run(rec, args, warmup, step, cleanup)


if __name__ == "__main__":
    sys.exit(main())
