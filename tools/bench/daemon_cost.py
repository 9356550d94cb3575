#!/usr/bin/python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""What `pipeprof daemon` costs with 0, 1 and 4 traced jobs (or --jobs 1,8,32): its own CPU
(user + system, from /proc/PID/stat), its RSS at the start and end of the measured span, and
its BPF programs' run time (pipeprof_bpf_run_seconds_total, which the daemon reads from the
kernel's BPF statistics). Per context switch of the host (/proc/stat's ctxt): the scheduler
programs' runs and run time, summed over the dispatcher's `dispatch_switch` (whose run time holds
the jobs' programs it tail-calls) and any job's own `on_sched_switch` (bpftool's statistics):
what must not grow with the jobs; and every program of the daemon's, by name (--by-program).
A benchmark, not a test: it prints figures and asserts nothing.

Jobs (--kind):
  train  tools/workloads/demo_train.py, a real DataLoader training loop (the default);
  sleep  a process that maps the fake libnccl and sleeps: no event of its own, so what the host's
         other context switches cost is all that is measured; 32 of them start in a second.
Each runs /usr/bin/python3 through a symlink with its own command name, so `--match` picks the
jobs and nothing else on the machine. --ctxload N adds N pairs of untraced threads ping-ponging
(.output/workloads/ctxload, from `make fixtures`): a steady load of context switches no job
owns. --no-dispatch runs the daemon with PIPEPROF_NO_DISPATCH=1: each job attaches its own
scheduler programs (what every version before the dispatcher did), for comparison. The daemon
starts first; the span is measured once every job is attached and has had one window.

    sudo tools/bench/daemon_cost.py [--jobs 0,1,4] [--measure 60] [--window 10]
        [--kind train|sleep] [--ctxload PAIRS] [--no-dispatch] [--by-program]
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
FAKE_NCCL = os.path.join(REPO, ".output", "fakecuda", "libnccl.so.2")
CTXLOAD = os.path.join(REPO, ".output", "workloads", "ctxload")
SLEEPER = ("import ctypes, signal, time\nsignal.alarm(%d)\nctypes.CDLL(%r)\n"
           "time.sleep(%d)\n")
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


def prog_stats():
    """{name: (runs, run ns, programs)} over every loaded program, from bpftool; None without
    it."""
    try:
        out = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True,
                             timeout=60).stdout
        progs = json.loads(out or "[]")
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return None
    by = {}
    for x in progs:
        r = by.setdefault(x.get("name", "?"), [0, 0, 0])
        r[0] += x.get("run_cnt", 0)
        r[1] += x.get("run_time_ns", 0)
        r[2] += 1
    return by


def sched_switch_stats():
    """(runs, run ns, programs) summed over every loaded program on the sched_switch hook: the
    dispatcher's (dispatch_switch, whose run time holds the jobs' programs it tail-calls, which
    the kernel does not count apart) and any job's own on_sched_switch; None without bpftool.
    The kernel's statistics are on while the daemon runs (it turns them on)."""
    by = prog_stats()
    if by is None:
        return None
    mine = [by[n] for n in ("on_sched_switch", "dispatch_switch") if n in by]
    return tuple(sum(x[k] for x in mine) for k in range(3))


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


def start_job(kind, python, seconds):
    if kind == "sleep":
        cmd = [python, "-c", SLEEPER % (seconds + 60, FAKE_NCCL, seconds)]
    else:
        cmd = [python, WORKLOAD, "--duration", str(seconds)]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def measure(n_jobs, span, window, python, args):
    log, jobs = [], []
    env = dict(os.environ)
    if args.no_dispatch:
        env["PIPEPROF_NO_DISPATCH"] = "1"
    d = subprocess.Popen([PIPEPROF, "daemon", "--listen", "127.0.0.1:0", "--match",
                          "^%s$" % COMM, "--window", str(window)],
                         stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env)
    try:
        m = read_lines(d, r"listening on [\d.]+:(\d+)", 30, log)
        if not m:
            sys.exit("the daemon did not start:\n" + "\n".join(log))
        port = int(m.group(1))
        for _ in range(n_jobs):
            jobs.append(start_job(args.kind, python, span + 120))
        attached = 0
        while attached < n_jobs:
            if not read_lines(d, r"attached PID", 180, log):
                sys.exit("only %d of %d jobs attached:\n%s" % (attached, n_jobs, "\n".join(log)))
            attached += 1
        if args.ctxload:
            load = subprocess.Popen([CTXLOAD, str(args.ctxload), str(span + window + 60)],
                                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            jobs.append(load)
            load.stdout.readline()      # READY: every pair runs
        time.sleep(window + 2)     # every job through its first window
        run0 = metric(port, "pipeprof_bpf_run_seconds_total") or 0.0
        by0 = prog_stats() if args.by_program else None
        sw0, ctxt0 = sched_switch_stats(), context_switches()
        cpu0, rss0, t0 = cpu_s(d.pid), rss_kb(d.pid), time.monotonic()
        time.sleep(span)
        cpu1, rss1, t1 = cpu_s(d.pid), rss_kb(d.pid), time.monotonic()
        sw1, ctxt1 = sched_switch_stats(), context_switches()
        by1 = prog_stats() if args.by_program else None
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
            print("    %d context switches (%.0f/s); %d sched_switch program(s) loaded, "
                  "%.2f runs and %.0f ns of them per context switch; all BPF programs %.0f ns "
                  "per context switch" % (switches, switches / wall, sw1[2],
                                          (sw1[0] - sw0[0]) / switches,
                                          (sw1[1] - sw0[1]) / switches,
                                          (run1 - run0) * 1e9 / switches), flush=True)
        if by0 and by1 and switches > 0:
            rows = []
            for name, (runs, ns, n) in by1.items():
                r0, ns0, _ = by0.get(name, (0, 0, 0))
                if runs > r0 and (name.startswith(("on_", "dispatch_")) or name == "softirq_vector"):
                    rows.append((ns - ns0, name, runs - r0, n))
            for ns, name, runs, n in sorted(rows, reverse=True):
                print("      %-24s x%-3d %.3f runs, %6.0f ns per context switch; %5.0f ns a run"
                      % (name, n, runs / switches, ns / switches, ns / runs), flush=True)
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
    p.add_argument("--kind", choices=("train", "sleep"), default="train",
                   help="what each job runs (default %(default)s)")
    p.add_argument("--ctxload", type=int, default=0, metavar="PAIRS",
                   help="pairs of untraced threads ping-ponging beside the jobs")
    p.add_argument("--no-dispatch", action="store_true",
                   help="each job attaches its own scheduler programs (PIPEPROF_NO_DISPATCH=1)")
    p.add_argument("--by-program", action="store_true",
                   help="every program's runs and run time per context switch, by name")
    args = p.parse_args()
    if os.geteuid():
        sys.exit("run as root: the daemon loads BPF programs")
    if not os.access(PIPEPROF, os.X_OK):
        sys.exit("build first: make")
    if (args.kind == "sleep" and not os.path.exists(FAKE_NCCL)) or \
            (args.ctxload and not os.access(CTXLOAD, os.X_OK)):
        sys.exit("build the fixtures first: make fixtures")
    with tempfile.TemporaryDirectory() as tmp:
        python = os.path.join(tmp, COMM)
        os.symlink("/usr/bin/python3", python)
        for n in (int(x) for x in args.jobs.split(",")):
            measure(n, args.measure, args.window, python, args)


if __name__ == "__main__":
    main()
