#!/usr/bin/python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Workers that do not outlive the window: the main process forks a child every --every-ms
that burns --burn-ms of CPU in child_burn() and exits, as DataLoader workers without
persistent_workers do at each epoch's end. Their samples must keep their names although no
worker is alive when the window closes (pipeprof names frames as they come).

Prints READY pid=PID once the loop runs; stops after --duration seconds or on SIGTERM.
"""
import argparse
import os
import signal
import sys
import time


def child_burn(seconds):
    end = time.thread_time() + seconds
    x = 0
    while time.thread_time() < end:
        x += 1
    return x


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--duration", type=float, default=60)
    p.add_argument("--every-ms", type=float, default=500)
    p.add_argument("--burn-ms", type=float, default=300)
    args = p.parse_args()
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    deadline = time.monotonic() + args.duration
    print("READY pid=%d" % os.getpid(), flush=True)
    while not stop and time.monotonic() < deadline:
        t0 = time.monotonic()
        pid = os.fork()
        if pid == 0:
            child_burn(args.burn_ms / 1e3)
            os._exit(0)
        os.waitpid(pid, 0)
        time.sleep(max(0.0, args.every_ms / 1e3 - (time.monotonic() - t0)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
