#!/usr/bin/python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Thread-loader-bound trainer: batches are computed by a Python threading.Thread of the trainer's
own process (a thread-based prefetcher) and handed over through a queue.Queue(maxsize=2); the
trainer mostly waits in q.get() for the next batch, and its own step is small.

The producer's cost per batch is a budget of its own thread CPU time (--batch-ms), spent in
(64x256)@(256x256) matmuls: each runs ~1.5 ms with the GIL released (this torch uses a generic
BLAS), so the producer holds the GIL ~1% of its time and the trainer is not also stuck on the GIL
during its step. The trainer's step is a budget of its thread CPU time too (--step-ms, at least
one MLP pass), so the ratio of the two holds when the vCPUs slow each other down. With 2+ CPUs
the trainer is pinned to CPU 0 and the producer to CPU 1 (--no-pin to let them float).

Ground truth: `with rec.seg('thread'): batch = q.get()` (CPU -> RUNNING, rest -> THREAD_WAIT)
and the training step as a 'compute' segment. Measured on the idle 2-vCPU VM: THREAD_WAIT
70-71%, RUNNING 28-30%, and wall - CPU - run_delay of the 'compute' segments ~0.03 ms a step
(0.4-0.6%: the GIL costs the step next to nothing); every wait is ended by the producer thread
(a HELPER, on-CPU nearly all the time).
Expected verdict: DATA-LOADING BOUND (thread loader).
"""
import argparse
import os
import queue
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import groundtruth  # noqa: E402
from data_bound import FEATURES, make_trainer  # noqa: E402

WORK_ROWS = 64  # rows of the producer's work tensor; a batch is its first --batch rows


def producer(torch, q, stop, batch_ms, batch, pin, started):
    """Thread body: computes batches of (x, y) worth batch_ms of thread CPU time each and puts
    them on q until stop is set. An exception is handed to the trainer instead of a batch, so
    the trainer raises rather than waiting forever."""
    try:
        if pin:
            os.sched_setaffinity(threading.get_native_id(), {1})
        started["tid"] = threading.get_native_id()
        started["event"].set()
        g = torch.Generator().manual_seed(2)
        w = torch.randn(FEATURES, FEATURES, generator=g) / 16
        budget = int(batch_ms * 1e6)
        i = 0
        while not stop.is_set():
            c0 = time.thread_time_ns()
            x = torch.full((WORK_ROWS, FEATURES), (i % 97) / 97.0)
            while time.thread_time_ns() - c0 < budget:
                x = torch.tanh(x @ w)  # the GIL is released inside both ops
            item = (x[:batch].clone(), torch.arange(i, i + batch) % 10)
            i += batch
            while not stop.is_set():  # a bounded put, so a stop request is seen
                try:
                    q.put(item, timeout=0.1)
                    break
                except queue.Full:
                    pass
    except BaseException as e:  # handed over, re-raised by the trainer
        started["event"].set()
        q.put(e)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    groundtruth.add_common_args(p)
    p.add_argument("--batch-ms", type=float, default=22.0,
                   help="producer thread CPU ms per batch (default %(default)s)")
    p.add_argument("--step-ms", type=float, default=5.5,
                   help="trainer CPU ms per step, at least one pass (default %(default)s)")
    p.add_argument("--batch", type=int, default=8,
                   help="batch size, at most %d (default %%(default)s)" % WORK_ROWS)
    p.add_argument("--width", type=int, default=256, help="trainer MLP width (default %(default)s)")
    p.add_argument("--pin", action=argparse.BooleanOptionalAction, default=os.cpu_count() >= 2,
                   help="pin the trainer to CPU 0 and the producer to CPU 1 (default: on with "
                   ">= 2 CPUs)")
    args = p.parse_args(argv)
    if not 1 <= args.batch <= WORK_ROWS:
        p.error("--batch must be 1..%d" % WORK_ROWS)
    rec = groundtruth.Recorder("thread_loader", args.truth)
    st = {"stop": threading.Event(), "q": queue.Queue(maxsize=2)}

    def next_batch():
        item = st["q"].get()
        if isinstance(item, BaseException):
            raise RuntimeError("producer thread failed") from item
        return item

    def warmup():
        import torch
        torch.set_num_threads(1)
        torch.set_num_interop_threads(1)
        if args.pin:
            os.sched_setaffinity(0, {0})
        st["train"] = make_trainer(torch, args.width, args.batch)
        started = {"event": threading.Event()}
        st["thread"] = threading.Thread(
            target=producer, name="producer", daemon=True,
            args=(torch, st["q"], st["stop"], args.batch_ms, args.batch, args.pin, started))
        st["thread"].start()
        started["event"].wait()
        for _ in range(5):
            x, y = next_batch()
            st["train"](x, y, args.step_ms)
        return {"producer_tid": started.get("tid"), "batch": args.batch,
                "producer_cpu_ms_per_batch": args.batch_ms,
                "trainer_cpu_ms_per_step": args.step_ms, "pinned": args.pin}

    def step():
        with rec.seg("thread"):
            x, y = next_batch()
        with rec.seg("compute"):
            st["train"](x, y, args.step_ms)

    def cleanup():
        st["stop"].set()
        if "thread" in st:
            st["thread"].join(5.0)

    return groundtruth.run(rec, args, warmup, step, cleanup)


if __name__ == "__main__":
    sys.exit(main())
