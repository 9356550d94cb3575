# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""`pipeprof daemon`'s NCCL series (pipeprof_job_nccl_{calls,bytes,unsized_calls,seconds}_total),
held against a rank whose every NCCL call is known: tools/workloads/nccl_job.py on the fake
libnccl.so.2 (test_nccl.py checks the same calls in `pipeprof -p`'s report).

The daemon reads nccl_stats (cumulative since the attach) at each window's close and serves
that reading until the next window; its window report holds that window's calls. So every
scrape must equal the sum of the job's window reports (polled alongside) up to one window, and
so names a window end. Between two such scrapes the counts grew by the calls whose return the BPF program saw
between the two readings; each reading comes after its window's end_ns (by the time the
daemon takes to close the window, at most READ_SLACK_S) and the job makes its calls one at a
time on one thread, so what grew is a contiguous run of the job's calls (in the truth file's
order) that starts at the first call still running or begun by end_a and ends likewise at
end_b. A reading takes the APIs one after the other: a call that returns in between puts one
API one call ahead of the others, so one API may have one call more than that run and one
one call fewer.
Per API the bytes are then its calls of known size times its one call size, and no AllGather
is unsized (each step makes a fresh communicator, seen at its creation).

Also: the series never go down between scrapes; the exposition is valid (this module's parser
and promtool); a job that maps no libnccl (the fake libcuda only), or one whose libnccl has
nothing to probe, has no NCCL series.
"""
import json
import time

from conftest import finish_workload, save_result
from test_daemon import (ALLOWED_LABELS, ATTACH_S, FAKE_CUDA, http_get, parse_exposition,
                         promtool_accepts, scrape, start_job_workload, start_lib_job)
# test_daemon's fixtures: its daemons, the jobs' python, and its preconditions (autouse)
from test_daemon import daemons, job_python, nccl_lib, preconditions  # noqa: F401

WINDOW_S = 2
# How long after a window's end_ns the daemon may read the maps: it first waits for BPF
# programs in flight (membarrier) and classifies the window's threads.
READ_SLACK_S = 1.5
# Distinct windows the scrapes must land on (the first is the attach's, with calls made before
# READY, which the truth does not hold: it is not compared).
WINDOWS = 5
POLL_S = 0.25
FAMILIES = {"calls": "pipeprof_job_nccl_calls_total", "bytes": "pipeprof_job_nccl_bytes_total",
            "unsized": "pipeprof_job_nccl_unsized_calls_total",
            "seconds": "pipeprof_job_nccl_seconds_total"}
APIS = ("ncclAllReduce", "ncclAllGather", "ncclReduceScatter", "ncclBroadcast", "ncclReduce",
        "ncclSend", "ncclRecv", "ncclGroupStart", "ncclGroupEnd")
GROUP = ("ncclGroupStart", "ncclGroupEnd")
BLOCKING = ("ncclAllReduce", "ncclAllGather", "ncclReduceScatter", "ncclBroadcast",
            "ncclReduce", "ncclGroupEnd")


def nccl_of_scrape(samples, pid):
    """{api: {calls, bytes, unsized, seconds}} of one job in one scrape (fields it has)."""
    out = {}
    for key, fam in FAMILIES.items():
        for name, labels, v in samples:
            if name == fam and labels.get("pid") == str(pid):
                out.setdefault(labels["op"], {})[key] = v
    return out


def nccl_of_report(report):
    got = {c["name"]: c for c in report["nccl"]["calls"]}
    out = {}
    for api in APIS:
        c = got.get(api, {"calls": 0, "bytes": 0, "unsized_calls": 0, "total_ns": 0})
        out[api] = {"calls": c["calls"], "bytes": c["bytes"], "unsized": c["unsized_calls"],
                    "total_ns": c["total_ns"]}
    return out


def add_counts(a, b, sign=1):
    return {api: {k: a[api][k] + sign * b[api][k] for k in a[api]} for api in APIS}


def readings_of(reports, scrapes):
    """The cumulative reading behind each window's report. A window's report holds that
    window's calls; the metrics, every call since the attach. Summed in order from the first
    report polled, plus what came before it (the offset that makes the first scrape one of
    them): {end_ns: reading}, or a problem. Polled 8 times a window, no window is missed; a
    gap says one was."""
    ends = sorted(reports)
    for a, b in zip(ends, ends[1:]):
        if b - a > 1.6 * WINDOW_S * 1e9:
            return None, "no report polled between the windows ending %.3f and %.3f s" % (
                a / 1e9, b / 1e9)
    cum, run = {}, {api: {"calls": 0, "bytes": 0, "unsized": 0, "total_ns": 0} for api in APIS}
    for e in ends:
        run = add_counts(run, reports[e])
        cum[e] = run
    first = scrapes[0][2]
    first = {api: {"calls": int(first.get(api, {}).get("calls", 0)),
                   "bytes": int(first.get(api, {}).get("bytes", 0)),
                   "unsized": int(first.get(api, {}).get("unsized", 0)),
                   "total_ns": round(first.get(api, {}).get("seconds", 0) * 1e9)}
             for api in APIS}
    for e in ends:
        offset = add_counts(first, cum[e], -1)
        if any(v < 0 for api in APIS for v in offset[api].values()):
            continue
        readings = {x: add_counts(cum[x], offset) for x in ends}
        if all(any(same_counts(sc[2], r) for r in readings.values()) for sc in scrapes):
            return readings, None
    return None, "no offset makes every scrape a sum of window reports: first scrape %s, " \
        "reports %s" % (first["ncclAllReduce"], {e: reports[e]["ncclAllReduce"] for e in ends})


def same_counts(scraped, reported):
    for api in APIS:
        s, r = scraped.get(api, {}), reported[api]
        if s.get("calls") != r["calls"] or round(s.get("seconds", -1) * 1e9) != r["total_ns"]:
            return False
        if api not in GROUP and (s.get("bytes") != r["bytes"] or
                                 s.get("unsized") != r["unsized"]):
            return False
    return True


def check_delta(calls, end_a, end_b, a, b):
    """Problems with what grew between the readings of the windows ending at end_a and end_b
    (a and b: nccl_of_report's of each), as lines; and the run that matched."""
    slack = int(READ_SLACK_S * 1e9)
    delta = {api: {k: b[api][k] - a[api][k] for k in ("calls", "bytes", "unsized", "total_ns")}
             for api in APIS}
    n = len(calls)
    prefix = [dict.fromkeys(APIS, 0)]
    for c in calls:
        p = dict(prefix[-1])
        p[c[0]] += 1
        prefix.append(p)

    def cuts(end):
        # The first call not counted at the reading: returned after end (the reading comes
        # after end), and the one before it began by end + slack.
        return [i for i in range(1, n) if calls[i][2] > end and calls[i - 1][1] <= end + slack]

    if not calls or calls[0][2] >= end_a or calls[-1][1] <= end_b + slack:
        return ["the truth does not cover the windows ending %d and %d" % (end_a, end_b)], None
    starts, stops = cuts(end_a), cuts(end_b)
    if not starts or not stops:
        return ["the truth does not cover the windows ending %d and %d" % (end_a, end_b)], None
    total = sum(delta[api]["calls"] for api in APIS)
    best = None
    stops_set = set(stops)
    for i in starts:
        for j in range(i + total - 2, i + total + 3):
            if j not in stops_set:
                continue
            dev = [delta[api]["calls"] - (prefix[j][api] - prefix[i][api]) for api in APIS]
            # One API ahead at each reading: at most one +1 (at end_b) and one -1 (at end_a).
            score = (max(abs(x) for x in dev), max(dev.count(1), dev.count(-1)))
            if best is None or score < best[0]:
                best = (score, i, j, dev)
    problems = []
    if best is None or best[0] > (1, 1):
        return ["calls %s are no run of the job's calls between %.3f s and %.3f s (nearest: "
                "%s)" % ({k: v["calls"] for k, v in delta.items()}, end_a / 1e9, end_b / 1e9,
                         best and dict(zip(APIS, best[3])))], None
    _, i, j, _ = best
    run = calls[i:j]
    for api in APIS:
        d = delta[api]
        mine = [c for c in calls if c[0] == api]
        size = {c[3] for c in mine}
        if len(size) != 1:
            problems.append("%s: the workload's calls have several sizes %s" % (api, size))
            continue
        size = size.pop()
        if d["unsized"] != 0:
            problems.append("%s: %d calls of unknown size on communicators made after the "
                            "attach" % (api, d["unsized"]))
        if d["bytes"] != (d["calls"] - d["unsized"]) * size:
            problems.append("%s: %d bytes over %d calls, not %d a call" % (
                api, d["bytes"], d["calls"], size))
        brackets = [c[2] - c[1] for c in run if c[0] == api]
        widest = max(c[2] - c[1] for c in mine)
        hi = sum(brackets) + widest
        lo = 0.85 * (sum(brackets) - widest)
        if d["total_ns"] > hi or (api in BLOCKING and d["total_ns"] < lo):
            problems.append("%s: %.4f s inside, the workload's brackets %.4f s" % (
                api, d["total_ns"] / 1e9, sum(brackets) / 1e9))
    return problems, (i, j)


def test_nccl_series_per_job_and_api(daemons, procs, job_python, nccl_lib, tmp_path):
    d = daemons(["--window", str(WINDOW_S)])
    # Two jobs without NCCL series: one maps libcuda only, one a libnccl.so.2 with no NCCL
    # symbol (the fake libcuda under that name: nothing to probe).
    other = start_lib_job(procs, job_python, FAKE_CUDA, seconds=60)
    empty = start_lib_job(procs, job_python, nccl_lib, seconds=60)
    truth_path = str(tmp_path / "truth.json")
    w, pid, _ = start_job_workload(procs, job_python, "nccl_job.py", truth_path, duration=120)
    m, _ = d.wait_line(r"\battached PID %d\b" % pid, ATTACH_S + 20)
    assert m, "the daemon did not attach to nccl_job.py (PID %d)\n%s" % (pid, d.log())
    for job in (other, empty):
        m, _ = d.wait_line(r"\battached PID %d\b" % job.p.pid, ATTACH_S + 20)
        assert m, "the daemon did not attach to %s (PID %d)\n%s" % (
            job.argv, job.p.pid, d.log())

    reports = {}        # end_ns -> nccl_of_report
    scrapes = []        # (text, samples, nccl_of_scrape)
    deadline = time.monotonic() + WINDOW_S * (WINDOWS + 4) + 30
    while time.monotonic() < deadline:
        status, _, body = http_get(d.port, "/api/v1/report?pid=%d" % pid)
        if status == 200:
            rep = json.loads(body)
            reports[rep["window"]["end_ns"]] = nccl_of_report(rep)
        text, _ = scrape(d.port)
        samples, types = parse_exposition(text)
        got = nccl_of_scrape(samples, pid)
        if got:
            scrapes.append((text, samples, got))
        status, _, body = http_get(d.port, "/api/v1/report?pid=%d" % pid)
        if status == 200:
            rep = json.loads(body)
            reports[rep["window"]["end_ns"]] = nccl_of_report(rep)
        if len(reports) >= WINDOWS + 1 and len(scrapes) >= WINDOWS:
            break
        time.sleep(POLL_S)
    # The last window's reading may come READ_SLACK_S after its end: the truth must go on.
    time.sleep(READ_SLACK_S + 0.5)
    assert w.alive(), "nccl_job.py exited early\n%s" % w.output()
    truth = finish_workload(w, truth_path)
    assert len(scrapes) >= 2, "%d scrapes with NCCL series\n%s" % (len(scrapes), d.log())

    # Valid exposition: this module's parser took every scrape; promtool the last.
    text, samples, _ = scrapes[-1]
    promtool_accepts(text, tmp_path)
    _, types = parse_exposition(text)
    for fam in FAMILIES.values():
        assert types.get(fam) == "counter", (fam, types.get(fam))
    for name, labels, _ in samples:
        assert set(labels) <= ALLOWED_LABELS, (name, labels)
        if name in FAMILIES.values():
            assert set(labels) == {"pid", "comm", "op"}, (name, labels)
            assert labels["op"] in APIS, labels
    # Each probed API has its series; the group calls move no bytes and have none.
    for _, _, got in scrapes:
        assert set(got) == set(APIS), sorted(got)
        for api in APIS:
            want = {"calls", "seconds"} | (set() if api in GROUP else {"bytes", "unsized"})
            assert set(got[api]) == want, (api, got[api])
    # No libnccl probed, no NCCL series; the jobs themselves are there.
    for job in (other, empty):
        assert [v for n, l, v in samples if n == "pipeprof_job_info" and
                l.get("pid") == str(job.p.pid)] == [1.0], job.argv
    stray = [(n, l) for n, l, _ in samples if n in FAMILIES.values() and l["pid"] != str(pid)]
    assert not stray, stray

    # Counters never go down, and they moved.
    for (_, _, a), (_, _, b) in zip(scrapes, scrapes[1:]):
        for api in APIS:
            for k in a[api]:
                assert b[api][k] >= a[api][k], (api, k, a[api][k], b[api][k])
    assert scrapes[-1][2]["ncclAllReduce"]["calls"] > scrapes[0][2]["ncclAllReduce"]["calls"]

    # Every scrape is one window's reading (the sum of the window reports up to it); what grew
    # between two is what the job did.
    reports, why = readings_of(reports, scrapes)
    assert reports, why
    ends = []
    for n, (_, _, got) in enumerate(scrapes):
        match = [e for e, r in reports.items() if same_counts(got, r)]
        assert match, "scrape %d matches no window reading:\n%s\nreadings: %s" % (
            n, got, {e: r["ncclAllReduce"] for e, r in reports.items()})
        ends.append(match[0])
    ends = sorted(set(ends))
    assert len(ends) >= 3, "scrapes landed on %d windows" % len(ends)
    calls = truth["extra"]["calls"]
    checked, problems, table = 0, [], []
    for end_a, end_b in zip(ends, ends[1:]):
        if not calls or end_a < calls[0][1]:
            continue        # the attach's window, or one before READY
        found, run = check_delta(calls, end_a, end_b, reports[end_a], reports[end_b])
        problems += ["windows ending %.3f..%.3f s: %s" % (end_a / 1e9, end_b / 1e9, p)
                     for p in found]
        checked += 1
        table.append({"from_s": end_a / 1e9, "to_s": end_b / 1e9,
                      "calls": {api: reports[end_b][api]["calls"] - reports[end_a][api]["calls"]
                                for api in APIS},
                      "run": run})
    sample = [line for line in text.splitlines() if "nccl" in line and not line.startswith("#")
              and 'pid="%d"' % pid in line]
    print("\n%d scrapes over %d windows, %d intervals checked; last scrape:\n%s" % (
        len(scrapes), len(ends), checked, "\n".join(sample)))
    save_result("daemon_nccl", {"intervals": table, "metrics": sample, "table": "\n".join(
        ["daemon_nccl: calls per interval between scrapes (AllReduce, GroupEnd)"] +
        ["  %.3f..%.3f s: %d, %d" % (x["from_s"], x["to_s"], x["calls"]["ncclAllReduce"],
                                     x["calls"]["ncclGroupEnd"]) for x in table])})
    assert checked >= 2, "only %d intervals after READY" % checked
    assert not problems, "\n".join(problems)
