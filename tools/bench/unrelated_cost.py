#!/usr/bin/python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""What pipeprof's BPF programs cost per event of processes it does not trace.

pipeprof's scheduler programs run on every context switch and wakeup of the machine, traced or
not, and must leave untraced tasks at once. This traces a small target (tools/workloads/scale.py
with 2 workers) with `pipeprof -p PID -j` and, while it runs, loads the machine with context
switches of an unrelated process (.output/workloads/ctxload, from `make fixtures`: a pair of
threads ping-ponging over pipes, on one CPU by default). The kernel's BPF run-time statistics
of each of that pipeprof's programs (run_time_ns, run_cnt; the programs are found through its
file descriptors) are read before and after the load; their quotient is the cost of one run,
nearly all of them unrelated events. The context-switch rate comes from /proc/stat's ctxt. A
quiet stretch before the load is measured the same way, for comparison.

Statistics are turned on with BPF_ENABLE_STATS, whose file descriptor keeps them on until this
script exits, whatever other users of kernel.bpf_stats_enabled do meanwhile; where that call is
refused, the sysctl is set and restored afterwards.

A benchmark, not a test: it prints figures and asserts nothing (exit 1 only when it cannot
measure).

    sudo tools/bench/unrelated_cost.py [--pairs 1] [--cpu 0] [--load-s 4] [--quiet-s 2]
                                       [--json FILE] [--pipeprof BINARY]
"""
import argparse
import ctypes
import json
import os
import re
import signal
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PIPEPROF = os.path.join(REPO, "pipeprof")
CTXLOAD = os.path.join(REPO, ".output", "workloads", "ctxload")
TARGET = ["/usr/bin/python3", os.path.join(REPO, "tools", "workloads", "scale.py"),
          "--workers", "2", "--threads", "8", "--worker-sleep-ms", "20"]
BPF_STATS = "/proc/sys/kernel/bpf_stats_enabled"
SYS_BPF = 321 if os.uname().machine == "x86_64" else 280
BPF_ENABLE_STATS = 32
BPF_STATS_RUN_TIME = 0


def enable_stats():
    """Turns the kernel's BPF run-time statistics on for as long as this process lives; returns
    a function that undoes it."""
    libc = ctypes.CDLL(None, use_errno=True)
    attr = (ctypes.c_uint32 * 2)(BPF_STATS_RUN_TIME, 0)
    fd = libc.syscall(SYS_BPF, BPF_ENABLE_STATS, ctypes.byref(attr), ctypes.sizeof(attr))
    if fd >= 0:
        return lambda: os.close(fd)
    with open(BPF_STATS) as f:
        before = f.read().strip()
    with open(BPF_STATS, "w") as f:
        f.write("1")

    def restore():
        with open(BPF_STATS, "w") as f:
            f.write(before)

    return restore


def ctxt():
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("ctxt "):
                return int(line.split()[1])
    raise RuntimeError("no ctxt line in /proc/stat")


def fdinfo_texts(pid):
    """The text of /proc/PID/fdinfo/FD for each of process pid's file descriptors still open."""
    fdinfo = "/proc/%d/fdinfo" % pid
    for fd in os.listdir(fdinfo):
        try:
            with open(os.path.join(fdinfo, fd)) as f:
                yield f.read()
        except OSError:
            continue


def bpf_ids(pid):
    """({prog ids}, {link ids}) held by process pid's file descriptors."""
    progs, links = set(), set()
    for text in fdinfo_texts(pid):
        m = re.search(r"^link_id:\s*(\d+)", text, re.M)
        if m:
            links.add(int(m.group(1)))
        elif re.search(r"^prog_type:", text, re.M):
            m = re.search(r"^prog_id:\s*(\d+)", text, re.M)
            if m:
                progs.add(int(m.group(1)))
    return progs, links


def prog_stats(ids):
    """{id: (name, run_time_ns, run_cnt)} of the programs ids, from bpftool."""
    out = subprocess.run(["bpftool", "prog", "show", "-j"], capture_output=True, text=True,
                         check=True).stdout
    return {p["id"]: (p.get("name", "?"), p.get("run_time_ns", 0), p.get("run_cnt", 0))
            for p in json.loads(out) if p["id"] in ids}


def wait_attached(pp, timeout=60):
    """pipeprof's program ids once its set of links has stopped growing (every probe in)."""
    deadline = time.monotonic() + timeout
    last, stable = None, 0
    while time.monotonic() < deadline and pp.poll() is None:
        progs, links = bpf_ids(pp.pid)
        stable = stable + 1 if links and links == last else 0
        last = links
        if stable >= 5:
            return progs
        time.sleep(0.1)
    raise RuntimeError("pipeprof did not attach (exit status %s)" % pp.poll())


def delta(a, b):
    return {i: (b[i][0], b[i][1] - a[i][1], b[i][2] - a[i][2]) for i in b if i in a}


def print_table(title, d, secs, switches):
    print("%s: %.1f s, %.0f context switches/s machine-wide" % (title, secs, switches / secs))
    print("  %-24s %12s %10s %9s" % ("program", "runs", "runs/s", "ns/run"))
    total_ns = total_runs = 0
    for _, (name, ns, runs) in sorted(d.items(), key=lambda kv: -kv[1][2]):
        if not runs:
            continue
        total_ns += ns
        total_runs += runs
        print("  %-24s %12d %10.0f %9.1f" % (name, runs, runs / secs, ns / runs))
    print("  %-24s %12d %10.0f %9.1f   (%.2f%% of one CPU)" % (
        "all", total_runs, total_runs / secs, total_ns / max(total_runs, 1),
        100 * total_ns / (secs * 1e9)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=1, help="ping-pong pairs (default 1)")
    ap.add_argument("--cpu", type=int, default=0,
                    help="the CPU every pair runs on (default 0; -1: pair i on CPU i mod CPUs, "
                    "which on a 2-CPU VM keeps pipeprof and bpftool off the CPUs for seconds)")
    ap.add_argument("--load-s", type=float, default=4, help="seconds of load (default 4)")
    ap.add_argument("--quiet-s", type=float, default=2,
                    help="seconds measured before the load (default 2)")
    ap.add_argument("--json", help="also write the figures here")
    ap.add_argument("--pipeprof", default=PIPEPROF,
                    help="the pipeprof binary to measure (default: this tree's)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("unrelated_cost.py: run as root (pipeprof loads BPF programs)")
    for f in (args.pipeprof, CTXLOAD):
        if not os.access(f, os.X_OK):
            sys.exit("unrelated_cost.py: %s is missing: `make pipeprof fixtures`" % f)

    target = subprocess.Popen(TARGET + ["--duration", "600"], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    pp = load = None
    restore = None
    try:
        for line in target.stdout:
            m = re.match(r"READY pid=(\d+)", line)
            if m:
                break
        else:
            sys.exit("unrelated_cost.py: the target never got ready")
        secs = args.quiet_s + args.load_s + 3
        pp = subprocess.Popen([args.pipeprof, "-p", m.group(1), "-d", "%.1f" % secs, "-j"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        ids = wait_attached(pp)
        restore = enable_stats()
        s0, c0, t0 = prog_stats(ids), ctxt(), time.monotonic()
        time.sleep(args.quiet_s)
        s1, c1, t1 = prog_stats(ids), ctxt(), time.monotonic()
        load = subprocess.Popen([CTXLOAD] + (["-c", str(args.cpu)] if args.cpu >= 0 else []) +
                                [str(args.pairs), "%.1f" % args.load_s],
                                stdout=subprocess.PIPE, text=True, start_new_session=True)
        load.stdout.readline()  # READY
        s2, c2, t2 = prog_stats(ids), ctxt(), time.monotonic()
        load_out = load.stdout.read()
        load.wait()
        s3, c3, t3 = prog_stats(ids), ctxt(), time.monotonic()
        restore()
        restore = None
        out, err = pp.communicate(timeout=120)
    finally:
        if restore:
            restore()
        for p in (load, pp):
            if p and p.poll() is None:
                p.kill()
        os.killpg(target.pid, signal.SIGTERM)
        target.wait()

    quiet, loaded = delta(s0, s1), delta(s2, s3)
    print_table("quiet", quiet, t1 - t0, c1 - c0)
    print_table("under load (%s)" % load_out.strip(), loaded, t3 - t2, c3 - c2)
    report = json.loads(out) if pp.returncode == 0 else None
    if report:
        c = report["counters"]
        print("pipeprof: verdict %r; %d threads traced; %d BPF recursion misses; not traced: %s" %
              (report["verdict"]["name"], len(report["threads"]), c["bpf_recursion_misses"],
               report["not_traced"]))
    else:
        print("pipeprof exited %s: %s" % (pp.returncode, err[-2000:]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"quiet": {"secs": t1 - t0, "ctxt": c1 - c0, "progs": quiet},
                       "load": {"secs": t3 - t2, "ctxt": c3 - c2, "progs": loaded}}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
