# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""pipeprof -p PID as a user meets it: errors, exits, signals, launching, library discovery,
and that nothing is left attached afterwards. Loads BPF for real: run as root."""
import json
import os
import signal
import subprocess
import time

import pytest

from conftest import keep_report

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PIPEPROF = os.path.join(REPO, "pipeprof")
PYTHON = "/usr/bin/python3"
WORKLOADS = os.path.join(REPO, "tools", "workloads")
FAKE_CUDART = os.path.join(REPO, ".output", "fakecuda", "libcudart.so.13")
REAL_CUDART = "/usr/local/cuda/lib64/libcudart.so.13"
# Prefixes of program names: "dispatch_" is every program of the daemon's and top's dispatcher.
OUR_PROGS = {"on_sched_switch", "on_sched_waking", "on_sched_wakeup", "dispatch_",
             "softirq_vector", "on_gpu_enter", "on_gpu_return",
             "on_sched_process", "on_block_rq_iss", "on_launch", "on_copy", "on_copy_return",
             "on_exec"}


@pytest.fixture(scope="module", autouse=True)
def preconditions():
    assert os.path.exists(PIPEPROF), "build first: make"
    assert os.geteuid() == 0, "these tests load BPF programs: run them as root"


def run(args, **kw):
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    kw.setdefault("timeout", 120)
    return subprocess.run([PIPEPROF] + args, **kw)


def our_progs():
    out = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True,
                         check=True).stdout
    return [p for p in json.loads(out) if any(p.get("name", "").startswith(n[:15])
                                               for n in OUR_PROGS)]


def link_count():
    out = subprocess.run(["bpftool", "-j", "link", "show"], capture_output=True, text=True,
                         check=True).stdout
    return len(json.loads(out))


def assert_detached(links_before):
    """The kernel frees programs a moment after their last reference goes: poll briefly."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if not our_progs() and link_count() <= links_before:
            return
        time.sleep(0.1)
    assert not our_progs(), f"pipeprof BPF programs left loaded: {our_progs()}"
    assert link_count() <= links_before, "BPF links left behind"


class Proc:
    """A background process killed on exit from the with-block."""

    def __init__(self, args, ready=None, env=None):
        self.p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True, env=env)
        self.ready_line = None
        if ready:
            deadline = time.monotonic() + 120
            for line in self.p.stdout:
                if ready in line:
                    self.ready_line = line
                    break
                assert time.monotonic() < deadline, f"{args} never printed {ready}"
            assert self.ready_line, f"{args} exited before {ready}"

    @property
    def pid(self):
        return self.p.pid

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()


def sleeper_code(lib=None, seconds=60):
    load = f"import ctypes; ctypes.CDLL({lib!r}); " if lib else ""
    return f"{load}import time, sys; print('READY', flush=True); time.sleep({seconds})"


def test_no_such_pid():
    r = run(["-p", "4194303", "-d", "1"])
    assert r.returncode == 2
    assert "no such process: 4194303" in r.stderr


@pytest.mark.parametrize("args,msg", [
    (["-p", "abc"], "invalid PID"),
    (["-p", "-5"], "invalid PID"),
    (["-p", "1", "-d", "0"], "invalid duration"),
    (["-p", "1", "-d", "x"], "invalid duration"),
    (["-p", "1", "--threshold", "200"], "invalid threshold"),
    (["-p", "1", "--threshold", "nan"], "invalid threshold"),
    (["-p", "1", "-d", "nan"], "invalid duration"),
    (["-p", "1", "-d", "inf"], "invalid duration"),
    (["-p", "1", "--tid", "0"], "invalid TID"),
    (["-p", "1", "--tid", "x"], "invalid TID"),
    ([], "nothing to trace"),
    (["-p", "1", "--", "true"], "not both"),
])
def test_bad_arguments(args, msg):
    r = run(args)
    assert r.returncode == 2, r
    assert msg in r.stderr


@pytest.mark.parametrize("env,msg", [
    ({"PIPEPROF_TEST_DROP_WAKEUPS": "0"}, "is not a count from 1 to 1000000"),
    ({"PIPEPROF_TEST_DROP_SWITCH_INS": "3x"}, "is not a count from 1 to 1000000"),
    ({"PIPEPROF_TEST_DROP_WOKEN_SWITCH_INS": "1"}, "PIPEPROF_TEST_DROP_WAKEUPS is unset"),
    ({"PIPEPROF_TEST_DROP_WAKEUPS": "3", "PIPEPROF_TEST_DROP_WOKEN_SWITCH_INS": "2"},
     "is not 0 or 1"),
])
def test_bad_test_hooks(env, msg):
    """A test hook set wrong is said in one line and nothing is traced, rather than a run that
    silently drops no event (or every one)."""
    links_before = link_count()
    r = run(["-p", str(os.getpid()), "-d", "1"], env=dict(os.environ, **env))
    assert r.returncode != 0, r
    lines = [l for l in r.stderr.splitlines() if msg in l]
    assert len(lines) == 1, r.stderr
    assert_detached(links_before)


def test_help_has_examples():
    r = run(["--help"])
    assert r.returncode == 0
    assert "sudo pipeprof -p 4242 -d 10 -j" in r.stdout
    assert "-- /usr/bin/python3 train.py" in r.stdout


def test_not_root_is_a_clear_error():
    links = link_count()
    with Proc(["sleep", "30"]) as target:
        r = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                            PIPEPROF, "-p", str(target.pid), "-d", "1"],
                           capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert "run as root" in r.stderr
    assert_detached(links)


def test_target_exits_while_traced():
    links = link_count()
    with Proc([PYTHON, "-c", "import time; print('READY', flush=True); "
               "t = time.time()\nwhile time.time() - t < 1.5: pass"], ready="READY") as target:
        t0 = time.monotonic()
        r = run(["-p", str(target.pid), "-d", "20", "-j"])
        took = time.monotonic() - t0
    assert r.returncode == 0, r.stderr
    report = keep_report(json.loads(r.stdout))
    assert report["target_exited"] is True
    assert took < 10, "pipeprof should stop when its target exits, not wait out -d"
    assert report["window"]["seconds"] < 5
    # What was seen up to the exit is still reported: the busy loop is CPU-bound.
    assert report["verdict"]["name"] == "CPU-BOUND"
    assert report["trainer"]["states"]["RUNNING"]["fraction"] > 0.8
    assert_detached(links)


def test_text_report_notes_the_exit():
    with Proc(["sh", "-c", "echo READY; sleep 1"], ready="READY") as target:
        r = run(["-p", str(target.pid), "-d", "20"])
    assert r.returncode == 0, r.stderr
    assert "note: the target exited" in r.stdout


def test_sigint_prints_report_and_detaches():
    links = link_count()
    with Proc([PYTHON, "-c", sleeper_code(seconds=60)], ready="READY") as target:
        p = subprocess.Popen([PIPEPROF, "-p", str(target.pid), "-j"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        time.sleep(1.5)
        assert our_progs(), "programs should be loaded while tracing"
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
    assert p.returncode == 0, err
    report = keep_report(json.loads(out))
    assert report["interrupted"] is True
    assert report["target_exited"] is False
    # An idle sleeper: the main thread sleeps on a timer.
    assert report["trainer"]["states"]["OTHER"]["fraction"] > 0.9
    assert_detached(links)


def test_sigterm_detaches_too():
    links = link_count()
    with Proc([PYTHON, "-c", sleeper_code(seconds=60)], ready="READY") as target:
        p = subprocess.Popen([PIPEPROF, "-p", str(target.pid)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        time.sleep(1.5)
        p.send_signal(signal.SIGTERM)
        out, _ = p.communicate(timeout=30)
    assert p.returncode == 0
    assert "Verdict:" in out
    assert_detached(links)


def test_ctrl_c_while_attaching_a_launch():
    """Ctrl-C reaches the whole foreground group, the held command too: pipeprof must say so
    and clean up, not die on a write to the dead command's pipe."""
    links = link_count()
    marker = "held-%d" % os.getpid()
    p = subprocess.Popen([PIPEPROF, "-d", "5", "--", PYTHON, "-c", "import time; time.sleep(30)",
                          marker], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    # pipeprof forks the held command once its handlers are set, then attaches (40 ms or
    # more): Ctrl-C as soon as the held command exists lands inside the attach, whatever the
    # machine's load. A fixed sleep did not: with the cached kernel types the attach can end
    # first.
    children = "/proc/%d/task/%d/children" % (p.pid, p.pid)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with open(children) as f:
            if f.read().strip():
                break
    else:
        raise AssertionError("pipeprof never forked the held command")
    os.killpg(p.pid, signal.SIGINT)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 1, (p.returncode, err)
    assert "interrupted while attaching" in err
    assert out == ""
    assert subprocess.run(["pgrep", "-f", marker], capture_output=True).returncode == 1
    assert_detached(links)


def test_launch_follows_from_the_start():
    links = link_count()
    code = ("import os, time\n"
            "pid = os.fork()\n"
            "if pid == 0:\n"
            "    t = time.time()\n"
            "    while time.time() - t < 1.0: pass\n"
            "    os._exit(0)\n"
            "os.waitpid(pid, 0)\n")
    r = run(["-d", "20", "-j", "--", PYTHON, "-c", code])
    assert r.returncode == 0, r.stderr
    report = keep_report(json.loads(r.stdout))
    assert report["launched"] is True
    assert report["target_exited"] is True
    forked = [p for p in report["processes"] if p["forked_while_tracing"]]
    assert len(forked) == 1, report["processes"]
    assert forked[0]["parent"] == report["pid"]
    # The child computed for a second of wall time; its thread shows it (queued for a CPU
    # part of it when something else competes for the CPUs).
    child = [t for t in report["threads"] if t["pid"] == forked[0]["pid"]]
    assert child and child[0]["role"] == "WORKER"
    states = child[0]["states"]
    assert states["RUNNING"]["seconds"] + states["RUNQ"]["seconds"] > 0.8, states
    # The parent waited in wait() for its child to finish: the child's exit ended that wait,
    # which delivered no batch, so it is no DATA_WAIT (stall model: a child's exit is OTHER).
    states = report["trainer"]["states"]
    assert states["OTHER"]["seconds"] > 0.8, states
    assert states["DATA_WAIT"]["seconds"] < 0.05, states
    assert "waits_on_children" in [r["id"] for r in report["recommendations"]], \
        report["recommendations"]
    assert_detached(links)


def test_launch_of_missing_command():
    links = link_count()
    r = run(["-d", "1", "--", "/nonexistent/train"])
    assert r.returncode == 2
    assert "cannot run /nonexistent/train" in r.stderr
    assert_detached(links)


def test_launched_command_is_stopped_at_the_end():
    r = run(["-d", "1", "-j", "--", "sleep", "300"], timeout=30)
    assert r.returncode == 0, r.stderr
    pid = json.loads(r.stdout)["pid"]
    assert not os.path.exists(f"/proc/{pid}"), "launched command left running"


def test_cpu_job_without_cuda_says_gpu_not_traced():
    with Proc([PYTHON, "-c", "import time; print('READY', flush=True)\n"
               "t = time.time()\nwhile time.time() - t < 30: pass"], ready="READY") as target:
        r = run(["-p", str(target.pid), "-d", "1.5", "-j"])
        text = run(["-p", str(target.pid), "-d", "1"])
    assert r.returncode == 0, r.stderr
    report = keep_report(json.loads(r.stdout))
    assert report["gpu"]["traced"] is False
    assert "no libcudart or libcuda" in report["gpu"]["why_not"]
    assert any("GPU_WAIT" in s for s in report["not_traced"])
    assert report["verdict"]["name"] == "CPU-BOUND"
    assert "GPU_WAIT: no libcudart or libcuda" in text.stdout
    # The window closes before the maps are read: no thread's states outgrow it.
    for t in report["threads"]:
        total = sum(st["seconds"] for st in t["states"].values())
        assert abs(total - t["wall_s"]) < 1e-6, t
        assert t["wall_s"] <= report["window"]["seconds"] + 1e-6, (t, report["window"])
    counters = report["counters"]
    assert counters["sched_switch_events"] > 0
    assert counters["selftest_uprobe_hits"] >= 1
    # Every loss counter is reported, and none fires on a quiet single-process job.
    for lost in ("threads_lost_map_full", "processes_lost_map_full", "io_requests_lost_map_full",
                 "bpf_recursion_misses", "probe_attach_failures"):
        assert counters[lost] == 0, (lost, counters)


def test_tid_that_is_no_traced_thread():
    with Proc([PYTHON, "-c", "import time; print('READY', flush=True); time.sleep(30)"],
              ready="READY") as target:
        r = run(["-p", str(target.pid), "-d", "0.5", "-j", "--tid", "1"])
    assert r.returncode == 0, r.stderr
    report = keep_report(json.loads(r.stdout))
    assert report["trainer"] is None
    assert "--tid 1: no such thread in the traced processes" in report["not_traced"]
    assert report["recommendations"][0]["id"] == "no_trainer"


def nm_values(path):
    out = subprocess.run(["nm", "-D", "--defined-only", path], capture_output=True, text=True,
                         check=True).stdout
    values = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "TtWi":
            values[parts[2].split("@")[0]] = int(parts[0], 16)
    return values


def load_segments(path):
    out = subprocess.run(["readelf", "-lW", path], capture_output=True, text=True,
                         check=True).stdout
    segs = []
    for line in out.splitlines():
        f = line.split()
        if f and f[0] == "LOAD":
            segs.append((int(f[1], 16), int(f[2], 16), int(f[4], 16)))  # offset, vaddr, filesz
    return segs


def check_probes_against_nm(report, path, kind):
    libs = [l for l in report["gpu"]["libraries"] if l["kind"] == kind]
    assert libs, report["gpu"]
    values, segs = nm_values(path), load_segments(path)
    probes = libs[0]["probes"]
    assert probes
    for p in probes:
        assert p["attached"], p
        assert p["value"] == values[p["name"]], (p, hex(values[p["name"]]))
        off, vaddr, _ = next(s for s in segs if s[1] <= p["value"] < s[1] + s[2])
        expected = p["value"] - vaddr + off + (4 if p["skipped_endbr64"] else 0)
        assert p["offset"] == expected, p
    return {p["name"] for p in probes}


@pytest.mark.skipif(not os.path.exists(REAL_CUDART), reason="the CUDA toolkit is not installed")
def test_real_libcudart_offsets_match_nm():
    with Proc([PYTHON, "-c", sleeper_code(REAL_CUDART)], ready="READY") as target:
        r = run(["-p", str(target.pid), "-d", "1", "-j"])
    assert r.returncode == 0, r.stderr
    report = keep_report(json.loads(r.stdout))
    assert report["gpu"]["traced"] is True
    names = check_probes_against_nm(report, REAL_CUDART, "cudart")
    assert {"cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize",
            "cudaMemcpy"} <= names


def test_fake_runtime_and_driver_both_probed():
    with Proc([PYTHON, "-c", sleeper_code(FAKE_CUDART)], ready="READY") as target:
        r = run(["-p", str(target.pid), "-d", "1", "-j"])
    assert r.returncode == 0, r.stderr
    report = keep_report(json.loads(r.stdout))
    check_probes_against_nm(report, FAKE_CUDART, "cudart")
    driver = os.path.join(os.path.dirname(FAKE_CUDART), "libcuda.so.1")
    names = check_probes_against_nm(report, driver, "cuda")
    assert {"cuStreamSynchronize", "cuCtxSynchronize"} <= names


def test_library_loaded_after_attach_is_picked_up():
    """gpu.py waits --load-after seconds after READY before it dlopens the fake runtime."""
    with Proc([PYTHON, os.path.join(WORKLOADS, "gpu.py"), "--sync", "spin", "--duration", "8",
               "--load-after", "1.5"], ready="READY") as target:
        r = run(["-p", str(target.pid), "-d", "5", "-j"])
    assert r.returncode == 0, r.stderr
    report = keep_report(json.loads(r.stdout))
    assert report["gpu"]["traced"] is True
    calls = {a["name"]: a["calls"] for a in report["gpu"]["apis"]}
    assert calls.get("cudaStreamSynchronize", 0) > 10, calls
    assert report["trainer"]["states"]["GPU_WAIT"]["fraction"] > 0.2


def test_nested_runtime_driver_call_counted_once():
    """The fake runtime's cudaStreamSynchronize calls the driver's cuStreamSynchronize: one wait."""
    code = (f"import ctypes, time\n"
            f"lib = ctypes.CDLL({FAKE_CUDART!r})\n"
            "class dim3(ctypes.Structure):\n"
            "    _fields_ = [('x', ctypes.c_uint), ('y', ctypes.c_uint), ('z', ctypes.c_uint)]\n"
            "print('READY', flush=True)\n"
            "time.sleep(1.0)\n"
            "for _ in range(200):\n"
            "    lib.cudaLaunchKernel(None, dim3(1000, 1, 1), dim3(1000, 1, 1), None,"
            " ctypes.c_size_t(0), None)\n"
            "    lib.cudaStreamSynchronize(None)\n"
            "time.sleep(30)\n")
    with Proc([PYTHON, "-c", code], ready="READY") as target:
        r = run(["-p", str(target.pid), "-d", "3", "-j"])
    assert r.returncode == 0, r.stderr
    report = keep_report(json.loads(r.stdout))
    calls = {a["name"]: a["calls"] for a in report["gpu"]["apis"]}
    assert calls.get("cudaStreamSynchronize") == 200, calls
    assert "cuStreamSynchronize" not in calls, calls
    assert report["trainer"]["gpu_sync_calls"] == 200
    # 200 simulated 1 ms kernels: about 0.2 s inside the calls.
    gpu_s = report["trainer"]["states"]["GPU_WAIT"]["seconds"]
    assert 0.19 < gpu_s < 0.35, gpu_s
