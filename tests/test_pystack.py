# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Which code: the report's "where" section and --folded, from CPU samples and Python stacks
walked in BPF.

tools/workloads/py_cost.py spends known shares of each role's CPU in known functions, by CPU
time budgets (trainer 70/30, worker 60/30/10). Every attach of ATTACHES must find each share
within 5 points, on Debian's python3.11 and on every other CPython the machine has that
pipeprof walks (pyenv's 3.10, 3.12 and 3.13, where present); an interpreter it cannot walk is
reported as such, and none of its frames is named.
"""
import glob
import json
import os
import re
import signal
import shutil
import subprocess
import time
from xml.etree import ElementTree

import pytest

from conftest import PIPEPROF, PYTHON, ROOT, WORKLOADS, attempt_pipeprof, keep_report

ATTACHES = 3
WINDOW_S = 5
# Samples a second on each CPU: with two busy processes, ~1500 samples a role in the window,
# so a 5-point miss is over 3.5 standard deviations of sampling error.
HZ = 297
TOLERANCE = 0.05
TRUTH = {"TRAINER": {"trainer_hot": 0.70, "trainer_cool": 0.30},
         "WORKER": {"worker_hot": 0.60, "worker_warm": 0.30, "worker_cool": 0.10}}


def start_cost_job(procs, python):
    job = procs([python, os.path.join(WORKLOADS, "py_cost.py"), "--duration", "600"],
                name="py_cost")
    m = job.wait_line(r"^READY pid=(\d+) worker=(\d+)", 60)
    assert m, job.output()
    return job, int(m.group(1)), int(m.group(2))


def shares_of(report, role):
    """{function name: share} of the role's innermost Python functions."""
    out = {}
    for e in report["where"]["roles"][role]["python"]:
        m = re.match(r"(\w+) \(py_cost\.py:\d+\)$", e["function"])
        if m:
            out[m.group(1)] = e["share"]
    return out


def window_problem(rep):
    """3.11+ keep frames on a data stack of their own, read a window at a time: the frames of
    py_cost.py's plain calls come from that window (a C-stack shim of 3.12+ does not, nor a
    generator's frame); 3.10's heap frames never do. Wrong offsets of the thread state's
    datastack fields would still walk every frame, one read each, so only this tells."""
    c = rep["counters"]
    walked, windowed = c["python_frames_walked"], c["python_frames_from_window"]
    versions = {p["version"] for p in rep["where"]["interpreters"] if p["walked"]}
    if not walked:
        return "no Python frames walked (%s)" % versions
    if versions == {"3.10"}:
        return "3.10: %d of %d frames from a window" % (windowed, walked) if windowed else None
    if windowed < 0.5 * walked:
        return "%s: %d of %d frames from a window" % (versions, windowed, walked)
    return None


def check_shares(reports):
    problems, lines = [], []
    for i, rep in enumerate(reports, 1):
        c = rep["counters"]
        lines.append("attach %d: %d of %d Python frames from a window" % (
            i, c["python_frames_from_window"], c["python_frames_walked"]))
        problem = window_problem(rep)
        if problem:
            problems.append("attach %d: %s" % (i, problem))
        walked = [p for p in rep["where"]["interpreters"] if p["walked"]]
        if len(walked) < 2:
            problems.append("attach %d: interpreters walked: %s" % (i, rep["where"]["interpreters"]))
        for role, truth in TRUTH.items():
            r = rep["where"]["roles"][role]
            got = shares_of(rep, role)
            lines.append("attach %d %s (%d samples): %s" % (
                i, role, r["samples"], ", ".join("%s %.1f%% (truth %.0f%%)" % (
                    f, 100 * got.get(f, 0), 100 * t) for f, t in truth.items())))
            if r["samples"] < 200:
                problems.append("attach %d %s: only %d samples" % (i, role, r["samples"]))
            for f, t in truth.items():
                if abs(got.get(f, 0) - t) > TOLERANCE:
                    problems.append("attach %d %s: %s %.1f%%, truth %.0f%%" % (
                        i, role, f, 100 * got.get(f, 0), 100 * t))
    return problems, lines


def test_shares_per_role(procs):
    job, pid, worker = start_cost_job(procs, PYTHON)
    reports = []
    for _ in range(ATTACHES):
        rep, why = attempt_pipeprof(pid, WINDOW_S, ["-F", str(HZ)])
        assert rep is not None, why
        reports.append(rep)
    job.signal(signal.SIGTERM)
    problems, lines = check_shares(reports)
    print("\n" + "\n".join(lines))
    assert not problems, "\n".join(problems + lines)
    # The worker is a process of its own: its samples are the WORKER role's.
    assert reports[0]["where"]["sample_hz"] == HZ
    # Advice about the trainer's own compute names where that compute is (a CPU-bound
    # trainer gets some; a busy machine may read CPU CONTENTION instead, in some attaches).
    named = 0
    for rep in reports:
        for rec in rep["recommendations"]:
            if rec["id"] in ("less_work_per_step", "intra_op_threads", "inputs_in_workers"):
                named += 1
                assert re.search(r"The trainer's CPU goes \d+% to trainer_hot "
                                 r"\(py_cost\.py:\d+\), \d+% to trainer_cool", rec["text"]), rec
    assert named, [r["recommendations"] for r in reports]
    assert {p["pid"] for p in reports[0]["where"]["interpreters"]} >= {pid, worker}
    # Naming the samples reads each sampled process's maps once (and again only after a
    # library note), not each second while samples come: every read takes the process's
    # mmap_lock, and a torch process's takes ~10 ms.
    for i, rep in enumerate(reports, 1):
        c = rep["counters"]
        assert c["maps_reads_naming"] <= 2 + c["maps_reads_notes"], (i, c)
        assert c["maps_full_scans"] <= 1 + WINDOW_S // 5 + 1, (i, c)


def test_folded_and_text(procs, tmp_path):
    job, pid, _ = start_cost_job(procs, PYTHON)
    folded = tmp_path / "out.folded"
    r = subprocess.run([PIPEPROF, "-p", str(pid), "-d", "2", "-F", str(HZ), "--folded",
                        str(folded)], capture_output=True, text=True, timeout=120, cwd=ROOT)
    job.signal(signal.SIGTERM)
    assert r.returncode == 0, r.stderr
    assert "\nWhere the CPU goes (samples at %d Hz" % HZ in r.stdout, r.stdout
    assert re.search(r"\n  WORKER: \d+ samples, .*\n    Python +\d+\.\d%  worker_hot "
                     r"\(py_cost\.py:\d+\)\n", r.stdout), r.stdout
    lines = folded.read_text().splitlines()
    assert lines, "empty folded output"
    total = 0
    for line in lines:
        # flamegraph.pl's input: frames separated by ';', a space, the count.
        m = re.match(r"^(TRAINER|WORKER|HELPER)(;[^;]+)+ (\d+)$", line)
        assert m, line
        total += int(m.group(3))
    assert any(l.startswith("WORKER;") and ";worker_hot (py_cost.py:" in l for l in lines)
    assert any(l.startswith("TRAINER;") and ";main (py_cost.py:" in l for l in lines)
    # Every sample of the text report's roles is a line's count.
    text_total = sum(int(n) for n in re.findall(r"\n  [A-Z]+: (\d+) samples", r.stdout))
    assert total == text_total, (total, text_total)


def test_sampling_off(procs, tmp_path):
    job, pid, _ = start_cost_job(procs, PYTHON)
    rep, why = attempt_pipeprof(pid, 1, ["-F", "0"])
    assert rep is not None, why
    assert rep["where"]["sample_hz"] == 0, rep["where"]
    assert all(not r["samples"] for r in rep["where"]["roles"].values()), rep["where"]
    r = subprocess.run([PIPEPROF, "-p", str(pid), "-d", "1", "-F", "0", "--folded",
                        str(tmp_path / "x")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--folded needs samples" in r.stderr, r.stderr
    r = subprocess.run([PIPEPROF, "-p", str(pid), "-d", "1", "-F", "5000"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "invalid sampling frequency" in r.stderr, r.stderr
    job.signal(signal.SIGTERM)


def test_lost_samples_are_counted_and_reported(procs):
    """A sample ring buffer too small for the rate (a page, shrunk by the test hook, against
    two busy processes at 997 Hz on each CPU) loses most samples between two reads: the report
    says how many, in the text and the JSON, and the counters agree. The same rate with the
    buffer pipeprof sizes itself loses none."""
    job, pid, _ = start_cost_job(procs, PYTHON)
    rep, why = attempt_pipeprof(pid, 2, ["-F", "997"])
    assert rep is not None, why
    kept = sum(r["samples"] for r in rep["where"]["roles"].values())
    assert rep["where"]["samples_lost"] == 0 and kept > 1000, (kept, rep["where"]["samples_lost"])
    assert rep["counters"]["cpu_samples"] >= kept, (rep["counters"], kept)

    env = dict(os.environ, PIPEPROF_TEST_MAP_ENTRIES="samples=4096")
    r = subprocess.run([PIPEPROF, "-p", str(pid), "-d", "2", "-F", "997", "-j"], env=env,
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    small = keep_report(json.loads(r.stdout))
    lost = small["where"]["samples_lost"]
    kept = sum(x["samples"] for x in small["where"]["roles"].values())
    assert lost > kept > 0, (lost, kept)
    assert small["counters"]["cpu_samples_lost"] == lost, (small["counters"], lost)
    r = subprocess.run([PIPEPROF, "-p", str(pid), "-d", "1", "-F", "997"], env=env,
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert re.search(r"\n  [1-9]\d* samples lost \(ring buffer full\)\n", r.stdout), r.stdout
    r = subprocess.run([PIPEPROF, "-p", str(pid), "-d", "1"], capture_output=True, text=True,
                       env=dict(os.environ, PIPEPROF_TEST_MAP_ENTRIES="samples=5000"), timeout=60)
    job.signal(signal.SIGTERM)
    assert r.returncode != 0 and "bad entry 'samples=5000'" in r.stderr, r.stderr


def test_samples_past_what_a_report_keeps(procs):
    """Past 32,768 samples a report keeps a uniform draw of the window's. At 1000 Hz on each
    CPU py_cost.py's two busy processes give ~2,000 samples a second, ~60,000 in a 30 s window.
    Halfway through, its trainer moves to trainer_after alone (SIGUSR1): that function's share
    of the trainer's samples must be the share of the window after the move, within 5 points
    (a report that kept the first 32,768 would read about a tenth where half is right), and
    the worker's shares stay its own. The counts are the draw's, and the JSON says of how many."""
    job, pid, _ = start_cost_job(procs, PYTHON)
    p = subprocess.Popen([PIPEPROF, "-p", str(pid), "-d", "30", "-F", "1000", "-j"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        time.sleep(15)
        os.kill(pid, signal.SIGUSR1)
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    switched = job.wait_line(r"^SWITCHED (\d+)", 10)
    job.signal(signal.SIGTERM)
    assert p.returncode == 0 and switched, (err, job.output())
    rep = keep_report(json.loads(out))
    where, win = rep["where"], rep["window"]
    kept = sum(r["samples"] for r in where["roles"].values())
    assert where["samples_kept"] == 32768 and where["samples_seen"] > 40000, where
    assert kept <= where["samples_kept"], (kept, where["samples_kept"])
    after = (win["end_ns"] - int(switched.group(1))) / (win["end_ns"] - win["start_ns"])
    trainer, worker = shares_of(rep, "TRAINER"), shares_of(rep, "WORKER")
    print("\ndraw of %d of %d samples: trainer_after %.3f, window after the move %.3f; "
          "worker %s" % (where["samples_kept"], where["samples_seen"],
                         trainer.get("trainer_after", 0), after, worker))
    assert abs(trainer.get("trainer_after", 0) - after) <= TOLERANCE, (trainer, after)
    for name, share in TRUTH["WORKER"].items():
        assert abs(worker.get(name, 0) - share) <= TOLERANCE, (worker, TRUTH["WORKER"])


def test_workers_gone_before_the_close_keep_their_names(procs):
    """Workers that exit inside the window (short_workers.py forks one every 0.5 s that burns
    0.3 s in child_burn and exits, as DataLoader workers do at an epoch's end): their frames
    are named as they come, not when the window closes, by when no worker is left to read."""
    job = procs([PYTHON, os.path.join(WORKLOADS, "short_workers.py"), "--duration", "120"],
                name="short_workers")
    m = job.wait_line(r"^READY pid=(\d+)", 60)
    assert m, job.output()
    lines, problems = [], []
    for i in range(ATTACHES):
        rep, why = attempt_pipeprof(int(m.group(1)), 3, ["-F", str(HZ)])
        assert rep is not None, why
        w = rep["where"]["roles"]["WORKER"]
        top = w["python"][0] if w["python"] else {"function": None, "share": 0}
        lines.append("attach %d: %d worker samples, %d processes seen; top %s %.0f%%, native %s" % (
            i + 1, w["samples"], len(rep["processes"]), top["function"], 100 * top["share"],
            [e["function"] for e in w["native"][:2]]))
        if w["samples"] < 200 or not re.match(r"child_burn \(short_workers\.py:\d+\)$",
                                                top["function"] or "") or top["share"] < 0.9:
            problems.append(lines[-1])
        # A symbol of the interpreter, read from its file after the worker is gone.
        if not any(re.match(r"\S+ \(python3[.\d]*\)$", e["function"]) for e in w["native"]):
            problems.append("attach %d: no native leaf named by its symbol" % (i + 1))
    job.signal(signal.SIGTERM)
    print("\n" + "\n".join(lines))
    assert not problems, "\n".join(problems + lines)


def pyenv_python(minor):
    exe = "/root/.pyenv/versions/3.%d.*/bin/python3" % minor
    found = sorted(glob.glob(exe))
    return found[-1] if found else None


@pytest.mark.parametrize("minor", [10, 12, 13])
def test_other_cpythons(procs, minor):
    python = pyenv_python(minor)
    if not python:
        pytest.skip("no CPython 3.%d on this machine (pyenv builds are looked for)" % minor)
    job, pid, _ = start_cost_job(procs, python)
    reports = []
    for _ in range(2):
        rep, why = attempt_pipeprof(pid, WINDOW_S, ["-F", str(HZ)])
        assert rep is not None, why
        reports.append(rep)
    job.signal(signal.SIGTERM)
    versions = {p["version"] for p in reports[0]["where"]["interpreters"]}
    assert versions == {"3.%d" % minor}, versions
    problems, lines = check_shares(reports)
    print("\n" + "\n".join(lines))
    assert not problems, "\n".join(problems + lines)


def deep_chain_names(depth=70, generator_at=20, from_c_at=40):
    """tools/workloads/deep_chain.py's frames, outermost first, as their last name part."""
    names = []
    for i in range(depth):
        names.append("chain_%d" % i)
        if i == generator_at:
            names.append("step_%d" % i)
        elif i == from_c_at:
            names.append("<lambda>")
    return names + ["wait_here"]


@pytest.mark.parametrize("minor", [10, 11, 12, 13])
def test_deep_stack_walked_in_order(procs, tmp_path, minor):
    """A wait begun 70 calls deep: its stack is the innermost part of the chain, in order, with
    nothing skipped or repeated, however each frame was read (3.11+: from one read of the data
    stack's top, or on its own past that window, for a generator's frame, a C-stack shim)."""
    python = PYTHON if minor == 11 else pyenv_python(minor)
    if not python:
        pytest.skip("no CPython 3.%d on this machine (pyenv builds are looked for)" % minor)
    lines, us, _ = offcpu_waits(procs, tmp_path, "deep_chain.py", [], python=python)
    assert us.get("THREAD_WAIT", 0) > 0.5e6, us
    heaviest = max(lines, key=lambda l: int(l.rsplit(" ", 1)[1]))
    frames = heaviest.rsplit(" ", 1)[0].split(";")[1:-1]
    names = [re.sub(r" \([^()]*\)$", "", f).rsplit(".", 1)[-1] for f in frames]
    chain = deep_chain_names()
    # 64 frames kept; a 3.12+ shim takes a slot and is dropped.
    assert 58 <= len(names) <= 64 and names == chain[-len(names):], (names, chain)


@pytest.mark.parametrize("depth", [70, 5])
def test_waker_stack_after_the_waiters(procs, depth):
    """A wait's record holds the waiter's frames and then its waker's, from where the waiter's
    end: a trainer 64 frames deep (the most kept) or 7, woken by a writer 30 calls deep. The
    waker's innermost frame must be the one that writes, in every attach; a waker stack read
    from the wrong slot names one of its callers, or nothing."""
    job = procs([PYTHON, os.path.join(WORKLOADS, "deep_chain.py"), "--duration", "60",
                 "--depth", str(depth), "--feed-depth", "30"], name="deep_chain")
    m = job.wait_line(r"^READY pid=(\d+)", 120)
    assert m, job.output()
    waiter = r"^main\.<locals>\.wait_here \(deep_chain\.py:\d+\)$"
    writer = r"^main\.<locals>\.write_one \(deep_chain\.py:\d+\)$"
    problems, lines = [], []
    for i in range(2):
        rep, why = attempt_pipeprof(int(m.group(1)), 2)
        assert rep is not None, why
        st = wait_state(rep, "THREAD_WAIT")
        top, waker = st["sites"][0], st["wakers"][0]
        lines.append("attach %d: %d waits (%s lost); %.0f%% at %s; %.0f%% woken at %s" % (
            i + 1, st["count"], rep["where"]["waits"].get("lost"), 100 * top["share"],
            top["site"], 100 * waker["share"], waker["site"]))
        if not re.match(waiter, top["site"] or "") or top["share"] < 0.9:
            problems.append("attach %d: waits at %s" % (i + 1, top["site"]))
        if not re.match(writer, waker["site"] or "") or waker["share"] < 0.9:
            problems.append("attach %d: woken at %s" % (i + 1, waker["site"]))
    assert not problems, "\n".join(problems + lines)


def test_unwalkable_cpython_is_named(procs):
    python = pyenv_python(9) or pyenv_python(8) or pyenv_python(7)
    if not python:
        pytest.skip("no CPython 3.7-3.9 on this machine to stand for a version without a layout")
    job, pid, _ = start_cost_job(procs, python)
    rep, why = attempt_pipeprof(pid, 2, ["-F", str(HZ)])
    job.signal(signal.SIGTERM)
    assert rep is not None, why
    interps = rep["where"]["interpreters"]
    assert interps and all(not p["walked"] and "no frame layout" in p["why_not"]
                           for p in interps), interps
    for role in ("TRAINER", "WORKER"):
        r = rep["where"]["roles"][role]
        assert r["samples"] > 0 and r["python_samples"] == 0 and not r["python"], r


def wait_state(rep, state):
    st = rep["where"]["waits"]["states"].get(state)
    assert st, "no %s waits with stacks: %s" % (state, rep["where"]["waits"])
    return st


@pytest.mark.parametrize("script, state, site, waker_role, waker_site", [
    # The trainer blocks in next(it) inside data_bound.py's step; a worker process's thread
    # (its queue feeder, which runs the standard library's code only) hands the batch over,
    # writing it to the pipe.
    ("data_bound.py", "DATA_WAIT", r"\(data_bound\.py:\d+\)$", "WORKER",
     r"^Connection\._send(_bytes)? \(connection\.py:\d+\)$"),
    # The trainer blocks in q.get() inside thread_loader.py's next_batch; the producer thread
    # of its own process, in thread_loader.py's producer, ends each wait.
    ("thread_loader.py", "THREAD_WAIT", r"\(thread_loader\.py:\d+\)$", "HELPER",
     r"^producer \(thread_loader\.py:\d+\)$"),
])
def test_wait_and_waker_sites(procs, script, state, site, waker_role, waker_site):
    job = procs([PYTHON, os.path.join(WORKLOADS, script), "--duration", "120"], name=script)
    m = job.wait_line(r"^READY pid=(\d+)", 120)
    assert m, job.output()
    pid = int(m.group(1))
    problems, lines = [], []
    for i in range(ATTACHES):
        rep, why = attempt_pipeprof(pid, 3)
        assert rep is not None, why
        st = wait_state(rep, state)
        top, waker = st["sites"][0], st["wakers"][0]
        # What a shortfall of the stacks' time needs to be told apart: records lost, and how
        # the trainer's state time ended up (a first wait begun before the attach has no stack).
        lines.append("attach %d: %s %.2f s in %d waits (%d records lost; trainer's %s %.2f s, "
                     "window %.2f s); %.0f%% at %s (in %s); ended %.0f%% by %s %s in %s" % (
                         i + 1, state, st["seconds"], st["count"],
                         rep["where"]["waits"].get("lost", -1), state,
                         rep["trainer"]["states"][state]["seconds"],
                         rep.get("window", {}).get("seconds", -1),
                         100 * top["share"], top["site"], top["innermost"],
                         100 * waker["share"], waker["role"], waker["tid"], waker["site"]))
        if not (top["site"] and re.search(site, top["site"]) and top["share"] >= 0.8):
            problems.append("attach %d: top %s site %s (%.0f%%)" % (
                i + 1, state, top["site"], 100 * top["share"]))
        if waker["role"] != waker_role or waker["share"] < 0.8:
            problems.append("attach %d: top waker %s %.0f%%" % (i + 1, waker, 100 * waker["share"]))
        if waker_site and not (waker["site"] and re.search(waker_site, waker["site"])):
            problems.append("attach %d: waker site %s" % (i + 1, waker["site"]))
        # The stacks cover the trainer's waits of that state: their time is the state's.
        got = rep["trainer"]["states"][state]["seconds"]
        if abs(st["seconds"] - got) > 0.1 * got + 0.05:
            problems.append("attach %d: %.2f s of %s with stacks, the trainer's %s is %.2f s" % (
                i + 1, st["seconds"], state, state, got))
    job.signal(signal.SIGTERM)
    print("\n" + "\n".join(lines))
    assert not problems, "\n".join(problems + lines)


def test_profile_command(procs, tmp_path):
    """`pipeprof profile`: the folded stacks of one role, and the trainer's waits by time."""
    job, pid, _ = start_cost_job(procs, PYTHON)
    out = tmp_path / "worker.folded"
    r = subprocess.run([PIPEPROF, "profile", "-p", str(pid), "-d", "2", "-F", str(HZ), "--role",
                        "worker", "-o", str(out)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = out.read_text().splitlines()
    assert lines and all(l.startswith("WORKER;") for l in lines), lines[:5]
    counts = {}
    for l in lines:
        m = re.search(r";(worker_\w+) \(py_cost\.py:\d+\);", l)
        if m:
            counts[m.group(1)] = counts.get(m.group(1), 0) + int(l.rsplit(" ", 1)[1])
    total = sum(counts.values())
    assert total > 300 and abs(counts.get("worker_hot", 0) / total - 0.6) <= TOLERANCE, counts
    job.signal(signal.SIGTERM)
    # `pipeprof flamegraph` draws that file: its root holds every sample of it.
    svg = tmp_path / "worker.svg"
    r = subprocess.run([PIPEPROF, "flamegraph", str(out), "-o", str(svg)], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and not r.stderr, r.stderr
    samples = sum(int(l.rsplit(" ", 1)[1]) for l in lines)
    assert re.search(r"<title>all \(%d samples, 100\.00%%\)</title>" % samples, svg.read_text())
    ElementTree.parse(str(svg))
    # Usage errors: exit 2 with the reason.
    for argv, why in ((["-p", str(pid)], "give -o FILE"),
                      (["-p", str(pid), "-o", "x", "--role", "boss"], "unknown role"),
                      (["-p", str(pid), "-o", "x", "-F", "0"], "invalid sampling frequency"),
                      (["-o", "x"], "nothing to sample")):
        r = subprocess.run([PIPEPROF, "profile"] + argv, capture_output=True, text=True, timeout=30)
        assert r.returncode == 2 and why in r.stderr, (argv, r.returncode, r.stderr)


def test_profile_offcpu(procs, tmp_path):
    lines, us, _ = offcpu_waits(procs, tmp_path, "thread_loader.py", [])
    # Two seconds, most of them the trainer's THREAD_WAIT in next_batch (70% on a quiet
    # machine; a quarter at least on a busy one).
    assert us.get("THREAD_WAIT", 0) > 0.5e6, us
    assert any("main.<locals>.next_batch (thread_loader.py:" in l for l in lines), lines[:5]


def folded_waits(path, role):
    """{state: microseconds} of a folded file of waits, every line of it the role's."""
    lines, us = path.read_text().splitlines(), {}
    for l in lines:
        m = re.match(r"^%s(;[^;]+)*;\[([A-Z_]+)\] (\d+)$" % role, l)
        assert m, l
        us[m.group(2)] = us.get(m.group(2), 0) + int(m.group(3))
    return lines, us


def test_profile_offcpu_of_a_role(procs, tmp_path):
    """--offcpu --role: every wait of that role's threads with its stack. A DataLoader whose
    trainer is the bottleneck (4 ms of items a batch, 20 ms steps) keeps its worker waiting for
    indices in _worker_loop; the producer thread of a thread-fed loop waits on its full queue,
    and the trainer's own waits (next_batch) are not the helper's. (With one pass a step, the
    trainer was the bottleneck only on a quiet machine: its worker ran 90% of some windows and
    began one wait in them, and 1 run in 8 failed.)"""
    lines, us, err = offcpu_waits(procs, tmp_path, "data_bound.py",
                                    ["--item-ms", "0.5", "--step-ms", "20"], "worker")
    assert re.search(r"pipeprof: [1-9]\d* waits of WORKER written to ", err), err
    # A worker waits most of the two seconds: its main thread for indices, its feeder thread
    # for batches to send.
    assert sum(us.values()) > 1e6, us
    assert any(";_worker_loop (worker.py:" in l and ";Queue.get (queues.py:" in l
               for l in lines), lines[:5]

    lines, us, err = offcpu_waits(procs, tmp_path, "thread_loader.py", [], "helper")
    assert any(";producer (thread_loader.py:" in l for l in lines), lines[:5]
    assert not any("next_batch" in l for l in lines), [l for l in lines if "next_batch" in l]


def offcpu_waits(procs, tmp_path, script, args, role=None, python=PYTHON):
    """`profile --offcpu -d 2` on a running SCRIPT, of one role's threads with role (else the
    trainer's): (folded lines, {state: us}, stderr)."""
    job = procs([python, os.path.join(WORKLOADS, script), "--duration", "60"] + args,
                name=script)
    m = job.wait_line(r"^READY pid=(\d+)", 120)
    assert m, job.output()
    out = tmp_path / ((role or "trainer") + ".folded")
    r = subprocess.run([PIPEPROF, "profile", "-p", m.group(1), "-d", "2", "--offcpu", "-o",
                        str(out)] + (["--role", role] if role else []),
                       capture_output=True, text=True, timeout=120)
    job.signal(signal.SIGTERM)
    assert r.returncode == 0, r.stderr
    lines, us = folded_waits(out, (role or "trainer").upper())
    return lines, us, r.stderr


FP_CHAIN = ["fp_outer", "fp_middle", "fp_inner_spin"]


def test_native_callers(procs, tmp_path):
    """Native frames beyond the leaf, as deep as frame pointers go: a ctypes call into a chain
    built with frame pointers (fp_outer -> fp_middle -> fp_inner_spin) is found whole under
    its Python caller, in every attach; a frame is never out of order or under the wrong
    Python function."""
    lib = os.path.join(ROOT, ".output", "workloads", "libfpchain.so")
    job = procs([PYTHON, os.path.join(WORKLOADS, "native_chain.py"), "--lib", lib,
                 "--duration", "120"], name="native_chain")
    m = job.wait_line(r"^READY pid=(\d+)", 60)
    assert m, job.output()
    problems, lines_seen = [], []
    for attach in range(1, ATTACHES + 1):
        out = tmp_path / ("chain%d.folded" % attach)
        r = subprocess.run([PIPEPROF, "profile", "-p", m.group(1), "-d", "3", "-F", str(HZ),
                            "-o", str(out)], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        whole = leaf = 0
        for line in out.read_text().splitlines():
            stack, count = line.rsplit(" ", 1)
            frames = stack.split(";")
            chain = [f[1:].split(" (")[0] for f in frames if f.startswith("[fp_")]
            idx = [FP_CHAIN.index(c) for c in chain if c in FP_CHAIN]
            if len(idx) != len(chain) or idx != sorted(set(idx)):
                problems.append("attach %d: frames of the chain out of order: %s" % (attach, line))
            py = [f for f in frames if f and not f.startswith("[") and f != "TRAINER"]
            if chain and (not py or not py[-1].startswith("native_step (native_chain.py:")):
                problems.append("attach %d: the chain under another Python frame: %s" %
                                (attach, line))
            if frames[-1] == "[fp_inner_spin (libfpchain.so)]":
                leaf += int(count)
                if chain == FP_CHAIN:
                    whole += int(count)
        lines_seen.append("attach %d: %d of %d samples in fp_inner_spin have the whole chain" %
                          (attach, whole, leaf))
        if leaf < 200 or whole < 0.9 * leaf:
            problems.append(lines_seen[-1])
    job.signal(signal.SIGTERM)
    print("\n" + "\n".join(lines_seen))
    assert not problems, "\n".join(problems[:20] + lines_seen)


def test_flame_graph_svg(procs, tmp_path):
    """`profile --format svg`: one self-contained SVG whose frames are as wide as their
    samples (worker_hot 60% of the worker's), drawn by a browser."""
    job, pid, _ = start_cost_job(procs, PYTHON)
    out = tmp_path / "flame.svg"
    r = subprocess.run([PIPEPROF, "profile", "-p", str(pid), "-d", "3", "-F", str(HZ), "--role",
                        "worker", "--format", "svg", "-o", str(out)],
                       capture_output=True, text=True, timeout=120)
    job.signal(signal.SIGTERM)
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    assert "http" not in text.replace('xmlns="http://www.w3.org/2000/svg"', ""), \
        "the SVG refers to something outside itself"
    root = ElementTree.fromstring(text)
    ns = "{http://www.w3.org/2000/svg}"
    width = {}
    for g in root.iter(ns + "g"):
        title = g.find(ns + "title").text
        m = re.match(r"(.*) \((\d+) samples, [\d.]+%\)$", title)
        assert m, title
        width[m.group(1)] = (float(g.find(ns + "rect").get("width")), int(m.group(2)))
    total_w, total = width["all"]
    assert total > 300 and width["WORKER"][1] == total, width
    hot = [v for k, v in width.items() if k.startswith("worker_hot (py_cost.py:")]
    assert len(hot) == 1, width
    assert abs(hot[0][0] / total_w - hot[0][1] / total) < 0.002, (hot, total_w, total)
    assert abs(hot[0][1] / total - 0.6) <= TOLERANCE, (hot, total)
    # Drawn: a browser renders it, and the frames are there in colour.
    chromium = shutil.which("chromium")
    if not chromium:
        pytest.skip("chromium is not installed (make deps installs it)")
    png = tmp_path / "flame.png"
    r = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                        "--screenshot=%s" % png, "--window-size=1200,300", out.as_uri()],
                       capture_output=True, text=True, timeout=120)
    assert png.exists(), r.stderr[-2000:]
    from PIL import Image
    img = Image.open(png).convert("RGB")
    colours = img.getcolors(maxcolors=1 << 20)
    assert colours and len(colours) > 20, "a blank or nearly blank picture"
    # The root frame spans the width near the bottom of the graph.
    height = int(root.get("height"))
    row = [img.getpixel((x, height - 12)) for x in range(20, 1180, 40)]
    assert all(p != (253, 253, 246) for p in row), row
