#!/usr/bin/python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""What `pipeprof daemon` costs with 0, 1 and 4 traced jobs (or --jobs 1,8,32): its own CPU
(user + system, from /proc/PID/stat), its RSS at the start and end of the measured span, and
its BPF programs' run time (pipeprof_bpf_run_seconds_total, which the daemon reads from the
kernel's BPF statistics). Per context switch of the host (/proc/stat's ctxt): the scheduler
programs' runs and run time, summed over every loaded copy of `on_sched_switch` (bpftool's
statistics), which is what one BPF object per job makes grow with the jobs. A benchmark, not
a test: it prints figures and asserts nothing.

Each job is tools/workloads/demo_train.py (a real DataLoader training loop) run by
/usr/bin/python3 through a symlink with its own command name, so `--match` picks the jobs and
nothing else on the machine. The daemon starts first; the span is measured once every job is
attached and has had one window.

    sudo tools/bench/daemon_cost.py [--jobs 0,1,4] [--measure 60] [--window 10]
"""
import argparse
import json
import os
import re
import select
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PIPEPROF = os.path.join(REPO, "pipeprof")
WORKLOAD = os.path.join(REPO, "tools", "workloads", "demo_train.py")
COMM = "ppbench"
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_s(pid):
    """utime + stime of the whole process, seconds."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        return int(re.search(r"^VmRSS:\s+(\d+)", f.read(), re.M).group(1))


def context_switches():
    with open("/proc/stat") as f:
        return int(re.search(r"^ctxt (\d+)$", f.read(), re.M).group(1))


def sched_switch_stats():
    """(runs, run ns) summed over every loaded program named on_sched_switch; None without
    bpftool. The kernel's statistics are on while the daemon runs (it turns them on)."""
    try:
        out = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True,
                             timeout=60).stdout
        progs = json.loads(out or "[]")
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return None
    mine = [x for x in progs if x.get("name") == "on_sched_switch"]
    return (sum(x.get("run_cnt", 0) for x in mine), sum(x.get("run_time_ns", 0) for x in mine),
            len(mine))


def metric(port, name):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10) as r:
        text = r.read().decode()
    m = re.search(r"^%s(?:\{[^}]*\})? (\S+)$" % re.escape(name), text, re.M)
    return float(m.group(1)) if m else None


def read_lines(p, pattern, timeout, log):
    """Reads p's stderr until a line matches pattern; returns the match or None."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r, _, _ = select.select([p.stderr], [], [], 0.5)
        if not r:
            continue
        line = p.stderr.readline()
        if not line:
            return None
        log.append(line.rstrip())
        m = re.search(pattern, line)
        if m:
            return m
    return None


def measure(n_jobs, span, window, python):
    log, jobs = [], []
    d = subprocess.Popen([PIPEPROF, "daemon", "--listen", "127.0.0.1:0", "--match",
                          "^%s$" % COMM, "--window", str(window)],
                         stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    try:
        m = read_lines(d, r"listening on [\d.]+:(\d+)", 30, log)
        if not m:
            sys.exit("the daemon did not start:\n" + "\n".join(log))
        port = int(m.group(1))
        for _ in range(n_jobs):
            jobs.append(subprocess.Popen([python, WORKLOAD, "--duration", str(span + 120)],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        attached = 0
        while attached < n_jobs:
            if not read_lines(d, r"attached PID", 180, log):
                sys.exit("only %d of %d jobs attached:\n%s" % (attached, n_jobs, "\n".join(log)))
            attached += 1
        time.sleep(window + 2)     # every job through its first window
        run0 = metric(port, "pipeprof_bpf_run_seconds_total") or 0.0
        sw0, ctxt0 = sched_switch_stats(), context_switches()
        cpu0, rss0, t0 = cpu_s(d.pid), rss_kb(d.pid), time.monotonic()
        time.sleep(span)
        cpu1, rss1, t1 = cpu_s(d.pid), rss_kb(d.pid), time.monotonic()
        sw1, ctxt1 = sched_switch_stats(), context_switches()
        run1 = metric(port, "pipeprof_bpf_run_seconds_total") or 0.0
        lost = metric(port, "pipeprof_events_lost_total")
        wall = t1 - t0
        print("%d job(s): daemon CPU %.3f s in %.0f s = %.2f%% of one CPU; RSS %d -> %d kB; "
              "BPF programs %.3f s = %.2f%% of one CPU; events lost %s"
              % (n_jobs, cpu1 - cpu0, wall, 100 * (cpu1 - cpu0) / wall, rss0, rss1,
                 run1 - run0, 100 * (run1 - run0) / wall,
                 "%d" % lost if lost is not None else "?"), flush=True)
        switches = ctxt1 - ctxt0
        if sw0 and sw1 and switches > 0:
            print("    %d context switches (%.0f/s); %d on_sched_switch program(s) loaded, "
                  "%.2f runs and %.0f ns of them per context switch; all BPF programs %.0f ns "
                  "per context switch" % (switches, switches / wall, sw1[2],
                                          (sw1[0] - sw0[0]) / switches,
                                          (sw1[1] - sw0[1]) / switches,
                                          (run1 - run0) * 1e9 / switches), flush=True)
    finally:
        for j in jobs:
            j.send_signal(signal.SIGINT)
        d.send_signal(signal.SIGTERM)
        try:
            d.wait(120)
        except subprocess.TimeoutExpired:
            d.kill()
        for j in jobs:
            try:
                j.wait(30)
            except subprocess.TimeoutExpired:
                j.kill()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", default="0,1,4", help="job counts to measure (default %(default)s)")
    p.add_argument("--measure", type=float, default=60, help="seconds measured per count")
    p.add_argument("--window", type=int, default=10, help="the daemon's --window")
    args = p.parse_args()
    if os.geteuid():
        sys.exit("run as root: the daemon loads BPF programs")
    if not os.access(PIPEPROF, os.X_OK):
        sys.exit("build first: make")
    with tempfile.TemporaryDirectory() as tmp:
        python = os.path.join(tmp, COMM)
        os.symlink("/usr/bin/python3", python)
        for n in (int(x) for x in args.jobs.split(",")):
            measure(n, args.measure, args.window, python)


if __name__ == "__main__":
    main()
