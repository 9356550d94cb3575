#!/usr/bin/python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""A distributed job started by torch.multiprocessing.spawn, as many training scripts start
theirs: the parent imports torch, sets MASTER_ADDR/MASTER_PORT in its own os.environ and spawns
--world fresh interpreters (multiprocessing's "spawn" start method, beside its resource tracker
process), each given its rank as an argument: no RANK, LOCAL_RANK or WORLD_SIZE in any
environment. Each rank runs DDP (gloo, loopback) on a small MLP; rank 1 burns --slow-ms of
thread CPU before each step, so the others wait for it in their allreduce.

Prints "READY pid=PARENT tid=PARENT" once every rank has made its first steps, then "RANK k
pid=PID" for each rank. Stops at --duration or on SIGTERM (the ranks agree to stop in a
per-step allreduce, so none is left in a collective), and writes --truth: the ranks' pids.
"""
import argparse
import json
import os
import signal
import socket
import sys
import time


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_main(rank, world, slow_ms, deadline, queue):
    import torch
    import torch.distributed as dist
    stop = {"asked": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(asked=True))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(
        torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(1 + rank)
    x, y = torch.randn(32, 256, generator=g), torch.randint(0, 10, (32,), generator=g)
    work, w = torch.randn(64, 256, generator=g), torch.randn(256, 256, generator=g) / 16
    steps = 0
    while True:
        if rank == 1:
            c0 = time.thread_time_ns()
            while time.thread_time_ns() - c0 < slow_ms * 1e6:
                work = torch.tanh(work @ w)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        flag = torch.tensor([1 if stop["asked"] or time.time() > deadline else 0])
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        steps += 1
        if steps == 5:
            queue.put((rank, os.getpid()))
        if flag.item():
            break
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--duration", type=float, default=60)
    p.add_argument("--truth", default="")
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--slow-ms", type=float, default=25.0)
    args = p.parse_args()
    import torch.multiprocessing as mp
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
                      GLOO_SOCKET_IFNAME="lo")
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    deadline = time.time() + args.duration
    spawned = mp.start_processes(rank_main, args=(args.world, args.slow_ms, deadline, queue),
                                 nprocs=args.world, join=False, start_method="spawn")
    signal.signal(signal.SIGTERM, lambda *_: [os.kill(q.pid, signal.SIGTERM)
                                              for q in spawned.processes if q.is_alive()])
    ranks = dict(queue.get() for _ in range(args.world))
    print("READY pid=%d tid=%d" % (os.getpid(), os.getpid()), flush=True)
    for k in sorted(ranks):
        print("RANK %d pid=%d" % (k, ranks[k]), flush=True)
    while not spawned.join():
        pass
    if args.truth:
        with open(args.truth, "w") as f:
            json.dump({"pid": os.getpid(), "extra": {"rank_pids": ranks}}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
