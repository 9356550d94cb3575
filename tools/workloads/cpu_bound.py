#!/usr/bin/python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""CPU-bound trainer: every step is pure on-CPU torch work (a small MLP's forward, backward and
SGD update) on the trainer thread, torch single-threaded.

Ground truth: the whole step is one 'compute' segment (CPU -> RUNNING, wall - CPU -> RUNQ), so
the trainer is ~100% RUNNING on an idle machine. Expected verdict: CPU-BOUND.
"""
import argparse
import os
import sys

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


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    groundtruth.add_common_args(p)
    p.add_argument("--width", type=int, default=256, help="MLP width (default %(default)s)")
    p.add_argument("--batch", type=int, default=64, help="batch size (default %(default)s)")
    p.add_argument("--depth", type=int, default=3, help="hidden layers (default %(default)s)")
    args = p.parse_args(argv)
    rec = groundtruth.Recorder("cpu_bound", args.truth)
    state = {}

    def warmup():
        import torch
        torch.set_num_threads(1)
        torch.set_num_interop_threads(1)
        state["step"] = make_mlp_step(torch, args.width, args.batch, args.depth)
        for _ in range(5):
            state["step"]()
        return {"width": args.width, "batch": args.batch, "depth": args.depth}

    def step():
        with rec.seg("compute"):
            state["step"]()

    return groundtruth.run(rec, args, warmup, step)


if __name__ == "__main__":
    sys.exit(main())
