#!/usr/bin/python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Overhead of `pipeprof` on the data-loading scenario: steps per second untraced and traced,
alternating runs, median ratio. A benchmark, not a test: it prints figures and asserts nothing.

    sudo tools/bench/overhead.py [--runs 5] [--duration 20]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WORKLOAD = [os.path.join(REPO, "tools", "workloads", "data_bound.py")]
RATE = re.compile(r"\(([\d.]+) steps/s\)")


def steps_per_second(traced, duration):
    cmd = ["/usr/bin/python3"] + WORKLOAD + ["--duration", str(duration)]
    if traced:
        # Launched under pipeprof, the whole run after READY is traced.
        cmd = [os.path.join(REPO, "pipeprof"), "-j", "--"] + cmd
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    m = RATE.search(out.stdout + out.stderr)
    if not m:
        sys.exit(f"no steps/s in the workload's output:\n{out.stdout}\n{out.stderr}")
    return float(m.group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5, help="untraced/traced pairs (default 5)")
    ap.add_argument("--duration", type=float, default=20, help="seconds per run (default 20)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("overhead.py: run as root (pipeprof loads BPF programs)")

    untraced, traced, ratios = [], [], []
    for i in range(args.runs):
        # Alternate which goes first so drift in the machine's state hits both sides.
        order = (False, True) if i % 2 == 0 else (True, False)
        pair = {}
        for t in order:
            pair[t] = steps_per_second(t, args.duration)
        untraced.append(pair[False])
        traced.append(pair[True])
        ratios.append(pair[True] / pair[False])
        print(f"run {i + 1}: untraced {pair[False]:.2f} steps/s, traced {pair[True]:.2f} steps/s, "
              f"ratio {ratios[-1]:.4f}", flush=True)
    med = statistics.median(ratios)
    print(f"median untraced {statistics.median(untraced):.2f} steps/s, traced "
          f"{statistics.median(traced):.2f} steps/s, median ratio {med:.4f} "
          f"(overhead {100 * (1 - med):.2f}%)")


if __name__ == "__main__":
    main()
