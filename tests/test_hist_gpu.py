# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""`pipeprof hist -j gpu-sync launch memcpy` against an exactly known pattern of CUDA calls.

tools/workloads/gpu_calls.py warms up, prints READY and waits for a go file; pipeprof hist
attaches (no interval: it traces until SIGINT); once pipeprof says it is tracing, the go file
releases the pattern; when the workload prints TRUTH, pipeprof gets SIGINT and prints one
pipeprof.hist/v1 object, compared here with the workload's own counts and measurements:

- gpu-sync: one histogram per synchronising API, with exactly the calls made (the runtime's
  cudaStreamSynchronize x 100 / cudaDeviceSynchronize x 5 / cudaMemcpy x 80, never their
  driver twins as well); the 1.5 ms waits in the 1024..2047 usecs slot or the next one;
- launch: every cudaLaunchKernel once (its nested cuLaunchKernel not counted again): 300
  launches (200 paced + 100 before the syncs), 299 gaps, 199 of ~768 usecs (slot 512..1023)
  and 100 of ~1.5 ms (slot 1024..2047);
- memcpy: per direction, exact byte histograms and sums (HtoD: 50 x 1 MiB sync + 40 x 4 KiB
  async; DtoH: 30 x 64 KiB) and a throughput histogram of the synchronous copies only
  (50 HtoD, 30 DtoH), below the fake GPU's 10000 MB/s;
- every lost counter zero; percentiles inside the slot of their rank.

Time histograms are compared slot by slot with the workload's own clock readings around each
call (within SLOT_SLACK), so a preemption on a busy machine, which both sides see, does not
fail the test; byte histograms and all counts must be exact.

Second run: only the fake driver loaded, its API called directly: cuLaunchKernel counted once
per call under its own name, cuStreamSynchronize, cuCtxSynchronize, cuMemcpyHtoD_v2 and
cuMemcpyDtoH_v2 as the gpu-sync labels. Third run: `-L ... 1 3`, the pattern straddling an
interval boundary: summed over the three objects every call is there once, per thread.

Needs root, ./pipeprof and .output/fakecuda; about 20 s (each pipeprof run takes ~0.3 s to
attach and ~4-5 s to exit, detaching its uprobes one by one).
"""
import json
import os
import re
import signal
import subprocess
import time

import pytest

from conftest import PYTHON, ROOT, WORKLOADS

PIPEPROF = os.path.join(ROOT, "pipeprof")
WORKLOAD = os.path.join(WORKLOADS, "gpu_calls.py")
ATTACH_TIMEOUT = 30     # pipeprof attaches in 0.3-2 s; generous for a loaded machine
PATTERN_TIMEOUT = 20    # the pattern itself takes ~0.35 s
EXIT_TIMEOUT = 20

# Allowed difference, per log2 slot, between pipeprof's time histograms and the workload's
# own measurement of the same calls (a preemption between the workload's clock read and the
# probe can move a sample across a slot edge).
SLOT_SLACK = 3
# Share of a time histogram that must sit where the pattern puts it. Loose on purpose: on a
# busy 2-CPU machine the spinning workload is preempted now and then, stretching a gap or a
# wait; the exact check is the slot-by-slot comparison with the workload's own measurement.
MOSTLY = 0.5


@pytest.fixture(scope="module")
def hist_bin(pipeprof_bin):
    r = subprocess.run([PIPEPROF, "hist", "--help"], capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        pytest.fail("`pipeprof hist --help` exited %d: this pipeprof has no hist subcommand\n%s"
                    % (r.returncode, (r.stderr or r.stdout)[-2000:]), pytrace=False)
    return pipeprof_bin


def json_objects(proc, want, timeout=5.0):
    """The JSON objects an exited process printed on stdout, one a line, once `want` of them
    have been read (the pump thread may still be reading when the process has exited), or
    whatever there is after timeout. Lines that are not JSON objects make it fail."""
    deadline = time.monotonic() + timeout
    while True:
        with proc._cond:
            lines = [ln.strip() for ln in proc.lines if ln.strip()]
        objs = []
        for line in lines:
            try:
                objs.append(json.loads(line))
            except ValueError:
                pytest.fail("pipeprof hist -j printed a line that is not JSON: %r\n%s" % (
                    line[:200], proc.output()), pytrace=False)
        if len(objs) >= want or time.monotonic() >= deadline:
            return objs
        time.sleep(0.05)


def mapped_libs(pid):
    with open("/proc/%d/maps" % pid) as f:
        return {os.path.basename(line.split()[5]) for line in f if len(line.split()) >= 6}


def lost_counters(obj, prefix="lost"):
    """(name, value) of every number in the "lost" object, nested or not."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from lost_counters(v, prefix + "." + k)
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from lost_counters(v, "%s[%d]" % (prefix, i))
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool):
        yield prefix, obj


def run_hist(procs, tmp_path, workload_args, hist_args=(), env=None, interval=None,
             count=None, go_delay=0.0):
    """Starts the workload, attaches pipeprof hist, releases the pattern (go_delay seconds
    after pipeprof says it is tracing) and, without an interval, stops pipeprof with SIGINT
    once the pattern is done; with `interval count`, lets it end by itself.

    Returns (reports, truth, info): the JSON objects printed, the workload's TRUTH, and
    {"pid", "maps" (basenames the workload maps), "attach_s"}."""
    go = str(tmp_path / "go")
    w = procs([PYTHON, WORKLOAD, "--go-file", go, "--linger", "60"] + list(workload_args),
              name="gpu_calls.py", env=env)
    m = w.wait_line(r"^READY pid=(\d+) tid=(\d+)", 30)
    if m is None:
        pytest.fail("gpu_calls.py printed no READY (exit %s)\n%s" % (w.p.poll(), w.output()),
                    pytrace=False)
    pid = int(m.group(1))
    tail = [] if interval is None else [str(interval)] + ([] if count is None else [str(count)])
    argv = [PIPEPROF, "hist", "-p", str(pid), "-j"] + list(hist_args) + \
        ["gpu-sync", "launch", "memcpy"] + tail
    pp = procs(argv, name="pipeprof hist")
    t0 = time.monotonic()
    if pp.wait_line(r"pipeprof: tracing PID %d" % pid, ATTACH_TIMEOUT, stderr=True) is None:
        pytest.fail("%s: no 'pipeprof: tracing PID %d' on stderr within %d s (exit %s)\n%s" % (
            " ".join(argv), pid, ATTACH_TIMEOUT, pp.p.poll(), pp.output()), pytrace=False)
    attach_s = time.monotonic() - t0
    if go_delay:
        time.sleep(go_delay)
    with open(go, "w"):
        pass
    m = w.wait_line(r"^TRUTH (.*)$", PATTERN_TIMEOUT)
    if m is None:
        pytest.fail("gpu_calls.py printed no TRUTH (exit %s)\n%s\n%s" % (
            w.p.poll(), w.output(), pp.output()), pytrace=False)
    truth = json.loads(m.group(1))
    maps = mapped_libs(pid)
    if interval is None:
        if not pp.alive():
            pytest.fail("pipeprof hist exited before SIGINT (status %s)\n%s" % (
                pp.p.poll(), pp.output()), pytrace=False)
        pp.signal(signal.SIGINT)
        want = 1
        rc = pp.wait(EXIT_TIMEOUT)
    else:
        want = count
        rc = pp.wait(interval * count + EXIT_TIMEOUT)
    if rc != 0:
        pytest.fail("%s: exit status %s (want 0)\n%s" % (" ".join(argv), rc, pp.output()),
                    pytrace=False)
    reports = json_objects(pp, want)
    if len(reports) != want:
        pytest.fail("%s printed %d JSON object(s), want %d\n%s" % (
            " ".join(argv), len(reports), want, pp.output()), pytrace=False)
    w.signal(signal.SIGTERM)
    if w.wait(10) != 0:
        pytest.fail("gpu_calls.py did not exit 0 on SIGTERM\n%s" % w.output(), pytrace=False)
    print("\n%s\nattach %.2f s; pattern %.3f s; pipeprof stderr:\n  %s" % (
        " ".join(argv), attach_s, truth["elapsed_s"], "\n  ".join(pp.stderr_lines[-10:])))
    return reports, truth, {"pid": pid, "maps": maps, "attach_s": attach_s}


def slots_dict(h):
    return {s["low"]: s["count"] for s in h.get("slots", []) if s["count"]}


def describe(h):
    if h is None:
        return "missing"
    keep = ("events", "count", "sum", "p50", "p90", "p99", "rate_per_s", "aggregate_mb_s")
    return "events=%s count=%s sum=%s p50=%s p90=%s p99=%s%s slots=%s" % (
        tuple(h.get(k) for k in keep[:6]) +
        ("".join(" %s=%s" % (k, h[k]) for k in keep[6:] if k in h),
         " ".join("%d..%d:%d" % (s["low"], s["high"], s["count"]) for s in h.get("slots", [])
                  if s["count"])))


class Checker:
    """Collects every failed check, so one run reports all its discrepancies at once."""

    def __init__(self, report, truth):
        self.report = report
        self.truth = truth
        self.errors = []
        self.lines = []

    def check(self, ok, what, quiet=False):
        if not (ok and quiet):
            self.lines.append(("ok    " if ok else "FAIL  ") + what)
        if not ok:
            self.errors.append(what)
        return ok

    def find(self, kind, label, metric):
        hs = [h for h in self.report.get("histograms", [])
              if h.get("kind") == kind and h.get("label") == label and h.get("metric") == metric]
        self.check(len(hs) == 1, "%s %s %s: %d histogram(s) (want 1)" % (kind, label, metric,
                                                                          len(hs)))
        return hs[0] if hs else None

    def expected(self, kind, label, metric):
        for e in self.truth["expect"]:
            if (e["kind"], e["label"], e["metric"]) == (kind, label, metric):
                return e
        raise KeyError((kind, label, metric))

    def consistent(self, h, name):
        """count = the sum of the slots, slots are log2 and ordered, per 'none' keys null."""
        if h is None:
            return
        slots = [s for s in h.get("slots", [])]
        total = sum(s["count"] for s in slots)
        self.check(total == h.get("count"), "%s: slots add up to %d, count %s" % (
            name, total, h.get("count")), quiet=True)
        bad = [s for s in slots if not (s["low"] == 0 and s["high"] == 1 or
                                       s["low"] >= 2 and s["low"] & (s["low"] - 1) == 0 and
                                       s["high"] == 2 * s["low"] - 1)]
        self.check(not bad, "%s: slots are log2 [2^k, 2^(k+1)-1] (bad: %s)" % (name, bad),
                   quiet=True)
        lows = [s["low"] for s in slots]
        self.check(lows == sorted(lows) and len(set(lows)) == len(lows),
                   "%s: slots ascending, no duplicate" % name, quiet=True)
        self.percentiles(h, name)
        self.check(h.get("pid") is None and h.get("tid") is None and h.get("comm") is None,
                   "%s: pid/tid/comm null without --per-thread/--per-process (%s/%s/%s)" % (
                       name, h.get("pid"), h.get("tid"), h.get("comm")), quiet=True)

    def percentiles(self, h, name):
        """p50 <= p90 <= p99, each inside the slot that holds its rank (p% of count; at a
        slot edge either neighbour), as an interpolation inside log2 slots must be."""
        slots = [s for s in h.get("slots", []) if s["count"]]
        total = sum(s["count"] for s in slots)
        vals = [h.get(p) for p in ("p50", "p90", "p99")]
        if not total:
            return
        if not all(isinstance(v, (int, float)) for v in vals):
            self.check(False, "%s: percentiles %s are numbers" % (name, vals))
            return
        self.check(vals[0] <= vals[1] <= vals[2], "%s: p50 %s <= p90 %s <= p99 %s" % (
            name, vals[0], vals[1], vals[2]), quiet=True)
        for pct, v in zip((50, 90, 99), vals):
            rank, seen, ok = pct / 100.0 * total, 0, False
            for s in slots:
                if seen <= rank <= seen + s["count"] and s["low"] <= v <= s["high"] + 1:
                    ok = True
                seen += s["count"]
            self.check(ok, "%s: p%d = %s lies in the slot holding rank %.1f of %d" % (
                name, pct, v, rank, total), quiet=True)

    def time_slots(self, h, e, name, home, next_ok=True):
        """Most samples of h (MOSTLY) in slot `home` or, if next_ok, the next one, and per slot
        within SLOT_SLACK of the workload's own measurement e: a wait the workload itself saw
        stretched (preempted on a busy machine) may sit further out, in both."""
        if h is None:
            return
        got, want = slots_dict(h), slots_dict(e)
        allowed = {home, home * 2} if next_ok else {home}
        inside = sum(v for k, v in got.items() if k in allowed)
        total = h.get("count") or 0
        self.check(total and inside >= MOSTLY * total, "%s: %d of %d samples in %s (want >= "
                   "%d%%)" % (name, inside, total, " or ".join(
                       "%d..%d" % (k, 2 * k - 1) for k in sorted(allowed)), 100 * MOSTLY))
        self.slots_match(got, want, name)

    def slots_match(self, got, want, name):
        diff = {k: (got.get(k, 0), want.get(k, 0)) for k in set(got) | set(want)
                if abs(got.get(k, 0) - want.get(k, 0)) > SLOT_SLACK}
        self.check(not diff, "%s: slots match the workload's measurement within %d per slot "
                   "(pipeprof, workload: %s)" % (name, SLOT_SLACK, diff or "all close"))

    def finish(self, title):
        print("\n%s\n  %s" % (title, "\n  ".join(self.lines)))
        if self.errors:
            pytest.fail("%d check(s) failed:\n  %s" % (len(self.errors),
                                                       "\n  ".join(self.errors)),
                        pytrace=False)


def check_common(c, report, truth, pid):
    """Everything both runs share; api names come from the truth (runtime or driver)."""
    t = truth
    apis = t["apis"]
    n1, n5, n2, n3, n4 = t["n_launch"], t["n_sync"], t["n_h2d"], t["n_d2h"], t["n_async"]
    n6 = t["n_device_sync"]
    c.check(report.get("schema") == "pipeprof.hist/v1", "schema %r" % report.get("schema"))
    c.check(report.get("pid") == pid, "pid %s (want %d)" % (report.get("pid"), pid))
    c.check(report.get("per") == "none", "per %r (want 'none')" % report.get("per"))
    c.check(bool(re.match(r"^\d\d:\d\d:\d\d$", str(report.get("timestamp")))),
            "timestamp %r is HH:MM:SS" % report.get("timestamp"))
    interval = report.get("interval_s")
    c.check(isinstance(interval, (int, float)) and interval >= t["elapsed_s"],
            "interval_s %s covers the pattern (%.3f s)" % (interval, t["elapsed_s"]))

    lost = report.get("lost")
    c.check(isinstance(lost, dict), "a 'lost' object is present (%r)" % (lost,))
    nonzero = [(k, v) for k, v in lost_counters(lost or {}) if v]
    c.check(not nonzero, "every lost counter is zero (non-zero: %s; all: %s)" % (
        nonzero, json.dumps(lost, sort_keys=True)))

    hists = report.get("histograms") or []
    for h in hists:
        c.consistent(h, "%s %s %s" % (h.get("kind"), h.get("label"), h.get("metric")))
    c.check(True, "%d histograms: each one's slots are log2, ascending, add up to its count; "
            "p50 <= p90 <= p99, each in the slot of its rank; pid/tid/comm null" % len(hists))
    kinds = {h.get("kind") for h in hists}
    c.check(kinds <= {"gpu-sync", "launch", "memcpy"}, "only the kinds asked for (%s)" % kinds)

    # ---- gpu-sync ----
    want_sync = {apis["stream_sync"]: n5, apis["device_sync"]: n6}
    for key, n in (("copy_h2d", n2), ("copy_d2h", n3)):
        want_sync[apis[key]] = want_sync.get(apis[key], 0) + n
    got_sync = {h["label"]: h for h in hists if h.get("kind") == "gpu-sync"}
    c.check(set(got_sync) == set(want_sync),
            "gpu-sync labels %s (want exactly %s: no driver twin counted beside its runtime "
            "call, no call from before the attach)" % (sorted(got_sync), sorted(want_sync)))
    for label, n in sorted(want_sync.items()):
        h = c.find("gpu-sync", label, "latency")
        if h is None:
            continue
        c.check(h.get("unit") == "usecs", "gpu-sync %s unit %r" % (label, h.get("unit")))
        c.check(h.get("events") == n and h.get("count") == n,
                "gpu-sync %s: events %s count %s (want %d)" % (label, h.get("events"),
                                                                h.get("count"), n))
        e = c.expected("gpu-sync", label, "latency")
        c.lines.append("      pipeprof %s | workload sum=%s slots=%s" % (
            describe(h), e["sum"], slots_dict(e)))
    ss = got_sync.get(apis["stream_sync"])
    if ss is not None:
        kus = t["kernel_us"]
        home = 1 << (kus.bit_length() - 1)
        c.time_slots(ss, c.expected("gpu-sync", apis["stream_sync"], "latency"),
                     "gpu-sync %s (%d us waits)" % (apis["stream_sync"], kus), home)
        v = ss.get("p50")
        c.check(isinstance(v, (int, float)) and home <= v <= 4 * home,
                "gpu-sync %s p50 = %s within %d..%d" % (apis["stream_sync"], v, home, 4 * home))
        e = c.expected("gpu-sync", apis["stream_sync"], "latency")
        s = ss.get("sum")
        c.check(isinstance(s, (int, float)) and 0.9 * e["sum"] <= s <= 1.05 * e["sum"] + 100,
                "gpu-sync %s sum %s usecs vs the workload's %d (0.9x..1.05x)" % (
                    apis["stream_sync"], s, e["sum"]))

    # ---- launch ----
    got_launch = {h["label"]: h for h in hists if h.get("kind") == "launch"}
    c.check(set(got_launch) == {apis["launch"]},
            "launch labels %s (want only %s: the nested launch counted once)" % (
                sorted(got_launch), apis["launch"]))
    lh = c.find("launch", apis["launch"], "gap")
    if lh is not None:
        want_n = t["launches"]
        c.check(want_n == n1 + n5, "the workload launched N1 + N5 = %d kernels (%d)" % (
            n1 + n5, want_n))
        c.check(lh.get("events") == want_n, "launch %s: events %s (want %d = %d paced + %d "
                "before syncs)" % (apis["launch"], lh.get("events"), want_n, n1, n5))
        c.check(lh.get("count") == want_n - 1, "launch %s: count %s gaps (want %d)" % (
            apis["launch"], lh.get("count"), want_n - 1))
        c.check(lh.get("unit") == "usecs", "launch unit %r" % lh.get("unit"))
        e = c.expected("launch", apis["launch"], "gap")
        c.lines.append("      pipeprof %s | workload sum=%s slots=%s" % (
            describe(lh), e["sum"], slots_dict(e)))
        got = slots_dict(lh)
        paced = 1 << (int(t["gap_us"]).bit_length() - 1)
        slow = 1 << (t["kernel_us"].bit_length() - 1)
        c.check(got.get(paced, 0) >= MOSTLY * (n1 - 1),
                "launch: %d gaps in %d..%d, where the %d paced ones (~%d us) go (want >= %d%%)"
                % (got.get(paced, 0), paced, 2 * paced - 1, n1 - 1, t["gap_us"], 100 * MOSTLY))
        c.check(got.get(slow, 0) >= MOSTLY * n5,
                "launch: %d gaps in %d..%d, where the %d around a %d us sync go (want >= %d%%)"
                % (got.get(slow, 0), slow, 2 * slow - 1, n5, t["kernel_us"], 100 * MOSTLY))
        c.slots_match(got, slots_dict(e), "launch gaps")
        rate, iv = lh.get("rate_per_s"), report.get("interval_s")
        if isinstance(rate, (int, float)) and isinstance(iv, (int, float)) and iv > 0:
            c.check(abs(rate - want_n / iv) <= 0.02 * want_n / iv + 0.01,
                    "launch rate_per_s %s = events / interval_s (%.3f)" % (rate, want_n / iv))
        else:
            c.check(False, "launch rate_per_s %r with interval_s %r" % (rate, iv))

    # ---- memcpy ----
    got_copy = {(h["label"], h["metric"]) for h in hists if h.get("kind") == "memcpy"}
    want_copy = {("HtoD", "bytes"), ("HtoD", "throughput"), ("DtoH", "bytes"),
                 ("DtoH", "throughput")}
    c.check(got_copy == want_copy, "memcpy histograms %s (want exactly %s)" % (
        sorted(got_copy), sorted(want_copy)))
    for label, n_sync, n_async, sync_b, async_b in (
            ("HtoD", n2, n4, t["h2d_bytes"], t["async_bytes"]),
            ("DtoH", n3, 0, t["d2h_bytes"], 0)):
        b = c.find("memcpy", label, "bytes")
        if b is not None:
            want_slots = {}
            for n, size in ((n_sync, sync_b), (n_async, async_b)):
                if n:
                    low = 1 << (size.bit_length() - 1)
                    want_slots[low] = want_slots.get(low, 0) + n
            c.check(b.get("unit") == "bytes", "memcpy %s bytes unit %r" % (label, b.get("unit")))
            c.check(b.get("events") == n_sync + n_async and b.get("count") == n_sync + n_async,
                    "memcpy %s bytes: events %s count %s (want %d = %d sync + %d async)" % (
                        label, b.get("events"), b.get("count"), n_sync + n_async, n_sync,
                        n_async))
            c.check(slots_dict(b) == want_slots, "memcpy %s bytes: slots %s (want %s)" % (
                label, slots_dict(b), want_slots))
            want_sum = n_sync * sync_b + n_async * async_b
            c.check(b.get("sum") == want_sum, "memcpy %s bytes: sum %s (want %d)" % (
                label, b.get("sum"), want_sum))
        r = c.find("memcpy", label, "throughput")
        if r is not None:
            e = c.expected("memcpy", label, "throughput")
            c.lines.append("      pipeprof %s | workload aggregate %s MB/s slots=%s" % (
                describe(r), e["aggregate_mb_s"], slots_dict(e)))
            c.check(r.get("unit") == "MB/s", "memcpy %s throughput unit %r" % (label,
                                                                              r.get("unit")))
            c.check(r.get("events") == n_sync and r.get("count") == n_sync,
                    "memcpy %s throughput: events %s count %s (want %d: synchronous copies "
                    "only)" % (label, r.get("events"), r.get("count"), n_sync))
            # The fake device moves 10 bytes/ns = 10000 MB/s and the call also memmoves on the
            # host first, so no copy can beat 10000 MB/s: every sample is below 16384.
            top = max([s["high"] for s in r.get("slots", []) if s["count"]] or [0])
            c.check(0 < top <= 16383, "memcpy %s throughput: highest slot ends at %d "
                    "(<= 16383: the fake GPU does 10000 MB/s at most)" % (label, top))
            agg = r.get("aggregate_mb_s")
            c.check(isinstance(agg, (int, float)) and 0.5 * e["aggregate_mb_s"] <= agg <= 10000,
                    "memcpy %s aggregate_mb_s %s (workload's view %s; at most 10000)" % (
                        label, agg, e["aggregate_mb_s"]))
    return c


def test_hist_gpu_runtime(hist_bin, fakecuda, procs, tmp_path):
    """Runtime API: labels are the runtime's, nested driver calls never counted again."""
    stats = str(tmp_path / "fakecuda-stats.json")
    env = dict(os.environ, FAKECUDA_STATS=stats)
    (report,), truth, info = run_hist(procs, tmp_path, ["--lib", fakecuda], env=env)
    c = Checker(report, truth)
    c.check({"libcudart.so.13", "libcuda.so.1"} <= info["maps"],
            "the workload maps libcudart.so.13 and libcuda.so.1")
    c.check(truth["apis"]["launch"] == "cudaLaunchKernel", "runtime mode")
    check_common(c, report, truth, info["pid"])

    # The workload's own count of what it called is the fake runtime's.
    try:
        with open(stats) as f:
            st = json.load(f)
    except (OSError, ValueError) as e:
        st = {}
        c.check(False, "FAKECUDA_STATS file %s readable (%s)" % (stats, e))
    want = {}
    for part in ("setup_calls", "warmup_calls", "pattern_calls"):
        for k, v in truth[part].items():
            want[k] = want.get(k, 0) + v
    got = {k: v["calls"] for k, v in st.items() if v["calls"]}
    if st:
        c.check(got == want, "FAKECUDA_STATS calls %s == the workload's setup + warm-up + "
                "pattern %s" % (got, want))
    c.finish("runtime API run (pid %d)" % info["pid"])


def test_hist_gpu_driver_only(hist_bin, fakecuda, procs, tmp_path):
    """Driver API only, no libcudart mapped: cuLaunchKernel and friends under their names."""
    driver = os.path.join(os.path.dirname(fakecuda), "libcuda.so.1")
    (report,), truth, info = run_hist(procs, tmp_path,
                                      ["--driver-only", "--driver-lib", driver])
    c = Checker(report, truth)
    c.check("libcuda.so.1" in info["maps"], "the workload maps libcuda.so.1")
    c.check(not any("cudart" in m for m in info["maps"]),
            "the workload maps no libcudart (%s)" % sorted(m for m in info["maps"] if "cud" in m))
    c.check(truth["apis"]["launch"] == "cuLaunchKernel", "driver mode")
    check_common(c, report, truth, info["pid"])
    c.finish("driver-only run (pid %d)" % info["pid"])


def test_hist_gpu_intervals_per_thread(hist_bin, fakecuda, procs, tmp_path):
    """`-L ... 1 3`: three 1-second JSON objects, histograms keyed by the workload's thread.
    The pattern is released 0.8 s into the first interval so it straddles the first boundary;
    summed over the intervals, every call is there exactly once and no launch gap is lost."""
    reports, truth, info = run_hist(procs, tmp_path, ["--lib", fakecuda], hist_args=["-L"],
                                    interval=1, count=3, go_delay=0.8)
    pid, tid = info["pid"], truth["tid"]
    c = Checker({"histograms": []}, truth)
    t, apis = truth, truth["apis"]
    merged = {}
    per_interval = []
    for i, r in enumerate(reports):
        c.check(r.get("schema") == "pipeprof.hist/v1" and r.get("pid") == pid and
                r.get("per") == "thread", "interval %d: schema %r pid %s per %r" % (
                    i, r.get("schema"), r.get("pid"), r.get("per")), quiet=True)
        iv = r.get("interval_s")
        c.check(isinstance(iv, (int, float)) and 0.9 <= iv <= 1.5,
                "interval %d: interval_s %s (want ~1)" % (i, iv), quiet=True)
        nonzero = [(k, v) for k, v in lost_counters(r.get("lost") or {}) if v]
        c.check(isinstance(r.get("lost"), dict) and not nonzero,
                "interval %d: lost counters all zero (%s)" % (i, r.get("lost")), quiet=True)
        seen = {}
        for h in r.get("histograms") or []:
            key = (h.get("kind"), h.get("label"), h.get("metric"))
            name = "interval %d %s %s %s" % ((i,) + key)
            c.check(h.get("pid") == pid and h.get("tid") == tid and h.get("comm") == "python3",
                    "%s: pid/tid/comm %s/%s/%r (want %d/%d/'python3')" % (
                        name, h.get("pid"), h.get("tid"), h.get("comm"), pid, tid), quiet=True)
            c.check(sum(s["count"] for s in h.get("slots", [])) == h.get("count"),
                    "%s: slots add up to count %s" % (name, h.get("count")), quiet=True)
            m = merged.setdefault(key, {"events": 0, "count": 0, "sum": 0, "slots": {}})
            for f in ("events", "count"):
                m[f] += h.get(f) or 0
            m["sum"] += h.get("sum") or 0
            for s in h.get("slots", []):
                m["slots"][s["low"]] = m["slots"].get(s["low"], 0) + s["count"]
            seen[key] = h.get("events")
        per_interval.append(seen)
    c.check(True, "%d intervals: schema, pid, per 'thread', interval_s ~1 s, lost zero; every "
            "histogram keyed pid %d tid %d comm 'python3'" % (len(reports), pid, tid))
    c.lines.append("      events per interval: %s" % "; ".join(
        ", ".join("%s/%s/%s=%s" % (k + (v,)) for k, v in sorted(d.items())) or "none"
        for d in per_interval))
    for m in merged.values():
        m["slots"] = {k: v for k, v in m["slots"].items() if v}

    def get(kind, label, metric):
        m = merged.get((kind, label, metric))
        c.check(m is not None, "%s %s %s present" % (kind, label, metric), quiet=True)
        return m or {"events": None, "count": None, "sum": None, "slots": {}}

    want_sync = {apis["stream_sync"]: t["n_sync"], apis["device_sync"]: t["n_device_sync"],
                 apis["copy_h2d"]: t["n_h2d"] + t["n_d2h"]}
    got_sync = sorted(k[1] for k in merged if k[0] == "gpu-sync")
    c.check(got_sync == sorted(want_sync), "gpu-sync labels %s (want %s)" % (
        got_sync, sorted(want_sync)))
    for label, n in sorted(want_sync.items()):
        m = get("gpu-sync", label, "latency")
        c.check(m["events"] == n and m["count"] == n,
                "gpu-sync %s over the intervals: events %s count %s (want %d)" % (
                    label, m["events"], m["count"], n))
    m = get("gpu-sync", apis["stream_sync"], "latency")
    c.slots_match(m["slots"], slots_dict(c.expected("gpu-sync", apis["stream_sync"],
                                                     "latency")),
                  "gpu-sync %s over the intervals" % apis["stream_sync"])
    m = get("launch", apis["launch"], "gap")
    c.check(m["events"] == t["launches"] and m["count"] == t["launches"] - 1,
            "launch %s over the intervals: events %s count %s (want %d and %d: a gap across "
            "an interval boundary is counted once, in the later interval)" % (
                apis["launch"], m["events"], m["count"], t["launches"], t["launches"] - 1))
    c.slots_match(m["slots"], slots_dict(c.expected("launch", apis["launch"], "gap")),
                  "launch gaps over the intervals")
    for label, metric in (("HtoD", "bytes"), ("DtoH", "bytes"), ("HtoD", "throughput"),
                          ("DtoH", "throughput")):
        e = c.expected("memcpy", label, metric)
        m = get("memcpy", label, metric)
        c.check(m["events"] == e["events"] and m["count"] == e["count"],
                "memcpy %s %s over the intervals: events %s count %s (want %d)" % (
                    label, metric, m["events"], m["count"], e["events"]))
        if metric == "bytes":
            c.check(m["slots"] == slots_dict(e) and m["sum"] == e["sum"],
                    "memcpy %s bytes over the intervals: slots %s sum %s (want %s, %d)" % (
                        label, m["slots"], m["sum"], slots_dict(e), e["sum"]))
    c.finish("intervals, per thread (pid %d tid %d)" % (pid, tid))
