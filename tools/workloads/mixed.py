#!/usr/bin/python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Mixed trainer: a DataLoader with 1 worker whose per-batch CPU cost is about twice the
trainer's compute per step, so the trainer spends about half its time computing and half
waiting for the next batch (the worker, always busy, delivers one batch per 2x compute).

Ground truth: 'data' segments around next(it) (CPU -> RUNNING, rest -> DATA_WAIT) and 'compute'
segments around the training step. Expected: DATA_WAIT and RUNNING both around 45-50%, verdict
DATA-LOADING BOUND (DATA_WAIT is the largest stall).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from data_bound import loader_main  # noqa: E402


def main(argv=None):
    # worker: 16 x 1.875 ms = 30 ms CPU per batch; trainer: 15 ms CPU per step
    return loader_main("mixed", argv, __doc__, item_ms=1.875, step_ms=15.0, batch=16)


if __name__ == "__main__":
    sys.exit(main())
