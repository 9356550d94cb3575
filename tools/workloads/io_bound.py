#!/usr/bin/python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""I/O-bound trainer: the trainer thread itself reads its samples synchronously from storage,
bypassing the page cache (O_DIRECT), so every read waits for the block device; its compute on
each block is small.

Setup (before READY): a data file (default 256 MiB) is written under --dir and fsynced; it is
deleted at exit. Each step reads --block bytes at a random aligned offset with os.preadv into an
mmap-allocated (page-aligned) buffer, then does a little torch work on them.

Ground truth: the read is an 'io' segment (CPU -> RUNNING, rest -> IO_WAIT), the torch work a
'compute' segment. Expected verdict: I/O BOUND.
"""
import argparse
import mmap
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import groundtruth  # noqa: E402

MiB = 1 << 20


def make_file(path, size):
    chunk = os.urandom(MiB)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for _ in range(size // MiB):
            os.write(fd, chunk)
        os.fsync(fd)
    finally:
        os.close(fd)


def read_interrupts():
    """{irq line name: [count per CPU]} from /proc/interrupts."""
    out = {}
    try:
        with open("/proc/interrupts") as f:
            ncpu = len(f.readline().split())
            for line in f:
                parts = line.split()
                if not parts:
                    continue
                counts = []
                for x in parts[1:1 + ncpu]:
                    if not x.isdigit():
                        break
                    counts.append(int(x))
                out[" ".join([parts[0]] + parts[1 + len(counts):])] = counts
    except OSError:
        pass
    return out


def completion_cpu(before, after, reads):
    """The CPU that took the most interrupts on the line that grew by about one per read
    (the block device's completion interrupt), or None."""
    best = None
    for name, counts in after.items():
        old = before.get(name)
        if not old or len(old) != len(counts):
            continue
        grew = [b - a for a, b in zip(old, counts)]
        total = sum(grew)
        if reads // 2 <= total <= reads * 4 and (best is None or total > best[0]):
            best = (total, max(range(len(grew)), key=grew.__getitem__), name)
    return best


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    groundtruth.add_common_args(p)
    p.add_argument("--dir", default="/var/tmp", help="where the data file goes (default %(default)s)")
    p.add_argument("--size-mib", type=int, default=256, help="data file size (default %(default)s)")
    p.add_argument("--cpu", default="auto",
                   help="pin the trainer: a CPU number, 'none', or 'auto' (default): the CPU "
                   "that takes the disk's completion interrupts, found by watching "
                   "/proc/interrupts during warm-up, so a finished read wakes the trainer "
                   "without a cross-CPU IPI (less wakeup latency counted as I/O)")
    p.add_argument("--block-kib", type=int, default=2048,
                   help="bytes per read, KiB (default %(default)s)")
    p.add_argument("--compute-elems", type=int, default=16384,
                   help="float32 elements of each block the trainer computes on (default %(default)s)")
    args = p.parse_args(argv)
    rec = groundtruth.Recorder("io_bound", args.truth)
    bs = args.block_kib * 1024
    if bs % 4096 or bs > args.size_mib * MiB:
        p.error("--block-kib must be a multiple of 4 and at most the file size")
    st = {"path": os.path.join(args.dir, "pipeprof-io-%d.dat" % os.getpid())}
    rng = random.Random(0)

    def warmup():
        import torch
        torch.set_num_threads(1)
        torch.set_num_interop_threads(1)
        make_file(st["path"], args.size_mib * MiB)
        st["fd"] = os.open(st["path"], os.O_RDONLY | os.O_DIRECT)
        st["buf"] = buf = mmap.mmap(-1, bs)
        st["view"] = torch.frombuffer(buf, dtype=torch.float32, count=args.compute_elems)
        st["w"] = torch.randn(args.compute_elems)
        st["nblocks"] = args.size_mib * MiB // bs
        st["torch"] = torch
        st["bytes"] = 0
        for _ in range(20):
            step()
        pinned, irq = None, None
        if args.cpu == "auto":
            before = read_interrupts()
            for _ in range(100):
                step()
            found = completion_cpu(before, read_interrupts(), 100)
            if found:
                pinned, irq = found[1], found[2]
        elif args.cpu != "none":
            pinned = int(args.cpu)
        if pinned is not None:
            os.sched_setaffinity(0, {pinned})
            for _ in range(20):
                step()
        return {"file": st["path"], "size_mib": args.size_mib, "block_bytes": bs, "o_direct": True,
                "pinned_cpu": pinned, "completion_irq": irq}

    def step():
        off = rng.randrange(st["nblocks"]) * bs
        with rec.seg("io"):
            n = os.preadv(st["fd"], [st["buf"]], off)
        with rec.seg("compute"):
            v = st["view"].nan_to_num(0.0, 0.0, 0.0).clamp_(-1, 1)
            float(v.dot(st["w"]))
        st["bytes"] += n

    def cleanup():
        if "fd" in st:
            os.close(st["fd"])
        try:
            os.unlink(st["path"])
        except FileNotFoundError:
            pass
        rec.extra["bytes_read"] = st.get("bytes", 0)

    return groundtruth.run(rec, args, warmup, step, cleanup)


if __name__ == "__main__":
    sys.exit(main())
