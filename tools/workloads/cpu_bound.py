#!/usr/bin/python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""CPU-bound trainer: every step is pure on-CPU torch work (a small MLP's forward, backward and
SGD update) on the trainer thread, torch single-threaded.

Ground truth: the whole step is one 'compute' segment (CPU -> RUNNING, wall - CPU -> RUNQ), so
the trainer is ~100% RUNNING on an idle machine. Expected verdict: CPU-BOUND.

--threads N gives torch N intra-op threads (an OpenMP pool of N - 1 beside the trainer);
--op elementwise replaces the MLP with large elementwise ops, which torch splits over those
threads (the MLP's small matrices and a single-threaded BLAS barely use them): two loops whose
one-thread traces look alike and whose second thread buys very different speed-ups.
--slow-every N --slow-ms M makes every Nth step M ms slower with a sleep after its update (an
'other' segment: OTHER), as a job that logs or checkpoints every N steps: slow steps whose
cause is known.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import groundtruth  # noqa: E402


def make_mlp_step(torch, width=256, batch=64, depth=3):
    """Returns step() doing one forward/backward/update of an MLP; ~width^2*batch*depth*6 flops."""
    torch.manual_seed(0)
    layers = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(width, 10))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(batch, width)
    y = torch.randint(0, 10, (batch,))
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return step


def make_elementwise_step(torch, side=1024, ops=4):
    """Returns step() doing `ops` elementwise passes over side x side tensors: at::parallel_for
    splits each over the intra-op threads (1M elements, far above its grain size). sin and tanh
    make each element cost more than its bytes, so memory bandwidth, which the VM's host
    shares, does not set the pace."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(side, side, generator=g)
    w = torch.randn(side, side, generator=g)

    def step():
        y = x
        for _ in range(ops):
            y = torch.tanh(torch.sin(y) * w + 0.1)
        return y

    return step


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    groundtruth.add_common_args(p)
    p.add_argument("--width", type=int, default=256, help="MLP width (default %(default)s)")
    p.add_argument("--batch", type=int, default=64, help="batch size (default %(default)s)")
    p.add_argument("--depth", type=int, default=3, help="hidden layers (default %(default)s)")
    p.add_argument("--threads", type=int, default=1,
                   help="torch intra-op threads, torch.set_num_threads (default %(default)s)")
    p.add_argument("--op", choices=("mlp", "elementwise"), default="mlp",
                   help="the step: an MLP's forward/backward/update, or large elementwise ops "
                   "(default %(default)s)")
    p.add_argument("--slow-every", type=int, default=0, metavar="N",
                   help="every Nth step sleeps --slow-ms after its update (default: never)")
    p.add_argument("--slow-ms", type=float, default=50.0,
                   help="the slow steps' sleep (default %(default)s)")
    args = p.parse_args(argv)
    rec = groundtruth.Recorder("cpu_bound", args.truth)
    state = {}

    def warmup():
        import torch
        torch.set_num_threads(args.threads)
        torch.set_num_interop_threads(1)
        if args.op == "mlp":
            state["step"] = make_mlp_step(torch, args.width, args.batch, args.depth)
        else:
            state["step"] = make_elementwise_step(torch)
        for _ in range(5):
            state["step"]()
        state["n"] = 0
        return {"width": args.width, "batch": args.batch, "depth": args.depth,
                "threads": args.threads, "op": args.op, "slow_every": args.slow_every,
                "slow_ms": args.slow_ms}

    def step():
        with rec.seg("compute"):
            state["step"]()
        state["n"] += 1
        if args.slow_every and state["n"] % args.slow_every == 0:
            with rec.seg("other"):
                time.sleep(args.slow_ms / 1e3)

    return groundtruth.run(rec, args, warmup, step)


if __name__ == "__main__":
    sys.exit(main())
