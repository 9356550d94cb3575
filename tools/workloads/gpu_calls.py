#!/usr/bin/python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""An exactly known pattern of CUDA calls on the fake runtime, for `pipeprof hist`.

No torch: ctypes only, so it starts in a fraction of a second. Protocol:

1. Loads the fake CUDA runtime (.output/fakecuda/libcudart.so.13, or --lib), allocates its
   buffers and calls every API of the pattern once (warm-up: page faults, lazy binding and
   first-call costs happen here, before any tracer is attached).
2. Prints `READY pid=<pid> tid=<tid>` (flushed), the same line as the other workloads.
3. Waits for "go" so a tracer can attach first: with --go-file PATH it polls (every 5 ms) until
   PATH exists; without it, it reads one line from stdin (end of file also means go).
4. Runs the pattern below on the calling (main) thread, prints `TRUTH {json}` and `DONE`
   (flushed), then lingers (--linger seconds, default 60) so a tracer can still be stopped
   while the process lives. SIGTERM / SIGINT end the linger (or the pattern) with a normal
   exit, so the fake runtime's FAKECUDA_STATS file is written.

The pattern (default counts; --n-launch etc. change them), all on the NULL stream:

  A  N1=200 launches of a 1 ns kernel (grid 1 x block 1), each started --gap-us (768) after
     the previous one (busy-wait pacing, relative: a late launch never makes the next gap
     shorter): 199 launch gaps of ~768 us, log2 slot 512..1023.
  B  N5=100 x (launch of a --kernel-us (1500) kernel, grid 1500 x block 1000 at 1 ns a thread,
     then cudaStreamSynchronize, which spins until it ends: ~1.5 ms, slot 1024..2047). The
     first launch of B comes --kernel-us after A's last one, so all N5 gaps of B are
     ~1.5 ms (slot 1024..2047) too.
  C  N2=50  cudaMemcpy HostToDevice of exactly 1 MiB      (synchronous)
  D  N3=30  cudaMemcpy DeviceToHost of exactly 64 KiB     (synchronous)
  E  N4=40  cudaMemcpyAsync HostToDevice of exactly 4 KiB, in groups of 8, each group followed
     by one cudaDeviceSynchronize (N6 = ceil(N4 / 8) = 5).

So cudaLaunchKernel is called N1 + N5 = 300 times (299 gaps in one thread), the synchronising
calls are cudaStreamSynchronize x N5, cudaDeviceSynchronize x N6 and cudaMemcpy x (N2 + N3),
and the copies are HtoD N2 + N4 (N2 x 1 MiB sync + N4 x 4 KiB async) and DtoH N3 x 64 KiB.

--driver-only loads only libcuda.so.1 (no libcudart mapped) and makes the same pattern with
the driver API: cuLaunchKernel, cuStreamSynchronize, cuMemcpyHtoD_v2, cuMemcpyDtoH_v2,
cuMemcpyHtoDAsync_v2 and cuCtxSynchronize.

TRUTH holds the counts and sizes, the pattern's call counts per API ("pattern_calls"), the
warm-up's ("warmup_calls") and the set-up's ("setup_calls"); in runtime mode FAKECUDA_STATS
(tools/fakecuda/README.md) reports their sum, per API. It also holds "expect": histograms in
the shape of pipeprof.hist/v1 (kind, label, metric, unit, events, count, sum, slots) built
from what the workload itself measured with CLOCK_MONOTONIC around each call. Byte histograms
are exact; the time ones are the workload's view (its clock reads bracket the call, so they
are a few usecs longer than the call itself).
"""
import argparse
import ctypes
import json
import os
import signal
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FAKECUDA = os.path.join(ROOT, ".output", "fakecuda")
DEFAULT_LIB = os.path.join(FAKECUDA, "libcudart.so.13")
DEFAULT_DRIVER = os.path.join(FAKECUDA, "libcuda.so.1")

SCHEDULE = {"spin": 1, "yield": 2, "block": 4}  # cudaDeviceSchedule* == CU_CTX_SCHED_*
H2D, D2H = 1, 2  # cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost
ASYNC_GROUP = 8  # async copies between two device syncs

_mono = time.monotonic_ns


def log2_slot(v):
    """pipeprof's (BCC's) log2 slot: slot k holds [2^k, 2^(k+1)), slot 0 holds 0 and 1."""
    v = int(v)
    return v.bit_length() - 1 if v > 1 else 0


def slot_bounds(k):
    return (0 if k == 0 else 1 << k), (1 << (k + 1)) - 1


def histogram(values):
    """[{'low','high','count'}] of the non-empty log2 slots of values (ints)."""
    counts = {}
    for v in values:
        k = log2_slot(v)
        counts[k] = counts.get(k, 0) + 1
    out = []
    for k in sorted(counts):
        lo, hi = slot_bounds(k)
        out.append({"low": lo, "high": hi, "count": counts[k]})
    return out


class dim3(ctypes.Structure):
    _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint), ("z", ctypes.c_uint)]


def _check(name, err):
    if err != 0:
        raise RuntimeError("%s failed: %d" % (name, err))


class Runtime:
    """The runtime API (libcudart, which pulls libcuda in as NEEDED)."""

    mode = "runtime"
    LAUNCH = "cudaLaunchKernel"
    STREAM_SYNC = "cudaStreamSynchronize"
    DEVICE_SYNC = "cudaDeviceSynchronize"
    COPY = {H2D: "cudaMemcpy", D2H: "cudaMemcpy"}
    COPY_ASYNC = {H2D: "cudaMemcpyAsync"}

    def __init__(self, path, schedule):
        if not os.path.exists(path):
            raise SystemExit("gpu_calls.py: %s not found (run `make fixtures`, or pass --lib)"
                             % path)
        self.path = path
        rt = self.rt = ctypes.CDLL(path)
        vp, sz, ui, i = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint, ctypes.c_int
        for name, args in {
            "cudaSetDevice": [i],
            "cudaSetDeviceFlags": [ui],
            "cudaMalloc": [ctypes.POINTER(vp), sz],
            "cudaLaunchKernel": [vp, dim3, dim3, ctypes.POINTER(vp), sz, vp],
            "cudaStreamSynchronize": [vp],
            "cudaDeviceSynchronize": [],
            "cudaMemcpy": [vp, vp, sz, i],
            "cudaMemcpyAsync": [vp, vp, sz, i, vp],
        }.items():
            fn = getattr(rt, name)
            fn.argtypes = args
            fn.restype = ctypes.c_int
        _check("cudaSetDevice", rt.cudaSetDevice(0))
        _check("cudaSetDeviceFlags", rt.cudaSetDeviceFlags(SCHEDULE[schedule]))
        self.setup_calls = {"cudaSetDevice": 1, "cudaSetDeviceFlags": 1}
        self._func = ctypes.c_void_p(0x1000)  # not looked at by the fake
        self._f_launch = rt.cudaLaunchKernel
        self._f_ssync = rt.cudaStreamSynchronize
        self._f_dsync = rt.cudaDeviceSynchronize
        self._f_copy = rt.cudaMemcpy
        self._f_acopy = rt.cudaMemcpyAsync

    def malloc(self, n):
        p = ctypes.c_void_p()
        _check("cudaMalloc", self.rt.cudaMalloc(ctypes.byref(p), n))
        self.setup_calls["cudaMalloc"] = self.setup_calls.get("cudaMalloc", 0) + 1
        return p.value

    def launch(self, grid, block):
        return self._f_launch(self._func, dim3(grid, 1, 1), dim3(block, 1, 1), None, 0, None)

    def stream_sync(self):
        return self._f_ssync(None)

    def device_sync(self):
        return self._f_dsync()

    def copy(self, dst, src, n, kind):
        return self._f_copy(dst, src, n, kind)

    def copy_async(self, dst, src, n, kind):
        return self._f_acopy(dst, src, n, kind, None)


class Driver:
    """The driver API only: libcuda.so.1 loaded alone, no libcudart in the process."""

    mode = "driver"
    LAUNCH = "cuLaunchKernel"
    STREAM_SYNC = "cuStreamSynchronize"
    DEVICE_SYNC = "cuCtxSynchronize"
    COPY = {H2D: "cuMemcpyHtoD_v2", D2H: "cuMemcpyDtoH_v2"}
    COPY_ASYNC = {H2D: "cuMemcpyHtoDAsync_v2"}

    def __init__(self, path, schedule):
        if not os.path.exists(path):
            raise SystemExit("gpu_calls.py: %s not found (run `make fixtures`, or pass "
                             "--driver-lib)" % path)
        self.path = path
        cu = self.cu = ctypes.CDLL(path)
        vp, sz, ui, i, ull = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint, ctypes.c_int,
                              ctypes.c_ulonglong)
        for name, args in {
            "cuInit": [ui],
            "cuDeviceGet": [ctypes.POINTER(i), i],
            "cuDevicePrimaryCtxSetFlags_v2": [i, ui],
            "cuMemAlloc_v2": [ctypes.POINTER(ull), sz],
            "cuLaunchKernel": [vp, ui, ui, ui, ui, ui, ui, ui, vp, ctypes.POINTER(vp),
                               ctypes.POINTER(vp)],
            "cuStreamSynchronize": [vp],
            "cuCtxSynchronize": [],
            "cuMemcpyHtoD_v2": [ull, vp, sz],
            "cuMemcpyDtoH_v2": [vp, ull, sz],
            "cuMemcpyHtoDAsync_v2": [ull, vp, sz, vp],
        }.items():
            fn = getattr(cu, name)
            fn.argtypes = args
            fn.restype = ctypes.c_int
        _check("cuInit", cu.cuInit(0))
        dev = ctypes.c_int()
        _check("cuDeviceGet", cu.cuDeviceGet(ctypes.byref(dev), 0))
        _check("cuDevicePrimaryCtxSetFlags_v2",
               cu.cuDevicePrimaryCtxSetFlags_v2(dev.value, SCHEDULE[schedule]))
        self.setup_calls = {"cuInit": 1, "cuDeviceGet": 1, "cuDevicePrimaryCtxSetFlags_v2": 1}
        self._func = ctypes.c_void_p(0x1000)
        self._f_launch = cu.cuLaunchKernel
        self._f_ssync = cu.cuStreamSynchronize
        self._f_dsync = cu.cuCtxSynchronize
        self._f_h2d = cu.cuMemcpyHtoD_v2
        self._f_d2h = cu.cuMemcpyDtoH_v2
        self._f_h2d_async = cu.cuMemcpyHtoDAsync_v2

    def malloc(self, n):
        p = ctypes.c_ulonglong()
        _check("cuMemAlloc_v2", self.cu.cuMemAlloc_v2(ctypes.byref(p), n))
        self.setup_calls["cuMemAlloc_v2"] = self.setup_calls.get("cuMemAlloc_v2", 0) + 1
        return p.value

    def launch(self, grid, block):
        return self._f_launch(self._func, grid, 1, 1, block, 1, 1, 0, None, None, None)

    def stream_sync(self):
        return self._f_ssync(None)

    def device_sync(self):
        return self._f_dsync()

    def copy(self, dst, src, n, kind):
        if kind == H2D:
            return self._f_h2d(dst, src, n)
        return self._f_d2h(dst, src, n)

    def copy_async(self, dst, src, n, kind):
        assert kind == H2D
        return self._f_h2d_async(dst, src, n, None)


def spin_until(deadline_ns):
    """Busy-waits (sleeping only while more than 2 ms remain) until CLOCK_MONOTONIC >= deadline."""
    while True:
        left = deadline_ns - _mono()
        if left <= 0:
            return
        if left > 2000000:
            time.sleep((left - 1500000) / 1e9)


class Pattern:
    def __init__(self, cuda, args):
        self.cuda = cuda
        self.a = args
        self.calls = {}
        self.launch_t = []       # entry-side timestamps of every launch (ns)
        self.ssync_us = []       # each stream sync's duration (us, truncated like pipeprof)
        self.dsync_us = []
        self.copy_us = {H2D: [], D2H: []}   # synchronous copies
        self.copy_bytes = {H2D: [], D2H: []}  # every copy
        self.copy_async_us = []
        self.rate = {H2D: [], D2H: []}      # MB/s of each synchronous copy (bytes per usec)
        self.copy_ns = {H2D: 0, D2H: 0}
        self.sync_bytes = {H2D: 0, D2H: 0}
        self.kernel_threads = int(round(args.kernel_us * 1000))  # 1 ns per thread
        n = max(args.h2d_bytes, args.d2h_bytes, args.async_bytes)
        self.host = ctypes.create_string_buffer(n)
        ctypes.memset(self.host, 0x5a, n)
        self.host_p = ctypes.addressof(self.host)
        self.dev = cuda.malloc(n)

    def _count(self, name):
        self.calls[name] = self.calls.get(name, 0) + 1

    def launch(self, grid, block):
        t0 = _mono()
        _check(self.cuda.LAUNCH, self.cuda.launch(grid, block))
        self._count(self.cuda.LAUNCH)
        return t0

    def stream_sync(self):
        t0 = _mono()
        _check(self.cuda.STREAM_SYNC, self.cuda.stream_sync())
        t1 = _mono()
        self._count(self.cuda.STREAM_SYNC)
        return t1 - t0

    def device_sync(self):
        t0 = _mono()
        _check(self.cuda.DEVICE_SYNC, self.cuda.device_sync())
        t1 = _mono()
        self._count(self.cuda.DEVICE_SYNC)
        return t1 - t0

    def copy(self, n, kind):
        if kind == H2D:
            dst, src = self.dev, self.host_p
        else:
            dst, src = self.host_p, self.dev
        t0 = _mono()
        _check(self.cuda.COPY[kind], self.cuda.copy(dst, src, n, kind))
        t1 = _mono()
        self._count(self.cuda.COPY[kind])
        return t1 - t0

    def copy_async(self, n):
        t0 = _mono()
        _check(self.cuda.COPY_ASYNC[H2D], self.cuda.copy_async(self.dev, self.host_p, n, H2D))
        t1 = _mono()
        self._count(self.cuda.COPY_ASYNC[H2D])
        return t1 - t0

    def warmup(self):
        """One of each call, before READY: nothing here is meant to be traced."""
        self.launch(1, 1)
        self.launch(1, 1000)
        self.stream_sync()
        self.copy(self.a.h2d_bytes, H2D)
        self.copy(self.a.d2h_bytes, D2H)
        self.copy_async(self.a.async_bytes)
        self.device_sync()
        warm = self.calls
        self.calls = {}
        return warm

    def run(self, stop):
        a = self.a
        gap_ns = int(a.gap_us * 1000)
        kernel_ns = int(a.kernel_us * 1000)
        t_start = _mono()
        # A: paced launches of a 1 ns kernel
        last = None
        for _ in range(a.n_launch):
            if stop():
                return False
            if last is not None:
                spin_until(last + gap_ns)
            last = self.launch(1, 1)
            self.launch_t.append(last)
        # B: launch a kernel_us kernel, wait for it
        for _ in range(a.n_sync):
            if stop():
                return False
            if last is not None:
                spin_until(last + kernel_ns)  # A -> B: the first gap looks like B's others
            last = self.launch(self.kernel_threads // 1000, 1000)
            self.launch_t.append(last)
            self.ssync_us.append(self.stream_sync() // 1000)
        # C, D: synchronous copies
        for kind, n, count in ((H2D, a.h2d_bytes, a.n_h2d), (D2H, a.d2h_bytes, a.n_d2h)):
            for _ in range(count):
                if stop():
                    return False
                ns = self.copy(n, kind)
                self.copy_us[kind].append(ns // 1000)
                self.copy_bytes[kind].append(n)
                self.copy_ns[kind] += ns
                self.sync_bytes[kind] += n
                self.rate[kind].append(n * 1000 // max(ns, 1))  # bytes/us == MB/s
        # E: async copies in groups, each group followed by a device sync
        for i in range(a.n_async):
            if stop():
                return False
            self.copy_async_us.append(self.copy_async(a.async_bytes) // 1000)
            self.copy_bytes[H2D].append(a.async_bytes)
            if (i + 1) % ASYNC_GROUP == 0 or i + 1 == a.n_async:
                self.dsync_us.append(self.device_sync() // 1000)
        self.elapsed_ns = _mono() - t_start
        return True

    def _time_hist(self, kind, label, values_us, metric="latency"):
        return {"kind": kind, "label": label, "metric": metric, "unit": "usecs",
                "events": len(values_us), "count": len(values_us), "sum": sum(values_us),
                "slots": histogram(values_us)}

    def truth(self, warm):
        a, c = self.a, self.cuda
        gaps_us = [(t1 - t0) // 1000 for t0, t1 in zip(self.launch_t, self.launch_t[1:])]
        n_dsync = len(self.dsync_us)
        expect = [
            self._time_hist("gpu-sync", c.STREAM_SYNC, self.ssync_us),
            self._time_hist("gpu-sync", c.DEVICE_SYNC, self.dsync_us),
        ]
        if c.COPY[H2D] == c.COPY[D2H]:
            expect.append(self._time_hist("gpu-sync", c.COPY[H2D],
                                          self.copy_us[H2D] + self.copy_us[D2H]))
        else:
            for kind in (H2D, D2H):
                expect.append(self._time_hist("gpu-sync", c.COPY[kind], self.copy_us[kind]))
        launch = self._time_hist("launch", c.LAUNCH, gaps_us, metric="gap")
        launch["events"] = len(self.launch_t)
        expect.append(launch)
        for kind, label in ((H2D, "HtoD"), (D2H, "DtoH")):
            b = self.copy_bytes[kind]
            expect.append({"kind": "memcpy", "label": label, "metric": "bytes", "unit": "bytes",
                           "events": len(b), "count": len(b), "sum": sum(b),
                           "slots": histogram(b)})
            r = self.rate[kind]
            us = self.copy_ns[kind] / 1000.0
            expect.append({"kind": "memcpy", "label": label, "metric": "throughput",
                           "unit": "MB/s", "events": len(r), "count": len(r),
                           "aggregate_mb_s": round(self.sync_bytes[kind] / us, 1) if us else 0,
                           "slots": histogram(r)})
        return {
            "workload": "gpu_calls",
            "mode": c.mode,
            "lib": c.path,
            "pid": os.getpid(),
            "tid": threading.get_native_id(),
            "schedule": a.sync,
            "n_launch": a.n_launch, "n_sync": a.n_sync, "n_h2d": a.n_h2d, "n_d2h": a.n_d2h,
            "n_async": a.n_async, "n_device_sync": n_dsync,
            "launches": len(self.launch_t),
            "gap_us": a.gap_us, "kernel_us": a.kernel_us,
            "h2d_bytes": a.h2d_bytes, "d2h_bytes": a.d2h_bytes, "async_bytes": a.async_bytes,
            "apis": {"launch": c.LAUNCH, "stream_sync": c.STREAM_SYNC,
                     "device_sync": c.DEVICE_SYNC, "copy_h2d": c.COPY[H2D],
                     "copy_d2h": c.COPY[D2H], "copy_async_h2d": c.COPY_ASYNC[H2D]},
            "pattern_calls": self.calls,
            "warmup_calls": warm,
            "setup_calls": c.setup_calls,
            "first_launch_ns": self.launch_t[0] if self.launch_t else None,
            "elapsed_s": round(self.elapsed_ns / 1e9, 4),
            "measured": {
                "gap_us": _summary(gaps_us[:max(a.n_launch - 1, 0)]),
                "sync_gap_us": _summary(gaps_us[max(a.n_launch - 1, 0):]),
                "stream_sync_us": _summary(self.ssync_us),
                "device_sync_us": _summary(self.dsync_us),
                "h2d_copy_us": _summary(self.copy_us[H2D]),
                "d2h_copy_us": _summary(self.copy_us[D2H]),
                "async_copy_us": _summary(self.copy_async_us),
            },
            "expect": expect,
        }


def _summary(v):
    if not v:
        return None
    s = sorted(v)
    return {"n": len(s), "min": s[0], "p50": s[len(s) // 2], "max": s[-1]}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lib", default=DEFAULT_LIB, help="CUDA runtime to load (default %(default)s)")
    p.add_argument("--driver-only", action="store_true",
                   help="load only the driver (--driver-lib) and call the driver API")
    p.add_argument("--driver-lib", default=DEFAULT_DRIVER,
                   help="driver for --driver-only (default %(default)s)")
    p.add_argument("--go-file", default=None,
                   help="start the pattern once this file exists (default: a line on stdin)")
    p.add_argument("--linger", type=float, default=60.0,
                   help="seconds to stay alive after DONE (default %(default)s)")
    p.add_argument("--sync", choices=sorted(SCHEDULE), default="spin",
                   help="how synchronising calls wait (default %(default)s)")
    p.add_argument("--n-launch", type=int, default=200, help="N1 paced launches")
    p.add_argument("--gap-us", type=float, default=768.0, help="gap between them (usecs)")
    p.add_argument("--n-sync", type=int, default=100, help="N5 launch + cudaStreamSynchronize")
    p.add_argument("--kernel-us", type=float, default=1500.0,
                   help="simulated kernel length the syncs wait for (usecs, whole ms/1000)")
    p.add_argument("--n-h2d", type=int, default=50, help="N2 synchronous HtoD copies")
    p.add_argument("--h2d-bytes", type=int, default=1 << 20)
    p.add_argument("--n-d2h", type=int, default=30, help="N3 synchronous DtoH copies")
    p.add_argument("--d2h-bytes", type=int, default=64 << 10)
    p.add_argument("--n-async", type=int, default=40, help="N4 async HtoD copies")
    p.add_argument("--async-bytes", type=int, default=4 << 10)
    args = p.parse_args(argv)
    if args.kernel_us < 1:
        p.error("--kernel-us must be at least 1")
    args.kernel_us = int(round(args.kernel_us))

    state = {"stop": False}

    def on_signal(signum, frame):
        state["stop"] = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    if args.driver_only:
        cuda = Driver(args.driver_lib, args.sync)
    else:
        cuda = Runtime(args.lib, args.sync)
    pat = Pattern(cuda, args)
    warm = pat.warmup()

    sys.stdout.write("READY pid=%d tid=%d\n" % (os.getpid(), threading.get_native_id()))
    sys.stdout.flush()

    if args.go_file:
        while not os.path.exists(args.go_file):
            if state["stop"]:
                return 0
            time.sleep(0.005)
    else:
        sys.stdin.readline()
        if state["stop"]:
            return 0

    if not pat.run(lambda: state["stop"]):
        sys.stderr.write("gpu_calls.py: stopped before the pattern ended\n")
        return 1
    sys.stdout.write("TRUTH %s\n" % json.dumps(pat.truth(warm), separators=(",", ":")))
    sys.stdout.write("DONE\n")
    sys.stdout.flush()

    end = _mono() + int(args.linger * 1e9)
    while not state["stop"] and _mono() < end:
        time.sleep(0.02)
    return 0


if __name__ == "__main__":
    sys.exit(main())
