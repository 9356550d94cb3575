#!/usr/bin/env python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""How long `pipeprof -p PID` takes to attach: wall time from exec to its "tracing" line, and the
CPU time it has used by then (its own /proc stat, user + system). Several rounds on one running
target; prints each round and the median.

    sudo tools/bench/attach_time.py --pid PID [--rounds 7]
    sudo tools/bench/attach_time.py            # starts tools/workloads/gpu.py (torch + fake CUDA)
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PIPEPROF = os.path.join(ROOT, "pipeprof")
HZ = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / HZ


def one_attach(pid, extra):
    started = time.monotonic()
    p = subprocess.Popen([PIPEPROF, "-p", str(pid), "-d", "0.3"] + extra,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    line = p.stderr.readline()
    wall = time.monotonic() - started
    cpu = cpu_seconds(p.pid)
    p.stderr.read()
    rc = p.wait()
    if "tracing" not in line or rc:
        sys.exit("attach failed (rc %d): %s" % (rc, line))
    return wall, cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pid", type=int)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    workload = None
    pid = args.pid
    if not pid:
        workload = subprocess.Popen(["/usr/bin/python3", os.path.join(ROOT, "tools/workloads/gpu.py"),
                                     "--duration", "300"], stdout=subprocess.PIPE, text=True,
                                    cwd=ROOT)
        for line in workload.stdout:
            if line.startswith("READY"):
                pid = int(line.split()[1].split("=")[1])
                break
    try:
        walls, cpus = [], []
        for i in range(args.rounds):
            wall, cpu = one_attach(pid, [])
            walls.append(wall)
            cpus.append(cpu)
            print("round %d: attach %.0f ms wall, %.0f ms CPU" % (i + 1, wall * 1e3, cpu * 1e3))
            time.sleep(0.5)
        print("median: attach %.0f ms wall, %.0f ms CPU (%d rounds)" % (
            statistics.median(walls) * 1e3, statistics.median(cpus) * 1e3, args.rounds))
    finally:
        if workload:
            workload.kill()
            workload.wait()


if __name__ == "__main__":
    main()
