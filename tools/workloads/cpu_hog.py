#!/usr/bin/python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""A CPU hog: one process that spins on-CPU until killed or --duration runs out.

Used by the contention scenario. Start it separately from the trainer (not as a child of it):
pipeprof counts the trainer's descendants as DataLoader workers.
"""
import argparse
import os
import sys
import time


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--duration", type=float, default=0, help="seconds to spin; 0 = until killed")
    p.add_argument("--nice", type=int, default=0, help="nice increment (default %(default)s)")
    args = p.parse_args(argv)
    if args.nice:
        os.nice(args.nice)
    sys.stdout.write("READY pid=%d\n" % os.getpid())
    sys.stdout.flush()
    end = time.monotonic() + args.duration if args.duration > 0 else None
    x = 0
    while True:
        for _ in range(100000):
            x = (x * 1103515245 + 12345) & 0x7FFFFFFF
        if end is not None and time.monotonic() >= end:
            return 0


if __name__ == "__main__":
    sys.exit(main())
