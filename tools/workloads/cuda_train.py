#!/usr/bin/python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""A real CUDA training loop (PyTorch on a GPU): the check of pipeprof against real libcudart,
libcuda and libtorch_cuda that the fake runtime cannot give. Needs torch with CUDA and a GPU;
exits 2 with one line when there is none (tests/test_real_cuda.py skips then).

--mode gpu: an MLP of --layers bf16 Linear(--width, --width) layers on a --width-row batch
  resident on the GPU; each step launches forward, backward and an SGD update, then reads the
  loss with .item() (a device-to-host copy and a stream synchronise). Expected: GPU-BOUND.
--mode data: a DataLoader (--workers processes, pin_memory on) whose samples cost --item-ms of
  worker CPU each, feeding a small MLP on the GPU (batch copied with non_blocking=True).
  Expected: DATA-LOADING BOUND, waits relayed by the pin-memory thread.
--mode nccl: the gpu mode's MLP (--layers, --width) in a one-rank NCCL process group (a file
  store under /tmp, no TCP): between backward and the update, one all_reduce a step of
  --allreduce-mb MiB of float32, as DDP reduces gradients. The real libnccl's calls, bytes and
  per-step counts against what the loop made. Expected: GPU-BOUND.
--mode launch: --ops tiny in-place kernels a step on a 256-element tensor, then
  torch.cuda.synchronize(): the host's launch path is the bottleneck. Expected: CPU-BOUND,
  launch-bound.

Ground truth (groundtruth.py): next(loader) a 'data' segment, the forward pass and the update
'compute', loss.backward() 'thread' (CUDA's backward runs on the autograd engine's device
thread while this one waits for it), .item() and torch.cuda.synchronize() 'gpu'.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import groundtruth  # noqa: E402
from data_bound import busy_dataset  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    groundtruth.add_common_args(p)
    p.add_argument("--mode", choices=("gpu", "data", "launch", "nccl"), default="gpu")
    p.add_argument("--layers", type=int, default=8, help="gpu mode: Linear layers (default %(default)s)")
    p.add_argument("--width", type=int, default=8192,
                   help="gpu mode: layer width and batch rows (default %(default)s)")
    p.add_argument("--workers", type=int, default=2, help="data mode: num_workers (default %(default)s)")
    p.add_argument("--item-ms", type=float, default=4.0,
                   help="data mode: worker CPU ms per sample (default %(default)s)")
    p.add_argument("--batch", type=int, default=16, help="data mode: batch size (default %(default)s)")
    p.add_argument("--allreduce-mb", type=int, default=4,
                   help="nccl mode: MiB of float32 reduced a step (default %(default)s)")
    p.add_argument("--ops", type=int, default=300,
                   help="launch mode: kernels a step (default %(default)s)")
    args = p.parse_args(argv)

    import torch
    if not torch.cuda.is_available():
        sys.stderr.write("cuda_train.py: no CUDA device (torch %s)\n" % torch.__version__)
        return 2
    rec = groundtruth.Recorder("cuda_" + args.mode, args.truth)
    dev = torch.device("cuda")
    st = {}

    def warmup():
        torch.manual_seed(0)
        info = {"mode": args.mode, "torch": torch.__version__,
                "device": torch.cuda.get_device_name(0)}
        if args.mode in ("gpu", "nccl"):
            model = torch.nn.Sequential(*[torch.nn.Linear(args.width, args.width, bias=False)
                                          for _ in range(args.layers)]).to(dev, torch.bfloat16)
            x = torch.randn(args.width, args.width, device=dev, dtype=torch.bfloat16)
            st.update(model=model, x=x, opt=torch.optim.SGD(model.parameters(), lr=1e-6))
            if args.mode == "nccl":
                import tempfile
                import torch.distributed as dist
                store = tempfile.mktemp(prefix="pipeprof-nccl-store-")
                dist.init_process_group("nccl", init_method="file://" + store, rank=0,
                                        world_size=1)
                n = args.allreduce_mb * (1 << 20) // 4
                st.update(dist=dist, grads=torch.ones(n, device=dev, dtype=torch.float32),
                          store=store)
                info.update(allreduce_bytes=n * 4, nccl=torch.cuda.nccl.version())
        elif args.mode == "data":
            model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(),
                                        torch.nn.Linear(1024, 10)).to(dev)
            loader = torch.utils.data.DataLoader(busy_dataset(torch, args.item_ms),
                                                 batch_size=args.batch, num_workers=args.workers,
                                                 pin_memory=True)
            st.update(model=model, opt=torch.optim.SGD(model.parameters(), lr=1e-3),
                      it=iter(loader), loss_fn=torch.nn.CrossEntropyLoss())
            info["worker_pids"] = [w.pid for w in st["it"]._workers]
            info["worker_cpu_ms_per_batch"] = args.item_ms * args.batch
        else:
            st["t"] = torch.ones(256, device=dev)
        for _ in range(3):
            step()
        torch.cuda.synchronize()
        return info

    def train(x, y=None):
        with rec.seg("compute"):
            st["opt"].zero_grad(set_to_none=True)
            out = st["model"](x)
            loss = (out.float().pow(2).mean() if y is None
                    else st["loss_fn"](out, y.to(dev, non_blocking=True)))
        with rec.seg("thread"):
            loss.backward()
        with rec.seg("compute"):
            if "dist" in st:
                # The call only queues the collective on NCCL's stream: host time of
                # microseconds, counted as compute; the GPU's part is waited for in .item().
                st["dist"].all_reduce(st["grads"])
            st["opt"].step()
        with rec.seg("gpu"):
            loss.item()

    def step():
        if args.mode in ("gpu", "nccl"):
            train(st["x"])
        elif args.mode == "data":
            with rec.seg("data"):
                x, y = next(st["it"])
            train(x.to(dev, non_blocking=True), y)
        else:
            with rec.seg("compute"):
                t = st["t"]
                for _ in range(args.ops):
                    t.mul_(1.0000001)
            with rec.seg("gpu"):
                torch.cuda.synchronize()

    def cleanup():
        it = st.pop("it", None)
        if it is not None:
            it._shutdown_workers()
        if "dist" in st:
            st["dist"].destroy_process_group()
            try:
                os.unlink(st["store"])
            except OSError:
                pass

    return groundtruth.run(rec, args, warmup, step, cleanup)


if __name__ == "__main__":
    sys.exit(main())
