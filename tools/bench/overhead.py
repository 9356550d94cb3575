#!/usr/bin/python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Overhead of `pipeprof` on the data-loading scenario: steps per second untraced and traced,
alternating runs, median ratio. A benchmark, not a test: it prints figures and asserts nothing.

One more traced run then turns on the kernel's BPF run-time statistics
(kernel.bpf_stats_enabled, restored afterwards) for the CPU time pipeprof's programs took: it
resolves costs far below what a steps/s comparison can.

    sudo tools/bench/overhead.py [--runs 7] [--duration 20]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WORKLOAD = [os.path.join(REPO, "tools", "workloads", "data_bound.py")]
RATE = re.compile(r"\(([\d.]+) steps/s\)")
BPF_STATS = "/proc/sys/kernel/bpf_stats_enabled"


def run_workload(traced, duration):
    """Steps/s of one run, and pipeprof's JSON report when traced (else None)."""
    cmd = ["/usr/bin/python3"] + WORKLOAD + ["--duration", str(duration)]
    if traced:
        # Launched under pipeprof, the whole run after READY is traced.
        cmd = [os.path.join(REPO, "pipeprof"), "-j", "--"] + cmd
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    m = RATE.search(out.stderr)
    if not m:
        sys.exit(f"no steps/s in the workload's output:\n{out.stdout}\n{out.stderr}")
    report = None
    if traced:
        # The workload's own lines come first on stdout; the report is printed after it ends.
        start = out.stdout.find("{\n")
        report = json.loads(out.stdout[start:]) if start >= 0 else None
        if not report:
            sys.exit(f"no JSON report on pipeprof's stdout:\n{out.stdout}")
    return float(m.group(1)), report


def bpf_cost(duration):
    with open(BPF_STATS) as f:
        before = f.read().strip()
    try:
        with open(BPF_STATS, "w") as f:
            f.write("1")
        rate, report = run_workload(True, duration)
    finally:
        with open(BPF_STATS, "w") as f:
            f.write(before)
    c, secs = report["counters"], report["window"]["seconds"]
    runs = c["bpf_run_count"]
    print(f"BPF programs (stats on, {rate:.3f} steps/s): {runs} runs in {secs:.1f} s "
          f"({runs / secs:.0f}/s), {c['bpf_run_ns'] / max(runs, 1):.0f} ns each, "
          f"{100 * c['bpf_run_ns'] / (secs * 1e9):.3f}% of one CPU; "
          f"{c['sched_switch_events'] / secs:.0f} sched_switch/s in the tracked set")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7, help="untraced/traced pairs (default 7)")
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
            pair[t] = run_workload(t, args.duration)[0]
        untraced.append(pair[False])
        traced.append(pair[True])
        ratios.append(pair[True] / pair[False])
        print(f"run {i + 1}: untraced {pair[False]:.3f} steps/s, traced {pair[True]:.3f} steps/s, "
              f"ratio {ratios[-1]:.4f}", flush=True)
    med = statistics.median(ratios)
    print(f"median untraced {statistics.median(untraced):.3f} steps/s, traced "
          f"{statistics.median(traced):.3f} steps/s, median ratio {med:.4f} "
          f"(overhead {100 * (1 - med):.2f}%)", flush=True)
    bpf_cost(args.duration)


if __name__ == "__main__":
    main()
