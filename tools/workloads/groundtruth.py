# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Ground truth for pipeprof's scenario workloads (stdlib only).

A workload's trainer thread records what it is doing as segments
(kind, t0_ns, t1_ns, cpu0_ns, cpu1_ns, runq0_ns, runq1_ns): wall time from
time.monotonic_ns() (CLOCK_MONOTONIC, the clock bpf_ktime_get_ns() reads), the
thread's own CPU time from time.thread_time_ns() (CLOCK_THREAD_CPUTIME_ID) and
the kernel's count of the thread's time runnable-but-waiting-for-a-CPU (field 2
of /proc/thread-self/schedstat, "run_delay": from wakeup or preemption to
switch-in). Each kind says which state of /work/shared/stall-model.md the rest
of its wall time belongs to:

    kind      CPU time   run_delay   wall - CPU - run_delay
    compute   RUNNING    RUNQ        RUNNING (on-CPU but not in the thread clock:
                                              hypervisor steal; with no run_delay
                                              column, all of wall - CPU is RUNQ)
    data      RUNNING    RUNQ        DATA_WAIT   (blocked in next(DataLoader iterator))
    io        RUNNING    RUNQ        IO_WAIT     (synchronous uncached read, major faults)
    other     RUNNING    RUNQ        OTHER       (sleep: woken by a timer)
    thread    RUNNING    RUNQ        THREAD_WAIT (blocked on another thread of the process:
                                                  a queue fed by a Python thread, a lock)
    comm      RUNNING    RUNQ        COMM_WAIT   (in a collective: DDP's allreduce in backward)
    gpu       GPU_WAIT   GPU_WAIT    GPU_WAIT    (inside a synchronising CUDA call)
    nccl      RUNNING    COMM_WAIT   COMM_WAIT   (around and in a probed NCCL call: the thread
                                                  waits off-CPU inside it, and its CPU time is
                                                  the call's overhead around it, outside the
                                                  probes; the run_delay is the wakeup's, inside)

Time between segments (loop overhead) counts as RUNNING, except its run_delay
(known from the neighbouring segments), which is RUNQ. Workloads keep the gaps
tiny and put every wait inside a segment. Without the run_delay columns (a
5-field segment) a wait kind's wall - CPU is all its wait state.

Protocol shared by every workload: once warmed up it prints
`READY pid=<pid> tid=<tid>` (flushed), runs --duration seconds more, writes the
--truth JSON file and exits 0. SIGTERM/SIGINT end the run early: the current
step finishes, the truth file is written and the exit status is 0 (a second
signal stops it at once, still writing the file).
"""

import argparse
import json
import os
import signal
import sys
import threading
import time

STATES = ("RUNNING", "RUNQ", "GPU_WAIT", "IO_WAIT", "DATA_WAIT", "THREAD_WAIT", "COMM_WAIT", "OTHER")

# kind -> state of the off-CPU (wall - cpu) part; 'gpu' (WHOLE) is GPU_WAIT as a whole.
WAIT_STATE = {
    "compute": "RUNQ",
    "data": "DATA_WAIT",
    "io": "IO_WAIT",
    "other": "OTHER",
    "gpu": "GPU_WAIT",
    "thread": "THREAD_WAIT",
    "comm": "COMM_WAIT",
    "nccl": "COMM_WAIT",
}

# Kinds whose whole wall time is their state: a probed call, whatever the thread does inside.
WHOLE = ("gpu",)
# Kinds whose run_delay is their wait's: the thread is runnable inside the probed call, after
# its wakeup.
RUNQ_IS_WAIT = ("nccl",)

_mono = time.monotonic_ns
_cpu = time.thread_time_ns


def _schedstat_reader():
    """Returns a function giving the calling thread's run_delay (ns), or None if unavailable."""
    try:
        fd = os.open("/proc/thread-self/schedstat", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    pread = os.pread

    def run_delay():
        return int(pread(fd, 96, 0).split()[1])

    try:
        run_delay()
    except (OSError, IndexError, ValueError):
        os.close(fd)
        return None
    return run_delay


class _Seg:
    """Context manager for one segment; reused, so a `with` costs a few clock reads."""

    __slots__ = ("rec", "kind", "t0", "c0", "q0")

    def __init__(self, rec, kind):
        self.rec = rec
        self.kind = kind

    def __enter__(self):
        # wall brackets the others: read it first on entry and last on exit
        self.t0 = _mono()
        self.q0 = self.rec._run_delay()
        self.c0 = _cpu()
        return self

    def __exit__(self, *exc):
        c1 = _cpu()
        q1 = self.rec._run_delay()
        t1 = _mono()
        if self.rec.recording:
            self.rec.segments.append((self.kind, self.t0, t1, self.c0, c1, self.q0, q1))
        return False


class Recorder:
    """Records the calling (trainer) thread's segments and step ends."""

    def __init__(self, scenario, truth_path=None, **extra):
        self.scenario = scenario
        self.truth_path = truth_path
        self.pid = os.getpid()
        self.tid = threading.get_native_id()
        self.segments = []
        self.steps = []
        self.extra = dict(extra)
        self.recording = False
        self.ready_ns = None
        self.end_ns = None
        self.stop = False
        self.stop_reason = None
        self._deadline = None
        self._signals = 0
        self._segs = {}
        # must be the trainer thread: the schedstat file is the calling thread's
        reader = _schedstat_reader()
        self.has_run_delay = reader is not None
        self._run_delay = reader or (lambda: 0)

    # -- recording -------------------------------------------------------
    def seg(self, kind):
        if kind not in WAIT_STATE:
            raise ValueError("unknown segment kind %r" % kind)
        s = self._segs.get(kind)
        if s is None:
            s = self._segs[kind] = _Seg(self, kind)
        return s

    def step(self):
        if self.recording:
            self.steps.append(_mono())

    # -- lifecycle -------------------------------------------------------
    def install_signal_handlers(self):
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)

    def _on_signal(self, signum, frame):
        if os.getpid() != self.pid:
            # a forked child (DataLoader worker) inherited this handler: SIGTERM kills it as
            # usual; SIGINT is left to the main process, which shuts the workers down
            if signum == signal.SIGTERM:
                signal.signal(signum, signal.SIG_DFL)
                os.kill(os.getpid(), signum)
            return
        self._signals += 1
        self.stop = True
        self.stop_reason = signal.Signals(signum).name
        if self._signals > 1:
            raise SystemExit(0)

    def ready(self, duration, **extra):
        """Warm-up done: start recording, print READY, arm the --duration deadline."""
        self.extra.update(extra)
        self.recording = True
        self.ready_ns = _mono()
        self._deadline = self.ready_ns + int(duration * 1e9)
        sys.stdout.write("READY pid=%d tid=%d\n" % (self.pid, self.tid))
        sys.stdout.flush()

    def running(self):
        """True while the loop should go on (before the deadline, no signal)."""
        if self.stop:
            return False
        if self._deadline is not None and _mono() >= self._deadline:
            self.stop_reason = self.stop_reason or "duration"
            return False
        return True

    def sleep(self, seconds):
        """Sleep in an 'other' segment, waking early on a stop signal."""
        end = _mono() + int(seconds * 1e9)
        while not self.stop:
            left = end - _mono()
            if left <= 0:
                break
            with self.seg("other"):
                time.sleep(min(left / 1e9, 0.05))

    def to_json(self):
        return {
            "scenario": self.scenario,
            "pid": self.pid,
            "tid": self.tid,
            "clock": "CLOCK_MONOTONIC",
            "ready_ns": self.ready_ns,
            "end_ns": self.end_ns,
            "stop_reason": self.stop_reason,
            "segment_fields": ["kind", "t0_ns", "t1_ns", "cpu0_ns", "cpu1_ns"] +
                              (["runq0_ns", "runq1_ns"] if self.has_run_delay else []),
            "segments": [list(s) if self.has_run_delay else list(s[:5]) for s in self.segments],
            "steps": self.steps,
            "extra": self.extra,
        }

    def write(self, path=None):
        path = path or self.truth_path
        if self.end_ns is None:
            self.end_ns = _mono()
        self.recording = False
        if not path:
            return
        if os.path.exists(path) and not os.path.isfile(path):
            # /dev/null, a FIFO: written through, never replaced by a renamed regular file
            # (which left the machine with a /dev/null that tmux and others cannot use).
            with open(path, "w") as f:
                json.dump(self.to_json(), f, separators=(",", ":"))
            return
        tmp = "%s.tmp.%d" % (path, os.getpid())
        with open(tmp, "w") as f:
            json.dump(self.to_json(), f, separators=(",", ":"))
        os.replace(tmp, path)

    def summary(self):
        """One line for humans: steps/s and the shares over the recorded span."""
        end = self.end_ns or _mono()
        if not self.ready_ns or end <= self.ready_ns:
            return "no recorded span"
        sh = shares(self.to_json(), self.ready_ns, end)
        secs = (end - self.ready_ns) / 1e9
        parts = " ".join("%s=%.3f" % (k, v) for k, v in sh.items() if v >= 0.0005)
        # Rate over whole steps (first to last completion), so it is not quantised by the
        # step count the way steps/duration is: benchmarks compare it to a fraction of 1%.
        n = len(self.steps)
        rate = (n - 1) * 1e9 / (self.steps[-1] - self.steps[0]) if n > 1 and \
            self.steps[-1] > self.steps[0] else n / secs
        return "%s: %d steps in %.1f s (%.3f steps/s); %s" % (
            self.scenario, n, secs, rate, parts)


def add_common_args(parser, duration=30.0):
    parser.add_argument("--duration", type=float, default=duration,
                        help="seconds to run after READY (default %(default)s)")
    parser.add_argument("--truth", default=None, help="write the ground-truth JSON here at exit")
    parser.add_argument("--quiet", action="store_true", help="no summary line at exit")
    parser.add_argument("--torch-profiler", action="store_true",
                        help="run the whole loop inside torch.profiler.profile(activities=[CPU]) "
                        "(the in-process alternative tools/bench/compare.py measures); prints "
                        "'PROFILER off events=N' once it has left the profile")
    return parser


def run(rec, args, warmup, step, cleanup=None):
    """Common driver: warmup() -> READY -> step() until done -> truth file.

    warmup() returns a dict of extra info (or None); step() does one training step and
    records its own segments; the step end is recorded here.
    """
    # Only the main thread may; a trainer thread's main thread installs them (thread_timeouts.py).
    if threading.current_thread() is threading.main_thread():
        rec.install_signal_handlers()
    prof = None
    try:
        info = warmup() or {}
        if rec.stop:
            return 0
        if getattr(args, "torch_profiler", False):
            import torch.profiler
            prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
            prof.__enter__()    # left in the finally below, after the loop
            info["torch_profiler"] = True
        rec.ready(args.duration, **info)
        try:
            while rec.running():
                step()
                rec.step()
        except Exception as e:
            # a signal to the whole process group also stops the DataLoader workers, and the
            # loader then raises in next(): expected while stopping, an error otherwise
            if not rec.stop:
                raise
            rec.extra["error_while_stopping"] = repr(e)
    finally:
        rec.end_ns = rec.end_ns or _mono()
        rec.recording = False
        if prof is not None:
            prof.__exit__(None, None, None)   # builds the event list, as leaving a `with` does
            sys.stdout.write("PROFILER off events=%d\n" % len(prof.events()))
            sys.stdout.flush()
        try:
            if cleanup is not None:
                cleanup()
        finally:
            rec.write()
        if not getattr(args, "quiet", False):
            sys.stderr.write(rec.summary() + "\n")
            sys.stderr.flush()
    return 0


# -- analysis -----------------------------------------------------------------

def load(truth):
    if isinstance(truth, dict):
        return truth
    with open(truth) as f:
        return json.load(f)


def _with_gaps(segments):
    """The segments, each 7 fields (run_delay None when not recorded), with the gaps between
    consecutive segments as 'gap' segments (their CPU and run_delay from the neighbours)."""
    prev = None
    for seg in segments:
        if len(seg) < 7:
            seg = list(seg[:5]) + [None, None]
        if prev is not None and seg[1] > prev[2]:
            yield ("gap", prev[2], seg[1], prev[4], seg[3], prev[6], seg[5])
        yield seg
        prev = seg


def shares(truth, start_ns, end_ns, whole=WHOLE):
    """Fraction of [start_ns, end_ns] the trainer spent in each of the 8 states.

    Segments are clipped to the window; a partly covered segment contributes its CPU time and
    run_delay in proportion to the covered part. Time not covered by any segment is RUNNING.
    Kinds in `whole` count whole as their state (WHOLE by default).
    """
    truth = load(truth)
    start_ns, end_ns = int(start_ns), int(end_ns)
    if end_ns <= start_ns:
        raise ValueError("empty window")
    ns = dict.fromkeys(STATES, 0.0)
    covered = 0.0
    for kind, t0, t1, c0, c1, q0, q1 in _with_gaps(truth["segments"]):
        a, b = max(t0, start_ns), min(t1, end_ns)
        if b <= a:
            continue
        part = b - a
        covered += part
        if kind in whole:
            ns[WAIT_STATE[kind]] += part
            continue
        wall = t1 - t0
        scale = part / wall
        cpu = min(max(c1 - c0, 0), wall)
        if q0 is None:
            runq = 0 if kind == "gap" else None
        else:
            runq = min(max(q1 - q0, 0), wall - cpu)
        if runq is None or kind in RUNQ_IS_WAIT:  # no run_delay column: the 5-field model
            ns["RUNNING"] += cpu * scale
            ns[WAIT_STATE[kind]] += part - cpu * scale
            continue
        rest = (wall - cpu - runq) * scale
        ns["RUNNING"] += cpu * scale
        ns["RUNQ"] += runq * scale
        if kind in ("compute", "gap"):
            ns["RUNNING"] += rest
        else:
            ns[WAIT_STATE[kind]] += rest
    window = end_ns - start_ns
    ns["RUNNING"] += window - covered
    return {s: ns[s] / window for s in STATES}


def count_segments(truth, kind, start_ns, end_ns):
    """Segments of `kind` that lie inside [start_ns, end_ns] (those cut by an edge count 1/2)."""
    truth = load(truth)
    n = 0.0
    for seg in truth["segments"]:
        k, t0, t1 = seg[0], seg[1], seg[2]
        if k != kind or t1 <= start_ns or t0 >= end_ns:
            continue
        n += 1.0 if (t0 >= start_ns and t1 <= end_ns) else 0.5
    return n


def covers(truth, start_ns, end_ns):
    """True if the recorded span contains the window."""
    truth = load(truth)
    return bool(truth.get("ready_ns")) and truth["ready_ns"] <= start_ns and \
        (truth.get("end_ns") or 0) >= end_ns


def format_table(rows, title=None):
    """rows: list of (label, {state: fraction}); returns a text table in percent."""
    out = []
    if title:
        out.append(title)
    out.append("%-12s" % "" + "".join("%12s" % s for s in STATES))
    for label, d in rows:
        out.append("%-12s" % label + "".join(
            "%12s" % ("-" if d.get(s) is None else "%.1f%%" % (100 * d[s])) for s in STATES))
    return "\n".join(out)


def main(argv=None):
    p = argparse.ArgumentParser(description="Shares of a ground-truth file over a window")
    p.add_argument("truth")
    p.add_argument("--start", type=int, help="window start (CLOCK_MONOTONIC ns); default READY")
    p.add_argument("--end", type=int, help="window end; default the end of the run")
    a = p.parse_args(argv)
    t = load(a.truth)
    start = a.start or t["ready_ns"]
    end = a.end or t["end_ns"]
    sh = shares(t, start, end)
    print(format_table([(t["scenario"], sh)], "window %.3f s" % ((end - start) / 1e9)))
    print("sum %.4f" % sum(sh.values()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
