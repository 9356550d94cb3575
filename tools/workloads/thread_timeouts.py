#!/usr/bin/python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""A trainer fed by a Python thread, through waits with timeouts: futex waits that time out.

The producer thread makes each batch with --item-ms of its own CPU in pure Python, so it holds
the GIL all the while (the trainer takes it back only when the interpreter hands it over:
a 5 ms timed wait on the GIL's condition, then its mutex, which the producer unlocks).

--mode retry: the trainer waits in `q.get(timeout=--timeout)` and, when it times out, at once
again, as a loop with a stop check does. With --item-ms above --timeout each batch is a chain
of waits that time out, the GIL taken back between them, and a last one the producer ends: all
of it is the producer's (a 'thread' segment, THREAD_WAIT).

--mode pause: the trainer pauses in `stop.wait(--pause-ms)` (an interruptible sleep: a wait on
a lock with a deadline that times out; an 'other' segment, OTHER), then waits in `q.get()` (on
another lock, with no timeout; a 'thread' segment) for the batch the producer, busy all the
time, makes into a queue of one. With --item-ms twice --pause-ms, half of each step is the
pause and half the wait. The pause is no timed-out wait retried, however soon the batch's wait
follows it.

--trainer-thread: the trainer is a thread of its own, the main thread only joins it (and takes
the signals, which only it may handle), as in jobs that train from a worker thread. READY names
the trainer's tid, for pipeprof's --tid.
"""
import argparse
import os
import queue
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import groundtruth  # noqa: E402


def spin(seconds):
    """seconds of this thread's CPU in Python bytecode: the GIL held throughout."""
    t = time.thread_time()
    while time.thread_time() - t < seconds:
        pass


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    groundtruth.add_common_args(p)
    p.add_argument("--mode", choices=("retry", "pause"), default="retry")
    p.add_argument("--item-ms", type=float, default=2500.0,
                   help="producer CPU ms per batch (default %(default)s)")
    p.add_argument("--timeout", type=float, default=1.0,
                   help="retry: q.get's timeout in seconds (default %(default)s)")
    p.add_argument("--pause-ms", type=float, default=100.0,
                   help="pause: stop.wait's timeout (default %(default)s)")
    p.add_argument("--pin", action=argparse.BooleanOptionalAction, default=os.cpu_count() >= 2,
                   help="pin the trainer to CPU 0 and the producer to CPU 1 (default: on with "
                   ">= 2 CPUs)")
    p.add_argument("--trainer-thread", action="store_true",
                   help="train in a thread of its own, not the main thread")
    args = p.parse_args(argv)
    if not args.trainer_thread:
        return train(args)
    made, done = threading.Event(), {}

    def trainer():
        try:
            done["rc"] = train(args, lambda rec: (done.update(rec=rec), made.set()))
        finally:
            made.set()  # a trainer that failed first must not leave main waiting

    t = threading.Thread(target=trainer, name="trainer")
    t.start()
    made.wait()
    if "rec" in done:
        done["rec"].install_signal_handlers()
    t.join()
    return done.get("rc", 1)


def train(args, made=None):
    """The training loop, in the calling thread: its Recorder's (made() is handed it first)."""
    rec = groundtruth.Recorder("thread_timeouts_" + args.mode, args.truth)
    if made is not None:
        made(rec)
    q, stop = queue.Queue(maxsize=1), threading.Event()
    started = {}

    def producer():
        if args.pin:
            os.sched_setaffinity(threading.get_native_id(), {1})
        started["tid"] = threading.get_native_id()
        while not stop.is_set():
            spin(args.item_ms / 1000.0)
            while not stop.is_set():
                try:
                    q.put(1, timeout=0.1)
                    break
                except queue.Full:
                    pass

    def next_batch():
        if args.mode == "pause":
            return q.get()
        while True:
            try:
                return q.get(timeout=args.timeout)
            except queue.Empty:
                if stop.is_set():
                    raise

    def step():
        if args.mode == "pause":
            with rec.seg("other"):
                stop.wait(args.pause_ms / 1000.0)
        with rec.seg("thread"):
            next_batch()

    def warmup():
        if args.pin:
            os.sched_setaffinity(0, {0})
        threading.Thread(target=producer, name="producer", daemon=True).start()
        step()
        return {"producer_tid": started.get("tid"), "mode": args.mode, "item_ms": args.item_ms,
                "timeout_s": args.timeout, "pause_ms": args.pause_ms, "pinned": args.pin}

    def cleanup():
        stop.set()

    return groundtruth.run(rec, args, warmup, step, cleanup)


if __name__ == "__main__":
    sys.exit(main())
