#!/usr/bin/python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Garbage collections of known number and length, in the trainer and in one forked worker.

Automatic collection is off (gc.disable()); each process builds --cycles reference cycles and
runs gc.collect() on them, --rate times a second, sleeping in between. Every collection's
CLOCK_MONOTONIC start and end (ns) is the ground truth: at SIGTERM each process writes its list
to TRUTH.<pid>.json (the trainer's pid first in READY). Prints
`READY pid=<trainer> worker=<worker>` once both run.
"""
import argparse
import gc
import json
import os
import signal
import sys
import time


def loop(truth_path, cycles, rate, child=None):
    """Collect until SIGTERM (passed on to child, if any), then write the truth file."""
    gc.disable()
    spans = []
    stop = []

    def on_term(*_):
        stop.append(1)
        if child:
            os.kill(child, signal.SIGTERM)
    signal.signal(signal.SIGTERM, on_term)
    while not stop:
        junk = []
        for _ in range(cycles):
            a = []
            a.append(a)
            junk.append(a)
        del junk
        t0 = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        gc.collect()
        spans.append((t0, time.clock_gettime_ns(time.CLOCK_MONOTONIC)))
        time.sleep(1.0 / rate)
    with open("%s.%d.json" % (truth_path, os.getpid()), "w") as f:
        json.dump({"pid": os.getpid(), "collections": spans}, f)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--truth", required=True, help="prefix of the per-process truth files")
    p.add_argument("--cycles", type=int, default=20000, help="cycles per collection")
    p.add_argument("--rate", type=float, default=20, help="collections a second (about)")
    a = p.parse_args()
    r, w = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(r)
        os.write(w, b"x")
        os.close(w)
        loop(a.truth, a.cycles // 2, a.rate)
        os._exit(0)
    os.close(w)
    os.read(r, 1)
    print("READY pid=%d worker=%d" % (os.getpid(), child), flush=True)
    loop(a.truth, a.cycles, a.rate, child)
    os.waitpid(child, 0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
