# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Odd targets, missing privileges, failed writes and libraries replaced under a running job:
each gets one clear line and the right exit status, never a report about the wrong thing."""
import json
import os
import re
import shutil
import subprocess
import time

import pytest

from conftest import PIPEPROF, PYTHON, ROOT, keep_report, start_workload

SLEEPER = [PYTHON, "-c", "import threading, time\n"
           "threading.Thread(target=lambda: time.sleep(600), name='loader', daemon=True).start()\n"
           "print('READY pid=0 tid=0', flush=True)\n"
           "time.sleep(600)\n"]


def run(argv, timeout=60, **kw):
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=ROOT, **kw)


def one_line(stderr):
    lines = [l for l in stderr.splitlines() if l.strip()]
    assert len(lines) == 1, "expected one line on stderr, got:\n%s" % stderr
    return lines[0]


def test_thread_id_resolves_to_its_process(pipeprof_bin, procs):
    w = procs(SLEEPER, name="sleeper")
    assert w.wait_line(r"^READY", 30), w.output()
    tids = sorted(int(t) for t in os.listdir("/proc/%d/task" % w.pid))
    assert len(tids) >= 2, tids
    thread = [t for t in tids if t != w.pid][0]

    r = run([pipeprof_bin, "-p", str(thread), "-d", "0.5", "-j"])
    assert r.returncode == 0, r.stderr
    report = keep_report(json.loads(r.stdout))
    assert report["pid"] == w.pid, "traced %s, not thread %d's process %d" % (
        report["pid"], thread, w.pid)
    assert report["trainer"]["tid"] == thread
    assert "%d is a thread" % thread in r.stderr and "tracing process %d" % w.pid in r.stderr

    r = run([pipeprof_bin, "hist", "-p", str(thread), "offcpu", "1", "1"])
    assert r.returncode == 0, r.stderr
    assert "tracing PID %d" % w.pid in r.stderr, r.stderr


def test_zombie_is_refused(pipeprof_bin):
    # A child that exits and is never reaped (until the test ends) stays a zombie.
    child = subprocess.Popen(["/bin/true"])
    deadline = time.time() + 10
    while time.time() < deadline:
        with open("/proc/%d/stat" % child.pid) as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                break
        time.sleep(0.05)
    try:
        for argv in ([pipeprof_bin, "-p", str(child.pid), "-d", "1"],
                     [pipeprof_bin, "-p", str(child.pid), "-d", "1", "-j"],
                     [pipeprof_bin, "hist", "-p", str(child.pid), "offcpu", "1", "1"]):
            started = time.monotonic()
            r = run(argv)
            took = time.monotonic() - started
            assert r.returncode == 2, (argv, r.returncode, r.stderr)
            assert "has exited" in one_line(r.stderr) and "zombie" in r.stderr, r.stderr
            assert r.stdout == "", "a zombie got a report:\n" + r.stdout
            # Refused before anything loads: no BPF object, no 1 s window.
            assert took < 0.9, "refusing took %.2f s" % took
    finally:
        child.wait()


def test_kernel_thread_and_init_are_refused(pipeprof_bin):
    for argv in ([pipeprof_bin, "-p", "2", "-d", "1"],
                 [pipeprof_bin, "hist", "-p", "2", "offcpu", "1", "1"]):
        r = run(argv)
        assert r.returncode == 2, (argv, r.stderr, r.stdout[:500])
        assert "kernel thread" in one_line(r.stderr)
        assert r.stdout == ""
    r = run([pipeprof_bin, "-p", "1", "-d", "1"])
    assert r.returncode == 2, (r.stderr, r.stdout[:500])
    line = one_line(r.stderr)
    assert "PID 1" in line and "init" in line and "every process" in line, line


def test_failed_writes_are_errors(pipeprof_bin, procs):
    w = procs(SLEEPER, name="sleeper")
    assert w.wait_line(r"^READY", 30), w.output()
    for argv in ([pipeprof_bin, "-p", str(w.pid), "-d", "0.3"],
                 [pipeprof_bin, "-p", str(w.pid), "-d", "0.3", "-j"],
                 [pipeprof_bin, "hist", "-p", str(w.pid), "offcpu", "1", "1"],
                 [pipeprof_bin, "hist", "-p", str(w.pid), "-j", "offcpu", "1", "1"]):
        with open("/dev/full", "w") as full:
            r = subprocess.run(argv, stdout=full, stderr=subprocess.PIPE, text=True, timeout=60,
                               cwd=ROOT)
        assert r.returncode == 1, (argv, r.returncode, r.stderr)
        assert "cannot write" in r.stderr and "No space left on device" in r.stderr, r.stderr


def test_report_is_out_before_the_probes_detach(pipeprof_bin, procs, fakecuda):
    _, pid, _ = start_workload(procs, "gpu.py", [], truth="/dev/null")
    p = subprocess.Popen([pipeprof_bin, "-p", str(pid), "-d", "0.5", "-j"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, cwd=ROOT)
    out = p.stdout.read()          # returns at EOF: pipeprof closed its stdout
    still_running = p.poll() is None
    err = p.stderr.read()
    assert p.wait(timeout=60) == 0, err
    report = keep_report(json.loads(out))
    attached = sum(pr["attached"] for lib in report["gpu"]["libraries"] for pr in lib["probes"])
    # Each uprobe detaches in ~70 ms, one after another: with this many, the report must be
    # out while they still detach.
    assert attached >= 8, report["gpu"]
    assert still_running, "stdout reached EOF only when pipeprof exited: it detached first"
    links = run(["bpftool", "link", "show"]).stdout
    assert "uprobe" not in links or str(pid) not in links, "probes left attached:\n" + links


def test_deleted_library_is_probed(pipeprof_bin, procs, fakecuda, tmp_path):
    libdir = tmp_path / "cuda"
    libdir.mkdir()
    for name in ("libcudart.so.13", "libcuda.so.1"):
        shutil.copy(os.path.join(os.path.dirname(fakecuda), name), libdir / name)
    env = dict(os.environ, LD_LIBRARY_PATH=str(libdir))
    argv = [PYTHON, os.path.join(ROOT, "tools", "workloads", "gpu.py"), "--duration", "60",
            "--lib", str(libdir / "libcudart.so.13")]
    w = procs(argv, name="gpu.py", env=env)
    m = w.wait_line(r"^READY pid=(\d+)", 90)
    assert m, w.output()
    pid = int(m.group(1))
    # An upgrade under a running job: the mapped files are unlinked.
    for f in libdir.iterdir():
        f.unlink()
    with open("/proc/%d/maps" % pid) as f:
        assert "libcudart.so.13 (deleted)" in f.read()

    r = run([pipeprof_bin, "-p", str(pid), "-d", "1", "-j"])
    assert r.returncode == 0, r.stderr
    report = keep_report(json.loads(r.stdout))
    assert report["gpu"]["traced"], report["gpu"].get("why_not")
    libs = [l for l in report["gpu"]["libraries"] if l["kind"] == "cudart"]
    assert libs and libs[0]["deleted"] and libs[0]["path"] == str(libdir / "libcudart.so.13")
    assert report["verdict"]["id"] == "gpu_bound", report["verdict"]

    r = run([pipeprof_bin, "hist", "-p", str(pid), "gpu-sync", "1", "1"])
    assert r.returncode == 0, r.stderr
    assert "no events" not in r.stdout and "count " in r.stdout, r.stdout


def _setpriv():
    path = shutil.which("setpriv")
    if not path:
        pytest.skip("setpriv (util-linux) is not installed")
    return path


def test_missing_capabilities_are_named(pipeprof_bin, procs, fakecuda):
    setpriv = _setpriv()
    _, pid, _ = start_workload(procs, "gpu.py", [], truth="/dev/null")
    # What the README once promised: CAP_BPF + CAP_PERFMON. Uprobes need CAP_SYS_ADMIN.
    r = run([setpriv, "--reuid=65534", "--regid=65534", "--clear-groups",
             "--inh-caps=+bpf,+perfmon", "--ambient-caps=+bpf,+perfmon",
             pipeprof_bin, "-p", str(pid), "-d", "0.5"])
    assert r.returncode == 1, r.stderr
    line = one_line(r.stderr)
    assert "missing CAP_SYS_ADMIN" in line and "uprobes" in line, line
    # Root with every capability but CAP_SYS_PTRACE cannot open the libraries of a target that
    # holds capabilities it lacks: said up front, not a report blind to the GPU.
    r = run([setpriv, "--bounding-set=-all,+bpf,+perfmon,+sys_admin",
             pipeprof_bin, "-p", str(pid), "-d", "0.5"])
    assert r.returncode == 1, (r.stderr, r.stdout[:300])
    assert "CAP_SYS_PTRACE" in one_line(r.stderr), r.stderr
    # And with all four, the job is traced and its GPU seen.
    r = run([setpriv, "--reuid=65534", "--regid=65534", "--clear-groups",
             "--inh-caps=+bpf,+perfmon,+sys_admin,+sys_ptrace",
             "--ambient-caps=+bpf,+perfmon,+sys_admin,+sys_ptrace",
             pipeprof_bin, "-p", str(pid), "-d", "0.5", "-j"])
    assert r.returncode == 0, r.stderr
    assert keep_report(json.loads(r.stdout))["gpu"]["traced"]


def test_top_level_help_lists_the_commands(pipeprof_bin):
    r = run([pipeprof_bin, "--help"])
    assert r.returncode == 0
    assert "pipeprof hist" in r.stdout and "pipeprof daemon" in r.stdout, r.stdout
    assert "pipeprof profile" in r.stdout and "pipeprof flamegraph" in r.stdout, r.stdout
    assert "localhost" not in r.stdout and "Report bugs" not in r.stdout, r.stdout


def test_both_uprobe_paths_time_gpu_calls(pipeprof_bin, procs, fakecuda):
    """Multi-uprobe links where the kernel has them (6.6+), one perf event per probe before:
    the same calls timed either way, and the multi path detaches far fewer links."""
    _, pid, _ = start_workload(procs, "gpu.py", [], truth="/dev/null")
    seen = {}
    for label, env in (("multi", {}), ("single", {"PIPEPROF_NO_UPROBE_MULTI": "1"})):
        r = run([pipeprof_bin, "-p", str(pid), "-d", "1", "-j", "-v"],
                env=dict(os.environ, **env))
        assert r.returncode == 0, r.stderr
        report = keep_report(json.loads(r.stdout))
        assert report["verdict"]["id"] == "gpu_bound", (label, report["verdict"])
        assert report["counters"]["selftest_uprobe_hits"] == 2, (label, report["counters"])
        calls = sum(a["calls"] for a in report["gpu"]["apis"])
        assert calls >= 10, (label, report["gpu"]["apis"])
        seen[label] = r.stderr.count("(multi link)")
    assert seen["multi"] >= 8 and seen["single"] == 0, seen


def online_cpus():
    with open("/sys/devices/system/cpu/online") as f:
        spans = [s.split("-") for s in f.read().strip().split(",")]
    return sum(int(s[-1]) - int(s[0]) + 1 for s in spans)


def test_attach_warms_every_cpu_without_pinning_itself(pipeprof_bin, procs):
    """The thread records' per-CPU caches are warmed by a program run on each online CPU (a
    cross-CPU call), so a switch right after the attach cannot lose a thread's event on any
    CPU the job may run on: pipeprof never pins itself to a CPU to do it. Pinned to each CPU in
    turn, an attach once waited 60 s behind a run queue that would not let it in, beside two
    CPU hogs; and one started under `taskset -c 0` warmed CPU 0 alone."""
    if not shutil.which("strace") or not shutil.which("taskset"):
        pytest.skip("strace and taskset are needed (make deps installs them)")
    _, pid, _ = start_workload(procs, "data_bound.py", [], truth="/dev/null")
    cpus = online_cpus()
    for attempt, confine in enumerate(([], ["taskset", "-c", "0"], [])):
        calls = "/tmp/pipeprof-affinity-%d.txt" % os.getpid()
        r = run(["strace", "-f", "-qq", "-e", "trace=sched_setaffinity", "-o", calls] + confine +
                [PIPEPROF, "-p", str(pid), "-d", "0.5", "-v"], timeout=120)
        with open(calls) as f:
            pinned = [l for l in f if "sched_setaffinity" in l]
        os.unlink(calls)
        assert r.returncode == 0, r.stderr[-3000:]
        # taskset's own call comes before the exec; pipeprof's would follow it.
        assert len(pinned) == (1 if confine else 0), (attempt, pinned)
        m = re.search(r"caches warmed on (\d+) CPUs in (\d+) runs, (\d+) CPUs still short",
                      r.stderr)
        assert m, r.stderr[-3000:]
        warmed, runs, short = (int(x) for x in m.groups())
        assert (warmed, short) == (cpus, 0) and runs >= cpus, (attempt, m.group(0), cpus)
