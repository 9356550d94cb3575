#!/usr/bin/python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""A job whose names are hostile, as any local user may choose them: its process and thread
names (prctl(PR_SET_NAME)) hold an ESC sequence, bytes that are not UTF-8, quotes, backslashes,
a tab, a newline, a C1 control and a right-to-left override; its command line (--tag) and the
path of a library it maps (--lib) may too. For tests/test_hostile_names.py: every name that
leaves pipeprof must come out escaped or replaced, never raw. --main-name names the main thread
otherwise (markup, for tests/test_html.py, which also runs a copy of this file from a path of
markup).

The main thread (the trainer: no GPU calls, so the main thread) waits in queue.get() for items
a helper thread named LOADER_NAME computes, so the verdict (a thread loader) and its
recommendation name the hostile helper; two more threads wake every few ms, so that per-thread
histograms show their names.

Prints `READY pid=<pid> tid=<tid>` once every name is set and the library is mapped; runs
--duration seconds (SIGTERM or SIGALRM end it sooner).
"""
import argparse
import ctypes
import os
import queue
import signal
import sys
import threading
import time

PR_SET_NAME = 15
# 14 bytes: fits a comm (15). The example.
MAIN_NAME = b'a"b\\c}\x1b[31m\xff\tz'
# An OSC sequence that retitles the terminal, then U+009B (CSI to an 8-bit terminal).
LOADER_NAME = b'\x1b]0;owned\x07\xc2\x9b2J'
# A newline that would forge a report line of its own.
NEWLINE_NAME = b'q\nVerdict: ok'
# Right-to-left override, a UTF-16 surrogate (not UTF-8) and half an emoji.
BIDI_NAME = b'\xe2\x80\xaeevil\xed\xa0\x80\xf0\x9f'
THREAD_NAMES = (LOADER_NAME, NEWLINE_NAME, BIDI_NAME)

libc = ctypes.CDLL(None, use_errno=True)


def set_name(name):
    """Names the calling thread (the process, from the main thread)."""
    if libc.prctl(PR_SET_NAME, ctypes.c_char_p(name), 0, 0, 0):
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NAME)")


def loader(q, started, item_ms):
    set_name(LOADER_NAME)
    started.release()
    i = 0
    while True:
        t = time.thread_time()
        while time.thread_time() - t < item_ms / 1000:
            i += 1
        q.put(i)


def napper(name, started):
    set_name(name)
    started.release()
    while True:
        t = time.monotonic()
        while time.monotonic() - t < 0.001:
            pass
        time.sleep(0.003)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=60)
    ap.add_argument("--lib", help="a shared library to map (the daemon's cue that this is a job)")
    ap.add_argument("--tag", help="unused: a hostile argument for /proc/PID/cmdline")
    ap.add_argument("--item-ms", type=float, default=20, help="loader CPU time per item")
    ap.add_argument("--main-name", type=os.fsencode,
                    help="the main thread's name (15 bytes at most) instead of MAIN_NAME")
    args = ap.parse_args()

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    signal.alarm(int(args.duration) + 30)
    set_name(args.main_name if args.main_name is not None else MAIN_NAME)
    if args.lib:
        ctypes.CDLL(os.fsencode(args.lib))
    q = queue.Queue(maxsize=2)
    started = threading.Semaphore(0)
    threading.Thread(target=loader, args=(q, started, args.item_ms), daemon=True).start()
    for name in THREAD_NAMES[1:]:
        threading.Thread(target=napper, args=(name, started), daemon=True).start()
    for _ in THREAD_NAMES:
        started.acquire()
    sys.stdout.write("READY pid=%d tid=%d\n" % (os.getpid(), threading.get_native_id()))
    sys.stdout.flush()
    deadline = time.monotonic() + args.duration
    while time.monotonic() < deadline:
        q.get()


if __name__ == "__main__":
    main()
