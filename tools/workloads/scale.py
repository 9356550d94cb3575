#!/usr/bin/python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""A data-loading-bound job at scale (stdlib only): many worker processes, many threads, and a
fork storm on demand. For pipeprof's scale and fault tests (tests/test_scale.py).

The root process's main thread is the trainer. --workers processes are forked from it, each a
DataLoader-like worker: it waits for a request on its own pipe, sleeps --worker-sleep-ms (as
if reading the sample), spends --worker-ms of its thread CPU time on it and writes back a
--batch-bytes batch. The trainer keeps --prefetch requests outstanding per worker and takes the
batches round robin, as torch's DataLoader does: `with rec.seg('data')` around the read of the
next batch (CPU -> RUNNING, rest -> DATA_WAIT), then a --step-ms 'compute' segment that ends
with the next request to that worker. With the defaults (64 workers x (1000 ms + 1 ms) a batch,
~64 batches/s, against a 2 ms step) the trainer waits for data most of the time while the
workers use a few percent of a CPU: DATA-LOADING BOUND, unless other load keeps the trainer off
the CPU for longer (the truth's run_delay says).

Threads: the whole tree has exactly --threads threads. Each worker process runs its loop in its
main thread plus idle threads (blocked on an Event for good); the root has the trainer, a storm
thread and idle threads for the rest. The layout (every pid and its thread count, read back
from /proc once all are up, and the storm thread's tid) is printed before READY as
`LAYOUT {json}`.

Fork storm: on SIGUSR1 the storm thread forks --storm processes back to back; every
--storm-every-th child forks one grandchild. Each lives 10-300 ms (spread over the storm) and
exits; parents reap their children. With the C helper built (`make fixtures`), the storm thread
runs it and it forks them (a hundred in a fraction of a second; Python's own fork manages a few
dozen a second on a busy 2-CPU VM). Once all are gone it prints `STORM {json}`: every pid
(children, grandchildren, the helper) with its fork time (CLOCK_MONOTONIC ns, taken by the
parent just before fork()).

Send the SIGUSR1 to the storm thread (tgkill with the layout's storm_tid) where the trainer's
states are checked: the kernel hands a signal sent to the process to its main thread, the
trainer, and in its wait for a batch (the workers deliver in bursts, so a wait lasts up to
0.8 s) the signal ends that wait early. The stall model reads a wait a signal ended as OTHER,
while the truth counts the whole read as data: the part cut off read up to 5.8% of a 5 s window
as OTHER. Sent to the storm thread, the signal interrupts only that thread's read; Python runs
the handler in the main thread once its read returns.

On SIGUSR2 the trainer writes its truth file so far (without stopping), so that a test can
check attaches to one long-running instance as they come; SIGTERM ends the run as usual.
"""
import argparse
import ctypes
import json
import os
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import groundtruth  # noqa: E402

PR_SET_NAME = 15
PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)


def _set_name(name):
    _libc.prctl(PR_SET_NAME, name.encode()[:15], 0, 0, 0)


def _die_with_parent():
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _burn(ms):
    end = time.thread_time_ns() + int(ms * 1e6)
    x = 0
    while time.thread_time_ns() < end:
        for i in range(200):
            x += i * i
    return x


def _idle_threads(n, name):
    """n threads that block for good: they exist, as a real job's idle helpers do."""
    forever = threading.Event()
    for i in range(n):
        threading.Thread(target=forever.wait, name="%s%d" % (name, i), daemon=True).start()


def _read_exact(fd, n):
    buf = b""
    while len(buf) < n:
        chunk = os.read(fd, n - len(buf))
        if not chunk:
            raise EOFError("worker pipe closed")
        buf += chunk
    return buf


def worker_main(index, req_r, resp_w, threads, worker_ms, worker_sleep, batch_bytes, ready_w):
    _die_with_parent()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    signal.signal(signal.SIGUSR2, signal.SIG_IGN)
    _set_name("worker%d" % index)
    _idle_threads(threads - 1, "w%didle" % index)
    os.write(ready_w, b"r")
    os.close(ready_w)
    batch = bytes([index % 251]) * batch_bytes
    try:
        while os.read(req_r, 1):
            time.sleep(worker_sleep)
            _burn(worker_ms)
            os.write(resp_w, batch)
    except OSError:
        pass
    os._exit(0)


STORM_HELPER = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), ".output", "workloads", "forkstorm")


def storm_python(n, every):
    """The storm without the helper: Python forks only a few dozen a second on a busy VM."""
    lives = [0.01 + 0.29 * i / max(n - 1, 1) for i in range(n)]
    rd, wr = os.pipe()
    kids = []
    t0 = time.monotonic_ns()
    for i in range(n):
        fork_ns = time.monotonic_ns()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(rd)
                _set_name("storm")
                if every and i % every == 0:
                    g_ns = time.monotonic_ns()
                    g = os.fork()
                    if g == 0:
                        _set_name("stormg")
                        time.sleep(lives[i])
                        os._exit(0)
                    os.write(wr, b"%d %d %d\n" % (g, g_ns, os.getpid()))
                    time.sleep(lives[i])
                    os.waitpid(g, 0)
                else:
                    time.sleep(lives[i])
            finally:
                os._exit(0)
        kids.append((pid, fork_ns))
    os.close(wr)
    for pid, _ in kids:
        os.waitpid(pid, 0)
    grand = []
    with os.fdopen(rd, "rb") as f:
        for line in f:
            g, g_ns, parent = line.split()
            grand.append((int(g), int(g_ns), int(parent)))
    return {"children": [p for p, _ in kids], "grandchildren": [g for g, _, _ in grand],
            "parent": {str(g): p for g, _, p in grand},
            "fork_ns": {str(p): ns for p, ns in kids + [(g, ns) for g, ns, _ in grand]},
            "start_ns": t0, "end_ns": time.monotonic_ns(), "helper": None}


def storm(n, every, out):
    """Forks n processes (and every every-th of them a grandchild) back to back, through the
    C helper (.output/workloads/forkstorm, `make fixtures`) when built: that one process is
    part of the storm too, its pid under "helper"."""
    if os.access(STORM_HELPER, os.X_OK):
        helper_ns = time.monotonic_ns()
        proc = subprocess.Popen([STORM_HELPER, str(n), str(every)], stdout=subprocess.PIPE)
        text, _ = proc.communicate()
        res = json.loads(text)
        res["helper"] = proc.pid
        res["fork_ns"][str(proc.pid)] = helper_ns
    else:
        res = storm_python(n, every)
    out.write("STORM %s\n" % json.dumps(res))
    out.flush()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    groundtruth.add_common_args(p, duration=120.0)
    p.add_argument("--workers", type=int, default=64, help="worker processes (default 64)")
    p.add_argument("--threads", type=int, default=1000,
                   help="threads in the whole tree (default 1000)")
    p.add_argument("--worker-ms", type=float, default=1.0,
                   help="worker thread CPU ms per batch (default %(default)s)")
    p.add_argument("--worker-sleep-ms", type=float, default=1000.0,
                   help="worker sleep per batch, as if reading it (default %(default)s)")
    p.add_argument("--step-ms", type=float, default=2.0,
                   help="trainer CPU ms per step (default %(default)s)")
    p.add_argument("--prefetch", type=int, default=2, help="requests in flight per worker")
    p.add_argument("--batch-bytes", type=int, default=1024)
    p.add_argument("--storm", type=int, default=100, help="processes forked per SIGUSR1")
    p.add_argument("--storm-every", type=int, default=10,
                   help="every Nth storm child forks a grandchild (0: none)")
    args = p.parse_args(argv)
    workers = args.workers
    per_worker = max(1, (args.threads - 2) // (workers + 1))
    root_idle = args.threads - 2 - workers * per_worker  # besides the trainer and the storm thread
    if workers < 1 or root_idle < 0:
        p.error("--threads %d cannot hold %d workers" % (args.threads, workers))

    rec = groundtruth.Recorder("scale", args.truth)
    st = {"snapshot": False}
    storm_r, storm_w = os.pipe()

    def warmup():
        # Workers first, from a single-threaded process.
        ready_r, ready_w = os.pipe()
        st["req"], st["resp"], st["pids"] = [], [], []
        for i in range(workers):
            req_r, req_w = os.pipe()
            resp_r, resp_w = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(ready_r)
                for fd in st["req"] + st["resp"] + [req_w, resp_r, storm_r, storm_w]:
                    os.close(fd)
                worker_main(i, req_r, resp_w, per_worker, args.worker_ms,
                            args.worker_sleep_ms / 1e3, args.batch_bytes, ready_w)
            os.close(req_r)
            os.close(resp_w)
            st["req"].append(req_w)
            st["resp"].append(resp_r)
            st["pids"].append(pid)
        os.close(ready_w)
        _read_exact(ready_r, workers)
        os.close(ready_r)

        storm_up = threading.Event()

        def storm_loop():
            st["storm_tid"] = threading.get_native_id()
            storm_up.set()
            while os.read(storm_r, 1):
                storm(args.storm, args.storm_every, sys.stdout)

        threading.Thread(target=storm_loop, name="storm", daemon=True).start()
        storm_up.wait()
        _idle_threads(root_idle, "idle")
        signal.signal(signal.SIGUSR1, lambda s, f: os.write(storm_w, b"s"))
        signal.signal(signal.SIGUSR2, lambda s, f: st.update(snapshot=True))
        for i in range(workers):
            os.write(st["req"][i], b"r" * args.prefetch)
        st["next"] = 0
        for _ in range(2 * workers):
            step_once(False)
        layout = {str(pid): len(os.listdir("/proc/%d/task" % pid)) for pid in st["pids"]}
        root_threads = len(os.listdir("/proc/self/task"))
        sys.stdout.write("LAYOUT %s\n" % json.dumps({
            "root": os.getpid(), "root_threads": root_threads, "storm_tid": st["storm_tid"],
            "workers": layout,
            "threads": root_threads + sum(layout.values())}))
        sys.stdout.flush()
        return {"workers": workers, "threads_per_worker": per_worker,
                "root_threads": root_threads, "worker_pids": st["pids"]}

    def step_once(record=True):
        i = st["next"]
        st["next"] = (i + 1) % workers
        if record:
            with rec.seg("data"):
                _read_exact(st["resp"][i], args.batch_bytes)
            with rec.seg("compute"):
                _burn(args.step_ms)
                os.write(st["req"][i], b"r")
        else:
            _read_exact(st["resp"][i], args.batch_bytes)
            os.write(st["req"][i], b"r")

    def step():
        step_once()
        if st["snapshot"]:
            st["snapshot"] = False
            end = rec.end_ns
            rec.end_ns = time.monotonic_ns()
            rec.write()
            rec.end_ns = end
            rec.recording = True

    def cleanup():
        for fd in st.get("req", []):
            os.close(fd)
        for pid in st.get("pids", []):
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass

    return groundtruth.run(rec, args, warmup, step, cleanup)


if __name__ == "__main__":
    sys.exit(main())
