#!/usr/bin/env python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""A Python loop that spends its CPU in a native call chain of known shape.

The main thread calls, through ctypes, fp_outer -> fp_middle -> fp_inner_spin of
libfpchain.so (built with frame pointers; tools/workloads/fpchain/fpchain.c) from the Python
function native_step, for --native-ms of CPU time, then spins --python-ms in python_step. A
sampler that follows frame pointers finds fp_outer;fp_middle under native_step for the samples
whose leaf is fp_inner_spin.

    python3 native_chain.py --lib .output/workloads/libfpchain.so [--duration SECS]

Prints `READY pid=<pid>`; SIGTERM ends it.
"""
import argparse
import ctypes
import os
import signal
import sys
import time


def python_step(ms):
    end = time.thread_time() + ms / 1e3
    while time.thread_time() < end:
        pass


def native_step(lib, ms):
    lib.fp_outer(ctypes.c_double(ms))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lib", required=True, help="path of libfpchain.so")
    ap.add_argument("--duration", type=float, default=60)
    ap.add_argument("--native-ms", type=float, default=8)
    ap.add_argument("--python-ms", type=float, default=2)
    args = ap.parse_args()
    lib = ctypes.CDLL(os.path.abspath(args.lib))
    lib.fp_outer.restype = ctypes.c_ulong
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print("READY pid=%d" % os.getpid(), flush=True)
    end = time.monotonic() + args.duration
    while time.monotonic() < end:
        native_step(lib, args.native_ms)
        python_step(args.python_ms)


if __name__ == "__main__":
    main()
