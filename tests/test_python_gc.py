# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Python garbage-collection pauses, from the interpreter's USDT probes.

tools/workloads/gc_job.py runs gc.collect() about 20 times a second in the trainer and in a
forked worker, with automatic collection off, and records every collection's start and end.
Each of ATTACHES attaches must count, per role, the collections that began inside its window
(one more or fewer at either edge) and their pause time within 10% (plus 2 ms) of the truth's.
An interpreter built without USDT probes (a pyenv build, where present) is reported as not
traced, never as zero pauses.
"""
import glob
import json
import os
import signal
import subprocess

import pytest

from conftest import PIPEPROF, PYTHON, ROOT, WORKLOADS, attempt_pipeprof

ATTACHES = 3
WINDOW_S = 2


def truth_in_window(spans, start_ns, end_ns):
    """(collections begun in [start, end), their pause time clipped to the window, in s)."""
    n, ns = 0, 0
    for t0, t1 in spans:
        if start_ns <= t0 < end_ns:
            n += 1
            ns += min(t1, end_ns) - t0
    return n, ns / 1e9


def test_gc_pauses_per_role(procs, tmp_path):
    prefix = str(tmp_path / "gc")
    job = procs([PYTHON, os.path.join(WORKLOADS, "gc_job.py"), "--truth", prefix], name="gc_job")
    m = job.wait_line(r"^READY pid=(\d+) worker=(\d+)", 60)
    assert m, job.output()
    pid, worker = int(m.group(1)), int(m.group(2))
    reports = []
    for i in range(ATTACHES):
        rep, why = attempt_pipeprof(pid, WINDOW_S)
        assert rep is not None, why
        reports.append(rep)
    job.signal(signal.SIGTERM)
    assert job.wait(30) == 0, job.output()
    truth = {}
    for path in glob.glob(prefix + ".*.json"):
        with open(path) as f:
            t = json.load(f)
        truth[t["pid"]] = t["collections"]
    assert set(truth) == {pid, worker}, truth.keys()

    problems, lines = [], []
    for i, rep in enumerate(reports, 1):
        gc = rep["python_gc"]
        if not gc["traced"]:
            problems.append("attach %d: GC not traced: %s" % (i, gc["why_not"]))
            continue
        w = rep["window"]
        for role, who in (("TRAINER", pid), ("WORKER", worker)):
            want_n, want_s = truth_in_window(truth[who], w["start_ns"], w["end_ns"])
            got = gc["roles"][role]
            lines.append("attach %d %s: %d collections, %.1f ms; truth %d, %.1f ms" % (
                i, role, got["collections"], 1e3 * got["seconds"], want_n, 1e3 * want_s))
            if want_n < 10:
                problems.append("attach %d %s: only %d collections in the truth" % (
                    i, role, want_n))
            if abs(got["collections"] - want_n) > 1:
                problems.append("attach %d %s: %d collections, truth %d" % (
                    i, role, got["collections"], want_n))
            if abs(got["seconds"] - want_s) > 0.10 * want_s + 0.002:
                problems.append("attach %d %s: %.1f ms of pauses, truth %.1f ms" % (
                    i, role, 1e3 * got["seconds"], 1e3 * want_s))
        if gc["roles"]["HELPER"]["collections"]:
            problems.append("attach %d: collections in helper threads: %s" % (i, gc["roles"]))
    print("\n" + "\n".join(lines))
    assert not problems, "\n".join(problems + lines)


def test_gc_line_in_text_report(procs, tmp_path):
    prefix = str(tmp_path / "gc")
    job = procs([PYTHON, os.path.join(WORKLOADS, "gc_job.py"), "--truth", prefix], name="gc_job")
    m = job.wait_line(r"^READY pid=(\d+)", 60)
    assert m, job.output()
    r = subprocess.run([PIPEPROF, "-p", m.group(1), "-d", "1"], capture_output=True, text=True,
                       timeout=60, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    line = [l for l in r.stdout.splitlines() if l.startswith("  Python GC: trainer ")]
    assert line and "of its on-CPU time); workers " in line[0], r.stdout


def unprobed_pythons():
    """Interpreters without USDT probes: pyenv's shared-library builds, where present."""
    found = []
    for exe in sorted(glob.glob("/root/.pyenv/versions/3.*/bin/python3")):
        libs = glob.glob(os.path.join(os.path.dirname(os.path.dirname(exe)), "lib",
                                      "libpython3*.so*"))
        if libs:
            found.append(exe)
    return found


@pytest.mark.parametrize("exe", unprobed_pythons()[:1] or [None])
def test_interpreter_without_usdt_is_not_traced(exe, procs):
    if exe is None:
        pytest.skip("no shared-library Python build (pyenv) on this machine")
    job = procs([exe, "-c", "import time; print('READY', flush=True); time.sleep(60)"],
                name="pyenv")
    assert job.wait_line(r"^READY", 30), job.output()
    rep, why = attempt_pipeprof(job.p.pid, 1)
    assert rep is not None, why
    gc = rep["python_gc"]
    assert gc["traced"] is False and gc["roles"] is None, gc
    assert "no gc__start/gc__done USDT probes" in gc["why_not"], gc
    assert any(l.startswith("Python GC: ") for l in rep["not_traced"]), rep["not_traced"]
