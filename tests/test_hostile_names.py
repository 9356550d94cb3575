# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Names a traced job chose to be hostile: its process and thread names (prctl), its command
line and the path of a library it maps hold ESC sequences, bytes that are not UTF-8, quotes,
backslashes, a newline, a C1 control and a right-to-left override (tools/workloads/
hostile_names.py). Every output must stay valid in its format and inert on a terminal:

- `pipeprof -p PID -j`, `pipeprof hist -j`, the daemon's /api/v1/report and JSON lines are
  strict UTF-8 JSON, each name read back as bytes.decode("utf-8", "replace") reads it;
- the daemon's /metrics passes `promtool check metrics`;
- the text report, `hist` text, -v and the daemon's log hold no control character but '\\n'
  and are UTF-8, each name shown with its escapes (\\xNN) in place.

One workload serves every test (attached a few seconds each). Loads BPF for real: run as root.
"""
import json
import os
import shutil
import signal
import subprocess
import time
import unicodedata

import pytest

from conftest import PYTHON, READY_TIMEOUT, ROOT, WORKLOADS, Proc, keep_report
from test_daemon import LOOPBACK, PROMTOOL, free_port, http_get, parse_exposition

PIPEPROF = os.path.join(ROOT, "pipeprof")
FAKECUDA = os.path.join(ROOT, ".output", "fakecuda")

# tools/workloads/hostile_names.py's names, and how pipeprof's text shows them.
MAIN_NAME = b'a"b\\c}\x1b[31m\xff\tz'
MAIN_SHOWN = r'a"b\\c}\x1b[31m\xff\x09z'
LOADER_NAME = b'\x1b]0;owned\x07\xc2\x9b2J'
LOADER_SHOWN = r'\x1b]0;owned\x07\xc2\x9b2J'
NEWLINE_NAME = b'q\nVerdict: ok'
NEWLINE_SHOWN = r'q\x0aVerdict: ok'
BIDI_NAME = b'\xe2\x80\xaeevil\xed\xa0\x80\xf0\x9f'
BIDI_SHOWN = r'\xe2\x80\xaeevil\xed\xa0\x80\xf0\x9f'
ALL_NAMES = (MAIN_NAME, LOADER_NAME, NEWLINE_NAME, BIDI_NAME)
# The library's directory, and an argument of the command line.
LIB_DIR = b'cuda\x1b[7m\xff"\\q'
LIB_DIR_SHOWN = r'cuda\x1b[7m\xff"\\q'
TAG = b'x\x1b]0;t\x07"\\\xff\xc2\x9b'
# The command line shows control characters as spaces (one line in reports).
TAG_SHOWN = r'x ]0;t "\\\xff\xc2\x9b'
MATCH = '^a"b\\\\c'     # the daemon's --match: MAIN_NAME's start, as a POSIX ERE

DAEMON_READY_S = 30
WINDOW_WAIT_S = 20


def utf8(raw):
    """As a JSON or Prometheus consumer reads the name pipeprof got: invalid bytes replaced."""
    return raw.decode("utf-8", "replace")


@pytest.fixture(scope="module", autouse=True)
def preconditions():
    assert os.geteuid() == 0, "these tests load BPF programs: run them as root"
    assert os.path.exists(PIPEPROF), "build first: make"
    assert os.path.exists(os.path.join(FAKECUDA, "libcudart.so.13")), "make fixtures first"


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    """The hostile workload, its fake CUDA runtime mapped from a hostile directory:
    (proc, pid, main tid, library directory as bytes)."""
    lib_dir = os.path.join(os.fsencode(str(tmp_path_factory.mktemp("hostile"))), LIB_DIR)
    os.makedirs(lib_dir)
    for name in (b"libcudart.so.13", b"libcuda.so.1"):
        shutil.copy(os.path.join(os.fsencode(FAKECUDA), name), os.path.join(lib_dir, name))
    argv = [os.fsencode(PYTHON), os.fsencode(os.path.join(WORKLOADS, "hostile_names.py")),
            b"--duration", b"300", b"--lib", os.path.join(lib_dir, b"libcudart.so.13"),
            b"--tag", TAG]
    w = Proc(argv, "hostile_names.py")
    try:
        m = w.wait_line(r"^READY pid=(\d+) tid=(\d+)", READY_TIMEOUT)
        assert m, "hostile_names.py did not start\n%s" % w.output()
        yield w, int(m.group(1)), int(m.group(2)), lib_dir
    finally:
        w.kill_group()


def alive(job):
    w = job[0]
    assert w.alive(), "the hostile workload exited\n%s" % w.output()


def assert_terminal_safe(raw, what):
    """Text for a terminal: UTF-8, no control character but newline, no bidi override."""
    assert b"\x1b" not in raw, "%s holds an ESC byte:\n%r" % (what, raw[-3000:])
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        pytest.fail("%s is not UTF-8 (%s):\n%r" % (what, e, raw[-3000:]), pytrace=False)
    bad = sorted({"U+%04X" % ord(c) for c in text
                  if (unicodedata.category(c) == "Cc" and c != "\n") or
                  c in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"})
    assert not bad, "%s holds %s:\n%r" % (what, bad, raw[-3000:])
    return text


def strict_json(raw, what):
    """Strict UTF-8 (no lone surrogates, no invalid bytes) and strict JSON."""
    try:
        return keep_report(json.loads(raw.decode("utf-8")))
    except (UnicodeDecodeError, ValueError) as e:
        pytest.fail("%s is not strict UTF-8 JSON (%s):\n%r" % (what, e, raw[-3000:]),
                    pytrace=False)


def pipeprof(args, timeout=60):
    r = subprocess.run([PIPEPROF] + args, capture_output=True, timeout=timeout, cwd=ROOT)
    assert r.returncode == 0, "pipeprof %s exited %d\n%r" % (" ".join(args), r.returncode,
                                                            r.stderr[-3000:])
    return r


def expected_command(pid):
    """user/proctree.c's proc_cmdline(): arguments joined by spaces, control bytes spaces."""
    with open("/proc/%d/cmdline" % pid, "rb") as f:
        raw = f.read()[:511]
    return utf8(bytes(b if b >= 0x20 else 0x20 for b in raw).rstrip(b" "))


# -- pipeprof -p ------------------------------------------------------------------------------

def test_report_json(job):
    _, pid, tid, lib_dir = job
    r = pipeprof(["-p", str(pid), "-d", "2", "-j"])
    rep = strict_json(r.stdout, "pipeprof -p -j")
    alive(job)
    assert rep["command"] == expected_command(pid), (rep["command"], expected_command(pid))
    assert rep["trainer"]["tid"] == tid and rep["trainer"]["comm"] == utf8(MAIN_NAME), \
        rep["trainer"]
    comms = {t["comm"] for t in rep["threads"] if t["pid"] == pid}
    assert comms == {utf8(n) for n in ALL_NAMES}, comms
    assert [p["comm"] for p in rep["processes"] if p["pid"] == pid] == [utf8(MAIN_NAME)]
    paths = {lib["path"] for lib in rep["gpu"]["libraries"] if lib["pid"] == pid}
    assert utf8(os.path.join(lib_dir, b"libcudart.so.13")) in paths, paths
    # Names embedded in generated text (the verdict line, recommendations) are repaired too.
    waker = {w["tid"]: w["comm"] for w in rep["waited_on"] if w["tid"]}
    assert set(waker.values()) <= {utf8(n) for n in ALL_NAMES}, waker


def test_report_text_and_verbose_log(job):
    _, pid, tid, _ = job
    r = pipeprof(["-p", str(pid), "-d", "2", "-v"])
    out = assert_terminal_safe(r.stdout, "the text report")
    err = assert_terminal_safe(r.stderr, "pipeprof -v's log")
    alive(job)
    first = out.splitlines()[0]
    assert first.startswith("pipeprof: PID %d (" % pid) and TAG_SHOWN + ")" in first, first
    assert "Trainer thread %d (%s, chosen by" % (tid, MAIN_SHOWN) in out, out
    # The helper the trainer waits on is named in "Waited on", escaped.
    assert "(%s), HELPER pid %d" % (LOADER_SHOWN, pid) in out, out
    # A name with a newline does not start a line of its own.
    assert not any(line.startswith("Verdict: ok") for line in out.splitlines()), out
    # -v lists each probe with its library's path.
    assert LIB_DIR_SHOWN + "/libcudart.so.13:" in err, err[-3000:]


# -- pipeprof hist ----------------------------------------------------------------------------

def test_hist_text(job):
    _, pid, tid, _ = job
    r = pipeprof(["hist", "-p", str(pid), "--per-thread", "offcpu", "runq", "2", "1"])
    out = assert_terminal_safe(r.stdout, "hist's text")
    assert_terminal_safe(r.stderr, "hist's log")
    alive(job)
    assert "tid = %d %s (pid %d)" % (tid, MAIN_SHOWN, pid) in out, out
    shown = {s for s in (LOADER_SHOWN, NEWLINE_SHOWN, BIDI_SHOWN) if " %s (pid %d)" % (s, pid)
             in out}
    assert len(shown) >= 2, ("hostile thread names missing from the histograms", out)


def test_hist_json(job):
    _, pid, tid, _ = job
    r = pipeprof(["hist", "-p", str(pid), "--per-thread", "-j", "offcpu", "runq", "2", "1"])
    lines = r.stdout.splitlines()
    assert len(lines) == 1, r.stdout
    iv = strict_json(lines[0], "hist -j")
    alive(job)
    comms = {h["tid"]: h["comm"] for h in iv["histograms"] if h["pid"] == pid}
    assert comms.get(tid) == utf8(MAIN_NAME), comms
    assert set(comms.values()) <= {utf8(n) for n in ALL_NAMES}, comms
    assert len(set(comms.values())) >= 3, comms


# -- pipeprof daemon --------------------------------------------------------------------------

def wait_for(cond, timeout, step=0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(step)
    return None


def test_daemon_outputs(job, tmp_path):
    _, pid, tid, _ = job
    port = free_port()
    log_path = tmp_path / "daemon.log"
    jsonl = tmp_path / "daemon.jsonl"
    with open(log_path, "wb") as log:
        d = subprocess.Popen([PIPEPROF, "daemon", "--listen", "%s:%d" % (LOOPBACK, port),
                              "--match", MATCH, "--window", "1", "--jsonl", str(jsonl)],
                             stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             start_new_session=True, cwd=ROOT)
    try:
        def log():
            return log_path.read_bytes()

        assert wait_for(lambda: b"daemon listening on" in log(), DAEMON_READY_S), log()
        attached = b"attached PID %d " % pid
        assert wait_for(lambda: attached in log(), 10), log()

        def report():
            status, _, body = http_get(port, "/api/v1/report?pid=%d" % pid)
            return body if status == 200 else None

        body = wait_for(report, WINDOW_WAIT_S)
        assert body, ("no window report for PID %d" % pid, log())
        rep = strict_json(body, "/api/v1/report")
        assert rep["pid"] == pid and rep["command"] == expected_command(pid), rep["command"]
        comms = {t["comm"] for t in rep["threads"] if t["pid"] == pid}
        assert utf8(MAIN_NAME) in comms and comms <= {utf8(n) for n in ALL_NAMES}, comms

        status, headers, metrics = http_get(port, "/metrics")
        assert status == 200
        r = subprocess.run([PROMTOOL, "check", "metrics"], input=metrics, capture_output=True,
                           timeout=30)
        assert r.returncode == 0, ("promtool check metrics: %r %r" % (r.stdout, r.stderr),
                                   metrics[-3000:])
        samples, _ = parse_exposition(metrics.decode("utf-8"))
        info = [labels for name, labels, _ in samples
                if name == "pipeprof_job_info" and labels.get("pid") == str(pid)]
        # Bytes that are not UTF-8, and control characters the format cannot escape, read
        # U+FFFD; quote and backslash are escaped (parse_exposition unescapes them).
        assert info and info[0]["comm"] == 'a"b\\c}\ufffd[31m\ufffd\tz', info

        assert wait_for(lambda: jsonl.exists() and b'"snapshot"' in jsonl.read_bytes(), 10)
        events = [strict_json(line, "a JSON line") for line in jsonl.read_bytes().splitlines()]
        ours = [e for e in events if e.get("pid") == pid]
        assert {e["type"] for e in ours} >= {"attach", "snapshot"}, ours
        assert all(e["comm"] == utf8(MAIN_NAME) for e in ours), ours
    finally:
        if d.poll() is None:
            d.send_signal(signal.SIGTERM)
        try:
            d.wait(20)
        except subprocess.TimeoutExpired:
            d.kill()
            d.wait()
    text = assert_terminal_safe(log(), "the daemon's log")
    assert "attached PID %d (%s)" % (pid, MAIN_SHOWN) in text, text
    alive(job)
