#!/usr/bin/python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""GIL contention: the trainer computes in Python while another Python thread of the process
(a metrics or logging thread, a hand-made prefetcher) computes in Python too, so each waits for
the GIL while the other holds it.

The trainer's step is --step-ms of its own CPU in pure Python. The helper computes --busy-ms,
then sleeps --idle-ms (0: never), and repeats. CPython hands the GIL over by the switch
interval (5 ms): the thread that wants it waits that long on the GIL's condition, the timer
ends the wait, and it asks the holder to drop it. No wakeup names most of those waits (the
timer ends them, and the thread then runs): pipeprof must tell them from a sleep.

Ground truth: the step is one 'thread' segment (CPU -> RUNNING, run_delay -> RUNQ, the rest,
waiting for the GIL -> THREAD_WAIT). With --idle-ms 0, measured on the 2-vCPU VM: THREAD_WAIT
about 49%, RUNNING 50%. Expected verdict: WAITING ON A THREAD (a GIL holder, not a loader: it
hands over no data). Extra info: helper_tid.
"""
import argparse
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import groundtruth  # noqa: E402
from thread_timeouts import spin  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    groundtruth.add_common_args(p)
    p.add_argument("--step-ms", type=float, default=20.0,
                   help="trainer CPU ms per step (default %(default)s)")
    p.add_argument("--busy-ms", type=float, default=1000.0,
                   help="helper CPU ms per burst (default %(default)s)")
    p.add_argument("--idle-ms", type=float, default=0.0,
                   help="helper sleep ms between bursts (default %(default)s: never sleeps)")
    p.add_argument("--pin", action=argparse.BooleanOptionalAction, default=os.cpu_count() >= 2,
                   help="pin the trainer to CPU 0 and the helper to CPU 1 (default: on with "
                   ">= 2 CPUs)")
    args = p.parse_args(argv)
    rec = groundtruth.Recorder("gil_holder", args.truth)
    stop = threading.Event()
    started = {}

    def helper():
        if args.pin:
            os.sched_setaffinity(threading.get_native_id(), {1})
        started["tid"] = threading.get_native_id()
        while not stop.is_set():
            spin(args.busy_ms / 1000.0)
            if args.idle_ms:
                time.sleep(args.idle_ms / 1000.0)

    def step():
        with rec.seg("thread"):
            spin(args.step_ms / 1000.0)

    def warmup():
        if args.pin:
            os.sched_setaffinity(0, {0})
        threading.Thread(target=helper, name="helper", daemon=True).start()
        step()
        return {"helper_tid": started.get("tid"), "step_ms": args.step_ms,
                "busy_ms": args.busy_ms, "idle_ms": args.idle_ms, "pinned": args.pin}

    def cleanup():
        stop.set()

    return groundtruth.run(rec, args, warmup, step, cleanup)


if __name__ == "__main__":
    sys.exit(main())
