#!/usr/bin/python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""pipeprof's demo: a small, ordinary image-classification training loop that is held back by
its data loading.

A torchvision FakeData dataset (random 3x224x224 PIL images, 10 classes) goes through the usual
augmentation pipeline (RandomResizedCrop, flip, ColorJitter, ToTensor, Normalize) in one
DataLoader worker, and a small CNN trains on 32x32 crops with SGD on the main thread. On a
2-CPU machine the single worker cannot keep up with the model, so the trainer waits for batches:
pipeprof should say DATA-LOADING BOUND and suggest more workers. Prints its step rate every few
seconds.

    sudo ./pipeprof -d 10 -- /usr/bin/python3 tools/workloads/demo_train.py

Also records ground truth like the scenario workloads ('data' and 'compute' segments).
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import groundtruth  # noqa: E402


def build(args):
    import torch
    import torchvision
    from torchvision import transforms as T

    torch.set_num_threads(1)
    if torch.get_num_interop_threads() != 1:
        torch.set_num_interop_threads(1)
    torch.manual_seed(0)
    tf = T.Compose([
        T.RandomResizedCrop(args.crop, scale=(0.3, 1.0)),
        T.RandomHorizontalFlip(),
        T.ColorJitter(brightness=0.4, contrast=0.4, saturation=0.4),
        T.ToTensor(),
        T.Normalize(mean=(0.5, 0.5, 0.5), std=(0.25, 0.25, 0.25)),
    ])
    ds = torchvision.datasets.FakeData(size=10**7, image_size=(3, args.image, args.image),
                                       num_classes=10, transform=tf)
    loader = torch.utils.data.DataLoader(ds, batch_size=args.batch, shuffle=True,
                                         num_workers=args.workers, drop_last=True)
    nn = torch.nn
    c = args.channels
    model = nn.Sequential(
        nn.Conv2d(3, c, 3, padding=1), nn.BatchNorm2d(c), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(c, 2 * c, 3, padding=1), nn.BatchNorm2d(2 * c), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(2 * c, 2 * c, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        nn.Flatten(), nn.Linear(2 * c, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    def train(x, y):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return loader, train


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    groundtruth.add_common_args(p, duration=30.0)
    p.add_argument("--workers", type=int, default=1, help="DataLoader workers (default %(default)s)")
    p.add_argument("--batch", type=int, default=32, help="batch size (default %(default)s)")
    p.add_argument("--image", type=int, default=224, help="source image side (default %(default)s)")
    # 32: with 48x48 crops the trainer's step and the worker's batch cost about the same on
    # a 2-CPU VM, and the loop drifted between 12% and 38% DATA_WAIT from run to run
    p.add_argument("--crop", type=int, default=32, help="training crop side (default %(default)s)")
    p.add_argument("--channels", type=int, default=8, help="CNN width (default %(default)s)")
    p.add_argument("--every", type=float, default=5.0, help="seconds between rate lines")
    args = p.parse_args(argv)
    rec = groundtruth.Recorder("demo_train", args.truth)
    st = {"n": 0, "loss": 0.0}

    def warmup():
        loader, train = build(args)
        it = iter(loader)
        for _ in range(3):
            train(*next(it))
        st.update(it=it, train=train, t=time.monotonic(), n_last=0)
        return {"workers": args.workers, "batch": args.batch, "image": args.image, "crop": args.crop}

    def step():
        with rec.seg("data"):
            x, y = next(st["it"])
        with rec.seg("compute"):
            loss = st["train"](x, y)
        st["n"] += 1
        now = time.monotonic()
        if now - st["t"] >= args.every:
            rate = (st["n"] - st["n_last"]) / (now - st["t"])
            print("step %d: %.1f steps/s, %.0f images/s, loss %.3f" %
                  (st["n"], rate, rate * args.batch, float(loss)), flush=True)
            st["t"], st["n_last"] = now, st["n"]

    def cleanup():
        it = st.pop("it", None)
        if it is not None:
            it._shutdown_workers()

    return groundtruth.run(rec, args, warmup, step, cleanup)


if __name__ == "__main__":
    sys.exit(main())
