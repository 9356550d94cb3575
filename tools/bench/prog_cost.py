#!/usr/bin/python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""What each of pipeprof's BPF programs costs per run, from the kernel's BPF statistics, and what
its uprobes cost a CUDA call against empty programs on the same instructions.

A benchmark, not a test: it prints figures, reports pass/miss against the targets and asserts
nothing (exit 1 only when it cannot measure). Raw numbers go to --json.

Part 1, every program (--rounds rounds): `pipeprof -p PID` and `pipeprof hist -p PID` with every
kind trace workloads that make each program fire: tools/workloads/data_bound.py (scheduler
events, wakeups, DataLoader; under hist, `step` probes libtorch's autograd), gpu.py and
launch_heavy.py (fake CUDA runtime: synchronising calls, launches), gpu_calls.py (one run of its
pattern: launches, synchronous and async copies), io_bound.py (block I/O), a fork/exec loop
(posix_spawn of /bin/true, 200 a second) and .output/workloads/ctxload (a pair of the traced
job's threads ping-ponging over pipes on CPU 0: nearly every scheduler event on the machine is
then a traced task's, on both sides of each switch). For each, once pipeprof's links stop
changing, the run time and run count of each of that pipeprof's programs (found through its
file descriptors, read with bpftool) are taken before and after a --seconds window with the
statistics on; ns per run is their quotient, and the median over the rounds is reported.
Programs that return at once, on the same six scheduler tracepoints (tools/bench/empty_progs.bpf.c,
attached by .output/bench/empty_progs --sched for the whole part), are read in the same windows:
the floor of each hook (the tracepoint, the dispatch and the statistics themselves); on
sched_switch, sched_waking and sched_wakeup, programs that only read the clock give the floor
of a traced task's event ("clock": pipeprof reads the clock once per such event). The cost
per event of tasks pipeprof does not trace is tools/bench/unrelated_cost.py's figure: it is run
once per round and its numbers are taken as they are. "job%" is the job's context switches over
sched_switch's runs in the window: the share of switches with a traced task switching out.

Part 2, uprobes (--uprobe-rounds rounds): .output/bench/cuda_loop calls cudaStreamSynchronize,
cudaLaunchKernel and cudaMemcpy (64 bytes, host to device) of the fake runtime back to back.
pipeprof (`hist -p PID gpu-sync launch memcpy`, and `-p PID`) is run on it as a user would; its
multi-uprobe and multi-uretprobe links on that process (path, offsets: /proc/PID/fdinfo) are
copied by .output/bench/empty_progs, which attaches the empty uprobe or uretprobe program with
the same offsets and direction, one link per pipeprof link. Each round measures, in an order
rotated each round: no probes; pipeprof hist; its empty copy; pipeprof -p; its empty copy. Per
configuration and call: --batches batches of --calls calls with the statistics off, timed by
the calling thread's CPU clock (which holds the trap and the handlers, but not the time other
tasks of this shared machine had its CPU; the wall clock is recorded too), the median of the
batches; then one batch with the statistics on (each program's ns per run). The cost a
configuration adds to a call is its time per call minus the no-probe time of the same round;
the figure compared with the target is pipeprof's added cost over its empty copy's (median over
rounds).

Targets (issue 11): scheduler handlers at most 150 ns per event; uprobe handlers within 1.15x of
an empty program on the same instruction, judged on the cost each adds per call (the trap
dominates it, and that is what a user pays); the handlers' own ns per run against the empty
programs' is printed beside it.

Statistics are turned on with BPF_ENABLE_STATS (unrelated_cost.enable_stats): the kernel undoes
it when the file descriptor closes, whatever way this script ends; where that is refused, the
kernel.bpf_stats_enabled sysctl is set and its previous value restored on every exit path
(SIGTERM and SIGINT included). Before each round of part 1, and once before part 2, the
1-minute load average must fall below --max-load (waiting up to --wait-quiet seconds, then going
on with a warning); it is recorded beside every window (the workloads' own load included).

    sudo make bench-progs                                   # ~12 minutes
    sudo tools/bench/prog_cost.py --rounds 3 --uprobe-rounds 5 [--only uprobes|programs]
"""
import argparse
import datetime
import json
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import compare  # noqa: E402  (Lines, loadavg, wait_quiet)
import unrelated_cost as uc  # noqa: E402  (enable_stats, bpf_ids, prog_stats, wait_attached)

PY = "/usr/bin/python3"
PIPEPROF = os.path.join(REPO, "pipeprof")
OUT = os.path.join(REPO, ".output")
CTXLOAD = os.path.join(OUT, "workloads", "ctxload")
CUDA_LOOP = os.path.join(OUT, "bench", "cuda_loop")
EMPTY_PROGS = os.path.join(OUT, "bench", "empty_progs")
FAKE_CUDART = os.path.join(OUT, "fakecuda", "libcudart.so.13")
WL = os.path.join(REPO, "tools", "workloads")
HIST_KINDS = compare.HIST_KINDS
SCHED_TARGET_NS = 150
UPROBE_TARGET = 1.15
SCHED_PROGS = ("on_sched_switch", "on_sched_waking", "on_sched_wakeup",
               "on_sched_process_fork", "on_sched_process_exec", "on_sched_process_exit")
UPROBE_PROGS = ("on_gpu_enter", "on_gpu_return", "on_launch", "on_copy", "on_copy_return")

# posix_spawn of /bin/true, paced at ~200 a second: fork, exec and exit of the traced job's
# children (a session follows 4096 processes, so the pace keeps a window well inside that).
FORKEXEC = """
import os, sys, time
sys.stdout.write("READY pid=%d\\n" % os.getpid()); sys.stdout.flush()
nxt = time.monotonic()
while True:
    pid = os.posix_spawn("/bin/true", ["true"], os.environ)
    os.waitpid(pid, 0)
    nxt += 0.005
    time.sleep(max(0, nxt - time.monotonic()))
"""

WORKLOADS = {
    "data_bound": [PY, os.path.join(WL, "data_bound.py"), "--duration", "3600"],
    "gpu": [PY, os.path.join(WL, "gpu.py"), "--duration", "3600"],
    "launch_heavy": [PY, os.path.join(WL, "launch_heavy.py"), "--duration", "3600"],
    "gpu_calls": [PY, os.path.join(WL, "gpu_calls.py"), "--linger", "3600"],
    "io_bound": [PY, os.path.join(WL, "io_bound.py"), "--duration", "3600", "--size-mib", "64"],
    "forkexec": [PY, "-c", FORKEXEC],
    "ctxload": [CTXLOAD, "-c", "0", "1", "3600"],
}
# (workload, mode) measured in every round, in this order.
CONFIGS = [("data_bound", "p"), ("data_bound", "hist"), ("gpu", "p"), ("gpu", "hist"),
           ("launch_heavy", "p"), ("launch_heavy", "hist"), ("gpu_calls", "hist"),
           ("io_bound", "p"), ("io_bound", "hist"), ("forkexec", "p"), ("ctxload", "p"),
           ("ctxload", "hist")]
UNRELATED = "unrelated"   # the pseudo-configuration of unrelated_cost.py's figures

# The summary: per program, what fires it and which configurations to show.
SUMMARY = [
    ("on_sched_switch", "every context switch on the host",
     [("ctxload", "p"), ("ctxload", "hist"), UNRELATED, ("data_bound", "p"), ("data_bound", "hist")]),
    ("on_sched_waking", "every wakeup on the host",
     [("ctxload", "p"), ("ctxload", "hist"), UNRELATED, ("data_bound", "p"), ("data_bound", "hist")]),
    ("on_sched_wakeup", "every wakeup on the host",
     [("ctxload", "p"), ("ctxload", "hist"), UNRELATED, ("data_bound", "p"), ("data_bound", "hist")]),
    ("on_sched_process_fork", "every fork/clone on the host", [("forkexec", "p"), ("data_bound", "p")]),
    ("on_sched_process_exec", "every exec on the host", [("forkexec", "p")]),
    ("on_sched_process_exit", "every task exit on the host", [("forkexec", "p")]),
    ("on_softirq_entry", "every softirq on the host", [("data_bound", "p"), ("io_bound", "p")]),
    ("on_tcp_rcv_space_adjust", "every TCP receive that copies data, on the host", None),
    ("on_block_io_start", "every block I/O submitted", [("io_bound", "p"), ("io_bound", "hist")]),
    ("on_block_rq_issue", "every block request issued", [("io_bound", "p"), ("io_bound", "hist")]),
    ("on_block_rq_complete", "every block request completed", [("io_bound", "p"), ("io_bound", "hist")]),
    ("on_gpu_enter", "synchronising CUDA calls (runtime and driver), NCCL's calls, and libtorch's "
     "autograd Engine::execute (steps)",
     [("gpu", "p"), ("launch_heavy", "p"), ("gpu_calls", "hist"), ("data_bound", "hist")]),
    ("on_gpu_return", "their returns",
     [("gpu", "p"), ("launch_heavy", "p"), ("gpu_calls", "hist"), ("data_bound", "hist")]),
    ("on_launch", "cudaLaunchKernel (hist launch)", [("launch_heavy", "hist"), ("gpu_calls", "hist")]),
    ("on_copy", "cudaMemcpy* (hist memcpy)", [("gpu_calls", "hist")]),
    ("on_copy_return", "their returns", [("gpu_calls", "hist")]),
    ("on_loader_change", "_dl_debug_state (dlopen/dlclose), any process", None),
    ("on_cpu_sample", "CPU samples, 49 Hz on each CPU (-p): the Python walker", [("data_bound", "p")]),
]
# Attached only until the start-up check has proved the preempt count (then detached).
EMPTY_OF = {"on_sched_switch": "empty_switch", "on_sched_waking": "empty_waking",
            "on_sched_wakeup": "empty_wakeup", "on_sched_process_fork": "empty_fork",
            "on_sched_process_exec": "empty_exec", "on_sched_process_exit": "empty_exit"}
# The same hooks with one clock read: what a traced task's event costs before any accounting.
CLOCK_OF = {"on_sched_switch": "clock_switch", "on_sched_waking": "clock_waking",
            "on_sched_wakeup": "clock_wakeup"}
STARTUP_ONLY = ("on_softirq_exit", "on_irq_handler_entry", "on_irq_handler_exit",
                "on_hrtimer_expire_entry", "on_hrtimer_expire_exit")

UPROBE_APIS = ["sync", "launch", "memcpy"]
API_NAMES = {"sync": "cudaStreamSynchronize", "launch": "cudaLaunchKernel", "memcpy": "cudaMemcpy"}
UPROBE_CONFIGS = ["none", "pp-hist", "empty-hist", "pp-p", "empty-p"]


def config_name(c):
    return c if isinstance(c, str) else "%s %s" % (c[0], "-p" if c[1] == "p" else "hist")


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


class Stats:
    """The kernel's BPF run-time statistics, on between on() and off()."""

    def __init__(self):
        self._restore = None

    def on(self):
        if not self._restore:
            self._restore = uc.enable_stats()

    def off(self):
        restore, self._restore = self._restore, None
        if restore:
            restore()


def stats_sysctl():
    try:
        with open(uc.BPF_STATS) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def pipeprof_argv(mode, pid, kinds=None):
    if mode == "p":
        return [PIPEPROF, "-p", str(pid)]
    return [PIPEPROF, "hist", "-p", str(pid)] + (kinds or HIST_KINDS)


def stop(proc, timeout=120):
    """SIGINT (pipeprof reports and detaches), then SIGKILL to its group after timeout."""
    if proc is None:
        return None
    return proc.stop(signal.SIGINT, timeout)


def job_ctxt(pid):
    """Context switches of the live threads of pid and its descendant processes."""
    children = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(d))
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        todo += children.get(p, [])
        try:
            tids = os.listdir("/proc/%d/task" % p)
        except OSError:
            continue
        for tid in tids:
            try:
                with open("/proc/%d/task/%s/status" % (p, tid)) as f:
                    total += sum(int(l.split()[1]) for l in f if "ctxt_switches" in l)
            except (OSError, ValueError):
                pass
    return total


def proc_stat(key):
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith(key + " "):
                return int(line.split()[1])
    return 0


def prog_sizes(holder):
    """{name: {bytes_xlated, bytes_jited, verified_insns}} of the programs process holder holds:
    how big each handler is, and how much work the verifier did on it."""
    progs, _ = uc.bpf_ids(holder)
    verified = {}
    for fd in os.listdir("/proc/%d/fdinfo" % holder):
        try:
            with open("/proc/%d/fdinfo/%s" % (holder, fd)) as f:
                text = f.read()
        except OSError:
            continue
        i = re.search(r"^prog_id:\s*(\d+)", text, re.M)
        v = re.search(r"^verified_insns:\s*(\d+)", text, re.M)
        if i and v and not re.search(r"^link_id:", text, re.M):
            verified[int(i.group(1))] = int(v.group(1))
    out = subprocess.run(["bpftool", "prog", "show", "-j"], capture_output=True, text=True,
                         check=True).stdout
    return {p["name"]: {"bytes_xlated": p.get("bytes_xlated"), "bytes_jited": p.get("bytes_jited"),
                        "verified_insns": verified.get(p["id"])}
            for p in json.loads(out) if p["id"] in progs}


SIZES = {}


def start_empty(argv):
    """.output/bench/empty_progs with argv, once attached: (its Lines, {program ids})."""
    holder = compare.Lines([EMPTY_PROGS] + argv)
    m, _ = holder.wait_line(r"^READY((?: \w+=\d+)+)$", 60)
    if not m:
        out = holder.text()
        holder.kill()
        raise RuntimeError("empty_progs did not attach:\n" + out[-1000:])
    return holder, {int(kv.split("=")[1]) for kv in m.group(1).split()}


# -- part 1: every program on the workloads ------------------------------------------------------

def start_workload(name, go_file):
    argv = WORKLOADS[name] + (["--go-file", go_file] if name == "gpu_calls" else [])
    w = compare.Lines(argv, cwd=REPO)
    m, _ = w.wait_line(r"READY pid=(\d+)", 180)
    if not m:
        out = w.text()
        w.kill()
        raise RuntimeError("workload %s did not start:\n%s" % (name, out[-2000:]))
    return w, int(m.group(1))


def measure_config(workload, wpid, name, mode, seconds, stats, go_file, empty_ids):
    """One window of one pipeprof on one running workload: {prog name: [runs, ns]} of its
    programs and of the empty ones on the same hooks, and context."""
    pp = compare.Lines(pipeprof_argv(mode, wpid))
    rec = {"config": config_name((name, mode)), "load_start": compare.loadavg()}
    try:
        ids = uc.wait_attached(pp.p, timeout=180) | empty_ids
        if mode == "hist" and not SIZES:
            SIZES.update(prog_sizes(pp.pid))
        stats.on()
        s0, t0 = uc.prog_stats(ids), time.monotonic()
        c0, f0, j0 = proc_stat("ctxt"), proc_stat("processes"), job_ctxt(wpid)
        if name == "gpu_calls":
            since = workload.count()
            open(go_file, "w").close()
            if not workload.wait_line(r"^DONE", 120, since)[0]:
                raise RuntimeError("gpu_calls did not finish its pattern")
        else:
            time.sleep(seconds)
        s1, t1 = uc.prog_stats(ids), time.monotonic()
        c1, f1, j1 = proc_stat("ctxt"), proc_stat("processes"), job_ctxt(wpid)
        stats.off()
    finally:
        stats.off()
        rc = stop(pp)
    rec.update(secs=t1 - t0, ctxt=c1 - c0, forks=f1 - f0, job_ctxt=j1 - j0,
               load_end=compare.loadavg(), pipeprof_rc=rc,
               progs={n: [runs, ns] for n, ns, runs in uc.delta(s0, s1).values()})
    if rc not in (0, None):
        rec["pipeprof_tail"] = pp.text()[-1500:]
    return rec


def run_unrelated(stats_note, stats, empty_ids):
    """One run of unrelated_cost.py: its 'load' figures, as {prog: [runs, ns]}, and the empty
    programs' over its whole run (its loaded stretch is nearly all of their runs)."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        path = f.name
    try:
        load0 = compare.loadavg()
        stats.on()
        e0 = uc.prog_stats(empty_ids)
        proc = subprocess.Popen([PY, os.path.join(HERE, "unrelated_cost.py"), "--json", path],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            out, err = proc.communicate(timeout=300)
        except BaseException:
            # SIGINT: it then stops its pipeprof, load and target before exiting.
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
            raise
        r = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
        e1 = uc.prog_stats(empty_ids)
        stats.off()
        if r.returncode != 0:
            stats_note.append("unrelated_cost.py exited %d: %s" % (r.returncode, r.stderr[-500:]))
            return None
        with open(path) as f:
            d = json.load(f)["load"]
        return {"config": UNRELATED, "secs": d["secs"], "ctxt": d["ctxt"], "load_start": load0,
                "load_end": compare.loadavg(),
                "progs": dict({v[0]: [v[2], v[1]] for v in d["progs"].values()},
                              **{n: [runs, ns] for n, ns, runs in uc.delta(e0, e1).values()}),
                "stdout": r.stdout}
    finally:
        stats.off()
        os.unlink(path)


def programs_part(args, stats, notes):
    rounds = []
    configs = [c for c in CONFIGS if not args.workloads or c[0] in args.workloads]
    # Empty programs on the scheduler tracepoints, for the whole part: the floor of each window.
    empty, empty_ids = start_empty(["--sched"])
    try:
        for r in range(args.rounds):
            rounds.append(programs_round(args, stats, notes, configs, empty_ids, r))
    finally:
        empty.stop(signal.SIGTERM, 60)
    return rounds


def programs_round(args, stats, notes, configs, empty_ids, r):
    compare.wait_quiet(args.max_load, args.wait_quiet, notes)
    print("round %d/%d (load %.2f)" % (r + 1, args.rounds, compare.loadavg()[0]), flush=True)
    recs = []
    for name in dict.fromkeys(c[0] for c in configs):
        go_file = os.path.join(tempfile.mkdtemp(prefix="prog_cost."), "go")
        w, wpid = start_workload(name, go_file)
        try:
            for (n, mode) in configs:
                if n != name:
                    continue
                rec = measure_config(w, wpid, name, mode, args.seconds, stats, go_file,
                                     empty_ids)
                recs.append(rec)
                print("  %-20s %5.1f s  load %.2f  %s" % (
                    rec["config"], rec["secs"], rec["load_end"][0],
                    ", ".join("%s %.0f" % (p, ns / runs) for p, (runs, ns) in
                              sorted(rec["progs"].items()) if runs)), flush=True)
        finally:
            w.stop(signal.SIGTERM, 60)
            if os.path.exists(go_file):
                os.unlink(go_file)
            os.rmdir(os.path.dirname(go_file))
    if not args.no_unrelated and (not args.workloads or UNRELATED in args.workloads):
        u = run_unrelated(notes, stats, empty_ids)
        if u:
            recs.append(u)
            print("  %-20s %5.1f s  load %.2f  %s" % (
                UNRELATED, u["secs"], u["load_end"][0],
                ", ".join("%s %.0f" % (p, ns / runs) for p, (runs, ns) in
                          sorted(u["progs"].items()) if runs)), flush=True)
    return recs


def program_medians(rounds):
    """{config: {prog: {"ns_per_run", "runs_per_s", "runs", "rounds"}}} and {config: load}."""
    by = {}
    for recs in rounds:
        for rec in recs:
            c = by.setdefault(rec["config"], {"progs": {}, "load": [], "traced_share": []})
            c["load"].append(rec["load_end"][0])
            runs_sw = rec["progs"].get("on_sched_switch", [0, 0])[0]
            if rec.get("job_ctxt") is not None and runs_sw:
                c["traced_share"].append(min(1.0, rec["job_ctxt"] / runs_sw))
            for p, (runs, ns) in rec["progs"].items():
                e = c["progs"].setdefault(p, {"nspr": [], "rps": [], "runs": []})
                e["runs"].append(runs)
                e["rps"].append(runs / rec["secs"] if rec["secs"] else None)
                e["nspr"].append(ns / runs if runs else None)
    out = {}
    for cfg, c in by.items():
        out[cfg] = {"load_median": med(c["load"]), "traced_share": med(c["traced_share"]),
                    "progs": {p: {"ns_per_run": med(e["nspr"]), "runs_per_s": med(e["rps"]),
                                  "runs": sum(e["runs"]), "rounds": len(e["runs"])}
                              for p, e in c["progs"].items()}}
    return out


def summary_rows(meds):
    rows = []
    for prog, fires, cfgs in SUMMARY:
        if cfgs is None:   # wherever it ran
            cfgs = [c for c in meds if meds[c]["progs"].get(prog, {}).get("runs")]
            cfgs = [tuple(c.split(" ", 1)) if c != UNRELATED else c for c in cfgs]
            cfgs = [(c[0], "p" if c[1] == "-p" else "hist") if isinstance(c, tuple) else c
                    for c in cfgs]
        shown = False
        for c in cfgs:
            name = config_name(c)
            e = meds.get(name, {}).get("progs", {}).get(prog)
            if not e or not e["runs"]:
                continue
            floor = meds[name]["progs"].get(EMPTY_OF.get(prog), {}).get("ns_per_run")
            clock = meds[name]["progs"].get(CLOCK_OF.get(prog), {}).get("ns_per_run")
            rows.append({"program": prog, "fires": fires, "config": name,
                         "ns_per_run": e["ns_per_run"], "empty_ns_per_run": floor,
                         "clock_ns_per_run": clock,
                         "runs_per_s": e["runs_per_s"],
                         "runs": e["runs"], "load": meds[name]["load_median"],
                         "traced_share": meds[name]["traced_share"]})
            shown = True
        if not shown:
            rows.append({"program": prog, "fires": fires, "config": None, "ns_per_run": None,
                         "empty_ns_per_run": None, "clock_ns_per_run": None,
                         "runs_per_s": None, "runs": 0, "load": None, "traced_share": None})
    return rows


def print_programs(meds, rows):
    print("\nPer program (median ns per run over the rounds; runs/s in the window):")
    print("  %-22s %-20s %10s %8s %6s %6s %6s %6s" % ("program", "measured on", "runs/s", "ns/run",
                                                       "empty", "clock", "load", "job%"))
    for r in rows:
        if r["config"] is None:
            print("  %-22s %-20s %10s %8s" % (r["program"], "(did not fire)", "-", "-"))
            continue
        share = "" if r["traced_share"] is None or not r["program"].startswith("on_sched_s") \
            else "%.0f%%" % (100 * r["traced_share"])
        empty = "" if r["empty_ns_per_run"] is None else "%.0f" % r["empty_ns_per_run"]
        clock = "" if r.get("clock_ns_per_run") is None else "%.0f" % r["clock_ns_per_run"]
        print("  %-22s %-20s %10.0f %8.0f %6s %6s %6.2f %6s" % (
            r["program"], r["config"], r["runs_per_s"], r["ns_per_run"], empty, clock,
            r["load"] or 0, share))
    if SIZES:
        print("  sizes (translated bytes / JITed bytes / instructions the verifier walked): " +
              ", ".join("%s %s/%s/%s" % (n, v["bytes_xlated"], v["bytes_jited"], v["verified_insns"])
                        for n, v in sorted(SIZES.items())))
    startup = sorted({p for c in meds.values() for p in c["progs"] if p in STARTUP_ONLY and
                      c["progs"][p]["runs"]})
    if startup:
        print("  (%s: attached only until the start-up check, so they ran in no window)" %
              ", ".join(startup))


# -- part 2: uprobes against empty programs ------------------------------------------------------

class CudaLoop(compare.Dialog):
    def __init__(self):
        super().__init__([CUDA_LOOP, FAKE_CUDART], "cuda_loop")

    def per_call(self, api, n):
        line = self.ask("%s %d" % (api, n)).split()
        if len(line) != 4 or line[0] != api:
            raise RuntimeError("cuda_loop: %r" % " ".join(line))
        return int(line[2]) / n, int(line[3]) / n


def uprobe_links(holder, target_pid):
    """pipeprof's multi-uprobe links on target_pid: [(is a return probe, prog id, path,
    [offsets])]."""
    links = []
    for text in uc.fdinfo_texts(holder):
        kind = re.search(r"^link_type:\s*(uprobe_multi|uretprobe_multi)$", text, re.M)
        if not kind:
            continue
        pid = int(re.search(r"^pid:\s*(\d+)", text, re.M).group(1))
        if pid != target_pid:
            continue   # the start-up self-check on pipeprof itself, the loader probe (any pid)
        prog = int(re.search(r"^prog_id:\s*(\d+)", text, re.M).group(1))
        path = re.search(r"^path:\s*(.*)$", text, re.M).group(1)
        offs = re.findall(r"^\d+\s+(0x[0-9a-f]+)\s+0x[0-9a-f]+$", text, re.M)
        links.append((kind.group(1) == "uretprobe_multi", prog, path, offs))
    return sorted(links)


def attach_pipeprof(mode, pid):
    kinds = ["gpu-sync", "launch", "memcpy"]
    pp = compare.Lines(pipeprof_argv(mode, pid, kinds))
    ids = uc.wait_attached(pp.p, timeout=180)
    return pp, ids


def mirror_args(pp, pid):
    """empty_uprobes arguments copying pipeprof's links on pid, and a description of them."""
    links = uprobe_links(pp.pid, pid)
    names = {i: v[0] for i, v in uc.prog_stats({l[1] for l in links}).items()}
    argv, desc = [], []
    # Returns first, as pipeprof attaches them: no call is seen to start without its end.
    for ret, prog, path, offs in sorted(links, key=lambda l: not l[0]):
        argv += ["return" if ret else "enter", path, ",".join(offs)]
        desc.append({"program": names.get(prog), "return": ret, "path": path, "offsets": offs})
    return argv, desc


def uprobe_round(loop, cfg, mirrors, args, stats):
    """One configuration: per API the wall ns per call (median of batches, statistics off) and
    each program's [runs, ns] over one batch with them on."""
    holder, ids = None, set()
    if cfg.startswith("pp-"):
        holder, ids = attach_pipeprof(cfg[3:], loop.pid)
    elif cfg.startswith("empty-"):
        holder, ids = start_empty([str(loop.pid)] + mirrors[cfg[6:]][0])
    rec = {"config": cfg, "load_start": compare.loadavg(), "api": {}}
    try:
        for api in UPROBE_APIS:
            loop.per_call(api, max(1, args.calls // 10))   # settle
            batches = [loop.per_call(api, args.calls) for _ in range(args.batches)]
            a = {"wall_ns": [b[0] for b in batches], "cpu_ns": [b[1] for b in batches],
                 "wall_ns_median": med([b[0] for b in batches]),
                 "cpu_ns_median": med([b[1] for b in batches]),
                 "bpf_stats_sysctl": stats_sysctl()}
            if ids:
                stats.on()
                s0 = uc.prog_stats(ids)
                loop.per_call(api, args.calls)
                s1 = uc.prog_stats(ids)
                stats.off()
                a["progs"] = {n: [runs, ns] for n, ns, runs in uc.delta(s0, s1).values() if runs}
            rec["api"][api] = a
    finally:
        stats.off()
        if holder:
            holder.stop(signal.SIGINT if cfg.startswith("pp-") else signal.SIGTERM, 120)
    rec["load_end"] = compare.loadavg()
    return rec


def uprobes_part(args, stats, notes):
    loop = CudaLoop()
    try:
        mirrors = {}
        for mode in ("hist", "p"):
            pp, _ = attach_pipeprof(mode, loop.pid)
            try:
                mirrors[mode] = mirror_args(pp, loop.pid)
            finally:
                stop(pp)
            if not mirrors[mode][0]:
                raise RuntimeError("pipeprof %s put no uprobe on cuda_loop" % mode)
        rounds = []
        # Once for the part: a round takes seconds, and the calling thread's CPU time does not
        # count what other tasks take of its CPU.
        compare.wait_quiet(args.max_load, args.wait_quiet, notes)
        for r in range(args.uprobe_rounds):
            order = UPROBE_CONFIGS[r % len(UPROBE_CONFIGS):] + UPROBE_CONFIGS[:r % len(UPROBE_CONFIGS)]
            recs = {}
            for cfg in order:
                recs[cfg] = uprobe_round(loop, cfg, mirrors, args, stats)
            print("uprobe round %d/%d (load %.2f): %s" % (
                r + 1, args.uprobe_rounds, compare.loadavg()[0], "; ".join(
                    "%s %s" % (api, " ".join("%s %.0f" % (c, recs[c]["api"][api]["cpu_ns_median"])
                                             for c in UPROBE_CONFIGS)) for api in UPROBE_APIS)),
                flush=True)
            rounds.append(recs)
        return {"mirrors": {m: v[1] for m, v in mirrors.items()}, "rounds": rounds}
    finally:
        loop.close()


def uprobe_medians(part, calls):
    """Per mode and API: wall per call of each configuration, added costs, their ratio, and
    per program the ns per run of pipeprof's handler and of the empty program."""
    out = {}
    rounds = part["rounds"]
    for mode in ("hist", "p"):
        for api in UPROBE_APIS:
            base, pp, em = ([r[c]["api"][api]["cpu_ns_median"] for r in rounds]
                            for c in ("none", "pp-" + mode, "empty-" + mode))
            wbase, wpp, wem = ([r[c]["api"][api]["wall_ns_median"] for r in rounds]
                               for c in ("none", "pp-" + mode, "empty-" + mode))
            add_pp = [p - b for p, b in zip(pp, base)]
            add_em = [e - b for e, b in zip(em, base)]
            ratios = [p / e if e > 50 else None for p, e in zip(add_pp, add_em)]
            wratios = [(p - b) / (e - b) if e - b > 50 else None for p, e, b in zip(wpp, wem, wbase)]
            hits = {}
            for r in rounds:
                for prefix in ("pp-", "empty-"):
                    for prog, (runs, ns) in r[prefix + mode]["api"][api].get("progs", {}).items():
                        e = hits.setdefault(prog, {"nspr": [], "runs_per_call": []})
                        e["nspr"].append(ns / runs)
                        e["runs_per_call"].append(runs / calls)
            out["%s %s" % (mode, api)] = {
                "none_ns": med(base), "pp_ns": med(pp), "empty_ns": med(em),
                "added_pp_ns": med(add_pp), "added_empty_ns": med(add_em),
                "ratio": med(ratios), "ratios": ratios,
                "wall_none_ns": med(wbase), "wall_pp_ns": med(wpp), "wall_empty_ns": med(wem),
                "wall_ratio": med(wratios), "wall_ratios": wratios,
                "load": med([r["pp-" + mode]["load_end"][0] for r in rounds]),
                "progs": {p: {"ns_per_run": med(e["nspr"]),
                              "runs_per_call": med(e["runs_per_call"])} for p, e in hits.items()
                          if med(e["runs_per_call"]) >= 0.5}}
    for u in out.values():
        for p, e in u["progs"].items():
            empty = empty_run(u["progs"], p)
            e["x_empty"] = e["ns_per_run"] / empty if empty else None
    return out


def print_uprobes(um):
    print("\nUprobes on cuda_loop's calls: the calling thread's CPU ns per call (median over "
          "rounds) and the cost added to a call, pipeprof vs empty programs on the same "
          "instructions (wall-time ratio beside it):")
    print("  %-14s %8s %9s %9s %9s %9s %7s %7s %6s" % (
        "mode api", "none", "empty", "pipeprof", "+empty", "+pipeprof", "ratio", "wall", "load"))
    for key, u in um.items():
        if u["added_empty_ns"] is None or u["added_empty_ns"] < 50:
            print("  %-14s %8.0f %9s (not probed in this mode)" % (key, u["none_ns"], "-"))
            continue
        print("  %-14s %8.0f %9.0f %9.0f %9.0f %9.0f %6.3fx %6.3fx %6.2f" % (
            key, u["none_ns"], u["empty_ns"], u["pp_ns"], u["added_empty_ns"], u["added_pp_ns"],
            u["ratio"], u["wall_ratio"] or 0, u["load"] or 0))
    print("\n  BPF statistics, ns per run during each call's batch (runs per call; x the empty "
          "programs' ns per run):")
    for key, u in um.items():
        progs = u["progs"]
        if not progs:
            continue
        print("  %-14s %s" % (key, ", ".join(
            "%s %.0f (%.0f%s)" % (p, e["ns_per_run"], e["runs_per_call"],
                                  "; %.1fx" % (e["ns_per_run"] / empty_run(progs, p))
                                  if empty_run(progs, p) else "")
            for p, e in sorted(progs.items()))))


def empty_run(progs, prog):
    """ns per run of the empty program in the place of pipeprof's prog (None for an empty one)."""
    if prog.startswith("empty_"):
        return None
    e = progs.get("empty_uretprobe" if prog.endswith("_return") else "empty_uprobe")
    return e and e["ns_per_run"]


# -- verdicts and main -------------------------------------------------------------------------

def verdicts(rows, um):
    out = []
    for r in rows:
        if r["program"] in SCHED_PROGS and r["ns_per_run"] is not None:
            out.append({"target": "sched <= %d ns/event" % SCHED_TARGET_NS, "program": r["program"],
                        "config": r["config"], "value": r["ns_per_run"],
                        "pass": r["ns_per_run"] <= SCHED_TARGET_NS})
    for key, u in (um or {}).items():
        if u["ratio"] is not None:
            out.append({"target": "uprobe cost per call <= %.2fx empty" % UPROBE_TARGET,
                        "program": API_NAMES[key.split()[1]], "config": "cuda_loop, " + (
                            "-p" if key.startswith("p ") else "hist"),
                        "value": u["ratio"], "pass": u["ratio"] <= UPROBE_TARGET})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3, help="rounds of part 1 (default 3)")
    ap.add_argument("--seconds", type=float, default=5, help="window per configuration (default 5)")
    ap.add_argument("--uprobe-rounds", type=int, default=5, help="rounds of part 2 (default 5)")
    ap.add_argument("--calls", type=int, default=5000, help="calls per batch (default 5000)")
    ap.add_argument("--batches", type=int, default=5, help="batches per configuration (default 5)")
    ap.add_argument("--only", choices=["programs", "uprobes"], help="run only one part")
    ap.add_argument("--workloads", help="part 1: comma-separated subset of %s, %s" % (
        ", ".join(WORKLOADS), UNRELATED))
    ap.add_argument("--no-unrelated", action="store_true", help="skip unrelated_cost.py")
    ap.add_argument("--max-load", type=float, default=1.5,
                    help="wait for a 1-minute load average below this before each round (1.5)")
    ap.add_argument("--wait-quiet", type=float, default=300,
                    help="wait at most this many seconds for it (default 300)")
    ap.add_argument("--json", default=os.path.join(OUT, "bench-progs.json"),
                    help="raw numbers (default .output/bench-progs.json)")
    args = ap.parse_args()
    args.workloads = args.workloads.split(",") if args.workloads else None
    if os.geteuid() != 0:
        sys.exit("prog_cost.py: run as root (pipeprof loads BPF programs)")
    for f in (PIPEPROF, CTXLOAD, CUDA_LOOP, EMPTY_PROGS, FAKE_CUDART):
        if not os.access(f, os.R_OK):
            sys.exit("prog_cost.py: %s is missing: `make pipeprof fixtures` and `make bench-progs`"
                     % f)

    def on_signal(sig, frame):
        raise SystemExit(128 + sig)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    stats, notes = Stats(), []
    started = datetime.datetime.now(datetime.timezone.utc)
    result = {"started": started.isoformat(timespec="seconds"), "host": platform.node(),
              "kernel": platform.release(), "cpus": os.cpu_count(), "argv": sys.argv,
              "load_start": compare.loadavg(), "bpf_stats_sysctl_start": stats_sysctl(),
              "notes": notes}
    rows, um = [], None
    try:
        if args.only != "uprobes":
            rounds = programs_part(args, stats, notes)
            meds = program_medians(rounds)
            rows = summary_rows(meds)
            result.update(program_rounds=rounds, program_medians=meds, summary=rows,
                          program_sizes=SIZES)
            print_programs(meds, rows)
        if args.only != "programs":
            part = uprobes_part(args, stats, notes)
            part["calls"] = args.calls
            um = uprobe_medians(part, args.calls)
            result.update(uprobes=part, uprobe_medians=um)
            print_uprobes(um)
    finally:
        stats.off()
        result["bpf_stats_sysctl_end"] = stats_sysctl()
        result["load_end"] = compare.loadavg()
    v = verdicts(rows, um)
    result["verdicts"] = v
    print("\nTargets (pass/miss, never a failure):")
    for x in v:
        val = ("%.0f ns" % x["value"]) if x["target"].startswith("sched") else "%.3fx" % x["value"]
        print("  %-4s %-36s %-24s %-20s %s" % ("pass" if x["pass"] else "MISS", x["target"],
                                               x["program"], x["config"], val))
    for n in notes:
        print("note: " + n)
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(result, f, indent=1)
    print("load average %.2f at the start, %.2f at the end; raw numbers: %s" % (
        result["load_start"][0], result["load_end"][0], args.json))
    return 0


if __name__ == "__main__":
    sys.exit(main())
