#!/usr/bin/python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""A trainer whose waits begin DEPTH Python calls deep, each a function of its own: chain_0
calls chain_1 ... calls wait_here, which reads a pipe a writer thread feeds every 0.2 ms. The
frames differ in size (0-12 locals), chain_20 runs chain_21 inside a generator (a frame that
lives in the generator object, not on the thread's data stack) and chain_40 reaches chain_41
through map() (a call back into Python from C: 3.12+ push a C-stack shim frame there).

With 70 calls the stack holds more than the walker keeps (64 frames) and, on 3.11+, more than
its one read of the data stack's top covers: what a wait's stack must show is the innermost
part of chain_0 ... wait_here, in order, whichever way each frame was read (tests/test_pystack.py).
--feed-depth N: the writer writes from write_one, N calls of feed_down deep, so that a wait's
record holds a full stack and then its waker's.
Works with any CPython 3; no third-party module.
"""
import argparse
import os
import threading
import time

GENERATOR_AT, FROM_C_AT = 20, 40


def chain_source(depth):
    """The chain's functions as source: chain_i calls chain_{i+1}, the last calls wait_here."""
    parts = []
    for i in range(depth):
        callee = "wait_here()" if i == depth - 1 else "chain_%d()" % (i + 1)
        body = "".join("    local_%d = %d\n" % (j, j) for j in range(i % 13))
        if i == GENERATOR_AT:
            parts.append("def step_%d():\n%s    yield %s\n" % (i, body, callee))
            parts.append("def chain_%d():\n    return next(step_%d())\n" % (i, i))
        elif i == FROM_C_AT:
            parts.append("def chain_%d():\n%s    return list(map(lambda _: %s, [0]))\n"
                         % (i, body, callee))
        else:
            parts.append("def chain_%d():\n%s    return %s\n" % (i, body, callee))
    return "".join(parts)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--depth", type=int, default=70, help="calls before the wait (default 70)")
    ap.add_argument("--duration", type=float, default=60.0, help="seconds to run (default 60)")
    ap.add_argument("--feed-depth", type=int, default=0,
                    help="calls of feed_down the writer writes from (default 0)")
    args = ap.parse_args()
    reader, writer = os.pipe()
    deadline = time.monotonic() + args.duration

    def write_one():
        os.write(writer, b"x")

    def feed_down(n):
        return write_one() if n <= 0 else feed_down(n - 1)

    def feed():
        while time.monotonic() < deadline:
            feed_down(args.feed_depth)
            time.sleep(0.0002)
        os.close(writer)

    def wait_here():
        while os.read(reader, 1):
            pass

    scope = {"wait_here": wait_here}
    exec(compile(chain_source(args.depth), "deep_chain_calls.py", "exec"), scope)
    threading.Thread(target=feed, daemon=True).start()
    print("READY pid=%d" % os.getpid(), flush=True)
    scope["chain_0"]()


if __name__ == "__main__":
    main()
