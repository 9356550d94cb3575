#!/usr/bin/python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""A trainer on an asyncio event loop: a throttle, then a batch from a worker process.

Each step the trainer awaits asyncio.sleep(--sleep-ms) (a deliberate pause: a rate limit, a
poll interval), then asks a worker process for a batch over a pipe and awaits it; the worker
spends --item-ms of CPU making it. Both waits are the event loop's epoll_wait on one descriptor:
the pause is epoll_wait(.., --sleep-ms) that the timer ends, the batch epoll_wait(.., -1) that
the worker's write ends. The pause is no timed-out wait retried: it must stay OTHER, however
soon the batch's wait follows it.

Ground truth: the pause is an 'other' segment (OTHER), the wait for the batch a 'data' segment
(DATA_WAIT), the rest 'compute'. Defaults: 100 ms each, about half OTHER and half DATA_WAIT.
"""
import argparse
import asyncio
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import groundtruth  # noqa: E402

BATCH_BYTES = 64


def worker(requests, batches, item_ms, pin):
    if pin:
        os.sched_setaffinity(0, {1})
    while True:
        if not os.read(requests, 1):
            os._exit(0)
        t = time.thread_time()
        while time.thread_time() - t < item_ms / 1000.0:
            pass
        os.write(batches, b"x" * BATCH_BYTES)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    groundtruth.add_common_args(p)
    p.add_argument("--sleep-ms", type=float, default=100.0,
                   help="the asyncio.sleep each step (default %(default)s)")
    p.add_argument("--item-ms", type=float, default=100.0,
                   help="worker CPU ms per batch (default %(default)s)")
    p.add_argument("--pin", action=argparse.BooleanOptionalAction, default=os.cpu_count() >= 2,
                   help="pin the trainer to CPU 0 and the worker to CPU 1 (default: on with "
                   ">= 2 CPUs)")
    args = p.parse_args(argv)
    rec = groundtruth.Recorder("async_loader", args.truth)
    req_r, req_w = os.pipe()
    batch_r, batch_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(req_w)
        os.close(batch_r)
        worker(req_r, batch_w, args.item_ms, args.pin)
    os.close(req_r)
    os.close(batch_w)
    if args.pin:
        os.sched_setaffinity(0, {0})
    loop = asyncio.new_event_loop()
    st = {}

    async def connect():
        reader = asyncio.StreamReader()
        proto = asyncio.StreamReaderProtocol(reader)
        await loop.connect_read_pipe(lambda: proto, os.fdopen(batch_r, "rb", 0))
        st["reader"] = reader

    async def one_step():
        with rec.seg("other"):
            await asyncio.sleep(args.sleep_ms / 1000.0)
        with rec.seg("data"):
            os.write(req_w, b"r")
            await st["reader"].readexactly(BATCH_BYTES)

    def warmup():
        loop.run_until_complete(connect())
        for _ in range(3):
            loop.run_until_complete(one_step())
        return {"worker_pid": pid, "sleep_ms": args.sleep_ms, "item_ms": args.item_ms,
                "pinned": args.pin}

    def step():
        loop.run_until_complete(one_step())

    def cleanup():
        os.close(req_w)
        os.waitpid(pid, 0)

    return groundtruth.run(rec, args, warmup, step, cleanup)


if __name__ == "__main__":
    sys.exit(main())
