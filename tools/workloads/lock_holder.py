#!/usr/bin/python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Lock-bound trainer: each step the trainer must take a threading.Lock that another Python
thread of the process (a 'checkpoint/metrics writer') holds most of the time while it is itself
OFF-CPU: the writer takes the lock, sleeps --hold-ms (time.sleep, standing in for a slow write),
releases it, sleeps --gap-ms without it, and repeats. So the trainer's waits are ended by a thread
that is mostly sleeping, not computing: a lock holder, not a loader.

Timeline: the trainer gets the lock at the writer's release, reads the 'shared state' under it
briefly, releases it and computes --step-ms (thread CPU time, at least one MLP pass) while the
writer re-takes the lock after --gap-ms; the trainer then waits for the rest of the writer's hold.
Its wait per cycle is about gap + hold - step: with the defaults (5 + 20 - ~12.7 ms: the budget
plus part of the last MLP pass) about half.
The writer sleeps between release and re-acquire, so the woken trainer (not the writer) gets
the lock: Python locks are not fair. With 2+ CPUs the trainer is pinned to CPU 0 and the writer
to CPU 1 (--no-pin to let them float).

Ground truth: `with rec.seg('thread'): lock.acquire()` (CPU -> RUNNING, rest -> THREAD_WAIT),
the critical section and the step in 'compute' segments. Measured on the idle 2-vCPU VM:
THREAD_WAIT 48-49%, RUNNING 51%; the waits are ended by the writer thread (a HELPER, mostly
sleeping). Expected verdict: WAITING ON A THREAD. Extra info: holder_tid (the writer's tid).
"""
import argparse
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import groundtruth  # noqa: E402
from data_bound import FEATURES, make_trainer  # noqa: E402


def writer(lock, stop, hold_ms, gap_ms, pin, started):
    """Thread body: take the lock, sleep hold_ms holding it, release, sleep gap_ms; until stop."""
    if pin:
        os.sched_setaffinity(threading.get_native_id(), {1})
    started["tid"] = threading.get_native_id()
    started["event"].set()
    while not stop.is_set():
        with lock:
            time.sleep(hold_ms / 1e3)
        time.sleep(gap_ms / 1e3)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    groundtruth.add_common_args(p)
    p.add_argument("--hold-ms", type=float, default=20.0,
                   help="writer: ms it sleeps holding the lock (default %(default)s)")
    p.add_argument("--gap-ms", type=float, default=5.0,
                   help="writer: ms it sleeps without the lock (default %(default)s)")
    p.add_argument("--step-ms", type=float, default=12.0,
                   help="trainer CPU ms per step, at least one pass (default %(default)s)")
    p.add_argument("--batch", type=int, default=8, help="batch size (default %(default)s)")
    p.add_argument("--width", type=int, default=256, help="trainer MLP width (default %(default)s)")
    p.add_argument("--pin", action=argparse.BooleanOptionalAction, default=os.cpu_count() >= 2,
                   help="pin the trainer to CPU 0 and the writer to CPU 1 (default: on with "
                   ">= 2 CPUs)")
    args = p.parse_args(argv)
    rec = groundtruth.Recorder("lock_holder", args.truth)
    st = {"lock": threading.Lock(), "stop": threading.Event()}

    def warmup():
        import torch
        torch.set_num_threads(1)
        torch.set_num_interop_threads(1)
        if args.pin:
            os.sched_setaffinity(0, {0})
        st["train"] = make_trainer(torch, args.width, args.batch)
        st["x"] = torch.randn(args.batch, FEATURES)
        st["y"] = torch.arange(args.batch) % 10
        st["shared"] = torch.zeros(FEATURES)  # the 'metrics' the lock protects
        started = {"event": threading.Event()}
        st["thread"] = threading.Thread(target=writer, name="writer", daemon=True, args=(
            st["lock"], st["stop"], args.hold_ms, args.gap_ms, args.pin, started))
        st["thread"].start()
        started["event"].wait()
        for _ in range(5):
            step()
        return {"holder_tid": started["tid"], "hold_ms": args.hold_ms, "gap_ms": args.gap_ms,
                "trainer_cpu_ms_per_step": args.step_ms, "pinned": args.pin}

    def step():
        with rec.seg("thread"):
            st["lock"].acquire()
        with rec.seg("compute"):
            try:
                st["shared"].add_(1.0)  # the short critical section
            finally:
                st["lock"].release()
            st["train"](st["x"], st["y"], args.step_ms)

    def cleanup():
        st["stop"].set()
        if "thread" in st:
            st["thread"].join(5.0)

    return groundtruth.run(rec, args, warmup, step, cleanup)


if __name__ == "__main__":
    sys.exit(main())
