#!/usr/bin/python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""A trainer that waits for each batch with what remains of its step's deadline.

A worker process makes each batch in --item-ms (asleep, as one blocked on storage) once the
trainer asks for it, and sends it over a pipe. The trainer asks, computes for --work-ms, then
polls the pipe for what remains of --timeout since the step began (poll(fds, 1, timeout less
the compute), rounded up to milliseconds as Python's selectors do) and, when that times out,
polls again at once for the whole --timeout, as a loader with a watchdog does. With --item-ms
above --timeout each batch is a chain of waits that time out and a last one the worker ends,
the first of them with a shorter timeout than the rest: all of it is the worker's ('data',
DATA_WAIT). Compared by their exact timeouts, the first wait and its retry were two calls,
and that wait read as OTHER.
"""
import argparse
import multiprocessing as mp
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import groundtruth  # noqa: E402


def spin(seconds):
    """seconds of this thread's CPU."""
    t = time.thread_time()
    while time.thread_time() - t < seconds:
        pass


def worker(conn, item_s):
    while True:
        try:
            if conn.recv() is None:
                return
        except EOFError:
            return
        time.sleep(item_s)
        conn.send(b"batch")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    groundtruth.add_common_args(p)
    p.add_argument("--item-ms", type=float, default=2500.0,
                   help="the worker's time per batch (default %(default)s)")
    p.add_argument("--work-ms", type=float, default=50.0,
                   help="the trainer's compute per step, taken from its deadline "
                   "(default %(default)s)")
    p.add_argument("--timeout", type=float, default=1.0,
                   help="the wait's timeout in seconds (default %(default)s)")
    args = p.parse_args(argv)
    rec = groundtruth.Recorder("deadline_loader", args.truth)
    conn, child = mp.Pipe()
    proc = mp.Process(target=worker, args=(child, args.item_ms / 1000.0), daemon=True)

    def step():
        deadline = time.monotonic() + args.timeout
        conn.send(True)
        with rec.seg("compute"):
            spin(args.work_ms / 1000.0)
        with rec.seg("data"):
            remaining = deadline - time.monotonic()
            while not conn.poll(max(remaining, 0.001)):
                remaining = args.timeout
            conn.recv()

    def warmup():
        proc.start()
        step()
        return {"worker_pid": proc.pid, "item_ms": args.item_ms, "work_ms": args.work_ms,
                "timeout_s": args.timeout}

    def cleanup():
        try:
            conn.send(None)
        except OSError:
            pass
        proc.join(5)

    return groundtruth.run(rec, args, warmup, step, cleanup)


if __name__ == "__main__":
    sys.exit(main())
