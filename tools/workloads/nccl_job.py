#!/usr/bin/python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""A rank's host thread making known NCCL calls on the fake libnccl, for the NCCL probes.

No torch: ctypes only. Loads the fake libnccl.so.2 (.output/fakecuda/, or --lib), which
blocks each call until its "peer" thread signals the transfer done (tools/fakecuda/README.md:
FAKENCCL_LATENCY_US per call plus bytes at FAKENCCL_BYTES_PER_US). Each step, on the main
thread:

  compute  with --torch-steps a small backward pass (a step boundary for pipeprof's autograd
           probe), then --compute-ms of busy CPU ('compute' segment)
  comm     with --comm-every N > 0, every N steps: ncclCommDestroy and ncclCommInitRank of a
           communicator of --nranks ranks (a fresh handle; an AllGather's bytes received need
           the communicator's size, seen only at its creation)
  calls    each in an 'nccl' segment (its whole time COMM_WAIT):
             ncclAllReduce     262144 x float32 (1 MiB)
             ncclAllGather     16384 x bfloat16 sent, x nranks received
             ncclReduceScatter 32768 x float64 (256 KiB)
             ncclBroadcast     100000 x int8
             ncclReduce        5000 x int64 (none with --no-reduce)
             ncclGroupStart, ncclSend 1024 x int32, ncclRecv 1024 x int32, ncclGroupEnd
           (inside the group Send and Recv return at once; ncclGroupEnd waits for both)

The truth file (groundtruth protocol) holds in extra.calls every call made after READY as
[name, t0_ns, t1_ns, bytes, comm_t0_ns]: the workload's clock reads around the call
(CLOCK_MONOTONIC), its bytes (for AllGather the bytes received; 0 for the group calls) and
when the communicator it used began to be created (0 for the group calls).
"""
import argparse
import ctypes
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import groundtruth  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DEFAULT_LIB = os.path.join(ROOT, ".output", "fakecuda", "libnccl.so.2")

# nccl.h's ncclDataType_t and their sizes
INT8, INT32, INT64, BFLOAT16, FLOAT32, FLOAT64 = 0, 2, 4, 9, 7, 8
SIZE = {INT8: 1, INT32: 4, INT64: 8, BFLOAT16: 2, FLOAT32: 4, FLOAT64: 8}
SUM = 0

_mono = time.monotonic_ns


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    groundtruth.add_common_args(p)
    p.add_argument("--lib", default=DEFAULT_LIB)
    p.add_argument("--nranks", type=int, default=4)
    p.add_argument("--compute-ms", type=float, default=2.0)
    p.add_argument("--comm-every", type=int, default=1,
                   help="re-create the communicator every N steps (0: once, before READY)")
    p.add_argument("--torch-steps", action="store_true",
                   help="start each step with a small autograd backward pass (torch), which "
                   "pipeprof's step probe marks, before the busy loop")
    p.add_argument("--no-reduce", action="store_true",
                   help="make no ncclReduce (for a libnccl built without it)")
    args = p.parse_args(argv)

    nccl = ctypes.CDLL(args.lib)
    vp, sz = ctypes.c_void_p, ctypes.c_size_t
    for name, types in (("ncclAllReduce", [vp, vp, sz, ctypes.c_int, ctypes.c_int, vp, vp]),
                        ("ncclAllGather", [vp, vp, sz, ctypes.c_int, vp, vp]),
                        ("ncclReduceScatter", [vp, vp, sz, ctypes.c_int, ctypes.c_int, vp, vp]),
                        ("ncclBroadcast", [vp, vp, sz, ctypes.c_int, ctypes.c_int, vp, vp]),
                        ("ncclSend", [vp, sz, ctypes.c_int, ctypes.c_int, vp, vp]),
                        ("ncclRecv", [vp, sz, ctypes.c_int, ctypes.c_int, vp, vp]),
                        ("ncclGroupStart", []), ("ncclGroupEnd", []),
                        ("ncclCommInitRank", [ctypes.POINTER(vp), ctypes.c_int, UniqueId,
                                              ctypes.c_int]),
                        ("ncclCommDestroy", [vp])):
        getattr(nccl, name).argtypes = types
        getattr(nccl, name).restype = ctypes.c_int
    if not args.no_reduce:
        nccl.ncclReduce.argtypes = [vp, vp, sz, ctypes.c_int, ctypes.c_int, ctypes.c_int, vp, vp]
        nccl.ncclReduce.restype = ctypes.c_int

    uid = UniqueId()
    if nccl.ncclGetUniqueId(ctypes.byref(uid)):
        raise SystemExit("ncclGetUniqueId failed")
    buf = ctypes.create_string_buffer(4 << 20)
    b = ctypes.cast(buf, vp)
    comm = vp()
    comm_t0 = [0]
    calls = []
    rec = groundtruth.Recorder("nccl_job", args.truth, calls=calls, nranks=args.nranks)
    nccl_seg = rec.seg("nccl")

    def new_comm():
        if comm.value:
            nccl.ncclCommDestroy(comm)
        t0 = _mono()
        if nccl.ncclCommInitRank(ctypes.byref(comm), args.nranks, uid, 0):
            raise SystemExit("ncclCommInitRank failed")
        comm_t0[0] = t0

    def call(name, nbytes, *a):
        fn = getattr(nccl, name)
        with nccl_seg:
            t0 = _mono()
            rc = fn(*a)
            t1 = _mono()
        if rc:
            raise SystemExit("%s failed: %d" % (name, rc))
        if rec.recording:
            calls.append([name, t0, t1, nbytes, comm_t0[0] if nbytes else 0])

    n = args.nranks
    step_no = [0]

    backward = None
    if args.torch_steps:
        import torch
        torch.set_num_threads(1)
        x = torch.ones(64, requires_grad=True)

        def backward():
            (x * 2).sum().backward()

    def step():
        with rec.seg("compute"):
            if backward:
                backward()
            end = _mono() + int(args.compute_ms * 1e6)
            while _mono() < end:
                pass
        if args.comm_every and step_no[0] % args.comm_every == 0:
            new_comm()
        step_no[0] += 1
        call("ncclAllReduce", 262144 * 4, b, b, 262144, FLOAT32, SUM, comm, None)
        call("ncclAllGather", 16384 * 2 * n, b, b, 16384, BFLOAT16, comm, None)
        call("ncclReduceScatter", 32768 * 8, b, b, 32768, FLOAT64, SUM, comm, None)
        call("ncclBroadcast", 100000, b, b, 100000, INT8, 0, comm, None)
        if not args.no_reduce:
            call("ncclReduce", 5000 * 8, b, b, 5000, INT64, SUM, 0, comm, None)
        call("ncclGroupStart", 0)
        call("ncclSend", 1024 * 4, b, 1024, INT32, 1, comm, None)
        call("ncclRecv", 1024 * 4, b, 1024, INT32, 1, comm, None)
        call("ncclGroupEnd", 0)

    def warmup():
        new_comm()
        for _ in range(3):
            step()
        return {"lib": args.lib}

    return groundtruth.run(rec, args, warmup, step,
                           cleanup=lambda: comm.value and nccl.ncclCommDestroy(comm))


if __name__ == "__main__":
    sys.exit(main())
