# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Recommendations held against reality.

Each test runs one loop in two configurations side by side, A (today's) and B (the change a
recommendation names), both started once and alternated with SIGSTOP/SIGCONT so that only one
runs at a time: pipeprof attaches to A (several times, and the attaches must agree), and after
each attach B runs for as long, so A's prediction meets B's rate under the same load. Rates are
the workloads' own step timestamps (groundtruth.py).

- num_workers 1 -> 2 (data_bound.py, unpinned, and the demo's loop): the report predicts B's
  steps/s from A's trace within TOLERANCE (for the demo's loop, at the CPU cost per step B
  measured: see LOADERS); or, when the CPUs would be the limit and other processes use some of them
  (how much of theirs the job then gets is the scheduler's call), gives only the bound of the
  whole machine, and B's rate must stay under it (plus TOLERANCE).
- torch intra-op threads 1 -> 2 (cpu_bound.py, an MLP and large elementwise ops): a second
  thread buys them very different speed-ups, and their one-thread states look alike; the CPU
  samples tell them apart. The MLP's CPU is in a BLAS that starts no threads: Amdahl's law with
  that share serial predicts under 1.10x and turns the advice to the BLAS (serial_code); the
  elementwise ops' CPU is in torch's own parallel loops, predicted near 2x. Each prediction must
  be within TOLERANCE of the speed-up measured.

A pair is void when the load of other processes differs by more than MAX_OTHER_DRIFT CPUs
between A's window and B's, when A's own rate moved by more than SPEED_DRIFT between the
windows before and after B's, or when the vCPUs, timed one by one before, between and after the
two windows, run at speeds more than CPU_SPEED_SKEW apart (the VM's host slows a vCPU down by itself, unseen by
the guest): that comparison says nothing about the model. When the host skewed the vCPUs in
every round, the rounds are run once more; a test in which no round could be compared skips and
says why, rather than pass having checked nothing. The machine's figures, every prediction and every measurement go to
.output/scenario-results.json.

Needs root and ./pipeprof (make).
"""
import os
import signal
import time

import pytest

from conftest import (PYTHON, WORKLOADS, attempt_pipeprof, finish_workload, groundtruth,
                      save_result)

WINDOW_S = 4
SETTLE_S = 0.7   # after SIGCONT: the DataLoader refills its queue, caches warm again
TOLERANCE = 0.15
MAX_OTHER_DRIFT = 0.3
SPEED_DRIFT = 0.10
CPU_SPEED_SKEW = 0.20
# Of each test's rounds, at least this many must be compared (not void).
MIN_COMPARED = 1
READY_TIMEOUT = 120
# data_bound.py: the workers need 46 ms of CPU per batch (8 samples x 5.75 ms), the trainer
# 12 ms per step; unpinned, so that the scheduler may put any thread on any CPU, as the model
# assumes (pinned, the second worker would share the trainer's CPU while the first keeps its own).
LOADER_ARGS = ["--item-ms", "5.75", "--step-ms", "12", "--no-pin"]
# id: (script, its arguments but --workers, whether its CPU per step is fixed). data_bound.py
# spends budgets of thread CPU time, so a step costs the same CPU however busy the machine is.
# demo_train.py, the demo's loop (a small CNN fed by image transforms in the workers), does fixed
# work, and on this VM what that work costs in CPU time moves with what runs beside it and with
# the host, unseen by the guest: 64-108 ms a step with one worker, 62-78 with two, over runs of
# this test. The model takes a step's CPU cost as it measured it, so its prediction for
# demo_train is held to the rate it implies at the cost B measured, and its raw error is
# printed beside that.
LOADERS = {"data_bound": ("data_bound.py", LOADER_ARGS, True),
           "demo_train": ("demo_train.py", [], False)}


def read_cpu_ticks():
    """(busy, total) clock ticks of the whole machine from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    total = sum(v[:8])
    return total - v[3] - v[4], total


def tree_cpu_ticks(root):
    """utime + stime of root and every descendant process, in clock ticks."""
    parent, ticks = {}, {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name) as f:
                rest = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        parent[int(name)] = int(rest[1])
        ticks[int(name)] = int(rest[11]) + int(rest[12])
    total = 0
    for pid, t in ticks.items():
        p = pid
        while p and p != root:
            p = parent.get(p, 0)
        if p == root:
            total += t
    return total


class Side:
    """One configuration of the loop, started once, run and stopped on demand."""

    def __init__(self, procs, tmp_path, label, script, args):
        self.label = label
        self.truth_path = str(tmp_path / ("%s.truth.json" % label))
        argv = [PYTHON, os.path.join(WORKLOADS, script), "--duration", "600", "--truth",
                self.truth_path] + list(args)
        self.proc = procs(argv, name="%s(%s)" % (script, label))
        self.running = True
        self.truth = None

    def wait_ready(self):
        m = self.proc.wait_line(r"^READY pid=(\d+) tid=(\d+)", READY_TIMEOUT)
        if m is None:
            pytest.fail("%s did not print READY\n%s" % (self.label, self.proc.output()),
                        pytrace=False)
        self.pid, self.tid = int(m.group(1)), int(m.group(2))

    def pause(self):
        os.killpg(self.proc.pid, signal.SIGSTOP)
        self.running = False

    def resume(self):
        os.killpg(self.proc.pid, signal.SIGCONT)
        self.running = True

    def measure(self, seconds):
        """Runs for `seconds`; returns the window and the CPUs other processes used in it."""
        hz = os.sysconf("SC_CLK_TCK")
        b0, t0, j0, s0 = *read_cpu_ticks(), tree_cpu_ticks(self.pid), time.monotonic_ns()
        time.sleep(seconds)
        b1, t1, j1, s1 = *read_cpu_ticks(), tree_cpu_ticks(self.pid), time.monotonic_ns()
        ncpus = os.cpu_count()
        busy = ncpus * (b1 - b0) / (t1 - t0) if t1 > t0 else 0.0
        job = (j1 - j0) / hz / ((s1 - s0) / 1e9)
        return {"start_ns": s0, "end_ns": s1, "busy_cpus": busy, "job_cpus": job,
                "other_cpus": max(0.0, busy - job), "idle_cpus": ncpus - busy}

    def finish(self):
        if not self.running:
            self.resume()
        self.truth = finish_workload(self.proc, self.truth_path)
        return self.truth


def cpu_speeds(loops=3_000_000):
    """Each CPU's speed (loop iterations per second of this thread's own CPU time, best of 3),
    pinned in turn, while nothing of ours runs: the VM's host can slow one vCPU down without the
    guest seeing any steal time, and a bound that assumes equal CPUs then says nothing. CPU time,
    not wall time: another process sharing that CPU takes turns, which is no slower CPU."""
    mask = os.sched_getaffinity(0)
    speeds = []
    try:
        for cpu in sorted(mask):
            os.sched_setaffinity(0, {cpu})
            best = None
            for _ in range(3):
                t0 = time.thread_time()
                for _ in range(loops):
                    pass
                took = time.thread_time() - t0
                best = took if best is None else min(best, took)
            speeds.append(loops / best)
    finally:
        os.sched_setaffinity(0, mask)
    return speeds


def rate(truth, start_ns, end_ns):
    """Steps/s over whole steps completed inside [start_ns, end_ns]."""
    steps = [s for s in truth["steps"] if start_ns <= s <= end_ns]
    if len(steps) < 3 or steps[-1] <= steps[0]:
        return None
    return (len(steps) - 1) * 1e9 / (steps[-1] - steps[0])


def run_pairs(a, b, rounds):
    """Alternates: attach to A (B stopped), then B alone for as long; leaves both stopped.
    Returns one dict per round with A's report and B's window."""
    if b.running:
        b.pause()
    if not a.running:
        a.resume()
    time.sleep(SETTLE_S)
    out = []
    for i in range(rounds):
        # The vCPUs timed before A's window, between it and B's, and after B's.
        a.pause()
        speeds = [cpu_speeds()]
        a.resume()
        time.sleep(SETTLE_S)
        report, why = attempt_pipeprof(a.pid, WINDOW_S)
        if report is None:
            pytest.fail("attach %d to %s: %s" % (i + 1, a.label, why), pytrace=False)
        a.pause()
        speeds.append(cpu_speeds())
        b.resume()
        time.sleep(SETTLE_S)
        wb = b.measure(WINDOW_S)
        b.pause()
        speeds.append(cpu_speeds())
        out.append({"report": report, "b_window": wb, "cpu_speeds": speeds})
        a.resume()
        time.sleep(SETTLE_S)
    # A once more after the last B: each B window lies between two of A's.
    out.append({"a_window": a.measure(WINDOW_S)})
    a.pause()
    return out


def start_all(*sides):
    """Waits for every side's READY, then stops them all: each pair then runs alone."""
    for s in sides:
        s.wait_ready()
    for s in sides:
        s.pause()


def prediction(report, pid):
    for p in (report.get("model") or {}).get("predictions") or []:
        if p.get("id") == pid:
            return p
    return None


def rec(report, rid):
    for r in report.get("recommendations") or []:
        if r.get("id") == rid:
            return r
    return None


def other_cpus_of(report):
    return ((report.get("model") or {}).get("derived") or {}).get("other_cpus")


def judge_rounds(rounds, a, b, judge):
    """Fills each round's measured rates and the other-load drift, and calls
    judge(round) -> (status, line); status 'ok', 'bound', 'withheld', 'void' or 'FAIL'."""
    lines, results = [], []
    tail = rounds.pop()["a_window"]
    for i, r in enumerate(rounds, 1):
        w = r["report"]["window"]
        after = rounds[i]["report"]["window"] if i < len(rounds) else tail
        r["rate_a"] = rate(a.truth, w["start_ns"], w["end_ns"])
        r["rate_a_after"] = rate(a.truth, after["start_ns"], after["end_ns"])
        r["rate_b"] = rate(b.truth, r["b_window"]["start_ns"], r["b_window"]["end_ns"])
        oa = other_cpus_of(r["report"])
        r["other_a"], r["other_b"] = oa, r["b_window"]["other_cpus"]
        r["drift"] = abs(oa - r["other_b"]) if oa is not None else None
        r["speed_drift"] = abs(r["rate_a_after"] / r["rate_a"] - 1) \
            if r["rate_a"] and r["rate_a_after"] else None
        status, line = judge(r)
        if r["speed_drift"] is not None:
            line += " [A then %.2f steps/s, %+.0f%%]" % (r["rate_a_after"],
                                                        100 * (r["rate_a_after"] / r["rate_a"] - 1))
        r["status"] = status
        lines.append("round %d: %s" % (i, line))
        results.append({k: v for k, v in r.items() if k != "report"} | {
            "recommendations": r["report"].get("recommendations"),
            "model": r["report"].get("model"), "cpu": r["report"].get("cpu"),
            "verdict": r["report"]["verdict"]["name"]})
    return lines, results


def void_reason(r):
    """Why this pair's comparison says nothing about the model, or None."""
    for speeds in r["cpu_speeds"]:
        if speeds and max(speeds) > min(speeds) * (1 + CPU_SPEED_SKEW):
            return "the vCPUs run at different speeds (%s): the host" % (
                ", ".join("%.0fM/s" % (x / 1e6) for x in speeds))
    if r["speed_drift"] is None or r["speed_drift"] > SPEED_DRIFT:
        return "A's own rate moved across B's window: the host"
    if r["drift"] is None or r["drift"] > MAX_OTHER_DRIFT:
        return "other processes' load moved %.2f CPUs" % (r["drift"] if r["drift"] is not None
                                                          else -1)
    return None


def skewed(r):
    """The vCPUs, timed around this round, ran at speeds too far apart to compare anything."""
    return any(sp and max(sp) > min(sp) * (1 + CPU_SPEED_SKEW) for sp in r["cpu_speeds"])


def run_batches(a, b, rounds):
    """run_pairs, and once more when the host skewed the vCPUs in every round of the first
    batch (those rounds are void whatever the model says). Returns the batches."""
    batches = [run_pairs(a, b, rounds)]
    if all(skewed(r) for r in batches[0][:-1]):
        batches.append(run_pairs(a, b, rounds))
    return batches


def judge_batches(batches, a, b, judge):
    """judge_rounds over each batch; (rounds, lines, results) of them all."""
    rounds, lines, results = [], [], []
    for batch in batches:
        l, res = judge_rounds(batch, a, b, judge)
        rounds += batch
        lines += l
        results += res
    return rounds, lines, results


def require_compared(rounds, summary):
    """Void rounds check nothing, so a run of them proves nothing, and must not read as a
    pass: when no round could be compared (every one void: the host skewed the vCPUs or moved
    the job's speed, or other processes' load moved), the test skips and says why."""
    compared = [r for r in rounds if r["status"] != "void"]
    if len(compared) < MIN_COMPARED:
        pytest.skip("none of %d rounds could be compared (each void: see why below); the "
                    "model was not checked\n%s" % (len(rounds), summary))


def measured_speedup(r):
    return r["rate_b"] / r["rate_a"] if r["rate_a"] and r["rate_b"] else None


@pytest.mark.parametrize("loader", list(LOADERS))
def test_more_workers_prediction(loader, procs, pipeprof_bin, tmp_path):
    """num_workers 1 -> 2 on this machine's CPUs, trainer and workers sharing them."""
    script, args, fixed_cost = LOADERS[loader]
    a = Side(procs, tmp_path, "workers1", script, args + ["--workers", "1"])
    b = Side(procs, tmp_path, "workers2", script, args + ["--workers", "2"])
    start_all(a, b)
    batches = run_batches(a, b, 3)
    a.finish()
    b.finish()

    def judge(r):
        rep = r["report"]
        p = prediction(rep, "num_workers")
        m = measured_speedup(r)
        idle = (rep["model"]["derived"] or {}).get("idle_cpus")
        head = "verdict %r, idle %.2f CPUs, others %.2f|%.2f; A %.2f steps/s, B %s" % (
            rep["verdict"]["name"], idle if idle is not None else -1, r["other_a"] or 0,
            r["other_b"], r["rate_a"] or 0, "%.2f steps/s" % r["rate_b"] if r["rate_b"] else "?")
        if rep["verdict"]["name"] != "DATA-LOADING BOUND" and (r["other_a"] or 0) >= 0.5:
            # Another job took the CPUs: the loop waits for one more than for its data.
            return "void", head + " (void: other processes hold %.1f CPUs)" % r["other_a"]
        if rep["verdict"]["name"] != "DATA-LOADING BOUND" or p is None:
            return "FAIL", head + ": no num_workers prediction"
        if m is None:
            return "FAIL", head + ": no rate measured"
        if not p.get("speedup"):
            why = p.get("withheld") or ""
            if not p.get("bound"):
                return "FAIL", head + ": withheld for a reason this loop should not have: " + why
            # Other processes hold CPUs the job would need: only the bound, which must hold.
            line = head + ": at most %.2fx, measured %.2fx" % (p["bound"], m)
            if void_reason(r):
                return "void", line + " (void: %s)" % void_reason(r)
            if m > p["bound"] * (1 + TOLERANCE):
                return "FAIL", line + ": over the bound"
            return "bound", line
        err = abs(p["speedup"] - m) / m
        line = head + ": predicted %.2fx (limit %s), measured %.2fx, off %.1f%%" % (
            p["speedup"], p["limit"], m, 100 * err)
        # CPU per step, A's (the report's job CPUs) and B's (its process tree's).
        cost_a = rep["model"]["derived"]["job_cpus"] / r["rate_a"]
        cost_b = r["b_window"]["job_cpus"] / r["rate_b"]
        r["cpu_ms_per_step"] = (1000 * cost_a, 1000 * cost_b)
        line += "; CPU a step %.1f -> %.1f ms" % (1000 * cost_a, 1000 * cost_b)
        if void_reason(r):
            return "void", line + " (void: %s)" % void_reason(r)
        if not fixed_cost and p["limit"] == "cpus":
            # The model's account at the CPU cost B measured.
            at_cost = p["speedup"] * cost_a / cost_b
            err = abs(at_cost - m) / m
            line += ", at that cost %.2fx, off %.1f%%" % (at_cost, 100 * err)
        if err > TOLERANCE:
            return "FAIL", line
        # Either loop needs over a CPU a step with two workers: on 2 CPUs those are the limit.
        if os.cpu_count() <= 2 and p["limit"] != "cpus":
            return "FAIL", line + ": the trainer and the workers share %d CPUs, yet the " \
                "limit is %r" % (os.cpu_count(), p["limit"])
        more = rec(rep, "more_workers")
        if not more or "Raise num_workers from 1 to 2: predicted" not in more["text"]:
            return "FAIL", line + "; the advice does not carry it: %s" % (more or {}).get("text")
        return "ok", line

    rounds, lines, results = judge_batches(batches, a, b, judge)
    # Attaches agree while the job does: a void round's job ran at another speed.
    numbers = [prediction(r["report"], "num_workers")["speedup"] for r in rounds
               if r["status"] == "ok"]
    spread = (max(numbers) - min(numbers)) / min(numbers) if len(numbers) > 1 else 0.0
    summary = "%s num_workers 1 -> 2: " % loader + "; ".join(lines) + \
        "\n  attaches' predictions %s, spread %.1f%%" % (["%.2f" % n for n in numbers], 100 * spread)
    print("\n" + summary)
    save_result("recommendations_num_workers_" + loader, {"rounds": results, "summary": summary,
                                                          "table": summary})
    failed = [l for r, l in zip(rounds, lines) if r["status"] == "FAIL"]
    assert not failed, summary
    require_compared(rounds, summary)
    # Attaches to the one running job agree with each other.
    assert spread <= 0.10, summary


def cpu_pair(procs, tmp_path, op):
    a = Side(procs, tmp_path, "%s_threads1" % op, "cpu_bound.py", ["--op", op, "--threads", "1"])
    b = Side(procs, tmp_path, "%s_threads2" % op, "cpu_bound.py", ["--op", op, "--threads", "2"])
    return a, b


def test_intra_op_threads_prediction(procs, pipeprof_bin, tmp_path):
    """torch.set_num_threads 1 -> 2: predicted from where the one thread's CPU goes, within
    TOLERANCE of the speed-up measured."""
    pairs = {op: cpu_pair(procs, tmp_path, op) for op in ("mlp", "elementwise")}
    all_rounds = {}
    start_all(*[s for pair in pairs.values() for s in pair])
    for op, (a, b) in pairs.items():
        all_rounds[op] = run_batches(a, b, 2)
    for a, b in pairs.values():
        a.finish()
        b.finish()

    def judge(r):
        rep = r["report"]
        idle = (rep["model"]["derived"] or {}).get("idle_cpus")
        m = measured_speedup(r)
        head = "verdict %r, idle %.2f CPUs, others %.2f|%.2f, trainer on-CPU %.0f%%; measured " \
            "%s" % (rep["verdict"]["name"], idle if idle is not None else -1, r["other_a"] or 0,
                    r["other_b"], 100 * rep["model"]["inputs"]["trainer_running_share"],
                    "%.2fx" % m if m else "?")
        if rep["verdict"]["name"] != "CPU-BOUND" and (r["other_a"] or 0) >= 0.5:
            # Another job took the CPUs: the loop waits for one more than it computes.
            return "void", head + " (void: other processes hold %.1f CPUs)" % r["other_a"]
        if rep["verdict"]["name"] != "CPU-BOUND":
            return "FAIL", head + ": not CPU-BOUND"
        # A trainer whose CPU is in code that runs on one thread (the MLP's reference BLAS)
        # is told more threads will not help, under a bound of its own.
        advice = rec(rep, "intra_op_threads") or rec(rep, "serial_code")
        if idle is not None and idle < 0.5:
            if advice:
                return "FAIL", head + ": more threads advised with no idle CPU"
            return "withheld", head + ": no idle CPU, no threads advice"
        if not advice:
            return "FAIL", head + ": no intra-op threads advice with %.2f CPUs idle" % idle
        pred = advice.get("predicted_speedup")
        if pred is None:
            return "FAIL", head + ": no predicted speed-up from the trainer's CPU samples: %s" % (
                advice["text"])
        line = head + ", predicted %.2fx" % pred
        if void_reason(r) or m is None:
            return "void", line + " (void: %s)" % (void_reason(r) or "no rate")
        off = abs(pred - m) / m
        if off > TOLERANCE:
            return "FAIL", line + ": off by %.0f%% (> %.0f%%)" % (100 * off, 100 * TOLERANCE)
        return "ok", line + " (off by %.0f%%)" % (100 * off)

    summary, results, failed = [], {}, []
    for op, batches in list(all_rounds.items()):
        a, b = pairs[op]
        all_rounds[op], lines, results[op] = judge_batches(batches, a, b, judge)
        rounds = all_rounds[op]
        summary.append("%s: %s" % (op, "; ".join(lines)))
        failed += [l for r, l in zip(rounds, lines) if r["status"] == "FAIL"]
    # The two loops' one-thread traces look alike: nothing in them tells their speed-ups apart.
    shares = {op: [r["report"]["model"]["inputs"]["trainer_running_share"] for r in rounds]
              for op, rounds in all_rounds.items()}
    measured = {op: [measured_speedup(r) for r in rounds if r["status"] == "ok"]
                for op, rounds in all_rounds.items()}
    summary.append("one-thread traces: trainer on-CPU %s; measured 1 -> 2 threads %s" % (
        {op: ["%.3f" % s for s in v] for op, v in shares.items()},
        {op: ["%.2f" % x for x in v if x] for op, v in measured.items()}))
    text = "intra-op threads 1 -> 2:\n  " + "\n  ".join(summary)
    print("\n" + text)
    save_result("recommendations_intra_op_threads", {"rounds": results, "summary": text,
                                                     "table": text})
    assert not failed, text
    for op, rounds in all_rounds.items():
        for r in rounds:
            assert r["report"]["model"]["inputs"]["compute_threads"] == 1, (op, text)
    # The samples tell the two loops apart: the MLP's CPU is in a BLAS with no threads.
    for r in all_rounds["mlp"]:
        if r["status"] in ("ok", "void") and rec(r["report"], "intra_op_threads"):
            pytest.fail("mlp: threads advised for a trainer in a single-threaded BLAS:\n" + text)
    for op, rounds in all_rounds.items():
        require_compared(rounds, "%s: %s" % (op, text))
