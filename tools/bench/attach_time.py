#!/usr/bin/env python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""How long `pipeprof -p PID` takes to attach: wall time from exec to its "tracing" line, the
CPU time it has used by then (its threads' schedstat, in ns: /proc stat counts 10 ms ticks), its
peak RSS by then (VmHWM), and the peak RSS of its whole run (VmHWM read every 5 ms until it
exits). Not the kernel's rusage of the child: a child forked from this script carries the
script's own resident size into its peak (the kernel keeps the larger of the image it had
before exec and the one after), which hid pipeprof's figure under Python's (~15 MB). bpftool,
which a cold run starts once a boot to cache the CO-RE types, is not counted. Several rounds
on one running target; prints each round and the medians. Warm: with the attach cache
(/var/cache/pipeprof) as it is, which the first round fills; --cold gives every round an
empty cache directory of its own, as on a machine's first run.

    sudo tools/bench/attach_time.py --pid PID [--rounds 7] [--cold]
    sudo tools/bench/attach_time.py            # starts tools/workloads/gpu.py (torch + fake CUDA)
    sudo tools/bench/attach_time.py --hist step   # `pipeprof hist step`: reads libtorch_cpu too
    sudo tools/bench/attach_time.py --pid PID --rounds 1 --trace 60   # a minute's peak RSS

--trace sets the report's window (0.3 s by default): with a long one, the whole run's peak RSS
is what holding a minute of samples, waits and steps costs.

--bpf-calls runs pipeprof with .output/bench/bpf_calls.so preloaded (`make bench-attach`
builds it) and adds, per round and as medians, the CPU time its bpf() calls took to create the
maps, load the programs and create the links: where an attach's kernel time goes, by the
calling thread's clock. The shim's own cost is two clock reads a call.
"""
import argparse
import os
import shutil
import tempfile
import statistics
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PIPEPROF = os.path.join(ROOT, "pipeprof")
BPF_CALLS_SO = os.path.join(ROOT, ".output", "bench", "bpf_calls.so")
# bpf() commands (include/uapi/linux/bpf.h) the attach spends its kernel time in.
BPF_CMDS = {0: "maps", 5: "programs", 28: "links"}


def cpu_seconds(pid):
    total = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
            total += int(f.read().split()[0])
    return total / 1e9


def peak_rss_mb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def read_bpf_calls(path):
    """ms of CPU per name of BPF_CMDS from the shim's file (none where it wrote nothing)."""
    ms = {name: 0.0 for name in BPF_CMDS.values()}
    try:
        with open(path) as f:
            for line in f:
                _, cmd, _, ns = line.split()
                if int(cmd) in BPF_CMDS:
                    ms[BPF_CMDS[int(cmd)]] = int(ns) / 1e6
    except FileNotFoundError:
        sys.exit("the bpf() shim wrote nothing: is %s pipeprof's, dynamically linked?" % path)
    return ms


def one_attach(pipeprof, pid, hist, env, trace_s):
    cmd = [pipeprof, "hist", "-p", str(pid)] + hist.split() + ["1", "1"] if hist else \
          [pipeprof, "-p", str(pid), "-d", "%g" % trace_s]
    started = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    line = p.stderr.readline()
    wall = time.monotonic() - started
    cpu = cpu_seconds(p.pid)
    attach_rss = run_rss = peak_rss_mb(p.pid)
    drain = threading.Thread(target=p.stderr.read, daemon=True)
    drain.start()
    while p.poll() is None:
        try:
            run_rss = max(run_rss, peak_rss_mb(p.pid))
        except OSError:  # exited between the poll and the read
            break
        time.sleep(0.005)
    rc = p.wait()
    drain.join()
    if "tracing" not in line or rc:
        sys.exit("attach failed (rc %d): %s" % (rc, line))
    return wall, cpu, attach_rss, run_rss


def bpf_calls_text(calls, index):
    """'; bpf() CPU ms: maps M, programs P, links L' for one round (index) or the medians."""
    if not any(calls.values()):
        return ""
    pick = (lambda v: v[index]) if index is not None else statistics.median
    return "; bpf() CPU ms: " + ", ".join("%s %.1f" % (name, pick(v)) for name, v in calls.items())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pid", type=int)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--cold", action="store_true", help="an empty attach cache every round")
    ap.add_argument("--hist", default="", help="time `pipeprof hist KINDS` instead of the report")
    ap.add_argument("--pipeprof", default=PIPEPROF, help="the binary (another build, to compare)")
    ap.add_argument("--trace", type=float, default=0.3,
                    help="seconds the report traces after the attach (default 0.3)")
    ap.add_argument("--bpf-calls", action="store_true",
                    help="the CPU time of its bpf() calls by command (%s)" % BPF_CALLS_SO)
    args = ap.parse_args()
    if args.bpf_calls and not os.path.exists(BPF_CALLS_SO):
        sys.exit("%s is missing: `make bench-attach` builds it" % BPF_CALLS_SO)
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
        walls, cpus, rsss, run_rsss = [], [], [], []
        calls = {name: [] for name in BPF_CMDS.values()}
        for i in range(args.rounds):
            env = dict(os.environ)
            cold = tempfile.mkdtemp(prefix="pipeprof-cold-") if args.cold else None
            if cold:
                env["PIPEPROF_CACHE_DIR"] = os.path.join(cold, "cache")
            scratch = tempfile.mkdtemp(prefix="pipeprof-bpf-calls-") if args.bpf_calls else None
            if scratch:
                env["LD_PRELOAD"] = BPF_CALLS_SO
                env["PIPEPROF_BENCH_BPF_CALLS"] = os.path.join(scratch, "calls")
            try:
                wall, cpu, rss, run_rss = one_attach(args.pipeprof, pid, args.hist, env, args.trace)
                if scratch:
                    for name, ms in read_bpf_calls(os.path.join(scratch, "calls")).items():
                        calls[name].append(ms)
            finally:
                if cold:
                    shutil.rmtree(cold)
                if scratch:
                    shutil.rmtree(scratch)
            walls.append(wall)
            cpus.append(cpu)
            rsss.append(rss)
            run_rsss.append(run_rss)
            print("round %d: attach %.1f ms wall, %.1f ms CPU, peak RSS %.1f MB (whole run %.1f), "
                  "load %.2f%s" % (i + 1, wall * 1e3, cpu * 1e3, rss, run_rss, os.getloadavg()[0],
                                   bpf_calls_text(calls, -1)))
            time.sleep(0.5)
        print("median: attach %.1f ms wall, %.1f ms CPU, peak RSS %.1f MB (whole run %.1f) "
              "(%d rounds, %s cache%s)" % (
            statistics.median(walls) * 1e3, statistics.median(cpus) * 1e3,
            statistics.median(rsss), statistics.median(run_rsss), args.rounds,
            "cold" if args.cold else "warm",
            ", hist " + args.hist if args.hist else "") + bpf_calls_text(calls, None))
    finally:
        if workload:
            workload.kill()
            workload.wait()


if __name__ == "__main__":
    main()
