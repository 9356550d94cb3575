#!/usr/bin/python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""One side of two unrelated processes that hand a byte back and forth over a pair of FIFOs,
both pinned to one CPU: nearly every context switch on that CPU goes from one to the other.
Each maps --lib (a library the daemon takes for a training job's), so the daemon traces them as
two jobs, and every switch crosses from one job's task to the other's.

    pipe_pair.py --lib LIB --dir DIR --side a|b|forked [--duration S] [--cpu N]

Side a creates the FIFOs in DIR and serves first; start it before b. Prints READY pid=PID
once its FIFOs are open (so after the other side started too), then `ROUNDS n` at the end.
--side forked: one process (one job) prints READY pid=PID, waits for a file named `go` in DIR,
then forks the two sides as its children, which ping-pong over pipes: processes that exist
only after whatever traces the job attached.
"""
import argparse
import ctypes
import os
import signal
import time


def ping_pong(inp, out, serve, end):
    rounds = 0
    if serve:
        os.write(out, b"x")
    while True:
        c = os.read(inp, 1)
        if not c:
            break
        rounds += 1
        if serve and time.monotonic() > end:
            break
        os.write(out, c)
    os.close(out)
    return rounds


def forked(a):
    print("READY pid=%d" % os.getpid(), flush=True)
    go = os.path.join(a.dir, "go")
    while not os.path.exists(go):
        time.sleep(0.05)
    a2b, b2a = os.pipe(), os.pipe()
    end, children = time.monotonic() + a.duration, []
    for serve in (True, False):
        pid = os.fork()
        if pid == 0:
            inp, out = (b2a[0], a2b[1]) if serve else (a2b[0], b2a[1])
            for fd in a2b + b2a:
                if fd not in (inp, out):
                    os.close(fd)
            os._exit(0 if ping_pong(inp, out, serve, end) else 1)
        children.append(pid)
    for fd in a2b + b2a:
        os.close(fd)
    for pid in children:
        os.waitpid(pid, 0)
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lib", required=True)
    p.add_argument("--dir", required=True)
    p.add_argument("--side", choices=("a", "b", "forked"), required=True)
    p.add_argument("--duration", type=float, default=30.0)
    p.add_argument("--cpu", type=int, default=0)
    a = p.parse_args()
    signal.alarm(int(a.duration) + 60)
    ctypes.CDLL(a.lib)
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {a.cpu})
    if a.side == "forked":
        return forked(a)
    a2b, b2a = os.path.join(a.dir, "a2b"), os.path.join(a.dir, "b2a")
    if a.side == "a":
        for f in (a2b, b2a):
            if not os.path.exists(f):
                os.mkfifo(f)
        out, inp = os.open(a2b, os.O_WRONLY), os.open(b2a, os.O_RDONLY)
    else:
        inp, out = os.open(a2b, os.O_RDONLY), os.open(b2a, os.O_WRONLY)
    print("READY pid=%d" % os.getpid(), flush=True)
    rounds = ping_pong(inp, out, a.side == "a", time.monotonic() + a.duration)
    print("ROUNDS %d" % rounds, flush=True)


if __name__ == "__main__":
    main()
