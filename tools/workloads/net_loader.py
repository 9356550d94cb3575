#!/usr/bin/python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""A trainer fed over TCP, as a streaming dataset reading remote storage or a sample server
would feed it: a job of one trainer, no process group, no rank.

A sample server, outside the job (double-forked: not a descendant, as remote storage would be),
sends a batch of --batch-kb every --batch-ms on a loopback connection. --mode thread: a Python
thread of the trainer's process reads each batch off the socket and hands it over through a
queue.Queue(maxsize=2) (a thread prefetcher); --mode main: the trainer reads the socket itself
(num_workers=0 with an iterable dataset). The trainer's step is --step-ms of its own CPU.

Ground truth: the wait for the next batch is a 'data' segment (DATA_WAIT for its off-CPU part):
the trainer starves for data that comes over the network; the compute is 'compute'.
"""
import argparse
import os
import queue
import signal
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import groundtruth  # noqa: E402


def serve(listener, batch_bytes, batch_ms):
    """The server's loop: one client, a batch every batch_ms until it hangs up."""
    conn, _ = listener.accept()
    payload = bytes(range(256)) * (batch_bytes // 256)
    nxt = time.monotonic()
    try:
        while True:
            nxt += batch_ms / 1e3
            delay = nxt - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            conn.sendall(payload)
    except OSError:
        pass
    os._exit(0)


def start_server(batch_bytes, batch_ms):
    """A listener on an ephemeral loopback port, served by a grandchild reparented away from
    this process (the job's tree does not hold it). Returns the port."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    pid = os.fork()
    if pid == 0:
        os.setsid()
        if os.fork():
            os._exit(0)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        serve(listener, batch_bytes, batch_ms)
    os.waitpid(pid, 0)
    listener.close()
    return port


def recv_exact(sock, n):
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if not k:
            raise EOFError("the sample server hung up")
        got += k
    return buf


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    groundtruth.add_common_args(p)
    p.add_argument("--mode", choices=("thread", "main"), default="thread")
    p.add_argument("--batch-kb", type=int, default=256, help="bytes a batch, KiB (default %(default)s)")
    p.add_argument("--batch-ms", type=float, default=20.0,
                   help="the server sends a batch every this many ms (default %(default)s)")
    p.add_argument("--step-ms", type=float, default=4.0,
                   help="trainer CPU ms per step (default %(default)s)")
    args = p.parse_args(argv)
    rec = groundtruth.Recorder("net_loader_" + args.mode, args.truth)
    nbytes = args.batch_kb * 1024
    st = {"stop": threading.Event(), "q": queue.Queue(maxsize=2)}

    def reader():
        try:
            while not st["stop"].is_set():
                item = recv_exact(st["sock"], nbytes)
                while not st["stop"].is_set():
                    try:
                        st["q"].put(item, timeout=0.1)
                        break
                    except queue.Full:
                        pass
        except BaseException as e:  # handed to the trainer, which raises
            st["q"].put(e)

    def next_batch():
        if args.mode == "main":
            return recv_exact(st["sock"], nbytes)
        item = st["q"].get()
        if isinstance(item, BaseException):
            raise RuntimeError("reader thread failed") from item
        return item

    def compute(batch):
        c0 = time.thread_time_ns()
        acc = 0
        while time.thread_time_ns() - c0 < args.step_ms * 1e6:
            acc += sum(batch[:4096:64])
        return acc

    def warmup():
        port = start_server(nbytes, args.batch_ms)
        st["sock"] = socket.create_connection(("127.0.0.1", port))
        info = {"server_port": port, "batch_bytes": nbytes}
        if args.mode == "thread":
            st["thread"] = threading.Thread(target=reader, name="reader", daemon=True)
            st["thread"].start()
        for _ in range(5):
            compute(next_batch())
        if "thread" in st:
            info["reader_tid"] = st["thread"].native_id
        return info

    def step():
        with rec.seg("data"):
            batch = next_batch()
        with rec.seg("compute"):
            compute(batch)

    def cleanup():
        st["stop"].set()
        if "sock" in st:
            st["sock"].close()
        if "thread" in st:
            st["thread"].join(5.0)

    return groundtruth.run(rec, args, warmup, step, cleanup)


if __name__ == "__main__":
    sys.exit(main())
