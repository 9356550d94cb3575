# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""pipeprof against the four newer labelled workloads, checked as test_scenarios.py checks its
own (its check_attaches and run_attach_scenario): each workload is started once and attached
ATTACHES times; every attach must give the scenario's verdict and every state of the trainer
within 5 points of the workload's truth (plus that attach's steal), and its evidence:

- thread_loader.py: DATA-LOADING BOUND (thread loader); the thread waited on most
  (waited_on[0]) and the verdict's waited_on are the producer thread (READY extra producer_tid),
  a HELPER;
- ddp_gloo.py --slow-ms 25 (a launcher relaying rank 0's READY; pipeprof attaches to rank 0):
  COMMUNICATION BOUND; the top waker's causes include COMM_WAIT; extra peer_pid names rank 1;
- the same with --no-rank-env (rank 0 traced alone, told its rank and rendezvous on its command
  line, nothing in its environment): still COMMUNICATION BOUND, known as a rank by its
  connection to its sibling, rank 1 (else what the network delivers would be data);
- mmap_io.py: I/O BOUND; the verdict line names IO_WAIT;
- lock_holder.py: WAITING ON A THREAD; the verdict's waited_on is the lock holder (extra
  holder_tid);
- net_loader.py, a job of one trainer fed over TCP by a sample server outside the job, read by
  a thread of the trainer's process (--mode thread) or by the trainer itself (--mode main):
  DATA-LOADING BOUND, not COMMUNICATION BOUND (no rank, no collective), with no COMM_WAIT; the
  waits ended by the reader thread (READY extra reader_tid) or by network receives; the advice
  is about data over the network (network_data), none about stragglers or DDP; --mode workers
  (a DataLoader whose workers each read a connection): the workers wait on the network, and the
  advice is network_data, not the hand-off's (ipc_collate); --transport unix (the server, a
  data service outside the job, behind a Unix socket): NO DOMINANT STALL (a stranger's wakeup
  has no cause in the model), and outside_waker names the server's pid;
- shell_step.py, a loop that runs `sleep` each step and waits for it: NO DOMINANT STALL, not
  DATA-LOADING BOUND (a child's exit delivers no batch), and waits_on_children says so.

Every one also checks the verdict's contract: 'stalls' (each >= 10% of the trainer's time, the
trainer's own fraction, largest first, the scenario's stall first), 'near_threshold' (a bool),
'line' (the text verdict line) and 'waited_on', and the report's waited_on list
(test_scenarios.waited_on_entries). A workload file that does not exist fails its test.
"""
import pytest

from test_scenarios import (ATTACHES, STATES, describe_waker, run_attach_scenario,
                            trainer_fractions, waited_on_entries)

STALL_MIN = 0.10  # the verdict's stalls: every stall state >= 10% of the trainer's time


def _extra(truth, key):
    """The workload's READY extra info `key`, or None."""
    return (truth.get("extra") or {}).get(key)


def verdict_contract(stall):
    """The verdict object's new fields, with `stall` the largest stall of the scenario."""

    def check(report, truth, window):
        v = report.get("verdict") or {}
        problems = []
        stalls = v.get("stalls")
        got = trainer_fractions(report)
        if stall is None:
            if stalls != []:
                problems.append("verdict.stalls is %r, want [] (no stall the model names)" % (
                    stalls,))
        elif not isinstance(stalls, list) or not stalls:
            problems.append("verdict.stalls is %r, want a non-empty list" % (stalls,))
        else:
            fr = []
            for st in stalls:
                if not isinstance(st, dict) or st.get("state") not in STATES or \
                        not isinstance(st.get("fraction"), (int, float)) or \
                        not isinstance(st.get("near_threshold"), bool):
                    problems.append("verdict.stalls entry %r is not {'state','fraction',"
                                    "'near_threshold'}" % (st,))
                    continue
                fr.append(st["fraction"])
                if st["fraction"] < STALL_MIN - 1e-9:
                    problems.append("stall %s at %.3f < %.2f" % (st["state"], st["fraction"],
                                                                 STALL_MIN))
                if abs(st["fraction"] - got[st["state"]]) > 0.005:
                    problems.append("stall %s at %.3f, but the trainer's %s is %.3f" % (
                        st["state"], st["fraction"], st["state"], got[st["state"]]))
            if fr != sorted(fr, reverse=True):
                problems.append("verdict.stalls not largest first: %s" % fr)
            if isinstance(stalls[0], dict) and stalls[0].get("state") != stall:
                problems.append("largest stall %r, want %s" % (stalls[0].get("state"), stall))
        if not isinstance(v.get("near_threshold"), bool):
            problems.append("verdict.near_threshold is %r, want a bool" % (
                v.get("near_threshold"),))
        if not isinstance(v.get("line"), str) or not v.get("line"):
            problems.append("verdict.line is %r, want the text verdict line" % (v.get("line"),))
        if "waited_on" not in v:
            problems.append("verdict has no 'waited_on' (null or {'tid','pid','comm'})")
        _, why = waited_on_entries(report)
        if why:
            problems.append("waited_on: %s" % why)
        if problems:
            return False, "verdict contract: " + "; ".join(problems)
        return True, "verdict contract: stalls %s, near_threshold %s, line %r" % (
            ["%s %.3f" % (s["state"], s["fraction"]) for s in stalls], v["near_threshold"],
            v["line"])

    return check


def verdict_waits_on(key):
    """The verdict's waited_on names the thread of READY extra `key`."""

    def check(report, truth, window):
        want = _extra(truth, key)
        if not isinstance(want, int):
            return False, "the workload's truth has no %s in its extra info (%r)" % (
                key, truth.get("extra"))
        vw = (report.get("verdict") or {}).get("waited_on")
        if not isinstance(vw, dict):
            return False, "verdict.waited_on is %r, want the %s %d" % (vw, key, want)
        return vw.get("tid") == want, "verdict.waited_on: tid %s pid %s comm %r (want tid %d, " \
            "the %s)" % (vw.get("tid"), vw.get("pid"), vw.get("comm"), want, key)

    return check


def top_waker_is_producer(report, truth, window):
    """waited_on[0] is the producer thread (READY extra producer_tid), role HELPER."""
    want = _extra(truth, "producer_tid")
    if not isinstance(want, int):
        return False, "the workload's truth has no producer_tid in its extra info (%r)" % (
            truth.get("extra"),)
    wo, why = waited_on_entries(report)
    if why:
        return False, "waited_on: %s" % why
    ok = wo[0]["tid"] == want and wo[0]["role"] == "HELPER"
    return ok, "waited_on[0]: %s (want tid %d, the producer, role HELPER)" % (
        describe_waker(wo[0]), want)


def top_waker_ended_comm(report, truth, window):
    """The top waker's causes include COMM_WAIT; the truth names rank 1 (peer_pid)."""
    peer = _extra(truth, "peer_pid")
    if not isinstance(peer, int) or peer == truth.get("pid"):
        return False, "the workload's truth has no peer_pid (rank 1) in its extra info (%r)" % (
            truth.get("extra"),)
    wo, why = waited_on_entries(report)
    if why:
        return False, "waited_on: %s" % why
    causes = wo[0].get("causes") or {}
    return causes.get("COMM_WAIT", 0) > 0, "waited_on[0]: %s (want COMM_WAIT among its " \
        "causes; rank 1 is pid %d)" % (describe_waker(wo[0]), peer)


def line_names_io_wait(report, truth, window):
    line = (report.get("verdict") or {}).get("line")
    return isinstance(line, str) and "IO_WAIT" in line, \
        "verdict.line %r (want it to name IO_WAIT)" % (line,)


def data_over_network(via):
    """The trainer's data waits ended by network receives ("net") or by the thread that read
    them (READY extra reader_tid); the advice is network_data and nothing about collectives."""

    def check(report, truth, window):
        wo, why = waited_on_entries(report)
        if why:
            return False, "waited_on: %s" % why
        if via == "net":
            ok = wo[0].get("role") == "INTERRUPT" and "NET_RX" in (wo[0].get("comm") or "")
        else:
            ok = wo[0]["tid"] == _extra(truth, "reader_tid")
        ok = ok and (wo[0].get("causes") or {}).get("DATA_WAIT", 0) > 0
        ids = [r.get("id") for r in report.get("recommendations") or []]
        comm = ((report.get("trainer") or {}).get("states") or {}).get("COMM_WAIT")
        ok = ok and "network_data" in ids and not {"find_straggler", "overlap_comm"} & set(ids)
        return ok, "waited_on[0]: %s (want %s); recommendations %s; trainer COMM_WAIT %r" % (
            describe_waker(wo[0]), "a network receive" if via == "net" else
            "the reader thread %s" % _extra(truth, "reader_tid"), ids, comm)

    return check


def advice_names(rec_id, key=None):
    """The advice rec_id is given, naming the process of READY extra `key` when given."""

    def check(report, truth, window):
        recs = {r.get("id"): r for r in report.get("recommendations") or []}
        r = recs.get(rec_id)
        want = _extra(truth, key) if key else None
        ok = r is not None and (not key or (isinstance(want, int) and
                                            "process %d," % want in (r.get("text") or "")))
        bad = {"more_workers", "ipc_collate", "persistent_workers", "network_data",
               "find_straggler"} & set(recs)
        return ok and not bad, "recommendations %s; %s: %r (want it%s), none of %s" % (
            list(recs), rec_id, (r or {}).get("text"), " to name process %s" % want if key
            else "", sorted(bad))

    return check


def workers_wait_on_network(report, truth, window):
    """DataLoader workers each reading a connection: they wait on the network most of their
    time, and the advice is about that (network_data), not the hand-off (ipc_collate) nor
    collectives."""
    states = ((report.get("evidence") or {}).get("worker_loops") or {}).get("states") or {}
    net = sum((states.get(s) or {}).get("fraction", 0) for s in ("DATA_WAIT", "COMM_WAIT"))
    ids = [r.get("id") for r in report.get("recommendations") or []]
    ok = net >= 0.5 and "network_data" in ids and not \
        {"ipc_collate", "find_straggler", "overlap_comm"} & set(ids)
    return ok, "workers' network share %.3f (want >= 0.5); recommendations %s" % (net, ids)


# Rank 1's extra CPU per step, as tests/test_ranks.py runs it. With the workload's 9 ms, rank 0
# waited for ~9 ms beside ~10 ms of its own compute, a margin the host's CPUs can take away: in
# CI, rank 0 on a CPU slowed beside its pinned peer computed 80% of its time in two of five
# attaches, and its truth, as pipeprof, read COMM_WAIT 11-14% (CPU-BOUND).
DDP_STRAGGLER = ["--slow-ms", "25"]

# id: (script, args, expected verdict, largest stall, evidence checks)
NEW_SCENARIOS = {
    "thread_loader": ("thread_loader.py", [], "DATA-LOADING BOUND (thread loader)",
                      "THREAD_WAIT", [top_waker_is_producer, verdict_waits_on("producer_tid")]),
    "ddp_gloo": ("ddp_gloo.py", DDP_STRAGGLER, "COMMUNICATION BOUND", "COMM_WAIT",
                 [top_waker_ended_comm]),
    "ddp_gloo_no_env": ("ddp_gloo.py", DDP_STRAGGLER + ["--no-rank-env"], "COMMUNICATION BOUND",
                        "COMM_WAIT", [top_waker_ended_comm]),
    "mmap_io": ("mmap_io.py", [], "I/O BOUND", "IO_WAIT", [line_names_io_wait]),
    "lock_holder": ("lock_holder.py", [], "WAITING ON A THREAD", "THREAD_WAIT",
                    [verdict_waits_on("holder_tid")]),
    "net_loader_thread": ("net_loader.py", ["--mode", "thread"], "DATA-LOADING BOUND",
                          "DATA_WAIT", [data_over_network("thread")]),
    "net_loader_main": ("net_loader.py", ["--mode", "main"], "DATA-LOADING BOUND", "DATA_WAIT",
                        [data_over_network("net")]),
    "net_loader_workers": ("net_loader.py", ["--mode", "workers"], "DATA-LOADING BOUND",
                           "DATA_WAIT", [workers_wait_on_network]),
    "data_service_unix": ("net_loader.py", ["--mode", "main", "--transport", "unix"],
                          "NO DOMINANT STALL", None, [advice_names("outside_waker",
                                                                  "server_pid")]),
    "shell_step": ("shell_step.py", [], "NO DOMINANT STALL", None,
                   [advice_names("waits_on_children")]),
}


# Attaches more with one switch-in in three untraced: a reader thread whose own switch-in after
# a network receive went untraced was judged from the wait before and the time since it, its
# relay failed, and a third of the batches read THREAD_WAIT.
UNTRACED_ATTACHES = {"net_loader_thread": 2}


@pytest.mark.parametrize("name", list(NEW_SCENARIOS))
def test_new_scenario(name, procs, pipeprof_bin, tmp_path):
    """ATTACHES attaches to one running workload; each must be right."""
    script, args, verdict, stall, evidence = NEW_SCENARIOS[name]
    run_attach_scenario(name, procs, tmp_path, script, args, verdict,
                        [verdict_contract(stall)] + evidence, attaches=ATTACHES,
                        untraced=UNTRACED_ATTACHES.get(name, 0))
