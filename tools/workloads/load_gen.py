#!/usr/bin/python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Interrupt and timer load beside a traced job (stdlib only): for pipeprof's attach stress test.

Two sources of wakeups raised from interrupt context, so that pipeprof attaches while hard and
soft interrupts are running and wakes land on the traced CPUs from NET_RX and timer context:

- loopback TCP: a server and a client process on 127.0.0.1 (an ephemeral port) exchange small
  messages as fast as they can in both directions, --inflight messages in flight each way
  (loopback delivery runs in NET_RX softirq and wakes the blocked receiver from there);
- a timer-heavy sleeper process: time.sleep(--sleep-us) in a loop (an hrtimer interrupt per
  sleep).

Start it in its own session, NOT as a descendant of the traced job (pipeprof would count its
processes as DataLoader workers). Prints `READY pid=<pid> port=<port>` once traffic flows and
sleeps run, runs --duration seconds, and exits 0 on the deadline or on SIGTERM/SIGINT, printing
one line of rates: `load_gen: <messages/s> msgs/s each way, <sleeps/s> sleeps/s over <s> s`.

Unrestrained, the two TCP processes take ~1.4 of a 2-CPU machine's CPUs and a traced trainer
queues behind them (CPU contention); --sched-idle keeps the interrupts and the traffic but
lets every other task preempt the load.
"""
import argparse
import ctypes
import os
import signal
import socket
import sys
import time

MSG = b"m" * 64
PR_SET_PDEATHSIG = 1


def _die_with_parent():
    """Children get SIGKILL when the load_gen main process goes, whatever the reason."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass
    if os.getppid() == 1:
        os._exit(0)


def _recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("peer closed")
        buf += chunk
    return buf


def _pingpong(sock, inflight, first, report_fd):
    """Keeps `inflight` messages in flight each way: every message received is answered by one
    sent. The side with first=True primes the pipe. Counts messages received; on SIGTERM (or a
    closed peer) writes the count to report_fd and exits."""
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    count = [0]

    def stop(signum, frame):
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    try:
        if first:
            for _ in range(inflight):
                sock.sendall(MSG)
        while True:
            _recv_exact(sock, len(MSG))
            count[0] += 1
            sock.sendall(MSG)
    except (SystemExit, ConnectionError, OSError):
        pass
    finally:
        os.write(report_fd, b"%d\n" % count[0])
        os._exit(0)


def _sleeper(sleep_s, report_fd):
    count = [0]

    def stop(signum, frame):
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    try:
        sleep = time.sleep
        while True:
            sleep(sleep_s)
            count[0] += 1
    except SystemExit:
        pass
    finally:
        os.write(report_fd, b"%d\n" % count[0])
        os._exit(0)


def _fork(fn, *args):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        _die_with_parent()
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            fn(*args, w)
        finally:
            os._exit(0)
    os.close(w)
    return pid, r


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--duration", type=float, default=60.0,
                   help="seconds to run after READY (default %(default)s)")
    p.add_argument("--inflight", type=int, default=4,
                   help="messages in flight each way on the TCP connection (default %(default)s)")
    p.add_argument("--sleep-us", type=float, default=200.0,
                   help="the sleeper's sleep, microseconds (default %(default)s)")
    p.add_argument("--sched-idle", action="store_true",
                   help="run under SCHED_IDLE: the load still takes every idle moment of both "
                   "CPUs (and its interrupts land there), but a woken task of the traced job "
                   "preempts it at once instead of queueing behind it")
    p.add_argument("--tcp-cpu", type=int, default=None,
                   help="pin the TCP pair to this CPU: the network softirqs then land there, "
                   "and their kernel time (which SCHED_IDLE cannot preempt on a kernel built "
                   "without full preemption) stays off the other CPUs")
    p.add_argument("--no-tcp", action="store_true", help="no loopback traffic")
    p.add_argument("--no-sleeper", action="store_true", help="no timer sleeper")
    args = p.parse_args(argv)

    if args.sched_idle:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))  # children inherit it
    stopping = [False]

    def on_signal(signum, frame):
        stopping[0] = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    children = {}  # name -> (pid, read end of its report pipe)
    port = 0
    if not args.no_tcp:
        if args.tcp_cpu is not None:
            os.sched_setaffinity(0, {args.tcp_cpu})  # the TCP children inherit it
        lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        lsock.bind(("127.0.0.1", 0))
        lsock.listen(1)
        port = lsock.getsockname()[1]
        csock = socket.create_connection(("127.0.0.1", port))
        ssock, _ = lsock.accept()
        lsock.close()
        children["server"] = _fork(_pingpong, ssock, args.inflight, False)
        children["client"] = _fork(_pingpong, csock, args.inflight, True)
        ssock.close()
        csock.close()
    if not args.no_sleeper:
        if args.tcp_cpu is not None:
            os.sched_setaffinity(0, range(os.cpu_count()))  # the sleeper's timers on any CPU
        children["sleeper"] = _fork(_sleeper, args.sleep_us / 1e6)

    t0 = time.monotonic()
    sys.stdout.write("READY pid=%d port=%d\n" % (os.getpid(), port))
    sys.stdout.flush()
    deadline = t0 + args.duration
    while not stopping[0] and time.monotonic() < deadline:
        for name, (pid, _) in children.items():
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                sys.stderr.write("load_gen: %s exited early (status %d)\n" % (name, status))
                stopping[0] = True
        time.sleep(0.1)
    elapsed = time.monotonic() - t0

    counts = {}
    for name, (pid, r) in children.items():
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    for name, (pid, r) in children.items():
        with os.fdopen(r) as f:
            text = f.read().strip()
        counts[name] = int(text) if text.isdigit() else 0
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
    msgs = min(counts.get("server", 0), counts.get("client", 0))
    sys.stdout.write("load_gen: %.0f msgs/s each way, %.0f sleeps/s over %.1f s\n" % (
        msgs / elapsed if elapsed > 0 else 0, counts.get("sleeper", 0) / elapsed
        if elapsed > 0 else 0, elapsed))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
