# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""`pipeprof daemon` as an operator meets it: discovered jobs scraped by a real Prometheus,
job churn without leaks, hostile HTTP, SIGHUP reload and JSONL rotation, SIGTERM/SIGINT
cleanup, and a bounded soak. Loads BPF for real: run as root.

Everything listens on and connects to 127.0.0.1 only; every loop has a deadline. The daemon
traces every process on the machine that maps libtorch/libcudart/libcuda/libnccl; so that
other jobs on the machine (another test run's workloads) cannot disturb the counts, the jobs
here run a python3 through a symlink named JOB_COMM and every daemon gets --match '^JOB_COMM$'.
The daemon's own resources are measured from /proc (its fds, the BPF links it holds, its RSS).

Figures (RSS, fds, links, CPU time) are printed: run with -s to see them.
The soak (test_soak_bounded, about 90 s) can be deselected with -k 'not soak'; set
PIPEPROF_SOAK_S to make its sampled phase longer.
"""
import http.client
import json
import os
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import threading
import time
import urllib.parse

import pytest

from conftest import PYTHON, READY_TIMEOUT, ROOT, WORKLOADS, finish_workload, keep_report, \
    run_or_show_hang
from test_cli import PIPEPROF, assert_detached, link_count

FAKE_CUDA = os.path.join(ROOT, ".output", "fakecuda", "libcuda.so.1")
PROMETHEUS = "/usr/bin/prometheus"
PROMTOOL = "/usr/bin/promtool"
RULES = os.path.join(ROOT, "tools", "prometheus", "pipeprof.rules.yml")
DASHBOARD = os.path.join(ROOT, "tools", "grafana", "pipeprof-dashboard.json")
LOOPBACK = "127.0.0.1"
# The command name of every job these tests start; per run, so two runs of this module
# (or a daemon left from one) do not see each other's jobs.
JOB_COMM = "ppdtest%d" % os.getpid()
MATCH = "^%s$" % JOB_COMM

STATES = ("RUNNING", "RUNQ", "GPU_WAIT", "IO_WAIT", "DATA_WAIT", "THREAD_WAIT", "COMM_WAIT",
          "OTHER")
ROLES = ("TRAINER", "WORKER", "HELPER")
# user/classify.c's ids
VERDICTS = ("data_loading_bound", "gpu_bound", "cpu_bound", "io_bound", "cpu_contention",
            "communication_bound", "undetermined", "data_loading_thread", "waiting_on_thread",
            "gpu_unobserved", "wait_not_ended", "gpu_backlog")
JSONL_TYPES = ("snapshot", "verdict_change", "step_regression", "attach", "detach")
ALLOWED_LABELS = {"pid", "comm", "role", "state", "verdict", "le", "dist_job", "rank", "op"}
JOB_FAMILIES = {
    "pipeprof_job_info": "gauge",
    "pipeprof_job_state_seconds_total": "counter",
    "pipeprof_job_state_fraction": "gauge",
    "pipeprof_job_verdict": "gauge",
    "pipeprof_job_step_seconds": "histogram",
    "pipeprof_job_gpu_sync_seconds": "histogram",
    "pipeprof_job_io_latency_seconds": "histogram",
    # their series only for jobs with a probed libnccl (test_daemon_nccl.py)
    "pipeprof_job_nccl_calls_total": "counter",
    "pipeprof_job_nccl_bytes_total": "counter",
    "pipeprof_job_nccl_unsized_calls_total": "counter",
    "pipeprof_job_nccl_seconds_total": "counter",
}
SELF_FAMILIES = ("pipeprof_jobs_attached", "pipeprof_attach_failures_total",
                 "pipeprof_events_lost_total", "pipeprof_cpu_seconds_total",
                 "pipeprof_bpf_run_seconds_total", "pipeprof_windows_total")

DAEMON_READY_S = 30       # loading and attaching the BPF object
ATTACH_S = 10             # exec seen, then the maps are checked every second
DETACH_S = 10
CHURN_WARMUP = 5
CHURN_CYCLES = int(os.environ.get("PIPEPROF_CHURN", "50"))
# RSS slack for the churn and the soak. The daemon's steady state is reused heap: per-job
# records, report buffers, the exposition buffer. 1 MiB is 256 pages: glibc returns freed
# small chunks to its free lists rather than to the kernel, so RSS moves in page-sized steps
# as the allocator's high-water mark wobbles (a second arena touched by an HTTP thread, a
# longer report once); but a leak of 21 KiB or more per job over 50 jobs (a leaked report,
# JSON object tree, maps snapshot or libbpf link struct per job) exceeds it.
RSS_SLACK_KB = 1024
# The soak's sampled phase, after warm-up: 90 s in `make test` (a leak of ~12 KB a second shows),
# 600 in `make soak`.
SOAK_S = float(os.environ.get("PIPEPROF_SOAK_S", "90"))
SOAK_WARMUP_S = 12
IDLE_CPU_S = 10
# How long a connection that sends nothing may stay open before the daemon closes it (the
# daemon's timeout is 3 s, user/http.h; libmicrohttpd checks it at its next poll wakeup).
IDLE_CLOSE_S = 25
# Idle connections opened at once by the probe at the end of the HTTP test: fewer than the
# daemon keeps; test_daemon_hardening.py has the idle clients that reconnect.
MANY_IDLE = 40


# -- helpers ---------------------------------------------------------------------------------

def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


def other_pipeprofs(mine=()):
    """PIDs of pipeprof processes these tests did not start (another user's run or tests)."""
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) in mine:
            continue
        try:
            # errors="replace": another run's processes may have any bytes in their names
            with open("/proc/%s/comm" % d, errors="replace") as f:
                if f.read().strip() == "pipeprof":
                    found.append(int(d))
        except OSError:
            pass
    return found


def bpf_ids(kind):
    out = subprocess.run(["bpftool", "-j", kind, "show"], capture_output=True, text=True,
                         check=True).stdout
    return {x["id"] for x in json.loads(out)}


class Daemon:
    """`pipeprof daemon --listen 127.0.0.1:PORT ARGS`, stdout and stderr read line by line."""

    def __init__(self, args, port=None):
        self.port = port or free_port()
        self.argv = [PIPEPROF, "daemon", "--listen", "%s:%d" % (LOOPBACK, self.port)] + list(args)
        self.lines = []
        self.times = []     # time.monotonic() each line was read
        self._cond = threading.Condition()
        self.p = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, text=True, errors="replace",
                                  start_new_session=True, cwd=ROOT)
        self.pid = self.p.pid
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        for line in self.p.stdout:
            with self._cond:
                self.lines.append(line.rstrip("\n"))
                self.times.append(time.monotonic())
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def wait_line(self, pattern, timeout, since=0):
        """First line at index >= since matching pattern: (match, index), or (None, None)."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self._cond:
            i = since
            while True:
                while i < len(self.lines):
                    m = rx.search(self.lines[i])
                    if m:
                        return m, i
                    i += 1
                left = deadline - time.monotonic()
                if left <= 0 or self.p.poll() is not None:
                    if i < len(self.lines):
                        continue
                    return None, None
                self._cond.wait(min(left, 0.2))

    def count(self):
        with self._cond:
            return len(self.lines)

    def log(self, tail=60):
        with self._cond:
            return "--- daemon (exit %s) ---\n%s" % (self.p.poll(),
                                                    "\n".join(self.lines[-tail:]))

    def wait_ready(self):
        m, _ = self.wait_line(r"pipeprof: daemon listening on ", DAEMON_READY_S)
        if m is None:
            pytest.fail("%s: no 'daemon listening' line within %d s\n%s" % (
                " ".join(self.argv), DAEMON_READY_S, self.log()), pytrace=False)
        return self

    def alive(self):
        return self.p.poll() is None

    # /proc views of the daemon's own resources
    def rss_kb(self):
        with open("/proc/%d/status" % self.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        raise AssertionError("no VmRSS")

    def fds(self):
        return len(os.listdir("/proc/%d/fd" % self.pid))

    def fd_kinds(self):
        kinds = {}
        for fd in os.listdir("/proc/%d/fd" % self.pid):
            try:
                t = os.readlink("/proc/%d/fd/%s" % (self.pid, fd))
            except OSError:
                continue
            t = re.sub(r"\[\d+\]$", "", t)
            kinds[t] = kinds.get(t, 0) + 1
        return kinds

    def link_ids(self):
        """IDs of the BPF links the daemon holds open (from /proc/PID/fdinfo)."""
        ids = set()
        for fd in os.listdir("/proc/%d/fd" % self.pid):
            try:
                if os.readlink("/proc/%d/fd/%s" % (self.pid, fd)) != "anon_inode:bpf_link":
                    continue
                with open("/proc/%d/fdinfo/%s" % (self.pid, fd)) as f:
                    for line in f:
                        if line.startswith("link_id:"):
                            ids.add(int(line.split()[1]))
            except OSError:
                pass
        return ids

    def prog_ids(self):
        ids = set()
        for fd in os.listdir("/proc/%d/fd" % self.pid):
            try:
                if os.readlink("/proc/%d/fd/%s" % (self.pid, fd)) != "anon_inode:bpf-prog":
                    continue
                with open("/proc/%d/fdinfo/%s" % (self.pid, fd)) as f:
                    for line in f:
                        if line.startswith("prog_id:"):
                            ids.add(int(line.split()[1]))
            except OSError:
                pass
        return ids

    def cpu_s(self):
        """utime + stime of all the daemon's threads, seconds (clock ticks: 10 ms steps)."""
        with open("/proc/%d/stat" % self.pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def cpu_ns(self):
        """On-CPU nanoseconds of the daemon's live threads (/proc/PID/task/*/schedstat): the
        same time as cpu_s() at nanosecond resolution, for its long-lived threads."""
        total = 0
        for t in os.listdir("/proc/%d/task" % self.pid):
            try:
                with open("/proc/%d/task/%s/schedstat" % (self.pid, t)) as f:
                    total += int(f.read().split()[0])
            except OSError:
                pass
        return total

    def stop(self, sig=signal.SIGTERM, timeout=20):
        """Signals the daemon and waits for it; returns the exit status (None: still running)."""
        if self.alive():
            os.kill(self.pid, sig)
        try:
            return self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def kill(self):
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            self.p.wait(5)
        except subprocess.TimeoutExpired:
            pass


@pytest.fixture(scope="module", autouse=True)
def preconditions():
    assert os.geteuid() == 0, "these tests load BPF programs: run them as root"
    assert os.path.exists(PIPEPROF), "build first: make"
    r = subprocess.run([PIPEPROF, "daemon", "--help"], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0, "this pipeprof has no daemon: %s" % r.stderr.strip()
    assert os.path.exists(FAKE_CUDA), "build the fixtures first: make fixtures"


@pytest.fixture
def daemons():
    """Factory: starts daemons (waiting for their 'listening' line); SIGKILLs leftovers."""
    started = []

    def start(args=(), ready=True, match=MATCH):
        d = Daemon((["--match", match] if match else []) + list(args))
        started.append(d)
        return d.wait_ready() if ready else d

    yield start
    for d in started:
        if d.alive():
            d.kill()


@pytest.fixture(scope="module")
def job_python(tmp_path_factory):
    """/usr/bin/python3 through a symlink named JOB_COMM: the jobs' command name."""
    path = tmp_path_factory.mktemp("jobpython") / JOB_COMM
    os.symlink(PYTHON, path)
    return str(path)


def start_job_workload(procs, py, script, truth, duration):
    """conftest.start_workload, run by the JOB_COMM python: returns (proc, pid, tid)."""
    w = procs([py, os.path.join(WORKLOADS, script), "--duration", str(duration),
               "--truth", truth], name=script)
    m = w.wait_line(r"^READY pid=(\d+) tid=(\d+)", READY_TIMEOUT)
    if m is None:
        pytest.fail("%s did not print READY within %d s (exit status %s)\n%s" % (
            script, READY_TIMEOUT, w.p.poll(), w.output()), pytrace=False)
    return w, int(m.group(1)), int(m.group(2))


@pytest.fixture
def nccl_lib(tmp_path):
    """A shared library whose file is named libnccl.so.2 (the fake CUDA driver, copied): a
    process that loads it is a job to the daemon, without torch's import time."""
    path = tmp_path / "libnccl.so.2"
    shutil.copy(FAKE_CUDA, path)
    return str(path)


def lib_job_code(lib, hold="stdin", seconds=60):
    """Python that dlopens lib, prints READY, then holds until stdin closes (hold='stdin') or
    for `seconds`. SIGALRM ends it after 60 s whatever happens."""
    wait = "sys.stdin.read()" if hold == "stdin" else "time.sleep(%r)" % seconds
    return ("import ctypes, signal, sys, time\n"
            "signal.alarm(60)\n"
            "ctypes.CDLL(%r)\n"
            "print('READY', flush=True)\n"
            "%s\n" % (lib, wait))


def start_lib_job(procs, py, lib, seconds=60):
    """A sleeper that maps lib, started through conftest's procs (killed at the end)."""
    w = procs([py, "-c", lib_job_code(lib, hold="sleep", seconds=seconds)], name="libjob")
    if w.wait_line(r"^READY", 30) is None:
        pytest.fail("lib job did not start\n%s" % w.output(), pytrace=False)
    return w


# -- HTTP ------------------------------------------------------------------------------------

def http_get(port, path, method="GET", body=None, timeout=10):
    c = http.client.HTTPConnection(LOOPBACK, port, timeout=timeout)
    try:
        c.request(method, path, body=body)
        r = c.getresponse()
        return r.status, dict((k.lower(), v) for k, v in r.getheaders()), r.read()
    finally:
        c.close()


def healthz_ok(port):
    try:
        status, _, body = http_get(port, "/healthz", timeout=3)
    except (OSError, http.client.HTTPException):
        return False
    return status == 200 and body.strip() == b"ok"


SAMPLE_RE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+-?\d+)?$')
LABEL_RE = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*(,|$)')


def parse_exposition(text):
    """Text format 0.0.4 -> (samples [(name, {labels}, value)], {family: type})."""
    samples, types = [], {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        if line.startswith("#"):
            f = line.split(None, 3)
            if len(f) >= 4 and f[1] == "TYPE":
                assert f[2] not in types, "line %d: second TYPE for %s" % (n, f[2])
                types[f[2]] = f[3].strip()
            continue
        m = SAMPLE_RE.match(line)
        assert m, "line %d is not a sample: %r" % (n, line)
        labels, rest = {}, m.group(2) or ""
        pos = 0
        while pos < len(rest):
            lm = LABEL_RE.match(rest, pos)
            assert lm, "line %d: bad labels %r" % (n, rest)
            labels[lm.group(1)] = re.sub(r'\\(.)', lambda x: {"n": "\n"}.get(x.group(1),
                                                                             x.group(1)),
                                         lm.group(2))
            pos = lm.end()
        samples.append((m.group(1), labels, float(m.group(3))))
    return samples, types


def values(samples, name, **labels):
    return [v for n, l, v in samples
            if n == name and all(l.get(k) == str(x) for k, x in labels.items())]


def promtool_accepts(text, tmp_path):
    """Asserts that `promtool check metrics` takes the exposition text (kept in tmp_path)."""
    (tmp_path / "metrics.txt").write_text(text)
    r = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 0, "promtool check metrics exit %d:\n%s%s" % (
        r.returncode, r.stdout, r.stderr)


def scrape(port, timeout=10):
    status, headers, body = http_get(port, "/metrics", timeout=timeout)
    assert status == 200, (status, body[:500])
    return body.decode(), headers


def jobs_attached(port):
    s, _ = parse_exposition(scrape(port)[0])
    v = values(s, "pipeprof_jobs_attached")
    assert len(v) == 1, v
    return v[0]


def raw_exchange(port, data, timeout=5.0, shut_wr=False):
    """Sends raw bytes; returns ('status', code) for an HTTP response, ('closed', None) when the
    daemon closed or reset the connection without one, ('timeout', None) when it did neither."""
    s = socket.create_connection((LOOPBACK, port), timeout=timeout)
    try:
        try:
            if data:
                s.sendall(data)
            if shut_wr:
                s.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass    # closed on us mid-send: still read what it may have answered
        buf = b""
        deadline = time.monotonic() + timeout
        while b"\r\n" not in buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return ("timeout", None)
            s.settimeout(left)
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                return ("timeout", None)
            except ConnectionResetError:
                break
            if not chunk:
                break
            buf += chunk
        m = re.match(rb"HTTP/1\.[01] (\d{3})", buf)
        if m:
            return ("status", int(m.group(1)))
        return ("closed", None) if not buf else ("garbage", buf[:80])
    finally:
        s.close()


# -- Prometheus ------------------------------------------------------------------------------

def start_prometheus(procs, tmp_path, target_port):
    """A real Prometheus on loopback scraping 127.0.0.1:target_port every second."""
    port = free_port()
    cfg = tmp_path / "prometheus.yml"
    cfg.write_text(
        "global:\n"
        "  scrape_interval: 1s\n"
        "  scrape_timeout: 1s\n"
        "  evaluation_interval: 1s\n"
        "rule_files:\n"
        "  - %s\n"
        "scrape_configs:\n"
        "  - job_name: pipeprof\n"
        "    static_configs:\n"
        "      - targets: ['%s:%d']\n" % (RULES, LOOPBACK, target_port))
    r = subprocess.run([PROMTOOL, "check", "config", str(cfg)], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0, r.stdout + r.stderr
    p = procs([PROMETHEUS, "--config.file=%s" % cfg,
               "--storage.tsdb.path=%s" % (tmp_path / "tsdb"),
               "--web.listen-address=%s:%d" % (LOOPBACK, port),
               "--log.level=warn"], name="prometheus")
    deadline = time.monotonic() + 30
    while True:
        try:
            status, _, _ = http_get(port, "/-/ready", timeout=2)
            if status == 200:
                return p, port
        except OSError:
            pass
        if not p.alive() or time.monotonic() > deadline:
            pytest.fail("prometheus did not become ready\n%s" % p.output(), pytrace=False)
        time.sleep(0.3)


def prom_query(port, query):
    status, _, body = http_get(port, "/api/v1/query?" + urllib.parse.urlencode({"query": query}))
    assert status == 200, body[:500]
    doc = json.loads(body)
    assert doc["status"] == "success", doc
    return [(r["metric"], float(r["value"][1])) for r in doc["data"]["result"]]


def prom_targets(port):
    status, _, body = http_get(port, "/api/v1/targets")
    assert status == 200
    return json.loads(body)["data"]["activeTargets"]


def wait_prom_value(prom_port, query, want, timeout):
    """Polls an instant query until one series has value want; returns the seconds it took."""
    t0 = time.monotonic()
    last = None
    while time.monotonic() - t0 < timeout:
        last = prom_query(prom_port, query)
        if any(v == want for _, v in last):
            return time.monotonic() - t0
        time.sleep(0.5)
    return None if last is None else -1.0


def descendants(pid):
    out, todo = set(), [pid]
    while todo:
        p = todo.pop()
        try:
            tasks = os.listdir("/proc/%d/task" % p)
        except OSError:
            continue
        for t in tasks:
            try:
                with open("/proc/%d/task/%s/children" % (p, t)) as f:
                    kids = [int(x) for x in f.read().split()]
            except OSError:
                continue
            for k in kids:
                if k not in out:
                    out.add(k)
                    todo.append(k)
    return out


def check_links_gone(d, link_ids, prog_ids, links_before):
    """After the daemon exited: every link it held is gone from the kernel; and, when no other
    pipeprof runs beside these tests, test_cli's global check as well."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        left_links = link_ids & bpf_ids("link")
        left_progs = prog_ids & bpf_ids("prog")
        if not left_links and not left_progs:
            break
        time.sleep(0.1)
    assert not left_links, "BPF links left behind by the daemon: %s" % sorted(left_links)
    assert not left_progs, "BPF programs left loaded by the daemon: %s" % sorted(left_progs)
    others = other_pipeprofs()
    if others:
        print("note: other pipeprof processes %s are running: global link check skipped" %
              others)
    else:
        assert_detached(links_before)


def wait_for(cond, timeout, step=0.1):
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v or time.monotonic() > deadline:
            return v
        time.sleep(step)


# -- 1. Prometheus end to end ----------------------------------------------------------------

def test_prometheus_scrapes_data_loading_verdict(daemons, procs, job_python, tmp_path):
    links_before = link_count()
    d = daemons(["--window", "2"])
    w, pid, tid = start_job_workload(procs, job_python, "data_bound.py",
                                     str(tmp_path / "truth.json"), duration=120)
    m, _ = d.wait_line(r"\battached PID %d\b" % pid, ATTACH_S + 20)
    assert m, "the daemon did not attach to data_bound.py (PID %d)\n%s" % (pid, d.log())
    prom, prom_port = start_prometheus(procs, tmp_path, d.port)

    query = 'pipeprof_job_verdict{pid="%d",verdict="data_loading_bound"}' % pid
    took = wait_prom_value(prom_port, query, 1.0, 60)
    targets = prom_targets(prom_port)
    assert took is not None and took >= 0, (
        "Prometheus never saw %s == 1 (last: %s)\ntargets: %s\n%s" % (
            query, prom_query(prom_port, query), targets, d.log()))
    print("\nPrometheus: %s == 1 after %.1f s of scraping" % (query, took))
    ours = [t for t in targets if t["labels"].get("job") == "pipeprof"]
    assert ours and ours[0]["health"] == "up" and not ours[0]["lastError"], ours
    # Prometheus parsed every family, the histograms included.
    assert prom_query(prom_port, 'pipeprof_job_info{pid="%d"}' % pid), "no job_info in TSDB"
    steps = prom_query(prom_port, 'pipeprof_job_step_seconds_count{pid="%d"}' % pid)
    assert steps and steps[0][1] > 0, ("no steps in Prometheus", steps)
    frac = prom_query(prom_port, 'pipeprof_job_state_fraction{pid="%d",role="TRAINER",'
                                 'state="DATA_WAIT"}' % pid)
    assert frac and frac[0][1] > 0.2, frac

    # The shipped alert rules match what the daemon exports: the data-loading alert is
    # pending for this job (it fires after its 5 minutes).
    alert = 'ALERTS{alertname="PipeprofDataLoadingBound",pid="%d"}' % pid
    took = wait_prom_value(prom_port, alert, 1.0, 30)
    assert took is not None and took >= 0, ("no %s" % alert, prom_query(prom_port, "ALERTS"))
    assert {m["alertstate"] for m, _ in prom_query(prom_port, alert)} <= {"pending", "firing"}
    # Every query of the shipped dashboard runs, and the job's panels show this job.
    comm = prom_query(prom_port, 'pipeprof_job_info{pid="%d"}' % pid)[0][0]["comm"]
    # (rates need two scrapes: a few seconds after the first)
    needed = {"Verdict", "Steps per second", "Trainer: where its time goes",
              "DataLoader workers: where their time goes", "Step time", "pipeprof's own cost"}
    deadline = time.monotonic() + 30
    while True:
        shown, ran = set(), []
        for panel in json.load(open(DASHBOARD))["panels"]:
            for target in panel["targets"]:
                q = target["expr"].replace("$__rate_interval", "10s").replace(
                    "$comm", re.escape(comm))
                got = prom_query(prom_port, q)
                ran.append("%s: %s -> %d series" % (panel["title"], q, len(got)))
                if got:
                    shown.add(panel["title"])
        if needed <= shown or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert needed <= shown, "dashboard panels %s show nothing for %s:\n%s" % (
        sorted(needed - shown), comm, "\n".join(ran))

    # The exposition itself, straight from the daemon.
    text, headers = scrape(d.port)
    assert headers.get("content-type", "").startswith("text/plain; version=0.0.4"), headers
    promtool_accepts(text, tmp_path)
    samples, types = parse_exposition(text)
    for fam, typ in JOB_FAMILIES.items():
        assert types.get(fam) == typ, (fam, types.get(fam))
    for fam in SELF_FAMILIES:
        assert fam in types, fam
        assert len(values(samples, fam)) == 1, (fam, values(samples, fam))
    for name, labels, _ in samples:
        assert set(labels) <= ALLOWED_LABELS, (name, labels)
        if "role" in labels:
            assert labels["role"] in ROLES, (name, labels)
        if "state" in labels:
            assert labels["state"] in STATES, (name, labels)
        if "verdict" in labels:
            assert labels["verdict"] in VERDICTS, (name, labels)
    assert values(samples, "pipeprof_job_info", pid=pid) == [1.0]
    verdicts = {l["verdict"]: v for n, l, v in samples
                if n == "pipeprof_job_verdict" and l.get("pid") == str(pid)}
    assert set(verdicts) == set(VERDICTS), verdicts
    assert sorted(verdicts.values()) == [0.0] * (len(VERDICTS) - 1) + [1.0], verdicts
    trainer = {l["state"]: v for n, l, v in samples if n == "pipeprof_job_state_fraction"
               and l.get("pid") == str(pid) and l.get("role") == "TRAINER"}
    assert set(trainer) == set(STATES), trainer
    assert abs(sum(trainer.values()) - 1.0) < 0.02, trainer
    assert values(samples, "pipeprof_jobs_attached")[0] >= 1
    assert values(samples, "pipeprof_windows_total")[0] >= 1
    # DataLoader workers belong to the job: no job of their own, not in the daemon's log.
    kids = descendants(pid)
    assert kids, "data_bound.py has no DataLoader worker?"
    job_pids = {l["pid"] for n, l, _ in samples if n == "pipeprof_job_info"}
    assert not {str(k) for k in kids} & job_pids, (kids, job_pids)
    for k in kids:
        assert d.wait_line(r"\battached PID %d\b" % k, 0)[0] is None, (k, d.log())
    assert values(samples, "pipeprof_job_state_seconds_total", pid=pid, role="WORKER",
                  state="RUNNING")[0] > 0

    # The JSON report of the last window.
    status, headers, body = http_get(d.port, "/api/v1/report?pid=%d" % pid)
    assert status == 200, body[:300]
    report = keep_report(json.loads(body), "daemon /api/v1/report")
    assert report["schema"] == "pipeprof.report/v1"
    assert report["pid"] == pid
    assert report["verdict"]["name"] == "DATA-LOADING BOUND", report["verdict"]
    # Windows run from the job's attach: even its first is a whole --window long.
    assert 1.99 < report["window"]["seconds"] < 3.0, report["window"]
    assert report["trainer"]["tid"] == tid
    # The machine's CPUs over the window, as `pipeprof -p` measures them over its own.
    cpu = report["cpu"]
    assert cpu["ncpus"] == os.cpu_count(), cpu
    assert cpu["busy_fraction"] is not None and 0 < cpu["busy_fraction"] <= 1, cpu
    assert cpu["runnable_avg"] is not None and cpu["runnable_avg"] >= 0, cpu
    for q, want in (("pid=abc", 400), ("pid=", 400), ("pid=-3", 400), ("pid=12x", 400),
                    ("pid=4194303", 404), ("pid=%d" % min(kids), 404), ("", 400)):
        status, _, _ = http_get(d.port, "/api/v1/report?" + q if q else "/api/v1/report")
        assert status == want, (q, status, want)

    # SIGINT: a clean exit, nothing left attached.
    held_links, held_progs = d.link_ids(), d.prog_ids()
    assert held_links, "the daemon holds no BPF link?"
    rc = d.stop(signal.SIGINT)
    assert rc == 0, "daemon exit %s after SIGINT\n%s" % (rc, d.log())
    check_links_gone(d, held_links, held_progs, links_before)

    # The daemon's report is the same document as `pipeprof -p PID -j` (run now, on the same
    # job): the same GPU verdict and gaps, the same keys section by section.
    r = run_or_show_hang([PIPEPROF, "-p", str(pid), "-d", "1", "-j"], 60)
    assert r.returncode == 0, r.stderr
    cli = keep_report(json.loads(r.stdout))
    assert report["gpu"]["traced"] == cli["gpu"]["traced"], (
        "GPU traced: daemon %s, pipeprof -p %s (%s); daemon's libraries: %s" % (
            report["gpu"]["traced"], cli["gpu"]["traced"], cli["gpu"].get("why_not"),
            [l["path"] for l in report["gpu"]["libraries"]]))
    # The same gaps; counted losses (lines that start with their count) belong to each run.
    def gaps(nt):
        return [line for line in nt if not line[:1].isdigit()]
    assert gaps(report["not_traced"]) == gaps(cli["not_traced"]), (
        report["not_traced"], cli["not_traced"])
    assert set(report) == set(cli), set(report) ^ set(cli)
    for k, v in cli.items():
        if isinstance(v, dict):
            # The daemon's steps come from a histogram, and say so.
            extra = {"resolution"} if k == "steps" else set()
            assert set(report[k]) == set(v) | extra, (k, set(report[k]) ^ set(v))


STEP_WINDOWS = 3    # consecutive windows whose steps are checked


def test_report_steps_from_the_window_histogram(daemons, procs, job_python, tmp_path):
    """The report's steps, which the daemon takes from each window's step histogram (it keeps
    no step record): in each of STEP_WINDOWS consecutive windows of a DataLoader job, the count
    is what that window added to pipeprof_job_step_seconds_count, and agrees (within 2) with the
    workload's own step ends inside the window; p50 is within a factor of 2 of the workload's
    median step (interpolated in log2 slots: resolution says so) and the mean, exact from the
    histogram's sum, within 25%; the breakdowns a histogram cannot give are null."""
    d = daemons(["--window", "2"])
    truth = str(tmp_path / "truth.json")
    w, pid, tid = start_job_workload(procs, job_python, "data_bound.py", truth, duration=60)
    m, _ = d.wait_line(r"\battached PID %d\b" % pid, ATTACH_S + 20)
    assert m, "the daemon did not attach to data_bound.py (PID %d)\n%s" % (pid, d.log())

    def report():
        status, _, body = http_get(d.port, "/api/v1/report?pid=%d" % pid)
        return json.loads(body) if status == 200 else None

    # Per window (by its start): its report, and the job's step count in /metrics as last seen
    # while that report was served. /metrics is rebuilt at each second's tick, so it may lag a
    # report by up to a second, never lead it; the last reading of a 2 s window has caught up.
    seen, order = {}, []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        before = report()
        samples, _ = parse_exposition(scrape(d.port)[0])
        after = report()
        if before and after and before["window"] == after["window"]:
            start = after["window"]["start_ns"]
            if start not in seen:
                order.append(start)
            count = values(samples, "pipeprof_job_step_seconds_count", pid=pid)
            seen[start] = (after, count[0] if count else None)
        # Consecutive: each window starts where the one before it ended.
        run = [order[0]] if order else []
        for a, b in zip(order, order[1:]):
            run = run + [b] if seen[a][0]["window"]["end_ns"] == b else [b]
        # The last window's reading may not have caught up yet: one more after the run.
        if len(run) >= STEP_WINDOWS + 2:
            break
        time.sleep(0.2)
    assert len(run) >= STEP_WINDOWS + 2, "fewer than %d consecutive windows seen: %s\n%s" % (
        STEP_WINDOWS + 2, [(s, seen[s][0]["window"]) for s in order], d.log())
    truth_doc = finish_workload(w, truth)

    checked = []
    for prev, cur in zip(run[-STEP_WINDOWS - 2:-2], run[-STEP_WINDOWS - 1:-1]):
        rep, total = seen[cur]
        st, win = rep["steps"], rep["window"]
        added = total - seen[prev][1]
        ends = [t for t in truth_doc["steps"] if win["start_ns"] <= t <= win["end_ns"]]
        gaps = [(b - a) / 1e9 for a, b in zip(ends, ends[1:])]
        line = ("window %.1f s: %s steps (metrics added %d, truth %d), p50 %s ms (truth %.1f), "
                "mean %s ms (truth %.1f)" % (
                    win["seconds"], st["count"], added, len(ends), st["p50_s"] and
                    "%.1f" % (1e3 * st["p50_s"]), 1e3 * statistics.median(gaps) if gaps else 0,
                    st["mean_s"] and "%.1f" % (1e3 * st["mean_s"]),
                    1e3 * statistics.mean(gaps) if gaps else 0))
        checked.append(line)
        assert len(gaps) >= 10, "only %d steps of truth in the window: %s" % (len(ends), line)
        assert st["count"], "no steps in the window's report: %s\n%s" % (line, st)
        assert st["source"] == "autograd_engine" and st["why_not"] is None, st
        assert st["resolution"] == "log2_histogram", st
        assert st["tid"] == tid, (st["tid"], tid)
        assert st["count"] == added, "count is not what the window added to the metric: " + line
        assert abs(st["count"] - len(ends)) <= 2, "count off the workload's own: " + line
        assert abs(st["per_second"] - st["count"] / win["seconds"]) < 1e-6, st
        assert 0.5 <= st["p50_s"] / statistics.median(gaps) <= 2, "p50 off: " + line
        assert st["p50_s"] <= st["p90_s"], st
        assert abs(st["mean_s"] / statistics.mean(gaps) - 1) <= 0.25, "mean off: " + line
        for k in ("max_s", "every_step", "median_step", "slowest", "slow_count", "slow_steps"):
            assert st[k] is None, (k, st)
    print("\nsteps in the daemon's report, %d consecutive windows:\n  %s" % (
        STEP_WINDOWS, "\n  ".join(checked)))


# -- 2. job churn ----------------------------------------------------------------------------

@pytest.mark.parametrize("launcher_torch", [False, True], ids=["plain_launcher", "torch_launcher"])
def test_ranks_of_one_job_and_the_straggler(daemons, procs, job_python, tmp_path, launcher_torch):
    """ddp_gloo.py's two ranks (RANK, LOCAL_RANK, WORLD_SIZE and MASTER_ADDR/PORT in their
    environment, as torchrun sets them; rank 1 burns extra CPU before each step): each is a job
    of its own, both under one dist_job; rank 1 is the straggler in the metrics, and the shipped
    PipeprofStraggler alert goes pending for it in a real Prometheus. [torch_launcher]: the
    launcher imports torch first, as torchrun's agent does, and so maps libtorch: it is still no
    job of its own (the ranks are), in no series."""
    d = daemons(["--window", "2"])
    # --slow-ms 25: rank 0's COMM_WAIT well over the threshold (9 ms leaves it near 20-28%).
    w = procs([job_python, os.path.join(WORKLOADS, "ddp_gloo.py"), "--duration", "120",
               "--slow-ms", "25", "--truth", str(tmp_path / "truth.json")] +
              (["--launcher-imports-torch"] if launcher_torch else []), name="ddp_gloo.py")
    m = w.wait_line(r"^READY pid=(\d+) tid=(\d+)", READY_TIMEOUT)
    assert m, "ddp_gloo.py did not start\n%s" % w.output()
    rank0 = int(m.group(1))
    ranks = [p for p in descendants(w.p.pid) if p != rank0]
    assert len(ranks) == 1, ranks
    rank1 = ranks[0]
    for pid in (rank0, rank1):
        m, _ = d.wait_line(r"\battached PID %d\b" % pid, ATTACH_S + 20)
        assert m, "the daemon did not attach to rank PID %d\n%s" % (pid, d.log())
    prom, prom_port = start_prometheus(procs, tmp_path, d.port)
    query = 'pipeprof_rank_straggler{pid="%d",rank="1"}' % rank1
    took = wait_prom_value(prom_port, query, 1.0, 60)
    text, _ = scrape(d.port)
    samples, types = parse_exposition(text)
    info = {int(l["pid"]): l for n, l, v in samples if n == "pipeprof_rank_info"}
    assert took is not None and took >= 0, ("Prometheus never saw %s == 1" % query,
                                            prom_query(prom_port, "pipeprof_rank_straggler"),
                                            d.log())
    assert set(info) >= {rank0, rank1}, info
    assert info[rank0]["rank"] == "0" and info[rank1]["rank"] == "1", info
    assert info[rank0]["dist_job"] == info[rank1]["dist_job"], info
    assert info[rank0]["dist_job"].startswith("127.0.0.1:"), info
    assert values(samples, "pipeprof_rank_straggler", pid=rank0) == [0.0], text
    launcher_series = [(n, l) for n, l, v in samples if l.get("pid") == str(w.p.pid)]
    assert not launcher_series, ("the launcher is a job", launcher_series, d.log())
    # Rank 0 is not rank 1's worker, nor rank 1 rank 0's: each trainer waits in collectives.
    frac = prom_query(prom_port, 'pipeprof_job_state_fraction{pid="%d",role="TRAINER",'
                                 'state="COMM_WAIT"}' % rank0)
    assert frac and frac[0][1] >= 0.2, frac
    assert not prom_query(prom_port, 'pipeprof_job_state_fraction{pid="%d",role="WORKER"} > 0'
                          % rank0), "rank 0 has workers"
    alert = 'ALERTS{alertname="PipeprofStraggler",rank="1"}'
    took = wait_prom_value(prom_port, alert, 1.0, 30)
    assert took is not None and took >= 0, ("no %s" % alert, prom_query(prom_port, "ALERTS"))
    print("\n%s" % "\n".join(l for l in text.splitlines() if "rank" in l))


def test_data_loading_straggler_under_the_daemon(daemons, procs, job_python, tmp_path):
    """test_ranks_data.py's job under the daemon: three gloo ranks, each with a DataLoader worker,
    rank 1's samples 30x as dear (each rank a job of its own, their scheduler events passed to
    them by one dispatcher): one dist_job of three ranks, rank 1 the straggler in the
    metrics and the PipeprofStraggler alert pending for it in a real Prometheus; rank 1 reads
    data_loading_bound and ranks 0 and 2 communication_bound, over three windows running."""
    d = daemons(["--window", "4"])
    w = procs([job_python, os.path.join(WORKLOADS, "ddp_gloo.py"), "--duration", "240",
               "--world", "3", "--data-ms", "0.2", "--slow-data-ms", "6", "--slow-ms", "0",
               "--no-pin"], name="ddp_gloo.py")
    m = w.wait_line(r"^READY pid=(\d+) tid=(\d+)", READY_TIMEOUT)
    assert m, "ddp_gloo.py did not start\n%s" % w.output()
    rank0 = int(m.group(1))
    deadline, info = time.monotonic() + ATTACH_S + 60, {}
    while time.monotonic() < deadline and len(info) < 3:
        samples, _ = parse_exposition(scrape(d.port)[0])
        info = {l["rank"]: int(l["pid"]) for n, l, v in samples if n == "pipeprof_rank_info"}
        time.sleep(1)
    assert sorted(info) == ["0", "1", "2"] and info["0"] == rank0, (info, d.log())
    want = {"0": "communication_bound", "1": "data_loading_bound", "2": "communication_bound"}
    seen, rounds = [], 0
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and rounds < 3:
        time.sleep(4)
        samples, _ = parse_exposition(scrape(d.port)[0])
        got = {k: [l["verdict"] for n, l, v in samples if n == "pipeprof_job_verdict" and
                   l["pid"] == str(pid) and v == 1] for k, pid in info.items()}
        straggler = {k: values(samples, "pipeprof_rank_straggler", pid=pid)
                     for k, pid in info.items()}
        seen.append((got, straggler))
        ok = all(got[k] == [want[k]] for k in want) and straggler["1"] == [1.0]
        rounds = rounds + 1 if ok else 0
    print("\n" + "\n".join("verdicts %s straggler %s" % s for s in seen))
    assert rounds == 3, ("not 3 windows running with rank 1 the data-loading straggler",
                         seen, d.log())
    prom, prom_port = start_prometheus(procs, tmp_path, d.port)
    alert = 'ALERTS{alertname="PipeprofStraggler",rank="1"}'
    took = wait_prom_value(prom_port, alert, 1.0, 60)
    assert took is not None, ("no %s" % alert, prom_query(prom_port, "ALERTS"))


def test_mp_spawn_ranks_are_jobs(daemons, procs, job_python, tmp_path):
    """A job started by torch.multiprocessing.spawn (mp_spawn.py): its parent imports torch and
    is found first, but the ranks inside it, known by their connections to each other (no RANK
    anywhere), replace it: each rank a job numbered by pid, one dist_job, rank 1 the straggler;
    the parent in no series."""
    d = daemons(["--window", "2"])
    w = procs([job_python, os.path.join(WORKLOADS, "mp_spawn.py"), "--duration", "120",
               "--slow-ms", "25", "--truth", str(tmp_path / "truth.json")], name="mp_spawn.py")
    m = w.wait_line(r"^READY pid=(\d+)", READY_TIMEOUT)
    assert m, "mp_spawn.py did not start\n%s" % w.output()
    parent = int(m.group(1))
    pids = []
    for k in range(2):
        m = w.wait_line(r"^RANK %d pid=(\d+)" % k, 10)
        assert m, "mp_spawn.py did not name rank %d\n%s" % (k, w.output())
        pids.append(int(m.group(1)))
    numbers = {pid: str(n) for n, pid in enumerate(sorted(pids))}
    for pid in pids:
        m, _ = d.wait_line(r"\battached PID %d\b" % pid, ATTACH_S + 20)
        assert m, "the daemon did not attach to rank PID %d\n%s" % (pid, d.log())
    deadline, samples, text = time.monotonic() + 40, [], ""
    while time.monotonic() < deadline:
        text, _ = scrape(d.port)
        samples, _ = parse_exposition(text)
        if values(samples, "pipeprof_rank_straggler", pid=pids[1]) == [1.0]:
            break
        time.sleep(1)
    info = {int(l["pid"]): l for n, l, v in samples if n == "pipeprof_rank_info"}
    assert set(info) >= set(pids), (info, d.log())
    assert all(info[p]["rank"] == numbers[p] for p in pids), (info, numbers)
    assert info[pids[0]]["dist_job"] == info[pids[1]]["dist_job"], info
    assert values(samples, "pipeprof_rank_straggler", pid=pids[1]) == [1.0], (text, d.log())
    assert values(samples, "pipeprof_rank_straggler", pid=pids[0]) == [0.0], text
    parent_series = [(n, l) for n, l, v in samples if l.get("pid") == str(parent)]
    assert not parent_series, ("the spawning parent is a job", parent_series, d.log())
    print("\n%s" % "\n".join(l for l in text.splitlines() if "rank" in l))


def bpf_progs_by_id():
    out = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True,
                         check=True).stdout
    return {p["id"]: p for p in json.loads(out)}


def host_ctxt():
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("ctxt "):
                return int(line.split()[1])
    raise AssertionError("no ctxt line in /proc/stat")


# The hooks every event of the host reaches (not only the jobs'): the dispatcher's programs
# on them, and the jobs' own, which it tail-calls (names as the kernel cuts them, 15 bytes).
DISPATCHED = {"switch": "on_sched_switch", "waking": "on_sched_waking",
              "wakeup": "on_sched_wakeup", "tcp_rcv": "on_tcp_rcv_space_adjust",
              "io_start": "on_block_io_start", "rq_issue": "on_block_rq_issue",
              "rq_done": "on_block_rq_complete"}


def start_pipe_pair(procs, py, lib, tmp_path):
    """pipe_pair.py's two sides, each a job of its own; returns their pids."""
    pair = []
    for side in ("a", "b"):
        w = procs([py, os.path.join(WORKLOADS, "pipe_pair.py"), "--lib", lib,
                   "--dir", str(tmp_path), "--side", side, "--duration", "60"],
                  name="pipe_pair_" + side)
        pair.append(w)
        if side == "a":
            deadline = time.monotonic() + 10
            while not os.path.exists(tmp_path / "b2a") and time.monotonic() < deadline:
                time.sleep(0.05)
    pids = []
    for w in pair:
        m = w.wait_line(r"^READY pid=(\d+)", 30)
        assert m, "pipe_pair.py did not start\n%s" % w.output()
        pids.append(int(m.group(1)))
    return pids


def assert_pair_switches_seen(d, pids):
    """Each side's switch-ins were seen as they happened: nearly all come right after the other
    side's switch-out, another job's."""
    for pid in pids:
        status, _, body = http_get(d.port, "/api/v1/report?pid=%d" % pid)
        assert status == 200, body
        c = json.loads(body)["counters"]
        switches, missed = c["sched_switch_events"], c["switch_ins_missed"]
        print("PID %d: %d of its switches, %d switch-ins missed" % (pid, switches, missed))
        assert switches > 10000 and missed < 0.01 * switches, (pid, c)


def test_scheduler_programs_once_for_every_job(daemons, procs, job_python, nccl_lib, tmp_path):
    """Three jobs, two of which hand a byte back and forth on one CPU (pipe_pair.py), so nearly
    every switch there goes from one job's task to the other's, and one reads its samples from
    disk (io_bound.py): the daemon attaches the scheduler, network, block and softirq
    tracepoints once (the dispatcher's programs), not once per job; sched_switch's run once
    per context switch of the host; a switch between two jobs reaches both (the previous
    task's job passes it on): neither job's switch-ins go unseen (switch_ins_missed, which
    each job's program counts when a thread leaves a CPU it was never seen to reach); and the
    block requests reach their job, whose verdict is I/O bound."""
    d = daemons(["--window", "2"])
    _, io_pid, _ = start_job_workload(procs, job_python, "io_bound.py",
                                      str(tmp_path / "io_truth.json"), 120)
    pids = start_pipe_pair(procs, job_python, nccl_lib, tmp_path)
    for pid in pids + [io_pid]:
        m, _ = d.wait_line(r"\battached PID %d\b" % pid, ATTACH_S + 20)
        assert m, "the daemon did not attach to PID %d\n%s" % (pid, d.log())

    progs = bpf_progs_by_id()
    out = subprocess.run(["bpftool", "-j", "link", "show"], capture_output=True, text=True,
                         check=True).stdout
    mine = d.link_ids()
    names = [progs.get(l["prog_id"], {}).get("name") for l in json.loads(out) if l["id"] in mine]
    for hook, own in DISPATCHED.items():
        assert names.count("dispatch_" + hook) == 1, names
        assert names.count(own[:15]) == 0, names
    assert names.count("softirq_vector") == 1, names
    switch_progs = {l["prog_id"] for l in json.loads(out) if l["id"] in mine and
                    progs.get(l["prog_id"], {}).get("name") == "dispatch_switch"}

    def switch_runs():
        return sum(p.get("run_cnt", 0) for i, p in bpf_progs_by_id().items()
                   if i in switch_progs)
    runs0, ctxt0 = switch_runs(), host_ctxt()
    time.sleep(3)
    runs1, ctxt1 = switch_runs(), host_ctxt()
    per_switch = (runs1 - runs0) / max(1, ctxt1 - ctxt0)
    print("\n%d context switches, %.3f sched_switch program runs each" % (ctxt1 - ctxt0,
                                                                          per_switch))
    assert ctxt1 - ctxt0 > 10000 and 0.9 < per_switch < 1.1, (ctxt1 - ctxt0, per_switch)

    assert_pair_switches_seen(d, pids)
    # A job keeps its own softirq_entry only where the preempt count failed its check.
    status, _, body = http_get(d.port, "/api/v1/report?pid=%d" % pids[0])
    if not any("preempt count" in line for line in json.loads(body)["not_traced"]):
        assert "on_softirq_entr" not in names, names

    deadline, reads, verdict = time.monotonic() + 40, [], []
    while time.monotonic() < deadline:
        samples, _ = parse_exposition(scrape(d.port)[0])
        reads = values(samples, "pipeprof_job_io_latency_seconds_count", pid=io_pid)
        verdict = [l["verdict"] for n, l, v in samples
                   if n == "pipeprof_job_verdict" and l["pid"] == str(io_pid) and v == 1]
        if reads and reads[0] > 50 and verdict == ["io_bound"]:
            break
        time.sleep(1)
    print("PID %d: %s block requests timed, verdict %s" % (io_pid, reads, verdict))
    assert reads and reads[0] > 50 and verdict == ["io_bound"], (reads, verdict, d.log())


def test_jobs_past_pid_max_at_the_dispatchers_load(daemons, procs, job_python, nccl_lib,
                                                   tmp_path):
    """The dispatcher's pid map is sized to pid_max when the daemon starts; a process whose pid
    lies past it (pid_max raised since) goes through its overflow map, marked from userspace (a
    job's own process, at its attach: the pipe pair's two jobs) and from BPF (processes a job
    forks once traced: pipe_pair.py --side forked, whose two children ping-pong with each other
    alone, so only their own pids can bring their switches to the job). Neither loses its
    switches."""
    with open("/proc/sys/kernel/pid_max") as f:
        old = int(f.read())
    if old > 4194304 - 100000:
        pytest.skip("pid_max is at its limit (%d): no pid can lie past it" % old)
    d = daemons(["--window", "2"])
    forked_dir = tmp_path / "forked"
    forked_dir.mkdir()
    try:
        with open("/proc/sys/kernel/pid_max", "w") as f:
            f.write(str(old + 100000))
        with open("/proc/sys/kernel/ns_last_pid", "w") as f:
            f.write(str(old + 1000))
        w = procs([job_python, os.path.join(WORKLOADS, "pipe_pair.py"), "--lib", nccl_lib,
                   "--dir", str(forked_dir), "--side", "forked", "--duration", "60", "--cpu",
                   "1"], name="pipe_pair_forked")
        pids = start_pipe_pair(procs, job_python, nccl_lib, tmp_path)
        m = w.wait_line(r"^READY pid=(\d+)", 30)
        assert m, "pipe_pair.py --side forked did not start\n%s" % w.output()
        parent = int(m.group(1))
        for pid in pids + [parent]:
            m, _ = d.wait_line(r"\battached PID %d\b" % pid, ATTACH_S + 20)
            assert m, "the daemon did not attach to PID %d\n%s" % (pid, d.log())
        (forked_dir / "go").touch()
        time.sleep(3)
        children = sorted(descendants(parent))
    finally:
        with open("/proc/sys/kernel/pid_max", "w") as f:
            f.write(str(old))
    assert len(children) == 2 and min(pids + [parent] + children) > old, (
        old, pids, parent, children)
    assert_pair_switches_seen(d, pids + [parent])


def churn(d, py, lib, cycles, hold_s=0.2):
    """CYCLES short jobs, one after the other (never two alive): each is started, its
    'attached' line awaited, then it exits; its 'detached' line is awaited too, while the next
    job starts. Returns [(start to attached, exit to detached)] in seconds."""
    lat, pending = [], None     # pending: (pid, exit time, log index of its attach)

    def wait_detached(pid, t_exit, since):
        m, i = d.wait_line(r"\bdetached PID %d\b" % pid, DETACH_S, since)
        assert m, "no 'detached PID %d' within %d s\n%s" % (pid, DETACH_S, d.log())
        return d.times[i] - t_exit

    for _ in range(cycles):
        since = d.count()
        t0 = time.monotonic()
        p = subprocess.Popen([py, "-c", lib_job_code(lib)], stdin=subprocess.PIPE,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            m, i = d.wait_line(r"\battached PID %d\b" % p.pid, ATTACH_S, since)
            if m is None:
                out = "" if p.poll() is None else p.communicate()[1]
                pytest.fail("no 'attached PID %d' within %d s (job exit %s %s)\n%s" % (
                    p.pid, ATTACH_S, p.poll(), out, d.log()), pytrace=False)
            attach_s = d.times[i] - t0
            if pending:
                lat.append((pending[3], wait_detached(*pending[:3])))
            time.sleep(hold_s)
            p.stdin.close()
            assert p.wait(10) == 0
            pending = (p.pid, time.monotonic(), i, attach_s)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
    if pending:
        lat.append((pending[3], wait_detached(*pending[:3])))
    return lat


def resources(d, settle=False):
    """The daemon's RSS, fds and BPF link fds, and the machine's BPF links. settle: the
    fewest fds over a second, so that the connection of a scrape made just before (closed by
    the daemon a moment after its response) is not counted."""
    fds = d.fds()
    if settle:
        for _ in range(5):
            time.sleep(0.2)
            fds = min(fds, d.fds())
    return {"rss_kb": d.rss_kb(), "fds": fds, "own_links": len(d.link_ids()),
            "links": link_count()}


def test_job_churn_leaks_nothing(daemons, job_python, nccl_lib):
    d = daemons(["--window", "1"])
    jobs0 = jobs_attached(d.port)
    churn(d, job_python, nccl_lib, CHURN_WARMUP)
    time.sleep(1.5)   # a window passes: whatever the last job left is folded away
    assert wait_for(lambda: jobs_attached(d.port) == jobs0, 5), "jobs_attached did not settle"
    before = resources(d, settle=True)
    kinds_before = d.fd_kinds()
    print("\nchurn: after %d warm-up jobs: %s" % (CHURN_WARMUP, before))
    t0 = time.monotonic()
    rss, lat = [], []
    for n in range(0, CHURN_CYCLES, 10):
        lat += churn(d, job_python, nccl_lib, min(10, CHURN_CYCLES - n))
        rss.append(d.rss_kb())
    took = time.monotonic() - t0
    a, x = sorted(l[0] for l in lat), sorted(l[1] for l in lat)
    print("churn: start to 'attached' median %.2f s, max %.2f s; exit to 'detached' median "
          "%.2f s, max %.2f s" % (a[len(a) // 2], a[-1], x[len(x) // 2], x[-1]))
    time.sleep(1.5)
    assert wait_for(lambda: jobs_attached(d.port) == jobs0, 5), (
        "pipeprof_jobs_attached %s, was %s before the churn" % (jobs_attached(d.port), jobs0))
    # fds and links: exactly back (the daemon closes an HTTP connection a moment after its
    # response, so poll briefly)
    after = wait_for(lambda: (lambda r: r if (r["fds"], r["own_links"]) ==
                              (before["fds"], before["own_links"]) else None)(resources(d)), 5) \
        or resources(d)
    print("churn: %d jobs in %.1f s (%.2f s each); after: %s; RSS every 10 jobs: %s kB" % (
        CHURN_CYCLES, took, took / CHURN_CYCLES, after, rss))
    assert after["fds"] == before["fds"], ("fd leak", before, after, kinds_before,
                                           d.fd_kinds())
    assert after["own_links"] == before["own_links"], ("BPF link leak", before, after)
    # The exact measure is the daemon's own link fds above (a link nobody holds or pins is
    # freed by the kernel). The machine-wide count, as test_cli's assert_detached compares it:
    # other BPF users (another test run's pipeprof) may come and go meanwhile, so it may only
    # have gone down.
    assert after["links"] <= before["links"], ("machine-wide BPF link count grew", before,
                                               after, other_pipeprofs(mine=(d.pid,)))
    assert after["rss_kb"] - before["rss_kb"] <= RSS_SLACK_KB, (
        "RSS grew %d kB over %d jobs (slack %d kB)" % (after["rss_kb"] - before["rss_kb"],
                                                       CHURN_CYCLES, RSS_SLACK_KB))
    assert d.alive()

    # Racy churn: jobs that exit at random moments, before, during or after their attach.
    rng = random.Random(4242)
    since = d.count()
    pids = []
    for _ in range(10):
        p = subprocess.Popen([job_python, "-c", lib_job_code(nccl_lib)], stdin=subprocess.PIPE,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        pids.append(p.pid)
        time.sleep(rng.uniform(0.0, 1.3))
        p.stdin.close()
        p.wait(10)
    time.sleep(2)
    with d._cond:
        log = d.lines[since:]
    attached = {int(m.group(1)) for m in (re.search(r"\battached PID (\d+)", l) for l in log)
                if m}
    detached = {int(m.group(1)) for m in (re.search(r"\bdetached PID (\d+)", l) for l in log)
                if m}
    ours = set(pids)
    print("racy churn: %d jobs, %d attached, %d detached" % (
        len(pids), len(attached & ours), len(detached & ours)))
    assert attached & ours <= detached & ours, ("attached but never detached",
                                                 sorted((attached - detached) & ours))
    assert wait_for(lambda: jobs_attached(d.port) == jobs0, 5)
    final = wait_for(lambda: (lambda r: r if (r["fds"], r["own_links"]) ==
                              (before["fds"], before["own_links"]) else None)(resources(d)), 5) \
        or resources(d)
    print("racy churn: after: %s" % final)
    assert (final["fds"], final["own_links"]) == (before["fds"], before["own_links"]), (
        before, final, d.fd_kinds())
    assert d.alive()


# -- 3. hostile HTTP -------------------------------------------------------------------------

def test_malformed_and_oversized_http(daemons):
    d = daemons()
    port = d.port
    fds0 = d.fds()
    # Held open for the whole test: a connection that sends nothing, one that never ends its
    # headers, one that half-closes after unfinished headers. Neither may stop the others from
    # being served, and the daemon must close each of them (its idle timeout).
    stalled = {}
    stalled["idle"] = socket.create_connection((LOOPBACK, port), timeout=5)
    stalled["partial headers"] = socket.create_connection((LOOPBACK, port), timeout=5)
    stalled["partial headers"].sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
    stalled["headers then EOF"] = socket.create_connection((LOOPBACK, port), timeout=5)
    stalled["headers then EOF"].sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
    stalled["headers then EOF"].shutdown(socket.SHUT_WR)
    opened = time.monotonic()
    t0 = time.monotonic()
    status, _, body = http_get(port, "/healthz", timeout=5)
    assert (status, body) == (200, b"ok") or (status == 200 and body.strip() == b"ok"), \
        (status, body)
    assert time.monotonic() - t0 < 2, "/healthz waited behind an idle connection"

    big = 1 << 20
    cases = {
        "huge URI": b"GET /" + b"a" * big + b" HTTP/1.1\r\nHost: x\r\n\r\n",
        "huge query": b"GET /api/v1/report?pid=" + b"9" * big + b" HTTP/1.1\r\nHost: x\r\n\r\n",
        "huge header": b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " + b"b" * big +
                       b"\r\n\r\n",
        "many headers": b"GET /metrics HTTP/1.1\r\nHost: x\r\n" +
                        b"".join(b"X-H%d: v\r\n" % i for i in range(20000)) + b"\r\n",
        "garbage request line": b"\x01\x02garbage \xff\xfe\r\n\r\n",
        "no method": b" /metrics HTTP/1.1\r\n\r\n",
        "bad version": b"GET /metrics HTTP/x.y\r\nHost: x\r\n\r\n",
        "1.1 without Host": b"GET /metrics HTTP/1.1\r\n\r\n",
        "NUL in path": b"GET /met\x00rics HTTP/1.1\r\nHost: x\r\n\r\n",
        "POST with body": b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\n"
                          b"hello world",
        "POST big body": b"POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
                         % big + b"z" * big,
        "PUT report": b"PUT /api/v1/report?pid=1 HTTP/1.1\r\nHost: x\r\nContent-Length: 0"
                      b"\r\n\r\n",
        "DELETE": b"DELETE /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
        "bad Content-Length": b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: -5"
                              b"\r\n\r\n",
        "huge Content-Length": b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: "
                               b"99999999999999999999999\r\n\r\n",
        "bad chunk": b"POST /metrics HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                     b"zz\r\nhello\r\n0\r\n\r\n",
        "unknown path": b"GET /nope HTTP/1.1\r\nHost: x\r\n\r\n",
        "path traversal": b"GET /../../etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n",
        "report bad pid": b"GET /api/v1/report?pid=%n%s HTTP/1.1\r\nHost: x\r\n\r\n",
    }
    # Where the exact code is fixed by the contract
    exact = {"POST with body": 405, "PUT report": 405, "DELETE": 405, "unknown path": 404,
             "path traversal": 404, "report bad pid": 400}
    results = {}
    for name, data in cases.items():
        shut = False
        if isinstance(data, tuple):
            data, shut = data
        results[name] = raw_exchange(port, data, shut_wr=shut)
        assert d.alive(), "daemon died on %r\n%s" % (name, d.log())
    print("\nhostile HTTP: " + ", ".join("%s: %s" % (k, v[1] if v[0] == "status" else v[0])
                                        for k, v in results.items()))
    bad = {k: v for k, v in results.items()
           if not (v[0] == "closed" or (v[0] == "status" and 400 <= v[1] < 500))}
    assert not bad, "answered neither 4xx nor closed: %s" % bad
    wrong = {k: results[k] for k, code in exact.items() if results[k] != ("status", code)}
    assert not wrong, "wrong status: %s (want %s)" % (wrong, exact)

    # Still serving, the two stalled connections included.
    status, _, body = http_get(port, "/healthz", timeout=5)
    assert status == 200 and body.strip() == b"ok"
    scrape(port)

    # The stalled connections are closed by the daemon, not kept for ever.
    closed = {}
    for name, s in stalled.items():
        while name not in closed:
            left = IDLE_CLOSE_S - (time.monotonic() - opened)
            if left <= 0:
                break
            s.settimeout(left)
            try:
                data = s.recv(4096)
            except socket.timeout:
                break
            except ConnectionResetError:
                data = b""
            if not data or re.match(rb"HTTP/1\.[01] 4\d\d", data):
                closed[name] = round(time.monotonic() - opened, 1)
            # anything else: keep reading until the close
        s.close()
    print("stalled connections closed by the daemon after: %s s" % closed)
    assert set(closed) == set(stalled), (
        "connections still open after %d s: %s" % (IDLE_CLOSE_S, closed))
    status, _, body = http_get(port, "/healthz", timeout=5)
    assert status == 200 and body.strip() == b"ok"
    assert wait_for(lambda: d.fds() == fds0, 5), ("fd count %d, was %d" % (d.fds(), fds0),
                                                   d.fd_kinds())

    # Many idle local connections (a stuck or hostile local client): is the scraper, also
    # from 127.0.0.1, still served? Reported here; asserted in test_daemon_hardening.py.
    socks = []
    try:
        for _ in range(MANY_IDLE):
            socks.append(socket.create_connection((LOOPBACK, port), timeout=5))
        time.sleep(0.5)
        try:
            status, _, _ = http_get(port, "/healthz", timeout=3)
            probe = "answered %d" % status
        except (OSError, http.client.HTTPException) as e:
            probe = "not served (%s)" % e.__class__.__name__
    finally:
        for s in socks:
            s.close()
    print("with %d idle connections open, /healthz was %s" % (MANY_IDLE, probe))
    assert wait_for(lambda: healthz_ok(port), 5)
    assert wait_for(lambda: d.fds() == fds0, 5), ("fd count %d, was %d" % (d.fds(), fds0),
                                                   d.fd_kinds())


# -- 4. SIGHUP, JSONL, SIGTERM ---------------------------------------------------------------

def read_jsonl(path):
    try:
        with open(path) as f:
            text = f.read()
    except FileNotFoundError:
        return []
    # only whole lines: a reader may catch the writer between lines, never inside one
    return [json.loads(l) for l in text.splitlines(keepends=True) if l.endswith("\n")]


def snapshots(path, pid):
    return [o for o in read_jsonl(path) if o.get("type") == "snapshot" and o.get("pid") == pid]


def wait_snapshot(path, pid, window_s, timeout, after=0):
    """Waits for a snapshot of pid with window_s close to window_s; returns it or None."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        snaps = snapshots(path, pid)[after:]
        for s in snaps:
            if abs(float(s["window_s"]) - window_s) < 0.35:
                return s
        time.sleep(0.2)
    return None


def test_sighup_reloads_config_and_sigterm_detaches(daemons, procs, job_python, nccl_lib,
                                                    tmp_path):
    links_before = link_count()
    job = start_lib_job(procs, job_python, nccl_lib)   # there before the daemon starts
    stranger = start_lib_job(procs, PYTHON, nccl_lib)  # comm python3: not --match'ed
    jsonl = tmp_path / "daemon.jsonl"
    cfg = tmp_path / "pipeprof.conf"
    cfg.write_text("# pipeprof daemon test config\nwindow = 3\njsonl = %s\n" % jsonl)
    d = daemons(["--config", str(cfg)])
    m, _ = d.wait_line(r"\battached PID %d\b" % job.pid, ATTACH_S)
    assert m, "a job running before the daemon started was not attached\n%s" % d.log()
    assert d.wait_line(r"\battached PID %d\b" % stranger.pid, 2)[0] is None, (
        "--match %s attached a python3" % MATCH, d.log())

    first = wait_snapshot(jsonl, job.pid, 3.0, 12)
    assert first, ("no 3 s snapshot", snapshots(jsonl, job.pid), d.log())
    assert first["schema"] == "pipeprof.daemon/v1", first
    assert first["comm"] == JOB_COMM and first["verdict"] in VERDICTS, first
    assert isinstance(first["time"], (int, float)), first

    # logrotate-style: move the file away, change the window, SIGHUP
    moved = tmp_path / "daemon.jsonl.moved"
    os.rename(jsonl, moved)
    cfg.write_text("window = 1\njsonl = %s\n" % jsonl)
    t_hup = time.monotonic()
    os.kill(d.pid, signal.SIGHUP)
    new = wait_snapshot(jsonl, job.pid, 1.0, 8)
    assert new, ("no 1 s snapshot in a reopened %s after SIGHUP" % jsonl,
                 snapshots(jsonl, job.pid), snapshots(moved, job.pid), d.log())
    print("\nSIGHUP: first 1 s snapshot %.1f s after the signal" % (time.monotonic() - t_hup))
    assert d.alive()
    time.sleep(1.5)
    n_moved = len(read_jsonl(moved))
    time.sleep(2.5)
    assert len(read_jsonl(moved)) == n_moved, "still writing to the moved file after SIGHUP"
    assert len(snapshots(jsonl, job.pid)) >= 3
    for o in read_jsonl(jsonl) + read_jsonl(moved):
        assert o.get("type") in JSONL_TYPES, o
        if o["type"] == "snapshot":
            assert o.get("schema") == "pipeprof.daemon/v1", o

    # A broken config on SIGHUP: the daemon says so and keeps the old settings and serving.
    cfg.write_text("window = banana\n")
    since = d.count()
    os.kill(d.pid, signal.SIGHUP)
    time.sleep(2.5)
    assert d.alive(), "the daemon exited on a bad config\n%s" % d.log()
    print("bad config on SIGHUP, daemon said: %s" % d.lines[since:][-3:])
    status, _, _ = http_get(d.port, "/healthz")
    assert status == 200
    n = len(snapshots(jsonl, job.pid))
    assert wait_snapshot(jsonl, job.pid, 1.0, 4, after=n), "stopped writing after a bad config"

    # SIGTERM: exit 0, every BPF link gone.
    held_links, held_progs = d.link_ids(), d.prog_ids()
    assert held_links
    rc = d.stop(signal.SIGTERM)
    assert rc == 0, "daemon exit %s after SIGTERM\n%s" % (rc, d.log())
    check_links_gone(d, held_links, held_progs, links_before)
    assert job.alive(), "the traced job did not survive the daemon"


def test_jsonl_rotation(daemons, procs, job_python, nccl_lib, tmp_path):
    job = start_lib_job(procs, job_python, nccl_lib)
    path = tmp_path / "rot.jsonl"
    max_bytes = 4096
    d = daemons(["--window", "1", "--jsonl", str(path), "--jsonl-max-bytes", str(max_bytes),
                 "--jsonl-keep", "2"])
    assert d.wait_line(r"\battached PID %d\b" % job.pid, ATTACH_S)[0], d.log()
    assert wait_for(lambda: os.path.exists("%s.2" % path) and os.path.getsize(path) > 0, 20,
                    0.2), ("no rotation to .2", os.listdir(tmp_path), d.log())
    time.sleep(2)
    names = sorted(os.listdir(tmp_path))
    print("\nrotation: %s" % {n: os.path.getsize(tmp_path / n) for n in names
                              if n.startswith("rot.")})
    assert not os.path.exists("%s.3" % path), names
    for f in (str(path), "%s.1" % path, "%s.2" % path):
        lines = read_jsonl(f)
        with open(f, "rb") as fh:
            raw = fh.read()
        assert raw.endswith(b"\n"), f
        assert len(raw) <= max_bytes or len(lines) == 1, (f, len(raw), len(lines))
        assert all(o["type"] in JSONL_TYPES for o in lines), {o["type"] for o in lines}


def test_snapshot_covers_a_blocked_trainer(daemons, procs, job_python, nccl_lib, tmp_path):
    """A trainer blocked across window boundaries (a hung collective, a stuck DataLoader, here
    a sleep) is still in a state during each window: every full window's trainer seconds must
    add up to the window, not to zero, with the whole sleep dumped on the window it ends in."""
    code = ("import ctypes, signal, time\n"
            "signal.alarm(60)\n"
            "ctypes.CDLL(%r)\n"
            "print('READY', flush=True)\n"
            "while True:\n"
            "    time.sleep(2.5)\n" % nccl_lib)
    job = procs([job_python, "-c", code], name="sleeper")
    assert job.wait_line(r"^READY", 30), job.output()
    path = tmp_path / "w.jsonl"
    d = daemons(["--window", "1", "--jsonl", str(path)])
    assert d.wait_line(r"\battached PID %d\b" % job.pid, ATTACH_S)[0], d.log()
    assert wait_for(lambda: len(snapshots(path, job.pid)) >= 7, 15, 0.2), d.log()
    # No libtorch, so no step probe: the report says why it has no steps, and counts none.
    status, _, body = http_get(d.port, "/api/v1/report?pid=%d" % job.pid)
    assert status == 200, body[:300]
    st = json.loads(body)["steps"]
    assert st["source"] is None and st["count"] is None, st
    assert "libtorch_cpu is not mapped" in (st["why_not"] or ""), st
    snaps = snapshots(path, job.pid)
    sums = [(round(s["window_s"], 2), round(sum(s["seconds"]["TRAINER"].values()), 2))
            for s in snaps]
    print("\nblocked trainer: (window_s, trainer seconds) per window: %s" % sums)
    # Windows run from the job's attach: the first is as long as the others.
    assert all(1.0 <= x[0] < 1.3 for x in sums), "windows not of --window length: %s" % sums
    bad = [x for x in sums if abs(x[1] - x[0]) > 0.1 * x[0]]
    assert not bad, "trainer seconds do not add up to the window: %s" % bad


def test_verdict_change_event(daemons, procs, job_python, nccl_lib, tmp_path):
    """A job that idles in short sleeps, then computes: its verdict moves to cpu_bound, and the
    JSONL says so once, from the verdict of the snapshot before."""
    code = ("import ctypes, signal, time\n"
            "signal.alarm(60)\n"
            "ctypes.CDLL(%r)\n"
            "print('READY', flush=True)\n"
            "t = time.time()\n"
            "while time.time() - t < 4: time.sleep(0.02)\n"
            "t = time.time()\n"
            "while time.time() - t < 40: pass\n" % nccl_lib)
    path = tmp_path / "v.jsonl"
    d = daemons(["--window", "1", "--jsonl", str(path)])
    job = procs([job_python, "-c", code], name="idle-then-busy")
    assert job.wait_line(r"^READY", 30), job.output()
    assert d.wait_line(r"\battached PID %d\b" % job.pid, ATTACH_S)[0], d.log()

    def change():
        return [o for o in read_jsonl(path) if o.get("type") == "verdict_change" and
                o.get("pid") == job.pid and o.get("to") == "cpu_bound"]
    assert wait_for(change, 15, 0.2), ([(o["type"], o.get("verdict", o.get("to")))
                                         for o in read_jsonl(path)], d.log())
    lines = [o for o in read_jsonl(path) if o.get("pid") == job.pid]
    i = lines.index(change()[0])
    snaps = [o for o in lines[:i] if o["type"] == "snapshot"]
    print("\nverdicts: %s" % [(o["type"], o.get("verdict") or "%s->%s" % (
        o.get("from"), o.get("to"))) for o in lines])
    # the snapshot of the window that changed, then the event
    assert lines[i - 1]["type"] == "snapshot" and lines[i - 1]["verdict"] == "cpu_bound", \
        lines[:i + 1]
    assert len(snaps) >= 2 and snaps[-2]["verdict"] == change()[0]["from"] != "cpu_bound", \
        lines[:i + 1]
    assert len(change()) == 1

    # /metrics is rebuilt once a second: the window reaches it up to a second later.
    def metric_says_so():
        s, _ = parse_exposition(scrape(d.port)[0])
        return values(s, "pipeprof_job_verdict", pid=job.pid, verdict="cpu_bound") == [1.0]
    assert wait_for(metric_says_so, 3, 0.2)


# -- 5. soak (bounded) -----------------------------------------------------------------------

def test_soak_bounded(daemons, procs, job_python, tmp_path):
    """SOAK: about 2 minutes (`make soak`: 11). One daemon, /metrics scraped every second
    throughout; 10 s with no job, then a data-loading job traced for SOAK_WARMUP_S + SOAK_S
    seconds with the daemon's RSS sampled every 10 s. RSS must be flat after the warm-up (within RSS_SLACK_KB) and the
    daemon's CPU time is printed for 0 and 1 traced jobs."""
    d = daemons(["--window", "2"])
    stop = threading.Event()
    scrapes = {"ok": 0, "bad": [], "windows": []}

    def scraper():
        while not stop.is_set():
            t = time.monotonic()
            try:
                s, _ = parse_exposition(scrape(d.port, timeout=5)[0])
                scrapes["ok"] += 1
                scrapes["windows"].append(values(s, "pipeprof_windows_total")[0])
            except Exception as e:      # noqa: BLE001 - every failure is reported below
                scrapes["bad"].append(repr(e))
            stop.wait(max(0.0, 1.0 - (time.monotonic() - t)))

    th = threading.Thread(target=scraper, daemon=True)
    th.start()
    try:
        time.sleep(2)
        jobs0 = jobs_attached(d.port)
        c0, k0, t0 = d.cpu_ns(), d.cpu_s(), time.monotonic()
        time.sleep(IDLE_CPU_S)
        idle_cpu = (d.cpu_ns() - c0) / 1e9 / (time.monotonic() - t0)
        idle_ticks = d.cpu_s() - k0
        rss_idle = d.rss_kb()

        w, pid, _ = start_job_workload(procs, job_python, "data_bound.py",
                                       str(tmp_path / "truth.json"),
                                       duration=SOAK_S + SOAK_WARMUP_S + 60)
        assert d.wait_line(r"\battached PID %d\b" % pid, ATTACH_S + 20)[0], d.log()
        time.sleep(SOAK_WARMUP_S)
        samples = []
        c1, k1, t1 = d.cpu_ns(), d.cpu_s(), time.monotonic()
        end = t1 + SOAK_S
        while True:
            samples.append((round(time.monotonic() - t1), d.rss_kb(), d.fds()))
            if time.monotonic() >= end:
                break
            time.sleep(min(10, max(0.0, end - time.monotonic())))
        busy_cpu = (d.cpu_ns() - c1) / 1e9 / (time.monotonic() - t1)
        busy_ticks = d.cpu_s() - k1
        assert w.alive(), "the workload ended during the soak"
        s, _ = parse_exposition(scrape(d.port)[0])
    finally:
        stop.set()
        th.join(10)

    verdict = [l["verdict"] for n, l, v in s
               if n == "pipeprof_job_verdict" and l.get("pid") == str(pid) and v == 1]
    lost = values(s, "pipeprof_events_lost_total")
    bpf = values(s, "pipeprof_bpf_run_seconds_total")
    self_cpu = values(s, "pipeprof_cpu_seconds_total")
    rss = [r for _, r, _ in samples]
    print("\nsoak: %d scrapes ok, %d failed; jobs before the workload: %s" % (
        scrapes["ok"], len(scrapes["bad"]), jobs0))
    print("soak: daemon CPU with %d traced jobs: %.3f ms/s (%.3f%% of one CPU) over %d s, "
          "scraped every second; utime+stime %.2f s" % (
              jobs0, idle_cpu * 1e3, idle_cpu * 100, IDLE_CPU_S, idle_ticks))
    print("soak: daemon CPU with %d traced jobs: %.3f ms/s (%.3f%% of one CPU) over %.0f s, "
          "scraped every second; utime+stime %.2f s" % (
              jobs0 + 1, busy_cpu * 1e3, busy_cpu * 100, SOAK_S, busy_ticks))
    print("soak: RSS idle %d kB; (s, RSS kB, fds) after warm-up: %s" % (rss_idle, samples))
    print("soak: verdict %s, events lost %s, BPF run time %s s, daemon's own CPU metric %s s"
          % (verdict, lost, bpf, self_cpu))
    assert not scrapes["bad"], scrapes["bad"][:5]
    assert scrapes["ok"] >= (IDLE_CPU_S + SOAK_WARMUP_S + SOAK_S) * 0.8, scrapes["ok"]
    win = scrapes["windows"]
    assert all(b >= a for a, b in zip(win, win[1:])), "pipeprof_windows_total went down"
    assert win[-1] - win[0] >= (IDLE_CPU_S + SOAK_WARMUP_S + SOAK_S) / 2 * 0.8, win
    assert verdict == ["data_loading_bound"], verdict
    assert max(rss) - rss[0] <= RSS_SLACK_KB, (
        "RSS grew %d kB during the soak (slack %d kB): %s" % (max(rss) - rss[0],
                                                              RSS_SLACK_KB, samples))
    assert samples[-1][2] == samples[0][2] or wait_for(lambda: d.fds() == samples[0][2], 3), (
        "fd count moved", samples, d.fd_kinds())
    assert d.alive()
