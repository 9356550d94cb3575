#!/usr/bin/python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Overhead targets, resolved: pipeprof -p and the daemon on the three loops of compare.py, each
traced window bracketed by untraced ones, with a 95% confidence interval on the slowdown. A
benchmark, not a test: it prints figures and asserts nothing.

Why not compare.py's table: on a VM the loops' own speed wanders by 1-3% over tens of seconds
(the host), whatever the window's length (a CPU-bound loop timed untraced for 150 s in 1 s, 2 s
and 4 s windows: 1.5%, 1.4%, 1.4% standard deviation). A table whose rounds each compare one
untraced window with windows up to a minute away cannot tell 1.005 from 1.015.

Here every traced window sits between two untraced ones (U X U X U ...) a few seconds apart,
and its slowdown is the untraced rate at its midpoint (interpolated between its two neighbours)
over its own rate: a drift slower than a few seconds cancels. The configurations take the X
slots in turn, rotated every cycle; "A/A control" is an untraced window in an X slot, measured
exactly like a tracer: what no overhead reads as. Per configuration, over --cycles windows:
mean and median slowdown, a 95% t-interval on the mean, and the median's distribution-free 95%
interval (order statistics; the host's rare slow windows, which hit every configuration alike,
widen the mean's). A target (compare.py's: 1.005 on the DataLoader and CPU-bound loops, 1.02 on
the launch-heavy loop) is judged on each interval, the mean's and the median's: "pass" when
the interval's top is at or under it, "MISS" when its bottom is over it, and "not resolved"
when it straddles it: then more --cycles narrow it. Neighbouring windows' noise is not
independent, so an interval is a guide, not a guarantee; the A/A control's should hold 1.000.
A median can hide a tracer that slows a few windows a lot: each traced configuration's windows
over 1.02 are counted beside the A/A control's, with Fisher's exact test and, since the host's
slow spells make slow windows come in clusters, a sign test on the cycles where only one of the
two was slow; then both again with the A/A control's windows moved by the medians' difference,
since a cost that slows every window alike moves windows over a fixed threshold too: only those
ask for a tail beyond the cost; and the longest step of the slow windows printed (a stall, or
every step slower).
Another tracer in the run (--configs "...,bpftrace profile") gets the same figures, no verdict,
and each target configuration's difference from it cycle by cycle, with its 95% interval: is a
cost pipeprof's, or any tracer's of that kind?

Attach and detach are outside the windows (compare.py's --settle and --gap): this is the
steady-state cost; attach's own cost is tools/bench/attach_time.py's.

    sudo tools/bench/targets.py                          # 30 cycles of 2 s windows, ~27 min
    sudo tools/bench/targets.py --loops cpu-bound --cycles 40
    tools/bench/targets.py --pool run1.json run2.json    # earlier runs' windows, pooled
"""
import argparse
import datetime
import math
import os
import statistics
import sys
import tempfile
import time
import importlib.util
import json

_spec = importlib.util.spec_from_file_location(
    "bench_compare", os.path.join(os.path.dirname(os.path.abspath(__file__)), "compare.py"))
compare = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(compare)

CONTROL = "A/A control"
CONFIGS = [CONTROL] + list(compare.TARGET_CONFIGS)
BASELINE = "untraced"
# Two-sided 95% Student t quantiles by degrees of freedom; past 30 the normal's 1.96 is within 2%.
T975 = [None, 12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201,
        2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069,
        2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042]


def schedule(configs, cycles):
    """The windows' order: an untraced window before every other window and one at the end; the
    other configurations in turn, the order rotated by one each cycle."""
    out = []
    for c in range(cycles):
        k = c % len(configs)
        for config in configs[k:] + configs[:k]:
            out += [BASELINE, config]
    return out + [BASELINE]


def _mid(rec):
    return (rec["t0_ns"] + rec["t1_ns"]) / 2


def bracketed_slowdowns(windows):
    """windows: records in the order measured (config, rate or None, t0_ns, t1_ns). For each
    window of another configuration with a rate, the untraced windows just before and just after
    it (both with rates, nothing else measured between them and it) give the untraced rate at its
    midpoint, by linear interpolation in time; its slowdown is that over its rate. Returns
    ({config: [slowdown, ...]}, {config: windows that had no usable bracket}); each bracketed
    window's record gets its slowdown too."""
    out, unbracketed = {}, {}
    for i, rec in enumerate(windows):
        if rec["config"] == BASELINE:
            continue
        out.setdefault(rec["config"], [])
        before = windows[i - 1] if i > 0 else None
        after = windows[i + 1] if i + 1 < len(windows) else None
        ok = rec.get("rate") and all(
            w is not None and w["config"] == BASELINE and w.get("rate") and
            w.get("run") == rec.get("run") for w in (before, after))
        if not ok:
            unbracketed[rec["config"]] = unbracketed.get(rec["config"], 0) + 1
            continue
        span = _mid(after) - _mid(before)
        frac = (_mid(rec) - _mid(before)) / span if span > 0 else 0.5
        base = before["rate"] + (after["rate"] - before["rate"]) * frac
        out[rec["config"]].append(base / rec["rate"])
        rec["slowdown"] = base / rec["rate"]
    return out, unbracketed


def mean_ci(values):
    """Mean and the half-width of its two-sided 95% Student t-interval (None with < 2 values)."""
    n = len(values)
    if n < 2:
        return (values[0] if values else None), None
    t = T975[n - 1] if n - 1 < len(T975) else 1.96
    return statistics.fmean(values), t * statistics.stdev(values) / n ** 0.5


def median_ci(values):
    """The median's distribution-free 95% interval: the order statistics k and n + 1 - k, k the
    largest with P(Binomial(n, 1/2) < k) <= 2.5%. Robust to the host's rare slow windows, which
    widen the mean's interval; None with too few values (n < 6)."""
    n, xs = len(values), sorted(values)
    k, below = 0, 0.0
    while below + math.comb(n, k) / 2 ** n <= 0.025:
        below += math.comb(n, k) / 2 ** n
        k += 1
    if k == 0:
        return None
    return xs[k - 1], xs[n - k]


# A window this much slower than its neighbours is one of the host's rare slow windows, or the
# tracer's: tails() asks whether a configuration has more of them than the A/A control.
TAIL = 1.02


def tails(values, control, threshold=TAIL, shift=0.0):
    """(windows of values over threshold, of control's, one-sided p): the chance, were values
    and control windows alike (Fisher's exact test), that values would hold at least as many of
    the slow windows between them. A small p says the tracer makes slow windows of its own,
    which a median would hide. shift moves every control window first: a tracer that slows
    every window alike by 0.35% moves windows over a fixed threshold too (the A/A control's 43
    of 535 become 57 on the CPU-bound loop, its noise 1.5% a window), so only the test with the
    control moved by the medians' difference asks whether it has a tail beyond that cost."""
    k, kc, n, nc = sum(v > threshold for v in values), \
        sum(v + shift > threshold for v in control), len(values), len(control)
    slow, total = k + kc, n + nc
    if not total:
        return k, kc, 1.0
    p = sum(math.comb(slow, i) * math.comb(total - slow, n - i)
            for i in range(k, min(slow, n) + 1)) / math.comb(total, n)
    return k, kc, p


def cycle_of(windows):
    """{id(window): its cycle}, a cycle being one turn of schedule() (two slots a configuration),
    within its run ("run" in a pooled record, else one run)."""
    runs = {}
    for w in windows:
        runs.setdefault(w.get("run", 0), []).append(w)
    out = {}
    for run, ws in runs.items():
        per_cycle = 2 * max(len({w["config"] for w in ws if w["config"] != BASELINE}), 1)
        for i, w in enumerate(ws):
            out[id(w)] = (run, w.get("slot", i) // per_cycle)
    return out


def paired(windows, a, b):
    """[{a: slowdown, b: slowdown}] for each cycle with a bracketed window of both (windows as
    bracketed_slowdowns() left them)."""
    cycles = cycle_of(windows)
    per_cycle = {}
    for w in windows:
        if w["config"] in (a, b) and "slowdown" in w:
            per_cycle.setdefault(cycles[id(w)], {})[w["config"]] = w["slowdown"]
    return [c for c in per_cycle.values() if len(c) == 2]


def paired_tails(windows, config, threshold=TAIL, shift=0.0):
    """(cycles where config's window was over threshold and the A/A control's not, the reverse,
    one-sided p). The host's slow spells last tens of seconds, so slow windows come in clusters,
    which Fisher's test (tails()) takes for independent windows; a cycle's two windows lie
    seconds apart, in one spell or out of it together, and the schedule rotates which comes
    first. Were config's windows like the control's, each cycle where only one was slow would be
    either with even odds: the sign test on those. shift moves the control's windows first, as
    in tails()."""
    pairs = [{config: c[config] > threshold, CONTROL: c[CONTROL] + shift > threshold}
             for c in paired(windows, config, CONTROL)]
    only = sum(c[config] and not c[CONTROL] for c in pairs)
    reverse = sum(c[CONTROL] and not c[config] for c in pairs)
    n = only + reverse
    p = sum(math.comb(n, i) for i in range(only, n + 1)) / 2 ** n
    return only, reverse, p


def paired_difference(windows, config, other):
    """config's slowdown minus other's, cycle by cycle (the two windows of a cycle lie seconds
    apart, so the host's drift and slow spells hit both): (mean, 95% half-width, cycles). What
    tells pipeprof's cost from another tracer's of the same kind (bpftrace's sampler beside
    `-p`), which two configurations' separate intervals, each as wide as the host's noise,
    cannot."""
    diffs = [c[config] - c[other] for c in paired(windows, config, other)]
    mean, half = mean_ci(diffs)
    return mean, half, len(diffs)


def versus_lines(name, windows, configs):
    """For each configuration the targets name, its paired difference from every other tracer
    in the run (not the A/A control: its own line's interval already says that)."""
    lines = []
    for config in configs:
        if config not in compare.TARGET_CONFIGS:
            continue
        for other in configs:
            if other in (config, CONTROL) or other in compare.TARGET_CONFIGS:
                continue
            mean, half, n = paired_difference(windows, config, other)
            if half is not None:
                lines.append("%s, %s minus %s, cycle by cycle: %+.4f (95%% CI %+.4f to %+.4f), "
                             "n=%d" % (name, config, other, mean, mean - half, mean + half, n))
    return lines


def verdict(lo, hi, target):
    if hi <= target:
        return "pass"
    if lo > target:
        return "MISS"
    return "not resolved"


def tail_tests(windows, config, values, control, shift=0.0):
    """Both slow-window tests of config against the A/A control, its windows moved by shift."""
    return {"tails": dict(zip(("windows", "control_windows", "p"),
                              tails(values, control, shift=shift))),
            "paired_tails": dict(zip(("only_traced", "only_control", "p"),
                                     paired_tails(windows, config, shift=shift)))}


def summarize(windows, target):
    slow, unbracketed = bracketed_slowdowns(windows)
    out = {}
    for config, values in slow.items():
        mean, half = mean_ci(values)
        s = {"slowdowns": [round(v, 5) for v in values], "n": len(values),
             "unbracketed": unbracketed.get(config, 0), "mean": mean, "half_width": half,
             "median": statistics.median(values) if values else None,
             "median_ci": median_ci(values) if values else None}
        if half is not None:
            s["ci"] = [mean - half, mean + half]
            s["verdict"] = verdict(mean - half, mean + half, target)
        out[config] = s
    control = slow.get(CONTROL)
    for config, s in out.items():
        if control and config != CONTROL:
            s.update(tail_tests(windows, config, slow[config], control))
            shift = s["median"] - statistics.median(control)
            if shift > 0:
                s["beyond_shift"] = dict(tail_tests(windows, config, slow[config], control, shift),
                                         shift=shift)
        # A slow window whose longest step is no longer than the rest's had every step slower;
        # one with a long step had a stall.
        longest = [w["step_ms"]["max"] for w in windows if w["config"] == config
                   and w.get("slowdown", 0) > TAIL and w.get("step_ms")]
        if longest:
            s["slow_windows_longest_step_ms"] = max(longest)
    return out


def result_line(s, config, target):
    """One configuration's figures; for those the targets name, the verdicts on the mean's
    interval and the median's; for every traced one (another tracer too: is a cost pipeprof's
    or any tracer's of its kind?), the slow windows beside the A/A control's."""
    mci = s["median_ci"]
    out = "mean %.4f, 95%% CI %.4f-%.4f, median %.4f%s, n=%d%s" % (
        s["mean"], s["ci"][0], s["ci"][1], s["median"],
        " (%.4f-%.4f)" % tuple(mci) if mci else "", s["n"],
        " (%d unbracketed)" % s["unbracketed"] if s["unbracketed"] else "")
    if config in compare.TARGET_CONFIGS:
        out += "; target <= %.3f: mean %s, median %s" % (
            target, s["verdict"], verdict(*mci, target) if mci else "no interval")
    t = s.get("tails")
    if t:
        out += "; windows over %.2f: %d, A/A control %d (p=%.2f)" % (
            TAIL, t["windows"], t["control_windows"], t["p"])
    t = s.get("paired_tails")
    if t:
        out += "; cycles with only it slow %d, only the A/A control %d (p=%.3f)" % (
            t["only_traced"], t["only_control"], t["p"])
    b = s.get("beyond_shift")
    if b:
        out += "; beyond its median's shift (the A/A control's windows moved by %+.4f): " \
               "A/A control %d (p=%.2f), cycles %d against %d (p=%.3f)" % (
                   b["shift"], b["tails"]["control_windows"], b["tails"]["p"],
                   b["paired_tails"]["only_traced"], b["paired_tails"]["only_control"],
                   b["paired_tails"]["p"])
    if s.get("slow_windows_longest_step_ms") is not None:
        out += ", their longest step %.1f ms" % s["slow_windows_longest_step_ms"]
    return out


def run_loop(name, script, extra, args, configs, python, tmp):
    """One long-running loop, measured window by window in schedule order; the records."""
    print("%s: starting %s" % (name, script), flush=True)
    loop = compare.Loop(name, script, extra, python, tmp, warmup=args.warmup)
    time.sleep(args.warmup)
    # An untraced window needs no settling: nothing attached before it.
    plain = argparse.Namespace(**vars(args))
    plain.settle = 0
    windows = []
    try:
        for i, config in enumerate(schedule(configs, args.cycles)):
            rec = compare.measure(loop, config, plain if config == BASELINE else args)
            rec["slot"] = i
            windows.append(rec)
            if rec["error"]:
                print("  %s window %d %s FAILED: %s" % (name, i, config,
                      rec["error"].splitlines()[0]), flush=True)
            elif config != BASELINE:
                print("  %s window %d %-16s attached in %.1f s, load %.2f"
                      % (name, i, config, rec["attach_s"], rec["load1"]), flush=True)
            if not loop.alive():
                print("warning: %s: the loop exited at window %d; its remaining windows are not "
                      "measured" % (name, i), flush=True)
                break
    finally:
        compare.settle_records(loop, windows)
    return windows


def add_window_args(ap, json_name, cycles, seconds):
    """The options targets.py and stolen.py share: the windows, and the machine's quiet."""
    ap.add_argument("--cycles", type=int, default=cycles,
                    help="traced windows per configuration (and loop) (default %(default)s)")
    ap.add_argument("--seconds", type=float, default=seconds,
                    help="window length (default %(default)s)")
    ap.add_argument("--settle", type=float, default=0.5,
                    help="seconds between attach and the window (default %(default)s)")
    ap.add_argument("--gap", type=float, default=0.3,
                    help="seconds after each window (and after a tracer has exited) "
                    "(default %(default)s)")
    ap.add_argument("--max-load", type=float, default=1.0,
                    help="wait for the 1-minute load average to fall below this (default %(default)s)")
    ap.add_argument("--wait-quiet", type=float, default=300,
                    help="seconds to wait for that before going on anyway (default %(default)s)")
    ap.add_argument("--json", default=os.path.join(compare.REPO, ".output", json_name),
                    help="raw numbers (default %(default)s)")


def check_window_args(prog, args):
    if os.geteuid() != 0:
        sys.exit("%s: run as root (the tracers load BPF programs)" % prog)
    if args.cycles < 2 or args.seconds <= 0:
        sys.exit("%s: --cycles must be at least 2 and --seconds positive" % prog)


def pooled_windows(paths):
    """{loop: the windows of every run saved in paths (--json files), each tagged with its run}."""
    loops = {}
    for run, path in enumerate(paths):
        with open(path) as f:
            saved = json.load(f)
        for name, res in saved["loops"].items():
            loops.setdefault(name, []).extend(dict(w, run=run) for w in res["windows"])
    return loops


def loop_lines(name, summary, windows, configs, target):
    """One loop's line for each of configs, then its target configurations' differences from the
    other tracers (versus_lines)."""
    lines = []
    for config in configs:
        s = summary.get(config)
        if not s or s.get("half_width") is None:
            lines.append("%s, %s: too few bracketed windows" % (name, config))
        else:
            lines.append("%s, %s: %s" % (name, config, result_line(s, config, target)))
    return lines + versus_lines(name, windows, configs)


def pooled_lines(paths):
    """The target lines of the runs saved in paths, pooled: every window of every run counts
    once, and a cycle pairs windows of one run."""
    lines = []
    for name, windows in pooled_windows(paths).items():
        target = compare.TARGETS[name]
        summary = summarize(windows, target)
        lines += loop_lines(name, summary, windows,
                            sorted(summary, key=lambda c: (c != CONTROL, c)), target)
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.splitlines()[-3:]))
    add_window_args(ap, "bench-targets.json", cycles=30, seconds=2)
    ap.add_argument("--warmup", type=float, default=3,
                    help="seconds between a loop's READY and its first window (default %(default)s)")
    ap.add_argument("--loops", default=",".join(compare.TARGETS),
                    help="loops to run (default %(default)s)")
    ap.add_argument("--configs", default=",".join(CONFIGS),
                    help="configurations in the traced slots (default %(default)s; any of "
                    "compare.py's)")
    ap.add_argument("--python", default="/usr/bin/python3",
                    help="interpreter of the loops (default %(default)s)")
    ap.add_argument("--pool", nargs="+", metavar="FILE",
                    help="measure nothing: print the figures of the runs saved in these --json "
                    "files, pooled")
    args = ap.parse_args()
    if args.pool:
        try:
            lines = pooled_lines(args.pool)
        except (OSError, ValueError, KeyError) as e:
            sys.exit("targets.py: --pool: %s" % e)
        for line in lines:
            print("pooled " + line)
        return
    check_window_args("targets.py", args)
    configs = args.configs.split(",")
    unknown = set(configs) - set(compare.CONFIGS) | ({BASELINE} & set(configs))
    if unknown or not configs:
        sys.exit("targets.py: unknown configuration(s) %s (known: %s)" % (
            ", ".join(sorted(unknown)), ", ".join(c for c in compare.CONFIGS if c != BASELINE)))
    names = args.loops.split(",")
    unknown = set(names) - set(compare.TARGETS)
    if unknown:
        sys.exit("targets.py: no target for loop(s) %s (known: %s)"
                 % (", ".join(sorted(unknown)), ", ".join(compare.TARGETS)))
    loops = [x for x in compare.LOOPS if x[0] in names]
    compare.check_built("targets.py", names)

    notes = []
    started = datetime.datetime.now().astimezone()
    load_start = compare.wait_quiet(args.max_load, args.wait_quiet, notes)
    print("load average at start: %.2f %.2f %.2f; %d cycles of %.1f s windows: %s"
          % (*load_start, args.cycles, args.seconds, ", ".join(configs)), flush=True)
    results, lines = {}, []
    t_start = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        python = compare.loop_python(args.python, tmp)
        for name, script, extra, unit, label in loops:
            windows = run_loop(name, script, extra, args, configs, python, tmp)
            target = compare.TARGETS[name]
            summary = summarize(windows, target)
            results[name] = {"unit": unit, "workload": script, "target": target,
                             "windows": windows, "summary": summary}
            lines += loop_lines(name, summary, windows, configs, target)
    load_end = compare.loadavg()
    print()
    for line in lines:
        print("target " + line)
    for n in notes:
        print("note: " + n)
    print("load average: %.2f %.2f %.2f at the start, %.2f %.2f %.2f at the end; %.0f s"
          % (*load_start, *load_end, time.monotonic() - t_start))
    out = {"date": started.isoformat(timespec="seconds"),
           "machine": compare.machine(),
           "load_start": load_start, "load_end": load_end,
           "args": {k: v for k, v in vars(args).items() if k != "json"},
           "configs": configs, "notes": notes, "lines": lines,
           "wall_s": round(time.monotonic() - t_start, 1), "loops": results}
    compare.save_json(args.json, out)


if __name__ == "__main__":
    main()
