#!/usr/bin/python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Two or more pipeprof builds side by side on one running workload: each build attaches in
turn (`BUILD -p PID -d WINDOW`), round after round, and each program's run time and run count
are read from the kernel's BPF statistics over the middle of its window. Medians of ns per run
per build. Interleaving is what makes a difference of 5-10% visible on a host whose speed drifts
by more than that within minutes.

  sudo tools/bench/prog_ab.py --pid 1234 --rounds 6 ./pipeprof /tmp/pipeprof.old

Each build gets an attach cache of its own (PIPEPROF_CACHE_DIR), so neither reads the other's.
Needs root and bpftool; the kernel's BPF statistics are on while it runs."""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import unrelated_cost as uc  # noqa: E402  (enable_stats, wait_attached, prog_stats, delta)

PROGRAMS = ("on_sched_switch", "on_sched_waking", "on_sched_wakeup")


def one_window(build, pid, window, measure, names, cache):
    """ns per run of each program over `measure` seconds of one attach of build, from its own
    programs' statistics once every probe is in."""
    env = dict(os.environ, PIPEPROF_CACHE_DIR=cache)
    p = subprocess.Popen([build, "-p", str(pid), "-d", str(window)], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True, env=env)
    ids = uc.wait_attached(p)
    before = uc.prog_stats(ids)
    time.sleep(measure)
    after = uc.prog_stats(ids)
    _, err = p.communicate()
    if p.returncode:
        sys.exit("prog_ab.py: %s exited %d: %s" % (build, p.returncode, err.strip()[-500:]))
    return {name: ns / cnt for name, ns, cnt in uc.delta(before, after).values()
            if name in names and cnt > 0}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("builds", nargs="+", help="pipeprof binaries, two or more")
    ap.add_argument("--pid", type=int, required=True, help="the running workload to attach to")
    ap.add_argument("--rounds", type=int, default=5, help="rounds (default 5)")
    ap.add_argument("--window", type=float, default=6, help="each attach's -d (default 6)")
    ap.add_argument("--programs", default=",".join(PROGRAMS),
                    help="comma-separated program names (default the scheduler's three)")
    args = ap.parse_args()
    if len(args.builds) < 2:
        ap.error("two or more builds to compare")
    if args.window < 3:
        ap.error("--window must be at least 3 s")
    if os.geteuid():
        sys.exit("prog_ab.py: run as root (BPF statistics, and pipeprof itself)")
    for b in args.builds:
        if not os.access(b, os.X_OK):
            sys.exit("prog_ab.py: %s is not an executable" % b)
    try:
        os.kill(args.pid, 0)
    except OSError:
        sys.exit("prog_ab.py: no such process: %d" % args.pid)
    names = tuple(n for n in args.programs.split(",") if n)
    res = {b: {n: [] for n in names} for b in args.builds}
    caches = {b: tempfile.mkdtemp(prefix="prog_ab.") for b in args.builds}
    restore = uc.enable_stats()
    try:
        for r in range(args.rounds):
            for b in args.builds:
                got = one_window(b, args.pid, args.window, args.window - 2, names, caches[b])
                for n, v in got.items():
                    res[b][n].append(v)
                print("round %d %s: %s" % (r + 1, b, ", ".join(
                    "%s %.0f" % (n, v) for n, v in sorted(got.items()))), flush=True)
    finally:
        restore()
        for c in caches.values():
            shutil.rmtree(c, ignore_errors=True)
    print("\nmedian ns per run over %d rounds:" % args.rounds)
    print("%-40s %s" % ("build", " ".join("%16s" % n for n in names)))
    for b in args.builds:
        print("%-40s %s" % (b[-40:], " ".join(
            "%16s" % ("%.0f" % statistics.median(res[b][n]) if res[b][n] else "-")
            for n in names)))


if __name__ == "__main__":
    main()
