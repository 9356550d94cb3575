#!/usr/bin/python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Data-loading-bound trainer: a real torch.utils.data.DataLoader (1 worker process) whose
Dataset.__getitem__ burns a fixed amount of on-CPU torch work per sample, so the worker is busy
on-CPU while the trainer mostly waits in next(iterator); the trainer's own step is small.

Both sides' CPU costs are budgets of thread CPU time (worker: --item-ms per sample; trainer:
--step-ms per step, at least one MLP pass), so their ratio holds even when the two vCPUs slow
each other down. With 2+ CPUs the trainer is pinned to CPU 0 and the workers to the others
(--no-pin to let them float), so a woken trainer never queues behind a busy worker.

--eval runs the model forward only (an evaluation loop): no backward pass marks its steps.
--launches N adds N kernel launches through the fake CUDA runtime (tools/fakecuda, `make
fixtures`) to each step, after the model's pass, and one cudaStreamSynchronize (a 'gpu'
segment): an inference loop fed by a DataLoader. Only the trainer loads the runtime, after its
workers started.
--leak-kb K makes every __getitem__ keep K KiB more for good (a list that only grows, filled so
its pages are resident), as a Dataset that caches what it loads: the workers' resident memory
grows batch x K KiB per step, a leak of known rate (extra info: leak_bytes_per_step).

Ground truth: `with rec.seg('data'): batch = next(it)` (CPU -> RUNNING, rest -> DATA_WAIT) and
the training step as a 'compute' segment. Expected verdict: DATA-LOADING BOUND, with the worker
process on-CPU nearly all the time.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import groundtruth  # noqa: E402

FEATURES = 256


def busy_dataset(torch, item_cpu_ms, length=10**9, features=FEATURES, leak_kb=0):
    """A map-style Dataset whose __getitem__ does item_cpu_ms of on-CPU torch work (measured as
    the worker thread's own CPU time, so preemption makes it longer, never shorter), and keeps
    leak_kb KiB for good."""
    kept = []

    class BusyDataset(torch.utils.data.Dataset):
        def __init__(self):
            g = torch.Generator().manual_seed(1)
            self.w = torch.randn(64, 64, generator=g) / 8

        def __len__(self):
            return length

        def __getitem__(self, i):
            if leak_kb:
                kept.append(b"\x01" * (leak_kb * 1024))
            budget = int(item_cpu_ms * 1e6)
            c0 = time.thread_time_ns()
            x = torch.full((64, 64), float(i % 97) / 97)
            while time.thread_time_ns() - c0 < budget:
                x = torch.tanh(x @ self.w + 0.1)
            return x.flatten()[:features].clone(), int(i % 10)

    return BusyDataset()


def make_trainer(torch, width, batch, evaluate=False):
    """The trainer's step on a loaded batch: forward/backward/update of a small MLP.

    train(x, y, cpu_ms): one pass, then more passes while the thread's CPU time in this call is
    under cpu_ms (so the step's CPU cost is fixed even when a busy sibling CPU slows it down)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(FEATURES, width), torch.nn.ReLU(),
                                torch.nn.Linear(width, width), torch.nn.ReLU(),
                                torch.nn.Linear(width, 10))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    loss_fn = torch.nn.CrossEntropyLoss()

    def one(x, y):
        if evaluate:
            with torch.no_grad():
                model(x)
            return
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()

    def train(x, y, cpu_ms=0):
        budget = int(cpu_ms * 1e6)
        c0 = time.thread_time_ns()
        one(x, y)
        while time.thread_time_ns() - c0 < budget:
            one(x, y)

    return train


def _pin_worker(worker_id):
    os.sched_setaffinity(0, {(1 + worker_id) % os.cpu_count()})


def loader_main(name, argv, doc, item_ms, step_ms, workers=1, batch=8, width=256):
    """Shared by data_bound.py and mixed.py: a DataLoader over busy_dataset feeding the MLP."""
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    groundtruth.add_common_args(p)
    p.add_argument("--workers", type=int, default=workers,
                   help="DataLoader num_workers (default %(default)s)")
    p.add_argument("--batch", type=int, default=batch, help="batch size (default %(default)s)")
    p.add_argument("--item-ms", type=float, default=item_ms,
                   help="worker CPU ms per sample (default %(default)s)")
    p.add_argument("--step-ms", type=float, default=step_ms,
                   help="trainer CPU ms per step, at least one pass (default %(default)s)")
    p.add_argument("--width", type=int, default=width, help="trainer MLP width (default %(default)s)")
    p.add_argument("--eval", action="store_true",
                   help="forward passes only, under torch.no_grad(): no backward pass to mark "
                   "the steps")
    p.add_argument("--launches", type=int, default=0,
                   help="fake CUDA kernel launches a step, and a sync (default: none)")
    p.add_argument("--leak-kb", type=int, default=0,
                   help="KiB each sample keeps for good in the worker (default: none)")
    p.add_argument("--pin", action=argparse.BooleanOptionalAction, default=os.cpu_count() >= 2,
                   help="pin the trainer to CPU 0 and worker k to CPU 1+k mod CPUs, so a woken "
                   "trainer never queues behind a busy worker (default: on with >= 2 CPUs)")
    args = p.parse_args(argv)
    rec = groundtruth.Recorder(name, args.truth)
    st = {}

    def warmup():
        import torch
        torch.set_num_threads(1)
        torch.set_num_interop_threads(1)
        if args.pin:
            os.sched_setaffinity(0, {0})
        train = make_trainer(torch, args.width, args.batch, args.eval)
        loader = torch.utils.data.DataLoader(busy_dataset(torch, args.item_ms, leak_kb=args.leak_kb),
                                             batch_size=args.batch, num_workers=args.workers,
                                             shuffle=False,
                                             worker_init_fn=_pin_worker if args.pin else None)
        it = iter(loader)
        if args.launches:
            from gpu import DEFAULT_LIB, FakeCuda, dim3
            cuda = FakeCuda(DEFAULT_LIB, "spin")
            launch, sync = cuda.rt.cudaLaunchKernel, cuda.rt.cudaStreamSynchronize
            func, grid, block = cuda._func, dim3(1, 1, 1), dim3(1000, 1, 1)

            def kernels():
                for _ in range(args.launches):
                    if launch(func, grid, block, None, 0, None):
                        raise RuntimeError("cudaLaunchKernel failed")
            st.update(kernels=kernels, sync=sync)
        for _ in range(3):
            x, y = next(it)
            train(x, y, args.step_ms)
        st.update(train=train, it=it, loader=loader)
        return {"workers": args.workers, "batch": args.batch, "item_ms": args.item_ms,
                "worker_cpu_ms_per_batch": args.item_ms * args.batch,
                "trainer_cpu_ms_per_step": args.step_ms, "pinned": args.pin,
                "worker_pids": [w.pid for w in it._workers], "launches_per_step": args.launches,
                "leak_bytes_per_step": args.leak_kb * 1024 * args.batch}

    def step():
        with rec.seg("data"):
            x, y = next(st["it"])
        with rec.seg("compute"):
            st["train"](x, y, args.step_ms)
            if "kernels" in st:
                st["kernels"]()
        if "sync" in st:
            with rec.seg("gpu"):
                if st["sync"](None):
                    raise RuntimeError("cudaStreamSynchronize failed")

    def cleanup():
        it = st.pop("it", None)
        if it is not None:
            it._shutdown_workers()

    return groundtruth.run(rec, args, warmup, step, cleanup)


def main(argv=None):
    return loader_main("data_bound", argv, __doc__, item_ms=5.0, step_ms=0, batch=8)


if __name__ == "__main__":
    sys.exit(main())
