#!/usr/bin/python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""What pipeprof takes from a CPU-bound thread it traces, gap by gap: tools/bench/stolen.c spins
reading the TSC and counts every pause of over 1 us in its loop (interrupts and what runs in them,
probe traps, IPIs, other tasks on its CPU, the host), in windows untraced and traced in turn. A
benchmark, not a test: it prints figures and asserts nothing.

Why beside targets.py: a real loop's speed on a VM drifts by 1-3% over seconds, which leaves a
0.2% cost unresolved after 100 windows. The spinning thread's pauses are counted one by one;
the time it ran its own code, (wall - pauses) / wall, is its throughput exactly, and a tracer's
direct cost reads to a few hundredths of a percent in a few windows. Each pause is binned by
length, so the cost shows where it comes from (a 49 Hz sampler: ~49 more pauses a second, all of
one length). Not seen here: what a handler evicted from caches and TLBs, which a loop with a
working set refills after it (the spinning loop has none); targets.py's windows on real loops
hold that.

Windows alternate as in targets.py (U X U X U ..., the configurations rotated each cycle, an
"A/A control" measured like a tracer), and a window's slowdown is the untraced run fraction
interpolated at its midpoint over its own run fraction: the same statistics, against the same
targets as the CPU-bound loop (1.005).

    sudo tools/bench/stolen.py                       # 12 cycles of 4 s windows, ~8 min
    sudo tools/bench/stolen.py --configs "pipeprof -p,pipeprof -p -F 0" --cycles 20
"""
import argparse
import datetime
import os
import statistics
import sys
import time
import importlib.util


def _load(name, file):
    spec = importlib.util.spec_from_file_location(
        name, os.path.join(os.path.dirname(os.path.abspath(__file__)), file))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


compare = _load("bench_compare", "compare.py")
targets = _load("bench_targets", "targets.py")

STOLEN = os.path.join(compare.REPO, ".output", "bench", "stolen")
CONFIGS = ["A/A control", "pipeprof -p", "pipeprof -p -F 0", "pipeprof daemon"]
TARGET = compare.TARGETS["cpu-bound"]
NR_BUCKETS = 12
# Bucket k holds pauses of [2^k, 2^(k+1)) us: k 0 also those of 1-2 us, k 11 those of 2 ms on.
BUCKETS = ["%d-%d us" % (1 << k, 2 << k) for k in range(NR_BUCKETS - 1)] + ["%d us+" % (
    1 << (NR_BUCKETS - 1))]


def parse_window(line):
    """A `WINDOW ...` line of stolen.c as a record: wall_ns, gaps, gap_ns, count[], ns[]."""
    f = line.split()
    if len(f) != 4 + 2 * NR_BUCKETS or f[0] != "WINDOW":
        raise ValueError("not a window line: %r" % line)
    v = [int(x) for x in f[1:]]
    return {"wall_ns": v[0], "gaps": v[1], "gap_ns": v[2],
            "count": v[3:3 + NR_BUCKETS], "ns": v[3 + NR_BUCKETS:]}


# Pauses under 8 us are thousands a second on a VM, their number wandering by half from one
# window to the next (the host); an interrupt and its handlers take longer on the VMs measured
# (its timer tick 16-32 us). The first bucket kept in the "8 us+" reading.
LONG_FROM = 3


def run_fraction(win, from_bucket=0):
    """The share of the window the thread ran its own code, counting the pauses of buckets
    from_bucket on: its throughput, relative."""
    return (win["wall_ns"] - sum(win["ns"][from_bucket:])) / win["wall_ns"]


class Spinner(compare.Dialog):
    """tools/bench/stolen.c, started once; window() spins it and returns its record."""

    def __init__(self, cpu):
        # The fake runtime, never called: the daemon traces only processes that map one.
        super().__init__([STOLEN, "--comm", compare.COMM, "--dlopen", compare.FAKE_CUDART] + (
            ["--cpu", str(cpu)] if cpu is not None else []), "stolen")

    def window(self, seconds):
        return parse_window(self.ask("%g" % seconds))


def measure(spinner, config, args):
    tracer = compare.TRACERS[config]()
    rec = {"config": config, "error": None, "rate": None}
    try:
        if config != targets.BASELINE:
            tracer.attach(spinner)
            time.sleep(args.settle)
        rec["t0_ns"] = time.monotonic_ns()
        win = spinner.window(args.seconds)
        rec["t1_ns"] = time.monotonic_ns()
        rec.update(win)
        # targets.py's statistics read a window's "rate": here the run fraction.
        rec["rate"] = run_fraction(win)
        rec["rate_8us"] = run_fraction(win, LONG_FROM)
        rec["evidence"] = tracer.detach()
    except (RuntimeError, ValueError) as e:
        rec["error"], rec["rate"] = str(e), None
        tracer.cleanup()
    except BaseException:
        tracer.cleanup()
        raise
    time.sleep(args.gap)
    return rec


def per_second(windows, config, field):
    """The mean per second, over config's windows without error, of each bucket's field."""
    ws = [w for w in windows if w["config"] == config and not w["error"]]
    if not ws:
        return None
    return [statistics.fmean(w[field][k] / (w["wall_ns"] / 1e9) for w in ws)
            for k in range(NR_BUCKETS)]


def bucket_lines(windows, configs):
    """Per configuration, the buckets whose pauses per second or time per second differ most
    from the untraced windows'."""
    base_n = per_second(windows, targets.BASELINE, "count")
    base_ns = per_second(windows, targets.BASELINE, "ns")
    lines = []
    if base_n is None:
        return lines
    lines.append("untraced: %.0f pauses/s, %.3f%% of the time (%s)" % (
        sum(base_n), sum(base_ns) / 1e7, ", ".join(
            "%s %.0f/s" % (BUCKETS[k], base_n[k]) for k in range(NR_BUCKETS) if base_n[k] >= 1)))
    for config in configs:
        n, ns = per_second(windows, config, "count"), per_second(windows, config, "ns")
        if n is None:
            continue
        extra = sorted(range(NR_BUCKETS), key=lambda k: -abs(ns[k] - base_ns[k]))[:3]
        lines.append("%s: %+.0f pauses/s, %+.3f%% of the time; most in %s" % (
            config, sum(n) - sum(base_n), (sum(ns) - sum(base_ns)) / 1e7, ", ".join(
                "%s %+.1f/s %+.3f%%" % (BUCKETS[k], n[k] - base_n[k], (ns[k] - base_ns[k]) / 1e7)
                for k in extra)))
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.splitlines()[-3:]))
    targets.add_window_args(ap, "bench-stolen.json", cycles=12, seconds=4)
    # torch.profiler runs inside a Python loop and bpftrace's script probes the fake runtime:
    # neither has anything to do in a spinning C thread.
    known = [c for c in compare.CONFIGS
             if c not in (targets.BASELINE, "torch.profiler", "bpftrace")]
    ap.add_argument("--configs", default=",".join(CONFIGS),
                    help="comma-separated, of: " + ", ".join(known))
    ap.add_argument("--cpu", type=int, help="pin the spinning thread to this CPU")
    args = ap.parse_args()
    targets.check_window_args("stolen.py", args)
    configs = args.configs.split(",")
    unknown = set(configs) - set(known)
    if unknown:
        sys.exit("stolen.py: unknown configuration(s) %s (known: %s)"
                 % (", ".join(sorted(unknown)), ", ".join(known)))
    compare.check_built("stolen.py", ["launch-heavy"])   # pipeprof, and the fake runtime
    if not os.path.exists(STOLEN):
        sys.exit("stolen.py: %s missing (make %s)"
                 % (STOLEN, os.path.relpath(STOLEN, compare.REPO)))

    notes = []
    started = datetime.datetime.now().astimezone()
    load_start = compare.wait_quiet(args.max_load, args.wait_quiet, notes)
    print("load average at start: %.2f %.2f %.2f; %d cycles of %.1f s windows: %s"
          % (*load_start, args.cycles, args.seconds, ", ".join(configs)), flush=True)
    t_start = time.monotonic()
    spinner = Spinner(args.cpu)
    windows = []
    try:
        for i, config in enumerate(targets.schedule(configs, args.cycles)):
            rec = measure(spinner, config, args)
            rec["slot"] = i
            windows.append(rec)
            if rec["error"]:
                print("  window %d %s FAILED: %s" % (i, config, rec["error"].splitlines()[0]),
                      flush=True)
            else:
                print("  window %d %-16s %5d pauses, %.3f%% of the time"
                      % (i, config, rec["gaps"], 100 * (1 - rec["rate"])), flush=True)
            if not spinner.alive():
                raise RuntimeError("stolen exited at window %d" % i)
    finally:
        spinner.close()
    summary = targets.summarize(windows, TARGET)
    summary_8us = targets.summarize([dict(w, rate=w.get("rate_8us")) for w in windows], TARGET)
    lines = []
    for config in configs:
        for label, summ in (("all pauses", summary), ("pauses of 8 us+", summary_8us)):
            s = summ.get(config)
            if not s or s.get("half_width") is None:
                lines.append("%s, %s: too few bracketed windows" % (config, label))
                continue
            lines.append("%s, %s: %s" % (config, label,
                                             targets.result_line(s, config, TARGET)))
    print()
    for line in lines:
        print("slowdown " + line)
    for line in bucket_lines(windows, configs):
        print("pauses " + line)
    for n in notes:
        print("note: " + n)
    load_end = compare.loadavg()
    print("load average: %.2f %.2f %.2f at the start, %.2f %.2f %.2f at the end; %.0f s"
          % (*load_start, *load_end, time.monotonic() - t_start))
    compare.save_json(args.json, {
        "date": started.isoformat(timespec="seconds"), "machine": compare.machine(),
        "load_start": load_start, "load_end": load_end,
        "args": {k: v for k, v in vars(args).items() if k != "json"}, "configs": configs,
        "notes": notes, "lines": lines, "buckets": BUCKETS, "windows": windows,
        "summary": summary, "summary_8us": summary_8us,
        "wall_s": round(time.monotonic() - t_start, 1)})


if __name__ == "__main__":
    main()
