#!/usr/bin/python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Side-by-side overhead: three training loops, each untraced and under pipeprof -p, pipeprof
hist (every kind), pipeprof daemon, torch.profiler (CPU) and a bpftrace script doing the same
sched + uprobe accounting (tools/bench/sched_uprobe.bt). A benchmark, not a test: it prints
figures and asserts nothing.

The loops: tools/workloads/data_bound.py (a DataLoader with one worker feeding an MLP),
cpu_bound.py (an MLP's forward/backward/update) and launch_heavy.py (tiny kernels launched through
the fake CUDA runtime's cudaLaunchKernel, ~50k launches/s, a sync every 100). Each runs as one
long process per loop, through a symlink to /usr/bin/python3 with its own command name (the
daemon's --match picks it and nothing else on the machine). In each round every configuration
is measured once on that running loop, in an order rotated by one each round: the tracer
attaches (the loop is already running), the window starts --settle seconds after it reports
being attached and lasts --seconds, then the tracer is stopped and waited for. torch.profiler
is the in-process alternative, so it cannot attach: for its window the long-running loop is
stopped (SIGSTOP to its process group, SIGCONT after) and a fresh copy of the loop runs with
--torch-profiler, its whole loop inside torch.profiler.profile(activities=[ProfilerActivity.CPU]);
the window starts --warmup seconds after its READY, as for the long-running loop. (A profile
entered and left again in one process costs less each time after the first, as its buffers are
reused: one profile over the whole loop is what a user runs.)

The loop's rate in a window comes from its own step timestamps (its --truth file, written when
it exits): whole steps from the first to the last completion inside the window. Per round the
slowdown of a configuration is untraced rate / traced rate (both from that round); the table
gives the median rate and the median slowdown over the rounds. Raw numbers go to --json.

Before measuring, the 1-minute load average must fall below --max-load (checked every 30 s for
up to --wait-quiet seconds, then it goes on with a warning); the load at each window's end is
recorded, and so is the share of each window the loop's main thread spent waiting for a CPU.
An "A/A control" column measures a second untraced window per round: the noise floor. Targets
(pass/miss, never a failure): slowdown <= 1.005 on the DataLoader and CPU-bound
loops and <= 1.02 on the launch-heavy loop, for pipeprof with default settings (-p, daemon).
One untraced window per round cannot resolve 0.5% on a VM whose speed wanders by 1-3%:
tools/bench/targets.py brackets every traced window with untraced ones and gives each target a
confidence interval.

"bpftrace profile", on request (--configs; targets.py, stolen.py): bpftrace's 49 Hz sampler
of the loop's user stacks, what a user would run to see where a process spends its CPU.

Without bpftrace its column says "skipped" and a note says why. bpftrace needs tracefs: where
/sys/kernel/tracing is not mounted, the benchmark mounts it and unmounts it at the end.

    sudo tools/bench/compare.py                      # 5 rounds of 5 s windows, ~13 min
    sudo tools/bench/compare.py --quick              # 2 rounds of 2 s windows, ~3 min
    sudo tools/bench/compare.py --rounds 7 --seconds 8 --loops dataloader,cpu-bound
    sudo tools/bench/compare.py --python /opt/venv/bin/python3 --loops cuda-launch,cuda-data
                                # real CUDA loops (tools/workloads/cuda_train.py), GPU machine
"""
import argparse
import bisect
import datetime
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PIPEPROF = os.path.join(REPO, "pipeprof")
WORKLOADS = os.path.join(REPO, "tools", "workloads")
BT_SCRIPT = os.path.join(REPO, "tools", "bench", "sched_uprobe.bt")
FAKE_CUDART = os.path.join(REPO, ".output", "fakecuda", "libcudart.so.13")
TRACEFS = "/sys/kernel/tracing"
sys.path.insert(0, WORKLOADS)
import groundtruth  # noqa: E402
HIST_KINDS = ["offcpu", "runq", "io", "gpu-sync", "launch", "memcpy", "batch-wait", "step"]
# The command name of every loop this run starts (at most 15 characters).
COMM = "ppcmp%d" % os.getpid()

# name, script, extra arguments, unit, label in the table
LOOPS = [
    ("dataloader", "data_bound.py", [], "steps/s", "DataLoader (data_bound.py)"),
    ("cpu-bound", "cpu_bound.py", [], "steps/s", "CPU-bound (cpu_bound.py)"),
    ("launch-heavy", "launch_heavy.py", [], "launches/s", "launch-heavy (launch_heavy.py)"),
]
# On a GPU machine only (--loops names them; --python an interpreter whose torch has CUDA): real
# CUDA loops of tools/workloads/cuda_train.py, steps/s.
CUDA_LOOPS = [
    ("cuda-data", "cuda_train.py", ["--mode", "data"], "steps/s", "CUDA DataLoader (cuda_train.py)"),
    ("cuda-launch", "cuda_train.py", ["--mode", "launch"], "steps/s",
     "CUDA launch-heavy (cuda_train.py)"),
    ("cuda-gpu", "cuda_train.py", ["--mode", "gpu"], "steps/s", "CUDA GPU-bound (cuda_train.py)"),
]
# "A/A control" is a second untraced window in each round, compared with the first like any
# tracer: its slowdown is what no overhead at all looks like on this machine today.
CONFIGS = ["untraced", "A/A control", "pipeprof -p", "pipeprof -p -F 0", "pipeprof hist",
           "pipeprof daemon", "torch.profiler", "bpftrace", "bpftrace profile"]
NO_BPFTRACE = "bpftrace not installed (apt-get install bpftrace, or make deps)"
# Not in the side-by-side table unless --configs names them.
ON_REQUEST = ("bpftrace profile",)
# Configurations the targets apply to: pipeprof with default settings.
TARGET_CONFIGS = ("pipeprof -p", "pipeprof daemon")
TARGETS = {"dataloader": 1.005, "cpu-bound": 1.005, "launch-heavy": 1.02}
# Generous: on a busy machine pipeprof has been seen to take a minute to attach.
ATTACH_TIMEOUT = 180
STOP_TIMEOUT = 180


class Lines:
    """A child process whose stdout (stderr merged) is read line by line in a thread."""

    def __init__(self, argv, **kw):
        self.argv = argv
        self.lines = []
        self._cond = threading.Condition()
        self.p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, text=True, errors="replace",
                                  start_new_session=True, **kw)
        self.pid = self.p.pid
        self._reader = threading.Thread(target=self._pump, daemon=True)
        self._reader.start()

    def _pump(self):
        for line in self.p.stdout:
            with self._cond:
                self.lines.append(line.rstrip("\n"))
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def wait_line(self, pattern, timeout, since=0):
        """(match, index) of the first line at index >= since matching pattern, or (None, None)
        after timeout or once the process has exited."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self._cond:
            i = since
            while True:
                while i < len(self.lines):
                    m = rx.search(self.lines[i])
                    if m:
                        return m, i
                    i += 1
                left = deadline - time.monotonic()
                if left <= 0 or self.p.poll() is not None:
                    return None, None
                self._cond.wait(min(left, 0.2))

    def count(self):
        with self._cond:
            return len(self.lines)

    def text(self, since=0):
        with self._cond:
            return "\n".join(self.lines[since:])

    def stop(self, sig, timeout=STOP_TIMEOUT):
        """Signals the process and waits for it; its exit status (None if it had to be killed)."""
        if self.p.poll() is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass
        try:
            rc = self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None
        self._reader.join(10)   # what it printed last (a report, maps) may still be in the pipe
        return rc

    def kill(self):
        if self.p.poll() is None:
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.p.wait()


class Dialog:
    """A helper program that prints `READY pid=<pid>`, then answers each line on its standard
    input with one line (tools/bench/cuda_loop.c, tools/bench/stolen.c); end of input ends it."""

    def __init__(self, argv, what):
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                  start_new_session=True)
        line = self.p.stdout.readline()
        m = re.match(r"READY pid=(\d+)", line)
        if not m:
            self.p.kill()
            self.p.wait()
            raise RuntimeError("%s did not start: %r" % (what, line))
        self.pid = int(m.group(1))

    def alive(self):
        return self.p.poll() is None

    def ask(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        return self.p.stdout.readline()

    def close(self):
        if self.p.poll() is None:
            self.p.stdin.close()
            try:
                self.p.wait(10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()


# -- the machine -----------------------------------------------------------------------------

def loadavg():
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def cpu_jiffies():
    """(busy, steal, total) jiffies of all CPUs since boot, from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]   # idle + iowait
    total = sum(v[:8])   # guest time is already in user
    return total - idle, v[7], total


def proc_cpu_s(pid):
    """utime + stime of a process, seconds; None once it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_quiet(max_load, wait_s, notes):
    """Waits (up to wait_s) for the 1-minute load average to drop below max_load."""
    load = loadavg()
    deadline = time.monotonic() + wait_s
    while load[0] >= max_load and time.monotonic() < deadline:
        print("load average %.2f %.2f %.2f >= %.2f: waiting for a quiet machine (%.0f s left)"
              % (*load, max_load, deadline - time.monotonic()), flush=True)
        time.sleep(min(30, max(1, deadline - time.monotonic())))
        load = loadavg()
    if load[0] >= max_load:
        msg = "machine not quiet: load average %.2f %.2f %.2f at the start (wanted < %.2f); " \
              "figures are noisier" % (*load, max_load)
        print("warning: " + msg, flush=True)
        notes.append(msg)
    return load


def check_built(prog, loop_names):
    """Exits with a one-line error naming the make target where pipeprof, or the fake runtime
    the launch-heavy loop needs, is not built."""
    needs = [(PIPEPROF, "make pipeprof")] + (
        [(FAKE_CUDART, "make fixtures")] if "launch-heavy" in loop_names else [])
    for path, what in needs:
        if not os.path.exists(path):
            sys.exit("%s: %s missing (%s)" % (prog, path, what))


def machine():
    return {"host": platform.node(), "kernel": platform.release(), "cpus": os.cpu_count()}


def save_json(path, out):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
    print("raw numbers: %s" % path)


def ensure_tracefs(notes):
    """bpftrace reads tracepoint formats and makes uprobes through tracefs. Returns (usable,
    mounted_here)."""
    if os.path.exists(os.path.join(TRACEFS, "events")):
        return True, False
    r = subprocess.run(["mount", "-t", "tracefs", "tracefs", TRACEFS], capture_output=True,
                       text=True)
    if r.returncode:
        notes.append("bpftrace column skipped: tracefs is not mounted and mounting it failed: "
                     + r.stderr.strip())
        return False, False
    notes.append("tracefs was not mounted: mounted at %s for bpftrace, unmounted after" % TRACEFS)
    return True, True


# -- the tracers -----------------------------------------------------------------------------

class Tracer:
    """One configuration. attach(loop) returns once the tracer is in place (raises RuntimeError
    if it is not); detach() stops it and returns a little evidence that it traced. truth is
    None when the rate comes from the loop's own truth file."""

    proc = None
    truth = None

    def cleanup(self):
        if self.proc is not None:
            self.proc.kill()

    def cpu_s(self):
        return proc_cpu_s(self.proc.pid) if self.proc else None

    def _start(self, argv, ready, what):
        self.proc = Lines(argv, cwd=REPO)
        m, _ = self.proc.wait_line(ready, ATTACH_TIMEOUT)
        if m is None:
            self.proc.kill()
            raise RuntimeError("%s did not attach:\n%s" % (what, self.proc.text()[-2000:]))
        return m

    def _stop(self, sig, what):
        rc = self.proc.stop(sig)
        if rc != 0:
            raise RuntimeError("%s exited %s:\n%s" % (what, rc, self.proc.text()[-2000:]))
        return self.proc.text()


class Untraced(Tracer):
    def attach(self, loop):
        pass

    def detach(self):
        return {}


class Report(Tracer):
    """pipeprof -p PID, until SIGINT; the report is printed as it ends."""
    extra = []
    name = "pipeprof -p"

    def attach(self, loop):
        self._start([PIPEPROF, "-p", str(loop.pid)] + self.extra, r"^pipeprof: tracing PID",
                    self.name)

    def detach(self):
        out = self._stop(signal.SIGINT, self.name)
        m = re.search(r"^Verdict: (.*)$", out, re.M)
        return {"verdict": m.group(1)[:120] if m else None}


class ReportNoSamples(Report):
    """The same with the CPU sampler off: beside "pipeprof -p", what the sampler costs."""
    extra = ["-F", "0"]
    name = "pipeprof -p -F 0"


class Hist(Tracer):
    """pipeprof hist -p PID with every kind, one interval ended by SIGINT."""

    def attach(self, loop):
        self._start([PIPEPROF, "hist", "-p", str(loop.pid)] + HIST_KINDS,
                    r"^pipeprof: tracing PID", "pipeprof hist")

    def detach(self):
        out = self._stop(signal.SIGINT, "pipeprof hist")
        counts = re.findall(r"^count (\d+),", out, re.M)
        return {"histograms": len(counts), "events": sum(int(c) for c in counts)}


class Daemon(Tracer):
    """pipeprof daemon with default settings but --match (only this run's loops) and a free
    loopback port; it finds the running loop at start and attaches to it."""

    def attach(self, loop):
        self.pid = loop.pid
        self._start([PIPEPROF, "daemon", "--listen", "127.0.0.1:0", "--match", "^%s$" % COMM],
                    r"^pipeprof: attached PID %d\b" % loop.pid, "pipeprof daemon")

    def detach(self):
        out = self._stop(signal.SIGTERM, "pipeprof daemon")
        return {"attached": ("attached PID %d" % self.pid) in out}


class TorchProfiler(Tracer):
    """torch.profiler inside the loop: the running loop is paused and a fresh copy of it runs
    with --torch-profiler (its whole loop in one profile); its own truth file gives the rate."""

    truth = None

    def attach(self, loop):
        self.paused = loop
        os.killpg(loop.pid, signal.SIGSTOP)
        try:
            self.fresh = Loop(loop.name + "-torch-profiler", loop.script, loop.extra,
                              loop.python, loop.tmp, ["--torch-profiler"])
            time.sleep(loop.warmup)
        except BaseException:
            os.killpg(loop.pid, signal.SIGCONT)
            raise

    def detach(self):
        try:
            self.truth = self.fresh.finish()
            m = re.search(r"^PROFILER off events=(\d+)", self.fresh.proc.text(), re.M)
        finally:
            os.killpg(self.paused.pid, signal.SIGCONT)
        return {"events": int(m.group(1)) if m else None, "fresh_process": self.fresh.pid}

    def cpu_s(self):
        return None

    def cleanup(self):
        if getattr(self, "fresh", None) is not None:
            self.fresh.proc.kill()
        if getattr(self, "paused", None) is not None:
            try:
                os.killpg(self.paused.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass


class Bpftrace(Tracer):
    """tools/bench/sched_uprobe.bt on the loop's process and the fake libcudart."""

    def attach(self, loop):
        self.bpftrace = shutil.which("bpftrace")
        self._start([self.bpftrace, "-p", str(loop.pid), BT_SCRIPT, str(loop.pid), FAKE_CUDART],
                    r"^tracing PID", "bpftrace")

    def detach(self):
        out = self._stop(signal.SIGINT, "bpftrace")
        on = re.findall(r"^@on_cpu_ns\[\d+\]: (\d+)", out, re.M)
        calls = re.findall(r"^\[[^\])\n]*[\])]\s+(\d+) \|", out, re.M)   # "[2, 4)   972 |@@|"
        return {"threads": len(on), "on_cpu_s": sum(int(x) for x in on) / 1e9,
                "sync_calls": sum(int(x) for x in calls)}


class BpftraceProfile(Tracer):
    """bpftrace's 49 Hz sampler of the loop's user stacks (profile:hz:49), what a user would run
    to see where a process spends its CPU: beside "pipeprof -p", what a sampler of the same
    rate costs whoever wrote it."""

    PROGRAM = ('BEGIN { printf("tracing PID %d\\n", $1); } '
               'profile:hz:49 /pid == $1/ { @samples[ustack] = count(); }')

    def attach(self, loop):
        bpftrace = shutil.which("bpftrace")
        if not bpftrace:
            raise RuntimeError(NO_BPFTRACE)
        self._start([bpftrace, "-e", self.PROGRAM, str(loop.pid)], r"^tracing PID",
                    "bpftrace profile")

    def detach(self):
        out = self._stop(signal.SIGINT, "bpftrace profile")
        counts = re.findall(r"^\]: (\d+)$", out, re.M)
        return {"stacks": len(counts), "samples": sum(int(x) for x in counts)}


TRACERS = {"untraced": Untraced, "A/A control": Untraced, "pipeprof -p": Report,
           "pipeprof -p -F 0": ReportNoSamples, "pipeprof hist": Hist,
           "pipeprof daemon": Daemon, "torch.profiler": TorchProfiler, "bpftrace": Bpftrace,
           "bpftrace profile": BpftraceProfile}


# -- the loops -------------------------------------------------------------------------------

class Loop:
    """One workload, started once and measured under every configuration in turn."""

    def __init__(self, name, script, extra, python, tmp, more=(), warmup=0):
        self.name, self.script, self.extra, self.python, self.tmp = name, script, extra, python, tmp
        self.warmup = warmup
        fd, self.truth = tempfile.mkstemp(prefix=name + "-", suffix=".json", dir=tmp)
        os.close(fd)
        argv = [python, os.path.join(WORKLOADS, script), "--duration", "86400",
                "--truth", self.truth] + list(extra) + list(more)
        self.proc = Lines(argv, cwd=REPO)
        m, _ = self.proc.wait_line(r"^READY pid=(\d+)", 180)
        if m is None:
            self.proc.kill()
            raise RuntimeError("%s did not start:\n%s" % (name, self.proc.text()[-3000:]))
        self.pid = int(m.group(1))

    def alive(self):
        return self.proc.p.poll() is None

    def finish(self):
        """Stops the loop (SIGINT: it finishes its step and writes its truth file); the file."""
        rc = self.proc.stop(signal.SIGINT, 300)
        if rc != 0 or not os.path.getsize(self.truth):
            raise RuntimeError("%s exited %s:\n%s" % (self.name, rc, self.proc.text()[-3000:]))
        with open(self.truth) as f:
            return json.load(f)


def window_rate(steps, t0, t1, per_step):
    """Rate over the whole steps completed inside [t0, t1] (ns): from the first to the last."""
    i, j = bisect.bisect_left(steps, t0), bisect.bisect_right(steps, t1)
    n = j - i
    if n < 2 or steps[j - 1] <= steps[i]:
        return None, n
    return (n - 1) * per_step * 1e9 / (steps[j - 1] - steps[i]), n


def window_step_ms(steps, t0, t1):
    """The median, 90th percentile and longest of the whole steps inside [t0, t1] (ns), in ms:
    whether a slow window had every step slower or a few stalled. None with under 2 steps."""
    i, j = bisect.bisect_left(steps, t0), bisect.bisect_right(steps, t1)
    d = sorted(steps[k + 1] - steps[k] for k in range(i, j - 1))
    if not d:
        return None
    return {"median": round(d[len(d) // 2] / 1e6, 3),
            "p90": round(d[int(0.9 * (len(d) - 1))] / 1e6, 3), "max": round(d[-1] / 1e6, 3)}


def window_runq(truth, t0, t1):
    """Share of [t0, t1] the loop's main thread spent runnable but waiting for a CPU (from its
    own schedstat run_delay): how much the rest of the machine got in its way."""
    segs = truth["segments"]
    if not segs or len(segs[0]) < 7:
        return None
    i = bisect.bisect_left(truth["_seg_t1"], t0)
    j = bisect.bisect_right(truth["_seg_t0"], t1)
    part = {"segments": segs[max(0, i - 1):j + 1]}
    return groundtruth.shares(part, t0, t1)["RUNQ"]


def measure(loop, config, args):
    """One window of one configuration; the raw record (rate filled in later)."""
    tracer = TRACERS[config]()
    rec = {"config": config, "error": None}
    try:
        t_attach = time.monotonic()
        tracer.attach(loop)
        rec["attach_s"] = round(time.monotonic() - t_attach, 3)
        time.sleep(args.settle)
        busy0, steal0, total0 = cpu_jiffies()
        cpu0 = tracer.cpu_s()
        rec["t0_ns"] = time.monotonic_ns()
        time.sleep(args.seconds)
        rec["t1_ns"] = time.monotonic_ns()
        cpu1 = tracer.cpu_s()
        busy1, steal1, total1 = cpu_jiffies()
        rec["load1"] = loadavg()[0]
        rec["machine_busy"] = round((busy1 - busy0) / max(1, total1 - total0), 4)
        rec["machine_steal"] = round((steal1 - steal0) / max(1, total1 - total0), 4)
        if cpu0 is not None and cpu1 is not None:
            rec["tracer_cpu_s"] = round(cpu1 - cpu0, 3)
        rec["evidence"] = tracer.detach()
        if tracer.truth is not None:
            rate_of(rec, tracer.truth)
    except RuntimeError as e:
        rec["error"] = str(e)
        tracer.cleanup()
    except BaseException:
        tracer.cleanup()
        raise
    if not loop.alive():
        # Not ours: something else on the machine stopped it. Its windows so far still count.
        rec["error"] = "the loop exited during this measurement:\n" + loop.proc.text()[-1000:]
        return rec
    time.sleep(args.gap)
    return rec


def settle_records(loop, pending):
    """Stops loop and fills in the rates of the records measured on it."""
    try:
        truth = loop.finish()
    except RuntimeError as e:
        truth = None
        err = str(e)
    finally:
        loop.proc.kill()
    for rec in pending:
        if rec["error"]:
            rec["rate"] = None
        elif "rate" not in rec:
            if truth is None:
                rec["error"], rec["rate"] = "the loop's truth file was lost: " + err, None
            else:
                rate_of(rec, truth)
        rec["loop_pid"] = loop.pid
    if truth is not None:
        return truth.get("stop_reason")
    return None


def loop_python(interpreter, tmp):
    """A link to the interpreter named COMM (the loops' command name). A virtual environment's
    interpreter finds its packages from pyvenv.cfg beside or above the path it was started by,
    so for one the link gets a copy of that file and the environment's lib/ beside it. A bare
    name (--python python3) is looked up in PATH: the link must not point to a relative one."""
    found = shutil.which(interpreter)
    if not found:
        sys.exit("--python %s: no such executable (in PATH, for a bare name)" % interpreter)
    interpreter = os.path.abspath(found)
    venv = os.path.dirname(os.path.dirname(interpreter))
    if not os.path.exists(os.path.join(venv, "pyvenv.cfg")):
        python = os.path.join(tmp, COMM)
        os.symlink(interpreter, python)
        return python
    os.makedirs(os.path.join(tmp, "bin"))
    shutil.copy(os.path.join(venv, "pyvenv.cfg"), tmp)
    for d in ("lib", "lib64"):
        if os.path.exists(os.path.join(venv, d)):
            os.symlink(os.path.join(venv, d), os.path.join(tmp, d))
    python = os.path.join(tmp, "bin", COMM)
    os.symlink(interpreter, python)
    return python


def run_loop(name, script, extra, args, configs, python, tmp):
    def start():
        print("%s: starting %s" % (name, script), flush=True)
        lp = Loop(name, script, extra, python, tmp, warmup=args.warmup)
        time.sleep(args.warmup)
        return lp

    loop, records, pending, restarts = start(), [], [], []
    try:
        for r in range(args.rounds):
            k = r % len(configs)
            order = configs[k:] + configs[:k]
            for config in order:
                rec = measure(loop, config, args)
                rec["round"] = r + 1
                records.append(rec)
                pending.append(rec)
                print("  %s round %d %-16s %s" % (name, r + 1, config,
                      "attached in %.1f s, load %.2f" % (rec["attach_s"], rec["load1"])
                      if not rec["error"] else "FAILED: " + rec["error"].splitlines()[0]),
                      flush=True)
                if not loop.alive():
                    why = settle_records(loop, pending)
                    msg = "%s: the loop (PID %d) exited in round %d (%s); started again" % (
                        name, loop.pid, r + 1, why or "no truth file")
                    print("warning: " + msg, flush=True)
                    restarts.append(msg)
                    loop, pending = start(), []
    finally:
        settle_records(loop, pending)
    return records, restarts


def rate_of(rec, truth):
    """Fills rec's rate, steps and loop_runq from the truth file of the loop it measured."""
    if "_seg_t0" not in truth:
        truth["_seg_t0"] = [seg[1] for seg in truth["segments"]]
        truth["_seg_t1"] = [seg[2] for seg in truth["segments"]]
    # launches/s for the launch-heavy loop only: data_bound.py says launches_per_step too (its
    # --launches, 0 here), and taken as the unit that zeroed the DataLoader row's every rate.
    per_step = 1
    if truth["scenario"] == "launch_heavy":
        per_step = truth["extra"].get("launches_per_step", 1)
    rec["rate"], rec["steps"] = window_rate(truth["steps"], rec["t0_ns"], rec["t1_ns"], per_step)
    rec["step_ms"] = window_step_ms(truth["steps"], rec["t0_ns"], rec["t1_ns"])
    runq = window_runq(truth, rec["t0_ns"], rec["t1_ns"])
    rec["loop_runq"] = round(runq, 4) if runq is not None else None


def summarize(records, configs, rounds):
    """Per configuration: median rate, per-round slowdowns against that round's untraced."""
    base = {r["round"]: r["rate"] for r in records if r["config"] == "untraced" and r["rate"]}
    out = {}
    for c in configs:
        rates = [r["rate"] for r in records if r["config"] == c and r["rate"]]
        slow = [base[r["round"]] / r["rate"] for r in records
                if r["config"] == c and r["rate"] and r["round"] in base]
        out[c] = {
            "rates": rates,
            "median_rate": statistics.median(rates) if rates else None,
            "slowdowns": [round(s, 5) for s in slow],
            "median_slowdown": statistics.median(slow) if slow else None,
            "slowdown_of_medians": (statistics.median(base.values()) / statistics.median(rates)
                                    if rates and base else None),
            "failed_rounds": sum(1 for r in records if r["config"] == c and not r["rate"]),
        }
    return out


def fmt_rate(x):
    return "%.0f" % x if x >= 1000 else "%.1f" % x if x >= 100 else "%.2f" % x


def table(results, configs, skipped):
    head = "| loop | " + " | ".join(configs) + " |"
    lines = [head, "|" + "---|" * (len(configs) + 1)]
    for name, _, _, unit, label in LOOPS + CUDA_LOOPS:
        if name not in results:
            continue
        cells = []
        for c in configs:
            s = results[name]["summary"].get(c)
            if c in skipped:
                cells.append("skipped")
            elif not s or s["median_rate"] is None:
                cells.append("failed")
            elif c == "untraced":
                cells.append("%s %s" % (fmt_rate(s["median_rate"]), unit))
            else:
                cells.append("%s (%.3fx)" % (fmt_rate(s["median_rate"]), s["median_slowdown"]))
        lines.append("| %s | %s |" % (label, " | ".join(cells)))
    return "\n".join(lines)


def target_lines(results):
    out = []
    for name, limit in TARGETS.items():
        if name not in results:
            continue
        aa = results[name]["summary"].get("A/A control")
        noise = "; A/A control %.4f (rounds %.3f-%.3f)" % (
            aa["median_slowdown"], min(aa["slowdowns"]), max(aa["slowdowns"])) \
            if aa and aa["median_slowdown"] else ""
        for c in TARGET_CONFIGS:
            s = results[name]["summary"].get(c)
            if not s or s["median_slowdown"] is None:
                continue
            v = s["median_slowdown"]
            out.append("%s, %s: %.4f (rounds %.3f-%.3f), target <= %.3f: %s%s" % (
                name, c, v, min(s["slowdowns"]), max(s["slowdowns"]), limit,
                "pass" if v <= limit else "MISS", noise))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.splitlines()[-3:]))
    ap.add_argument("--rounds", type=int, default=5, help="rounds (default %(default)s)")
    ap.add_argument("--python", default="/usr/bin/python3",
                    help="interpreter of the loops (default %(default)s; on a GPU machine one "
                    "whose torch has CUDA, for the cuda-* loops)")
    ap.add_argument("--seconds", type=float, default=5,
                    help="measured window per configuration and round (default %(default)s)")
    ap.add_argument("--warmup", type=float, default=3,
                    help="seconds between a loop's READY and its first window (default %(default)s)")
    ap.add_argument("--settle", type=float, default=0.5,
                    help="seconds between attach and the window (default %(default)s)")
    ap.add_argument("--gap", type=float, default=0.5,
                    help="seconds after a tracer has exited (default %(default)s)")
    ap.add_argument("--loops", default=",".join(x[0] for x in LOOPS),
                    help="loops to run (default %(default)s)")
    ap.add_argument("--configs", default=",".join(c for c in CONFIGS if c not in ON_REQUEST),
                    help="configurations, untraced always included (default: all but %s)"
                    % ", ".join(ON_REQUEST))
    ap.add_argument("--max-load", type=float, default=1.0,
                    help="wait for the 1-minute load average to fall below this (default %(default)s)")
    ap.add_argument("--wait-quiet", type=float, default=300,
                    help="seconds to wait for that before going on anyway (default %(default)s)")
    ap.add_argument("--quick", action="store_true",
                    help="development: 2 rounds of 2 s windows, 1 s warm-up, no waiting for quiet")
    ap.add_argument("--json", default=os.path.join(REPO, ".output", "bench-compare.json"),
                    help="raw numbers and the table (default %(default)s)")
    args = ap.parse_args()
    if args.quick:
        args.rounds, args.seconds, args.warmup, args.wait_quiet = 2, 2, 1, 0
    if os.geteuid() != 0:
        sys.exit("compare.py: run as root (the tracers load BPF programs)")
    loops = [x for x in LOOPS + CUDA_LOOPS if x[0] in args.loops.split(",")]
    check_built("compare.py", [x[0] for x in loops])
    configs = ["untraced"] + [c for c in CONFIGS if c != "untraced" and c in args.configs.split(",")]
    unknown = set(args.configs.split(",")) - set(CONFIGS)
    if unknown:
        sys.exit("compare.py: unknown configurations: %s" % ", ".join(sorted(unknown)))
    notes, skipped = [], {}
    unmount = False
    if "bpftrace profile" in configs and not shutil.which("bpftrace"):
        skipped["bpftrace profile"] = NO_BPFTRACE
    if "bpftrace" in configs:
        if not shutil.which("bpftrace"):
            skipped["bpftrace"] = NO_BPFTRACE
        else:
            ok, unmount = ensure_tracefs(notes)
            if not ok:
                skipped["bpftrace"] = "tracefs unavailable"
    for c, why in skipped.items():
        print("%s column skipped: %s" % (c, why), flush=True)
        notes.append("%s column skipped: %s" % (c, why))
    measured = [c for c in configs if c not in skipped]

    started = datetime.datetime.now().astimezone()
    load_start = wait_quiet(args.max_load, args.wait_quiet, notes)
    print("load average at start: %.2f %.2f %.2f; %d rounds, %.1f s windows, configurations: %s"
          % (*load_start, args.rounds, args.seconds, ", ".join(measured)), flush=True)
    results = {}
    t_start = time.monotonic()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            python = loop_python(args.python, tmp)
            for name, script, extra, unit, label in loops:
                records, restarts = run_loop(name, script, extra, args, measured, python, tmp)
                notes.extend(restarts)
                results[name] = {"unit": unit, "workload": script, "records": records,
                                 "summary": summarize(records, measured, args.rounds)}
    finally:
        if unmount:
            subprocess.run(["umount", TRACEFS])
    load_end = loadavg()
    tbl = table(results, configs, skipped)
    targets = target_lines(results)
    print()
    print(tbl)
    print()
    print("cells: median rate over %d rounds (median of per-round slowdown = untraced rate / "
          "traced rate)" % args.rounds)
    for name in results:
        rq = [r["loop_runq"] for r in results[name]["records"] if r.get("loop_runq") is not None]
        if rq:
            print("%s: the loop's main thread waited for a CPU %.1f%% of the windows (median; "
                  "max %.1f%%)" % (name, 100 * statistics.median(rq), 100 * max(rq)))
    for t in targets:
        print("target " + t)
    for n in notes:
        print("note: " + n)
    print("load average: %.2f %.2f %.2f at the start, %.2f %.2f %.2f at the end; %.0f s"
          % (*load_start, *load_end, time.monotonic() - t_start))
    out = {
        "date": started.isoformat(timespec="seconds"),
        "machine": machine(),
        "load_start": load_start, "load_end": load_end,
        "args": {k: v for k, v in vars(args).items() if k != "json"},
        "configs": configs, "skipped": skipped, "notes": notes,
        "hist_kinds": HIST_KINDS, "targets": TARGETS, "target_configs": list(TARGET_CONFIGS),
        "target_results": targets, "table_markdown": tbl,
        "wall_s": round(time.monotonic() - t_start, 1),
        "loops": results,
    }
    save_json(args.json, out)


if __name__ == "__main__":
    main()
