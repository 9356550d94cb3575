#!/usr/bin/python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Page-fault I/O-bound trainer: the trainer reads its samples from an mmap'ed data file whose
pages are not in the page cache, so each step's touch takes major faults and sleeps in iowait
(no read() call anywhere: the I/O is the faults). The trainer is pinned to CPU 0 (--cpu).

Setup (before READY): a data file (default 128 MiB) is written with random bytes into a temporary
directory under --dir, fsynced, and mmap'ed read-only with MADV_RANDOM (no read-around: a fault
reads only the folio it needs). The file and its directory are deleted at exit.

Each step reads one byte from each of --pages consecutive pages of the next region of the mapping
(a strided numpy copy), feeds them to a small MLP step of --step-ms thread CPU time, and then
evicts the whole file again (madvise(MADV_DONTNEED) drops the mapping's PTEs, then
posix_fadvise(POSIX_FADV_DONTNEED) the now unmapped page-cache folios; ~0.2 ms on-CPU), so every
touch is cold. --pages 0 (the default) picks the page count in warm-up: three rounds of 8 steps,
each scaling it by the ratio of the share's odds aimed at (--io-share) to those measured.

Fault size (--huge, the default): the mapping is also MADV_HUGEPAGE, so where the kernel and
filesystem keep large page-cache folios (ext4 on this 6.x kernel, THP 'madvise' mode) a fault
reads a whole 2 MiB folio (one major fault per 512 pages touched; --pages is rounded up to
whole folios): ~0.5 ms, 85% of it off-CPU. With --no-huge each page is its own 4 KiB major
fault: ~100 us here, half of it CPU (the virtio notify's VM exit counts as the trainer's CPU),
so at most about half of the touch is IO_WAIT, at ~10k faults/s, and the shares vary more.

Settings, measured on the 2-vCPU test VM (virtio disk vda, idle): the default (--io-share 0.4:
~36-41 faults, 72-82 MiB per step, so ~2 GB/s from the disk) gives IO_WAIT 39-41% (clear I/O
BOUND); --io-share 0.2, or the fixed --pages 6656 --step-ms 20 (13 faults per step), gives
20-22% (the borderline case at the default threshold; --pages 6144 gives 18-20%). The extra info
records the page count used, the major faults and the MiB the disk read per step
(/proc/self/stat, /proc/diskstats), to show the I/O really reaches the device.

Ground truth: the touch is an 'io' segment (CPU -> RUNNING, rest -> IO_WAIT), the training step
and the eviction a 'compute' segment. Expected verdict: I/O BOUND.
"""
import argparse
import mmap
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import groundtruth  # noqa: E402
from data_bound import FEATURES, make_trainer  # noqa: E402
from io_bound import MiB, make_file  # noqa: E402

PAGE = mmap.PAGESIZE


def major_faults():
    """This process's major page faults so far (field 12 of /proc/self/stat)."""
    with open("/proc/self/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[9])


def disk_reads(dev):
    """(reads completed, MiB read) by the block device dev (st_dev of the data file), from
    /proc/diskstats; None if it is not listed (not a block device)."""
    with open("/proc/diskstats") as f:
        for line in f:
            x = line.split()
            if (int(x[0]), int(x[1])) == (os.major(dev), os.minor(dev)):
                return int(x[3]), int(x[5]) * 512 / MiB
    return None


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    groundtruth.add_common_args(p)
    p.add_argument("--dir", default="/var/tmp",
                   help="where the temporary data directory goes (default %(default)s)")
    p.add_argument("--size-mib", type=int, default=128, help="data file size (default %(default)s)")
    p.add_argument("--pages", type=int, default=0,
                   help="pages touched per step; 0: chosen in warm-up for --io-share "
                   "(default %(default)s)")
    p.add_argument("--io-share", type=float, default=0.4,
                   help="IO_WAIT share aimed at when --pages is 0 (default %(default)s)")
    p.add_argument("--step-ms", type=float, default=20.0,
                   help="trainer CPU ms per step, at least one pass (default %(default)s)")
    p.add_argument("--huge", action=argparse.BooleanOptionalAction, default=True,
                   help="MADV_HUGEPAGE: a fault reads a 2 MiB folio (default on)")
    p.add_argument("--cpu", default="0",
                   help="pin the trainer to this CPU, or 'none' (default %(default)s)")
    args = p.parse_args(argv)
    if not 0 < args.io_share < 0.9:
        p.error("--io-share must be in (0, 0.9)")
    rec = groundtruth.Recorder("mmap_io", args.truth)
    size = args.size_mib * MiB
    folio = (2 * MiB // PAGE) if args.huge else 1  # pages one fault brings in
    st = {"dir": tempfile.mkdtemp(prefix="pipeprof-mmap-", dir=args.dir), "i": 0}
    st["path"] = os.path.join(st["dir"], "data")

    def step(pages=None):
        span = (pages or st["pages"]) * PAGE
        off = st["i"] % (size // span) * span
        st["i"] += 1
        with rec.seg("io"):
            vals = st["arr"][off:off + span:PAGE].copy()  # one byte a page: major faults
        with rec.seg("compute"):
            n = min(len(vals), FEATURES)
            st["x"][0, :n] = st["torch"].from_numpy(vals[:n]).float() / 255
            st["train"](st["x"], st["y"], args.step_ms)
            st["mm"].madvise(mmap.MADV_DONTNEED)  # the whole file, so every touch is cold
            os.posix_fadvise(st["fd"], 0, 0, os.POSIX_FADV_DONTNEED)

    def whole(pages):
        """pages rounded up to whole folios, at most the file."""
        return min(max(1, -(-int(pages) // folio)) * folio, size // PAGE)

    def io_share(n, pages):
        """The IO_WAIT share (wall - CPU - run_delay of the touches) over n steps of pages."""
        s0 = len(rec.segments)
        rec.recording = True  # these steps' segments are read back, then dropped
        try:
            for _ in range(n):
                step(pages)
        finally:
            rec.recording = False
        segs, rec.segments[s0:] = rec.segments[s0:], []
        wait = sum(t1 - t0 - (c1 - c0) - (q1 - q0)
                   for k, t0, t1, c0, c1, q0, q1 in segs if k == "io")
        return wait / (segs[-1][2] - segs[0][1])

    def warmup():
        import numpy as np
        import torch
        torch.set_num_threads(1)
        torch.set_num_interop_threads(1)
        make_file(st["path"], size)
        st["dev"] = os.stat(st["path"]).st_dev
        st["fd"] = fd = os.open(st["path"], os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        st["mm"] = mm = mmap.mmap(fd, size, prot=mmap.PROT_READ)
        mm.madvise(mmap.MADV_RANDOM)
        if args.huge:
            mm.madvise(mmap.MADV_HUGEPAGE)
        st["arr"] = np.frombuffer(mm, dtype=np.uint8)
        st.update(torch=torch, train=make_trainer(torch, 256, 8),
                  x=torch.zeros(8, FEATURES), y=torch.arange(8) % 10)
        if args.cpu != "none":
            os.sched_setaffinity(0, {int(args.cpu)})
        probe = 8 * folio if args.huge else 512  # pages per step the calibration starts from
        for _ in range(3):
            step(probe)
        pages = whole(args.pages or probe)
        if not args.pages:
            # the share's odds, wait / rest of the step, grow about in proportion to the pages:
            # scale the page count by the odds aimed at over the odds measured, three times
            aim = args.io_share / (1 - args.io_share)
            for _ in range(3):
                got = min(max(io_share(8, pages), 0.01), 0.95)
                pages = whole(pages * aim / (got / (1 - got)))
        st["pages"] = pages
        m0, r0 = major_faults(), disk_reads(st["dev"])
        step()
        st["faults0"], st["reads0"] = major_faults(), disk_reads(st["dev"])
        return {"file": st["path"], "size_mib": args.size_mib, "pages_per_step": st["pages"],
                "huge": args.huge, "step_cpu_ms": args.step_ms,
                "io_share_target": None if args.pages else args.io_share,
                "warmup_step_major_faults": st["faults0"] - m0,
                "warmup_step_disk_mib": r0 and st["reads0"][1] - r0[1],
                "pinned_cpu": None if args.cpu == "none" else int(args.cpu)}

    def cleanup():
        if "faults0" in st:
            n = max(len(rec.steps), 1)
            rec.extra["major_faults_per_step"] = (major_faults() - st["faults0"]) / n
            r = disk_reads(st["dev"])
            if r and st["reads0"]:
                rec.extra["disk_reads_per_step"] = (r[0] - st["reads0"][0]) / n
                rec.extra["disk_mib_per_step"] = (r[1] - st["reads0"][1]) / n
        st.pop("arr", None)  # the numpy view must go before the mapping can close
        if "mm" in st:
            st.pop("mm").close()
        if "fd" in st:
            os.close(st["fd"])
        shutil.rmtree(st["dir"], ignore_errors=True)

    return groundtruth.run(rec, args, warmup, step, cleanup)


if __name__ == "__main__":
    sys.exit(main())
