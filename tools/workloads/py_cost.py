#!/usr/bin/env python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Python functions of known CPU cost, for pipeprof's "where" section and folded stacks.

The trainer (this process's main thread) and one forked worker process each loop over three
functions that spin until their thread has used a fixed budget of CPU time (time.thread_time,
not sleeps): the worker spends 60%, 30% and 10% of its CPU in worker_hot, worker_warm and
worker_cool; the trainer 70% and 30% in trainer_hot and trainer_cool. Those are the shares a
sampler must find for each role's innermost Python function. Pure Python, so any CPython 3
runs it.

SIGUSR1 to the trainer moves it to trainer_after alone from then on (and prints `SWITCHED
<CLOCK_MONOTONIC ns>`): the share of the window after that, in a report that keeps a draw of
its samples, tells whether the draw is uniform over the window.

    python3 py_cost.py [--duration SECS] [--unit-ms MS]

Prints `READY pid=<pid> worker=<pid>`; SIGTERM ends both processes.
"""
import argparse
import os
import signal
import sys
import time


# Each spins in its own body, so that it is the innermost Python frame of its samples.
def worker_hot(unit):
    end = time.thread_time() + 6 * unit
    while time.thread_time() < end:
        pass


def worker_warm(unit):
    end = time.thread_time() + 3 * unit
    while time.thread_time() < end:
        pass


def worker_cool(unit):
    end = time.thread_time() + 1 * unit
    while time.thread_time() < end:
        pass


def trainer_hot(unit):
    end = time.thread_time() + 7 * unit
    while time.thread_time() < end:
        pass


def trainer_cool(unit):
    end = time.thread_time() + 3 * unit
    while time.thread_time() < end:
        pass


def trainer_after(unit):
    end = time.thread_time() + 10 * unit
    while time.thread_time() < end:
        pass


switched = []


def loop(funcs, unit, deadline):
    while time.monotonic() < deadline:
        for f in (trainer_after,) if switched else funcs:
            f(unit)


def switch(*_):
    if not switched:
        switched.append(time.monotonic_ns())
        print("SWITCHED %d" % switched[0], flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=600)
    ap.add_argument("--unit-ms", type=float, default=1.0)
    args = ap.parse_args()
    deadline = time.monotonic() + args.duration
    worker = os.fork()
    if worker == 0:
        signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
        loop((worker_hot, worker_warm, worker_cool), args.unit_ms / 1e3, deadline)
        os._exit(0)

    def stop(*_):
        os.kill(worker, signal.SIGTERM)
        os.waitpid(worker, 0)
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGUSR1, switch)
    print("READY pid=%d worker=%d" % (os.getpid(), worker), flush=True)
    loop((trainer_hot, trainer_cool), args.unit_ms / 1e3, deadline)
    stop()


if __name__ == "__main__":
    main()
