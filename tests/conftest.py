# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Fixtures for the scenario tests: start labelled workloads, run pipeprof on them, clean up.

Every process a test starts goes into its own session (process group) and is killed, group and
all, when the test ends, whether it passed or not: DataLoader workers and CPU hogs included.
"""
import glob
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKLOADS = os.path.join(ROOT, "tools", "workloads")
PIPEPROF = os.path.join(ROOT, "pipeprof")
# Debian's, with torch; not whatever python3 is first on PATH. PIPEPROF_TEST_PYTHON names
# another (a GPU machine's interpreter with CUDA torch, for tests/test_real_cuda.py).
PYTHON = os.environ.get("PIPEPROF_TEST_PYTHON", "/usr/bin/python3")
RESULTS = os.path.join(ROOT, ".output", "scenario-results.json")
READY_TIMEOUT = 90  # importing torch on a cold cache is slow

sys.path.insert(0, WORKLOADS)
import groundtruth  # noqa: E402
import recs_rules  # noqa: E402

_results_lock = threading.Lock()
_session_results = {}
RECS_SEEN = os.path.join(ROOT, ".output", "recommendations-seen.json")
# Every pipeprof.report/v1 document the running test produced (keep_report), checked against
# recs_rules.FORBIDDEN when the test ends.
_kept_reports = []


def keep_report(report, source="pipeprof -p"):
    """Keeps a parsed report for the end-of-test check that no recommendation contradicts its
    evidence; returns it unchanged."""
    if isinstance(report, dict) and report.get("schema") == "pipeprof.report/v1":
        _kept_reports.append((source, report))
    return report


def _note_recommendations(test_id, kept):
    """Adds each kept report's verdict and recommendations to .output/recommendations-seen.json."""
    try:
        with open(RECS_SEEN) as f:
            seen = json.load(f)
    except (OSError, ValueError):
        seen = {}
    seen[test_id] = [{
        "source": source,
        "verdict": (r.get("verdict") or {}).get("name"),
        "cpu": r.get("cpu"),
        "recommendations": [{k: rec.get(k) for k in ("id", "text", "evidence",
                                                     "predicted_speedup", "speedup_bound")}
                            for rec in r.get("recommendations") or []],
    } for source, r in kept]
    os.makedirs(os.path.dirname(RECS_SEEN), exist_ok=True)
    tmp = RECS_SEEN + ".tmp"
    with open(tmp, "w") as f:
        json.dump(seen, f, indent=1, sort_keys=True)
    os.replace(tmp, RECS_SEEN)


@pytest.fixture(autouse=True)
def recommendations_fit_evidence(request):
    """After every test: no recommendation in any report it produced contradicts that report's
    own evidence (recs_rules.FORBIDDEN), and each says what it rests on."""
    start = len(_kept_reports)
    yield
    kept = _kept_reports[start:]
    del _kept_reports[start:]
    if not kept:
        return
    _note_recommendations(request.node.nodeid, kept)
    bad = []
    for source, report in kept:
        for v in recs_rules.violations(report):
            bad.append("%s (verdict %r): %s" % (source, (report.get("verdict") or {}).get("name"), v))
    if bad:
        pytest.fail("recommendations contradict their report's evidence:\n  " + "\n  ".join(bad),
                    pytrace=False)


class Proc:
    """A started process whose stdout is read line by line in the background."""

    def __init__(self, argv, name, env=None):
        self.argv = argv
        self.name = name
        self.lines = []
        self._cond = threading.Condition()
        self.p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True, start_new_session=True, cwd=ROOT, env=env)
        self.pid = self.p.pid
        self.stderr_lines = []
        threading.Thread(target=self._pump, args=(self.p.stdout, self.lines), daemon=True).start()
        threading.Thread(target=self._pump, args=(self.p.stderr, self.stderr_lines),
                         daemon=True).start()

    def _pump(self, f, sink):
        for line in f:
            with self._cond:
                sink.append(line.rstrip("\n"))
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def wait_line(self, pattern, timeout, stderr=False):
        """The first match of pattern in a line of stdout (or stderr), or None once timeout
        has passed or the process has exited without printing one."""
        rx = re.compile(pattern)
        lines = self.stderr_lines if stderr else self.lines
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for line in lines:
                    m = rx.search(line)
                    if m:
                        return m
                left = deadline - time.monotonic()
                if left <= 0 or self.p.poll() is not None:
                    # one last look: the process may have printed and exited at once
                    for line in lines:
                        m = rx.search(line)
                        if m:
                            return m
                    return None
                self._cond.wait(min(left, 0.5))

    def output(self, tail=40):
        with self._cond:
            out = self.lines[-tail:], self.stderr_lines[-tail:]
        return "--- %s stdout ---\n%s\n--- %s stderr ---\n%s" % (
            self.name, "\n".join(out[0]), self.name, "\n".join(out[1]))

    def alive(self):
        return self.p.poll() is None

    def signal(self, sig):
        if self.alive():
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def wait(self, timeout):
        try:
            return self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def kill_group(self):
        """SIGTERM the whole process group, then SIGKILL what is left of it."""
        for sig, grace in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(self.pid, sig)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline:
                self.p.poll()
                try:
                    os.killpg(self.pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.05)
            else:
                continue
            break
        try:
            self.p.wait(1)
        except subprocess.TimeoutExpired:
            pass


@pytest.fixture
def procs(request):
    """Factory starting processes that are all killed (with their groups) when the test ends."""
    started = []

    def start(argv, name=None, env=None):
        p = Proc(argv, name or os.path.basename(argv[1] if len(argv) > 1 else argv[0]), env=env)
        started.append(p)
        return p

    def finalize():
        for p in reversed(started):
            p.kill_group()

    request.addfinalizer(finalize)
    return start


@pytest.fixture(scope="session")
def pipeprof_bin():
    """./pipeprof must exist and we must be root: fail clearly (never skip) otherwise."""
    if not os.path.isfile(PIPEPROF) or not os.access(PIPEPROF, os.X_OK):
        pytest.fail("%s is missing or not executable: build it with `make` first" % PIPEPROF,
                    pytrace=False)
    if os.geteuid() != 0:
        pytest.fail("the scenario tests load BPF programs: run them as root (sudo make "
                    "scenario-test)", pytrace=False)
    if not os.path.exists(PYTHON):
        pytest.fail("%s is missing: the workloads need Debian's python3 with torch" % PYTHON,
                    pytrace=False)
    return PIPEPROF


def fixture_lib(name):
    """A library `make fixtures` builds under .output/fakecuda, or the test fails saying so."""
    lib = os.path.join(ROOT, ".output", "fakecuda", name)
    if not os.path.exists(lib):
        pytest.fail("%s is missing: build the GPU fixtures with `make fixtures`" % lib,
                    pytrace=False)
    return lib


@pytest.fixture(scope="session")
def fakecuda():
    return fixture_lib("libcudart.so.13")


@pytest.fixture(scope="session")
def fakenccl():
    return fixture_lib("libnccl.so.2")


def cpu_steal_ticks():
    """Per-CPU steal time (clock ticks) from /proc/stat: time the hypervisor ran something else
    while this VM's CPU had work."""
    ticks = []
    with open("/proc/stat") as f:
        for line in f:
            parts = line.split()
            if parts[0].startswith("cpu") and parts[0] != "cpu":
                ticks.append(int(parts[8]))
    return ticks


def steal_fraction(before, after, seconds):
    """The largest share of `seconds` any one CPU lost to the hypervisor between two
    cpu_steal_ticks() samples. A thread whose vCPU is stolen is still current in the guest, so
    the scheduler (and pipeprof) count it on-CPU while its own CPU time (schedstat, the
    workloads' truth) does not grow: comparisons between the two are uncertain by this much."""
    hz = os.sysconf("SC_CLK_TCK")
    worst = max((a - b for a, b in zip(after, before)), default=0)
    return worst / hz / seconds if seconds > 0 else 0.0


def start_workload(procs, script, args, truth, duration=60, env=None):
    """Starts tools/workloads/SCRIPT and waits for its READY line; returns (proc, pid, tid)."""
    argv = [PYTHON, os.path.join(WORKLOADS, script), "--duration", str(duration),
            "--truth", truth] + list(args)
    w = procs(argv, name=script, env=env)
    m = w.wait_line(r"^READY pid=(\d+) tid=(\d+)", READY_TIMEOUT)
    if m is None:
        pytest.fail("%s did not print READY within %d s (exit status %s)\n%s" % (
            script, READY_TIMEOUT, w.p.poll(), w.output()), pytrace=False)
    return w, int(m.group(1)), int(m.group(2))


def attempt_pipeprof(pid, seconds=5, extra=(), timeout=120, env=None):
    """Runs `pipeprof -p PID -d SECONDS -j`; returns (report, None), or (None, why) when it did
    not finish, failed or printed no v1 report. For tests that attach many times and report
    every attach, a failed one included. env: pipeprof's environment (None: this one's)."""
    argv = [PIPEPROF, "-p", str(pid), "-d", str(seconds), "-j"] + list(extra)
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                           env=env)
    except subprocess.TimeoutExpired as e:
        err = e.stderr or ""
        if isinstance(err, bytes):
            err = err.decode(errors="replace")
        return None, "%s did not finish in %d s\nstderr:\n%s" % (" ".join(argv), timeout, err)
    if r.returncode != 0:
        return None, "%s exited %d\nstderr:\n%s\nstdout:\n%s" % (
            " ".join(argv), r.returncode, r.stderr[-4000:], r.stdout[-2000:])
    try:
        report = json.loads(r.stdout)
    except ValueError as e:
        return None, "pipeprof -j printed no JSON object (%s):\n%s\nstderr:\n%s" % (
            e, r.stdout[-2000:], r.stderr[-2000:])
    if not isinstance(report, dict) or report.get("schema") != "pipeprof.report/v1":
        return None, "unexpected report schema %r" % (
            report.get("schema") if isinstance(report, dict) else report)
    report["_stderr"] = r.stderr
    keep_report(report, " ".join(argv[1:]))
    return report, None


def run_pipeprof(pid, seconds=5, extra=(), timeout=120):
    """Runs `pipeprof -p PID -d SECONDS -j`; returns the parsed report (fails the test otherwise)."""
    report, why = attempt_pipeprof(pid, seconds, extra, timeout)
    if report is None:
        pytest.fail(why, pytrace=False)
    return report


def untraced_switch_ins(every):
    """pipeprof's environment with one switch-in of the job in EVERY left untraced
    (PIPEPROF_TEST_DROP_SWITCH_INS), as a Firecracker guest leaves the switch-ins of the tasks
    its agent hands a CPU back to: the rare case, met at every attach."""
    return dict(os.environ, PIPEPROF_TEST_DROP_SWITCH_INS=str(every))


def lost_wakeups(every):
    """pipeprof's environment with one wakeup of the job in EVERY left untraced, its
    sched_waking and sched_wakeup (PIPEPROF_TEST_DROP_WAKEUPS), as a Firecracker guest loses a
    few beside CPU hogs (a timer's, its switch-in traced): met at every attach. With EVERY above 1,
    never two in a row from a task of one thread's waits of one call, so that a periodic job
    does not lose the same wakeup (its batch's delivery) in every cycle."""
    return dict(os.environ, PIPEPROF_TEST_DROP_WAKEUPS=str(every))


def lost_wakeups_unplaced(every):
    """lost_wakeups(EVERY), and each lost wakeup's switch-in lost with it
    (PIPEPROF_TEST_DROP_WOKEN_SWITCH_INS): a wait no event was seen to end, placed from the CPU
    clock at the thread's next switch-out, as the same guest leaves one now and then beside CPU
    hogs. With EVERY above 1, a task's wakeup of a thread holding timed-out waits is not lost
    then: nothing would be left to say what ended them."""
    return dict(lost_wakeups(every), PIPEPROF_TEST_DROP_WOKEN_SWITCH_INS="1")


def open_wait_ends_unseen():
    """pipeprof's environment with the timer's wakeup of each thread asleep since before the
    attach left untraced, and its switch-in (PIPEPROF_TEST_DROP_OPEN_WAIT_ENDS), as a Firecracker
    guest loses both now and then beside CPU hogs: the wait open at the attach ends unseen, and
    only the call it was in, read when pipeprof seeded the thread, says what chain it began."""
    return dict(os.environ, PIPEPROF_TEST_DROP_OPEN_WAIT_ENDS="1")


def attach_repeatedly(w, pid, attaches, seconds, extra=(), timeout=120, env=None):
    """Attaches `pipeprof -p PID -d SECONDS -j` ATTACHES times in a row to the one running
    workload w. Returns one dict per attach: report (None when that run failed), error (why),
    stolen (conftest.steal_fraction over that attach) and wall_s. Fails the test at once if the
    workload exits: without it there is no truth to compare any attach with."""
    runs = []
    for i in range(attaches):
        if not w.alive():
            pytest.fail("%s exited before attach %d of %d\n%s" % (
                w.name, i + 1, attaches, w.output()), pytrace=False)
        steal0 = cpu_steal_ticks()
        t0 = time.monotonic()
        report, why = attempt_pipeprof(pid, seconds, extra, timeout, env)
        wall = time.monotonic() - t0
        runs.append({"report": report, "error": why, "wall_s": wall,
                     "stolen": steal_fraction(steal0, cpu_steal_ticks(), seconds)})
    if not w.alive():
        pytest.fail("%s exited before the last of %d attaches finished\n%s" % (
            w.name, attaches, w.output()), pytrace=False)
    return runs


def finish_workload(w, truth, timeout=30):
    """Stops a workload (SIGTERM: it writes its truth file and exits 0); returns the truth."""
    w.signal(signal.SIGTERM)
    rc = w.wait(timeout)
    if rc is None:
        pytest.fail("%s did not exit within %d s of SIGTERM\n%s" % (w.name, timeout, w.output()),
                    pytrace=False)
    if rc != 0 or not os.path.exists(truth):
        pytest.fail("%s exited %s without a truth file\n%s" % (w.name, rc, w.output()),
                    pytrace=False)
    return groundtruth.load(truth)


def save_result(test_id, result):
    """Adds one test's numbers to .output/scenario-results.json (rewritten after every test)."""
    with _results_lock:
        _session_results[test_id] = result
        os.makedirs(os.path.dirname(RESULTS), exist_ok=True)
        try:
            with open(RESULTS) as f:
                old = json.load(f)
        except (OSError, ValueError):
            old = {}
        old.setdefault("results", {}).update(_session_results)
        old["updated"] = time.strftime("%Y-%m-%d %H:%M:%S")
        tmp = RESULTS + ".tmp"
        with open(tmp, "w") as f:
            json.dump(old, f, indent=1, sort_keys=True)
        os.replace(tmp, RESULTS)


def pytest_terminal_summary(terminalreporter):
    if not _session_results:
        return
    tr = terminalreporter
    tr.section("pipeprof vs ground truth (trainer, % of the window)")
    for test_id, res in _session_results.items():
        tr.write_line(res.get("table", test_id))
        tr.write_line("")
    tr.write_line("all numbers: %s" % RESULTS)


def bpf_objects(pid):
    """{'prog': ids, 'link': ids, 'map': ids} that process pid holds file descriptors of."""
    held = {"prog": set(), "link": set(), "map": set()}
    for path in glob.glob("/proc/%d/fdinfo/*" % pid):
        try:
            with open(path) as f:
                text = f.read()
        except OSError:
            continue
        for kind in ("link", "map"):
            m = re.search(r"^%s_id:\s*(\d+)" % kind, text, re.M)
            if m:
                held[kind].add(int(m.group(1)))
                break
        else:
            m = re.search(r"^prog_id:\s*(\d+)", text, re.M)
            if m:
                held["prog"].add(int(m.group(1)))
    return held


def _threads_blocked_at(pid):
    """Each thread of pid: its state, where the kernel has it waiting, and its kernel stack;
    then, where gdb is installed, its user stack."""
    lines = []
    for task in sorted(glob.glob("/proc/%d/task/*" % pid)):
        read = {}
        for name in ("stat", "wchan", "stack"):
            try:
                with open(os.path.join(task, name)) as f:
                    read[name] = f.read()
            except OSError as e:
                read[name] = "(%s)" % e.strerror
        state = (read["stat"].rsplit(")", 1)[-1].split() or ["?"])[0]
        lines.append("%s state %s wchan %s\n%s" % (task, state, read["wchan"], read["stack"]))
    try:
        gdb = subprocess.run(["gdb", "-p", str(pid), "-batch", "-ex", "thread apply all bt"],
                             capture_output=True, text=True, timeout=30)
        lines += [l for l in gdb.stdout.splitlines() if l.startswith(("#", "Thread"))]
    except (OSError, subprocess.TimeoutExpired):
        pass
    return "\n".join(lines)


def _threads_at_a_glance(pid):
    """One line a thread: state, CPU ticks so far, and the innermost kernel frames."""
    lines = []
    for task in sorted(glob.glob("/proc/%d/task/*" % pid)):
        try:
            with open(os.path.join(task, "stat")) as f:
                fields = f.read().rsplit(")", 1)[-1].split()
            with open(os.path.join(task, "stack")) as f:
                frames = [l.split("] ", 1)[-1].split("+", 1)[0] for l in f.read().splitlines()]
        except OSError:
            continue
        lines.append("%s %s utime %s stime %s in %s" % (
            os.path.basename(task), fields[0], fields[11], fields[12],
            " < ".join(frames[:4]) or "user mode"))
    return "; ".join(lines)


def run_or_show_hang(cmd, timeout, **kwargs):
    """subprocess.run(cmd, capture_output=True, text=True), except that a command still running
    after timeout seconds fails the test with what its threads did each second (state, CPU
    ticks, innermost kernel frames) and where each waits at the end (kernel stack, and user
    stack where gdb is installed), read before it is killed: a hang is a defect to find, and
    a bare timeout says nothing of where. Output goes through files, so a command that writes
    much while it runs never blocks on a pipe nobody reads."""
    with tempfile.TemporaryFile("w+") as out_f, tempfile.TemporaryFile("w+") as err_f:
        p = subprocess.Popen(cmd, stdout=out_f, stderr=err_f, text=True, **kwargs)
        start, history, elapsed = time.monotonic(), [], 0.0
        while elapsed < timeout:
            try:
                p.wait(timeout=min(1.0, timeout - elapsed))
                break
            except subprocess.TimeoutExpired:
                pass
            elapsed = time.monotonic() - start
            glance = _threads_at_a_glance(p.pid)
            if history and history[-1][1] == glance:
                history[-1][2] = elapsed
            else:
                history.append([elapsed, glance, elapsed])
        if p.poll() is None:
            where = _threads_blocked_at(p.pid)
            p.kill()
            p.wait()
            err_f.seek(0)
            seen = "\n".join("%5.1f-%5.1f s: %s" % (a, b, g) for a, g, b in history)
            pytest.fail("%s still running after %d s; each second:\n%s\nwhere its threads were "
                        "at the end:\n%s\nstderr:\n%s" % (
                            " ".join(cmd), timeout, seen, where, err_f.read()[-3000:]),
                        pytrace=False)
        out_f.seek(0)
        err_f.seek(0)
        return subprocess.CompletedProcess(cmd, p.returncode, out_f.read(), err_f.read())
