# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""A GPU far behind a loop that rarely synchronises (the fake runtime, tools/fakecuda).

A loop that reads its loss every N steps only lets the GPU fall behind: on a real GPU its
launches then block on a full queue, spinning on the CPU, and read as RUNNING; only the rare
sync shows how far behind the GPU is. gpu.py --sync-every 100 with 10 ms of GPU work a step and a
few ms of CPU, on a fake device whose queue holds 100 ms of work (FAKECUDA_MAX_BACKLOG_MS):
launches spin on the full queue, each sync waits ~100 ms, and every attach must withhold the
verdict (gpu_backlog) rather than call the loop CPU-BOUND. The same loop with 0.05 ms of GPU
work a step keeps the queue empty: its syncs are short and it is CPU-BOUND.
"""
import os

import pytest

from conftest import attach_repeatedly, finish_workload, start_workload
from test_scenarios import workload_duration

ATTACHES = 3
WINDOW_S = 3


@pytest.mark.parametrize("gpu_ms,want", [("10", "gpu_backlog"), ("0.05", "cpu_bound")])
def test_rare_syncs(gpu_ms, want, procs, fakecuda, tmp_path):
    truth = str(tmp_path / "backlog.truth.json")
    w, pid, tid = start_workload(procs, "gpu.py", ["--gpu-ms", gpu_ms, "--sync-every", "100"],
                                 truth, duration=workload_duration(ATTACHES, WINDOW_S),
                                 env=dict(os.environ, FAKECUDA_MAX_BACKLOG_MS="100"))
    runs = attach_repeatedly(w, pid, ATTACHES, WINDOW_S)
    finish_workload(w, truth)
    got = []
    for r in runs:
        assert r["report"] is not None, r["error"]
        rep = r["report"]
        syncs = [a for a in rep["gpu"]["apis"] if a.get("calls")]
        got.append((rep["verdict"]["id"], rep["verdict"]["line"], syncs))
    print("\n" + "\n".join("%s: %s" % (v, line) for v, line, _ in got))
    assert all(v == want for v, _, _ in got), got
    if want == "gpu_backlog":
        ids = [x["id"] for x in runs[0]["report"]["recommendations"]]
        assert ids[0] == "sync_to_measure" and "compute_share" not in ids, ids
