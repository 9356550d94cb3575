#!/usr/bin/python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""A loop that runs a command each step and waits for it (subprocess.run of a shell tool, as a
loop that calls nvidia-smi, syncs a checkpoint or asks git for its state would): its child's
exit, not a batch, ends the wait. No DataLoader.

Each step: `--command` (default `sleep --sleep-s`) run to its end in an 'other' segment (the
wait for a process that delivers nothing: OTHER), then --step-ms of the trainer's own CPU.
Expected: NO DOMINANT STALL (OTHER is no stall the model names), the children named by the
advice waits_on_children; not DATA-LOADING BOUND.
"""
import argparse
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import groundtruth  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    groundtruth.add_common_args(p)
    p.add_argument("--sleep-s", type=float, default=0.03,
                   help="the child's sleep a step (default %(default)s)")
    p.add_argument("--step-ms", type=float, default=10.0,
                   help="trainer CPU ms per step (default %(default)s)")
    args = p.parse_args(argv)
    rec = groundtruth.Recorder("shell_step", args.truth)
    argv_child = ["sleep", str(args.sleep_s)]

    def compute():
        c0 = time.thread_time_ns()
        while time.thread_time_ns() - c0 < args.step_ms * 1e6:
            pass

    def step():
        with rec.seg("other"):
            subprocess.run(argv_child, check=True)
        with rec.seg("compute"):
            compute()

    def warmup():
        for _ in range(3):
            step()
        return {"command": argv_child}

    return groundtruth.run(rec, args, warmup, step, lambda: None)


if __name__ == "__main__":
    sys.exit(main())
