# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""`pipeprof top -p PID`, driven in a terminal: tmux runs it at 120x40 on a data-bound job
(data_bound.py, one DataLoader worker). Within 3 s of its start the screen names the job and
the verdict DATA-LOADING BOUND; it redraws (the elapsed time moves); `q` quits with status 0,
as Ctrl-C and SIGTERM do, and every BPF program it held is gone afterwards. Its standard output in a
pipe gets plain frames, one a second. Without -p it finds the job as the daemon would. The
terminal tests skip where tmux is missing (Debian: tmux)."""
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

from conftest import PIPEPROF, ROOT, bpf_objects, start_workload

COLS, ROWS = 120, 40
SHOWN_WITHIN_S = 3.0


@pytest.fixture
def tmux():
    """A tmux server of the test's own, in a directory of its own, killed at the end. It runs in
    the foreground (-D), a child of the test: no daemon(), which refuses a /dev/null that is not
    the character device, and nothing outlives a test that dies."""
    if not shutil.which("tmux"):
        pytest.skip("tmux is not installed (Debian: tmux)")
    tmpdir = tempfile.mkdtemp(prefix="pp-tmux-")
    env = dict(os.environ, TMUX_TMPDIR=tmpdir)
    env.pop("TMUX", None)
    server = subprocess.Popen(["tmux", "-L", "top", "-D"], env=env, stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    sock = os.path.join(tmpdir, "tmux-%d" % os.getuid(), "top")
    deadline = time.monotonic() + 5
    while not os.path.exists(sock) and time.monotonic() < deadline:
        time.sleep(0.02)

    def cmd(*args, check=True):
        return subprocess.run(["tmux", "-L", "top"] + list(args), capture_output=True, text=True,
                              timeout=10, check=check, env=env)

    yield cmd
    cmd("kill-server", check=False)
    try:
        server.wait(5)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
    shutil.rmtree(tmpdir, ignore_errors=True)


def start_top(tmux, tmp_path, pid):
    """Starts `pipeprof top -p PID` in a detached session; returns (pipeprof's pid, the file
    its exit status goes to, the time it started)."""
    status = tmp_path / "exit-status"
    shell = "cd %s && %s top -p %d; echo EXIT=$? > %s" % (ROOT, PIPEPROF, pid, status)
    started = time.monotonic()
    tmux("new-session", "-d", "-x", str(COLS), "-y", str(ROWS), "-s", "top", shell)
    pane = int(tmux("display-message", "-p", "-t", "top", "#{pane_pid}").stdout)
    top_pid = None
    deadline = time.monotonic() + 5
    while top_pid is None and time.monotonic() < deadline:
        r = subprocess.run(["pgrep", "-P", str(pane), "-x", "pipeprof"], capture_output=True,
                           text=True)
        if r.stdout.split():
            top_pid = int(r.stdout.split()[0])
        else:
            time.sleep(0.05)
    assert top_pid, "pipeprof top did not start:\n%s" % screen(tmux)
    return top_pid, status, started


def screen(tmux):
    return tmux("capture-pane", "-p", "-t", "top", check=False).stdout


def wait_screen(tmux, pattern, until):
    text = ""
    while time.monotonic() < until:
        text = screen(tmux)
        m = re.search(pattern, text)
        if m:
            return m, text
        time.sleep(0.1)
    return None, text


def wait_exit(status, seconds=5):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if status.exists() and status.read_text().strip():
            return status.read_text().strip()
        time.sleep(0.05)
    return None


def live_prog_ids():
    out = subprocess.run(["bpftool", "prog", "show"], capture_output=True, text=True,
                         check=True).stdout
    return {int(m) for m in re.findall(r"^(\d+):", out, re.M)}


def assert_detached(held):
    """The programs pipeprof top held are unloaded (their ids are never reused soon)."""
    deadline = time.monotonic() + 5
    left = held & live_prog_ids()
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = held & live_prog_ids()
    assert not left, "BPF programs of pipeprof top left loaded: %s" % sorted(left)


def held_programs(top_pid):
    held = bpf_objects(top_pid)["prog"]
    assert held, "pipeprof top holds no BPF program while it runs"
    return held


@pytest.mark.parametrize("key", ["q", "C-c"])
def test_top_shows_the_job_refreshes_and_quits(procs, pipeprof_bin, tmux, tmp_path, key):
    w, pid, _ = start_workload(procs, "data_bound.py", [], str(tmp_path / "truth.json"))
    top_pid, status, started = start_top(tmux, tmp_path, pid)

    m, text = wait_screen(tmux, r"(?s)PID %d \(python3\).*DATA-LOADING BOUND" % pid,
                          started + SHOWN_WITHIN_S)
    assert m, "no verdict within %.0f s of the start; the screen:\n%s" % (SHOWN_WITHIN_S, text)
    for role in ("TRAINER", "WORKER", "HELPER"):
        assert re.search(r"^%s +\d+ +\|" % role, text, re.M), text
    assert re.search(r"steps: [\d.]+/s", text), text
    held = held_programs(top_pid)

    first = re.search(r"elapsed (\d+:\d\d)", text).group(1)
    m, text = wait_screen(tmux, r"elapsed (?!%s)\d+:\d\d" % first, time.monotonic() + 3)
    assert m, "the screen was not redrawn (elapsed still %s):\n%s" % (first, text)

    tmux("send-keys", "-t", "top", key)
    assert wait_exit(status) == "EXIT=0", "pipeprof top did not quit on %s:\n%s" % (
        key, screen(tmux))
    assert_detached(held)
    assert w.p.poll() is None, "the job died with pipeprof top"


def test_top_sigterm_exits_0_and_detaches(procs, pipeprof_bin, tmux, tmp_path):
    _, pid, _ = start_workload(procs, "data_bound.py", [], str(tmp_path / "truth.json"))
    top_pid, status, started = start_top(tmux, tmp_path, pid)
    m, text = wait_screen(tmux, r"DATA-LOADING BOUND", started + SHOWN_WITHIN_S)
    assert m, text
    held = held_programs(top_pid)
    os.kill(top_pid, signal.SIGTERM)
    assert wait_exit(status) == "EXIT=0", screen(tmux)
    assert_detached(held)


def test_top_in_a_pipe_prints_plain_frames(procs, pipeprof_bin, tmp_path):
    _, pid, _ = start_workload(procs, "data_bound.py", [], str(tmp_path / "truth.json"))
    r = subprocess.run([PIPEPROF, "top", "-p", str(pid), "-n", "2"], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert "\033" not in r.stdout
    assert r.stdout.count("pipeprof top - PID %d" % pid) == 2, r.stdout
    assert "DATA-LOADING BOUND" in r.stdout, r.stdout


def test_top_without_pid_finds_the_job(procs, pipeprof_bin, tmp_path):
    """The job the daemon would find: ours, unless the host runs others (the machine may be
    shared), when they are listed, ours among them, and nothing is traced."""
    _, pid, _ = start_workload(procs, "data_bound.py", [], str(tmp_path / "truth.json"))
    r = subprocess.run([PIPEPROF, "top", "-n", "1"], capture_output=True, text=True, timeout=30)
    if r.returncode == 0:
        assert "pipeprof top - PID %d " % pid in r.stdout, r.stdout
        return
    assert r.returncode == 2, r.stderr
    assert "training jobs; give -p" in r.stderr, r.stderr
    listed = [int(x) for x in re.findall(r"^ +(\d+)  ", r.stderr, re.M)]
    assert pid in listed, r.stderr
    # Its DataLoader worker maps torch too, but runs under the job.
    workers = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    assert not set(map(int, workers.split())) & set(listed), r.stderr
