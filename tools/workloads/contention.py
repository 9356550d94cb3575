#!/usr/bin/python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""CPU contention: the cpu_bound step (a small MLP on the trainer thread, torch single-threaded)
while other processes compete for the CPUs.

The competitors must not be descendants of the trainer (pipeprof counts those as DataLoader
workers), so by default this script starts none: start cpu_hog.py processes beside it (the test
harness starts 3 on this 2-CPU machine). --hogs N starts N of them itself in a new session, via a
double fork so they are not its descendants either, for standalone runs.

Ground truth: the whole step is one 'compute' segment; its wall - CPU is time runnable but not
running -> RUNQ. Expected verdict: CPU CONTENTION (with ~2x more runnable tasks than CPUs, RUNQ
is about half the wall time).
"""
import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import groundtruth  # noqa: E402
from cpu_bound import make_mlp_step  # noqa: E402


def start_detached_hogs(n):
    """Starts n cpu_hog.py processes re-parented to init (not our descendants); returns pids."""
    pids = []
    for _ in range(n):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # intermediate child: start the hog, report its pid, exit
            os.close(r)
            hog = subprocess.Popen([sys.executable, os.path.join(HERE, "cpu_hog.py")],
                                   stdout=subprocess.DEVNULL, start_new_session=True)
            os.write(w, b"%d" % hog.pid)
            os._exit(0)
        os.close(w)
        with os.fdopen(r) as f:
            pids.append(int(f.read()))
        os.waitpid(pid, 0)
    return pids


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    groundtruth.add_common_args(p)
    p.add_argument("--width", type=int, default=256, help="MLP width (default %(default)s)")
    p.add_argument("--batch", type=int, default=64, help="batch size (default %(default)s)")
    p.add_argument("--hogs", type=int, default=0,
                   help="start this many detached cpu_hog.py processes (killed at exit)")
    args = p.parse_args(argv)
    rec = groundtruth.Recorder("contention", args.truth)
    state = {"hogs": []}

    def warmup():
        import torch
        torch.set_num_threads(1)
        torch.set_num_interop_threads(1)
        state["step"] = make_mlp_step(torch, args.width, args.batch)
        for _ in range(5):
            state["step"]()
        if args.hogs:
            state["hogs"] = start_detached_hogs(args.hogs)
        return {"width": args.width, "batch": args.batch, "own_hogs": state["hogs"],
                "cpus": os.cpu_count()}

    def step():
        with rec.seg("compute"):
            state["step"]()

    def cleanup():
        for pid in state["hogs"]:
            try:
                os.kill(pid, 15)
            except ProcessLookupError:
                pass

    return groundtruth.run(rec, args, warmup, step, cleanup)


if __name__ == "__main__":
    sys.exit(main())
