#!/usr/bin/python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""A trainer fed over TCP, as a streaming dataset reading remote storage or a sample server
would feed it: a job of one trainer, no process group, no rank.

A sample server, outside the job (double-forked: not a descendant, as remote storage would be),
sends a batch of --batch-kb every --batch-ms on a loopback connection. --mode thread: a Python
thread of the trainer's process reads each batch off the socket and hands it over through a
queue.Queue(maxsize=2) (a thread prefetcher); --mode main: the trainer reads the socket itself
(num_workers=0 with an iterable dataset); --mode workers: a DataLoader of --workers processes,
each reading its own connection (an IterableDataset, as WebDataset streams shards). The
trainer's step is --step-ms of its own CPU.

Ground truth: the wait for the next batch is a 'data' segment (DATA_WAIT for its off-CPU part):
the trainer starves for data that comes over the network; the compute is 'compute'.

--transport unix: the same server behind a Unix socket (a data service on the host): its own
writes wake the reader, a process outside the job, not the network. The wait is an 'other'
segment (OTHER: the model names no cause for a stranger's wakeup); pipeprof is to name the
server (READY extra server_pid) as what the trainer waits on.
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


def serve_one(conn, batch_bytes, batch_ms):
    """One client: a batch every batch_ms until it hangs up."""
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
    conn.close()


def serve(listener, batch_bytes, batch_ms, clients):
    """The server: each of `clients` connections served by a thread of its own; exits when the
    last hangs up."""
    threads = []
    for _ in range(clients):
        conn, _ = listener.accept()
        t = threading.Thread(target=serve_one, args=(conn, batch_bytes, batch_ms), daemon=True)
        t.start()
        threads.append(t)
    for t in threads:
        t.join()
    os._exit(0)


def start_server(batch_bytes, batch_ms, clients, transport):
    """A listener (an ephemeral loopback port, or a Unix socket), served by a grandchild
    reparented away from this process (the job's tree does not hold it). Returns the address
    to connect to and the server's pid."""
    if transport == "unix":
        addr = "/tmp/pipeprof-net-loader-%d.sock" % os.getpid()
        if os.path.exists(addr):
            os.unlink(addr)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(addr)
    else:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", 0))
    listener.listen(clients)
    if transport != "unix":
        addr = listener.getsockname()
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(rfd)
        os.setsid()
        if os.fork():
            os._exit(0)
        os.write(wfd, str(os.getpid()).encode())
        os.close(wfd)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        serve(listener, batch_bytes, batch_ms, clients)
    os.close(wfd)
    os.waitpid(pid, 0)
    server_pid = int(os.read(rfd, 32) or b"0")
    os.close(rfd)
    listener.close()
    return addr, server_pid


def connect(addr):
    if isinstance(addr, str):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(addr)
        return sock
    return socket.create_connection(addr)


def recv_exact(sock, n):
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if not k:
            raise EOFError("the sample server hung up")
        got += k
    return buf


class Stream:
    """An IterableDataset (duck-typed, so this file imports torch only in workers mode): each
    DataLoader worker opens its own connection and yields what the server sends it."""

    def __init__(self, addr, nbytes):
        self.addr, self.nbytes = addr, nbytes

    def __iter__(self):
        sock = connect(self.addr)
        while True:
            yield bytes(recv_exact(sock, self.nbytes)[:4096])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    groundtruth.add_common_args(p)
    p.add_argument("--mode", choices=("thread", "main", "workers"), default="thread")
    p.add_argument("--workers", type=int, default=2, help="workers mode: num_workers "
                   "(default %(default)s)")
    p.add_argument("--transport", choices=("tcp", "unix"), default="tcp",
                   help="loopback TCP (the network) or a Unix socket (default %(default)s)")
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
        if args.mode == "workers":
            return next(st["it"])
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
        addr, server_pid = start_server(nbytes, args.batch_ms,
                                        args.workers if args.mode == "workers" else 1,
                                        args.transport)
        st["addr"] = addr
        info = {"server": str(addr), "server_pid": server_pid, "batch_bytes": nbytes}
        if args.mode == "workers":
            import torch
            torch.set_num_threads(1)
            stream = type("TorchStream", (Stream, torch.utils.data.IterableDataset), {})
            loader = torch.utils.data.DataLoader(stream(addr, nbytes), batch_size=None,
                                                 num_workers=args.workers)
            st["it"] = iter(loader)
            for _ in range(5):
                compute(next_batch())
            info["worker_pids"] = [w.pid for w in st["it"]._workers]
            return info
        st["sock"] = connect(addr)
        if args.mode == "thread":
            st["thread"] = threading.Thread(target=reader, name="reader", daemon=True)
            st["thread"].start()
        for _ in range(5):
            compute(next_batch())
        if "thread" in st:
            info["reader_tid"] = st["thread"].native_id
        return info

    wait_kind = "other" if args.transport == "unix" else "data"

    def step():
        with rec.seg(wait_kind):
            batch = next_batch()
        with rec.seg("compute"):
            compute(batch)

    def cleanup():
        st["stop"].set()
        if isinstance(st.get("addr"), str) and os.path.exists(st["addr"]):
            os.unlink(st["addr"])
        if "it" in st:
            st["it"]._shutdown_workers()
        if "sock" in st:
            st["sock"].close()
        if "thread" in st:
            st["thread"].join(5.0)

    return groundtruth.run(rec, args, warmup, step, cleanup)


if __name__ == "__main__":
    sys.exit(main())
