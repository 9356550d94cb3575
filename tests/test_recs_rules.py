# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""The forbidden-pairs check (recs_rules.py) can fail: planted bad reports are caught, and a
fitting one passes. No root, no BPF: the check itself runs after every test of the suite
(conftest.recommendations_fit_evidence) on every report those tests produce."""
import copy

import pytest

import recs_rules


def good_report():
    """A CPU-only DataLoader job on 2 CPUs with one idle: its advice fits its evidence."""
    return {
        "schema": "pipeprof.report/v1",
        "verdict": {"name": "DATA-LOADING BOUND"},
        "gpu": {"traced": False, "libraries": [],
                "why_not": "no libcudart or libcuda is mapped by the traced processes"},
        "cpu": {"ncpus": 2, "busy_fraction": 0.55, "runnable_avg": 1.1},
        "roles": {"WORKER": {"processes": 1, "threads": 3}},
        "processes": [{"pid": 1, "root": True}, {"pid": 2, "exited": False,
                                                 "forked_while_tracing": False}],
        "model": {"inputs": {"compute_threads": 1}, "derived": {"fits": True},
                  "predictions": [{"id": "num_workers", "from": 1, "to": 2, "speedup": 1.75}]},
        "recommendations": [{
            "id": "more_workers",
            "text": "Raise num_workers from 1 to 2: predicted 1.75x steps/s; beyond that the "
                    "CPUs are the limit.",
            "evidence": "the worker loop is on-CPU 97% (0.97 CPUs); 0.9 of 2 CPUs idle",
            "speedup_bound": 10.0, "predicted_speedup": 1.75, "prediction": 0,
        }],
    }


def plant(mutate):
    r = good_report()
    mutate(r)
    return r


def add_rec(r, rid, text, evidence="measured something"):
    r["recommendations"].append({"id": rid, "text": text, "evidence": evidence,
                                 "speedup_bound": None, "predicted_speedup": None,
                                 "prediction": None})


def busy_machine(r):
    r["cpu"]["busy_fraction"] = 0.99


PLANTED = {
    "pin_memory on a CPU-only job": (
        lambda r: add_rec(r, "pin_memory", "Set pin_memory=True."), "no GPU library mapped"),
    "pin_memory with every H2D byte from pinned memory": (
        lambda r: (r.update(gpu={"traced": True, "libraries": [{"path": "/x/libcudart.so.13"}],
                                 "copies": {"HtoD": {"calls": 30, "bytes": 3000000,
                                                     "pinned_calls": 30,
                                                     "pinned_bytes": 3000000}}}),
                   add_rec(r, "pin_memory", "Copy to the GPU from pinned memory: "
                           "pin_memory=True in the DataLoader.")),
        "no H2D copy from pageable memory"),
    "pin_memory with no H2D copy at all": (
        lambda r: (r.update(gpu={"traced": True, "libraries": [{"path": "/x/libcudart.so.13"}],
                                 "copies": {"HtoD": {"calls": 0, "bytes": 0, "pinned_calls": 0,
                                                     "pinned_bytes": 0}}}),
                   add_rec(r, "ipc_collate", "The hand-off is the bottleneck: try a higher "
                           "prefetch_factor, pin_memory=True.")),
        "no H2D copy from pageable memory"),
    "CUDA graphs on a CPU-only job": (
        lambda r: add_rec(r, "less_work_per_step", "Use torch.compile or CUDA graphs."),
        "no GPU advice"),
    "more workers with no idle CPU": (busy_machine, "no idle CPU: no more workers"),
    "more threads with no idle CPU": (
        lambda r: (busy_machine(r), r["recommendations"].clear(),
                   add_rec(r, "intra_op_threads", "Try torch.set_num_threads(2) so tensor ops "
                           "use the idle CPUs.")), "no idle CPU: no more threads"),
    "persistent_workers with no re-fork": (
        lambda r: add_rec(r, "persistent_workers", "Set persistent_workers=True."),
        "no persistent_workers"),
    # A job that starts its workers and ends inside the window re-forks nothing.
    "persistent_workers for a job's start and end": (
        lambda r: (r["processes"].append({"pid": 3, "exited": True, "forked_while_tracing": True,
                                          "fork_ns": 100, "exit_ns": 900}),
                   add_rec(r, "persistent_workers", "Set persistent_workers=True.")),
        "no persistent_workers"),
    "advice without evidence": (
        lambda r: r["recommendations"][0].update(evidence=""), "gives no evidence"),
    "prediction over its bound": (
        lambda r: (r["recommendations"][0].update(predicted_speedup=12.0, speedup_bound=10.0),
                   r["model"]["predictions"][0].update(speedup=12.0)), "over its own bound"),
    "prediction from a model that does not fit": (
        lambda r: r["model"]["derived"].update(fits=False), "does not fit"),
    "prediction the model does not hold": (
        lambda r: r["recommendations"][0].update(predicted_speedup=1.9), "is not its prediction"),
    "fewer intra-op threads with one compute thread": (
        lambda r: add_rec(r, "fewer_compute_threads", "Try torch.set_num_threads(1)."),
        "one compute thread"),
    "more threads for a trainer in a single-threaded BLAS": (
        lambda r: (r.update(where={"roles": {"TRAINER": {
            "samples": 200, "interpreter_samples": 4, "single_threaded_library_samples": 180}}}),
            add_rec(r, "intra_op_threads", "Try torch.set_num_threads(2) (or OMP_NUM_THREADS=2) "
                    "so tensor ops use the idle CPUs.")),
        "single-threaded code"),
    "CUDA graphs on a GPU job whose launches were not counted": (
        lambda r: (r.update(gpu={"traced": True, "libraries": [{"path": "/x/libcudart.so.13"}]},
                            steps={"count": 0, "gpu": None}),
                   add_rec(r, "less_work_per_step", "Use torch.compile, and launch overhead "
                           "with CUDA graphs.")),
        "no launches measured"),
    "launch-bound advice on steps that are not": (
        lambda r: (r.update(gpu={"traced": True, "libraries": [{"path": "/x/libcudart.so.13"}]},
                            steps={"count": 90, "gpu": {"launches": 90, "launch_bound": False}}),
                   add_rec(r, "launch_bound", "Launch-bound (CPU-side): capture the step in "
                           "CUDA graphs.")),
        "not launch-bound"),
    "device-memory leak advice with no growth": (
        lambda r: (r.update(gpu={"traced": True, "libraries": [{"path": "/x/libcudart.so.13"}]},
                            gpu_memory={"traced": True, "leak": False}),
                   add_rec(r, "device_memory_leak", "Device memory grows 0.26 MB a step.")),
        "no device-memory leak advice"),
    "workers advice with no workers": (
        lambda r: r["roles"]["WORKER"].update(processes=0), "no DataLoader workers"),
}


def test_good_report_passes():
    assert recs_rules.violations(good_report()) == []


@pytest.mark.parametrize("name", sorted(PLANTED))
def test_planted_bad_report_fails(name):
    mutate, want = PLANTED[name]
    bad = recs_rules.violations(plant(mutate))
    assert bad, "%s: the check passed a report it must fail" % name
    assert any(want in v for v in bad), "%s: %s" % (name, bad)


def test_statements_of_no_gain_are_not_advice():
    """Saying more workers will not help, on a busy machine, is the right advice."""
    r = good_report()
    busy_machine(r)
    r["recommendations"] = []
    add_rec(r, "cheaper_transforms", "The machine has no idle CPU: more workers would only "
            "take CPU time from other processes. Make the transforms cheaper, or cache decoded "
            "or preprocessed samples.")
    assert recs_rules.violations(r) == []


def test_refork_may_get_persistent_workers():
    r = good_report()
    r["processes"] += [{"pid": 3, "exited": True, "fork_ns": None, "exit_ns": 500},
                       {"pid": 4, "forked_while_tracing": True, "fork_ns": 600, "exit_ns": None}]
    add_rec(r, "persistent_workers", "Set persistent_workers=True.")
    assert recs_rules.violations(r) == []


def test_gpu_job_may_get_gpu_advice():
    r = good_report()
    r["gpu"] = {"traced": True, "libraries": [{"path": "/x/libcudart.so.13"}]}
    add_rec(r, "pin_memory", "Set pin_memory=True.")
    assert recs_rules.violations(r) == []
    # Copies traced, some from pageable memory: pinning is fair advice.
    r["gpu"]["copies"] = {"HtoD": {"calls": 3, "bytes": 3000000, "pinned_calls": 1,
                                   "pinned_bytes": 1000000}}
    assert recs_rules.violations(r) == []
    # An unreadable library is still a mapped one.
    r["gpu"] = {"traced": False, "libraries": [],
                "why_not": "a GPU library is mapped but cannot be read, so it is not probed"}
    assert recs_rules.violations(r) == []


def test_launch_bound_job_may_get_cuda_graphs():
    r = good_report()
    r["gpu"] = {"traced": True, "libraries": [{"path": "/x/libcudart.so.13"}]}
    r["steps"] = {"count": 90, "gpu": {"launches": 27000, "launch_bound": True}}
    r["gpu_memory"] = {"traced": True, "leak": True}
    add_rec(r, "launch_bound", "Launch-bound (CPU-side): capture the step in CUDA graphs "
            "(torch.compile(mode=\"reduce-overhead\")).")
    add_rec(r, "device_memory_leak", "Device memory grows 0.26 MB a step.")
    assert recs_rules.violations(r) == []


def test_other_documents_are_not_judged():
    assert recs_rules.violations({"schema": "pipeprof.hist/v1"}) == []
    assert recs_rules.violations(copy.deepcopy(None)) == []


def test_serial_code_advice_fits():
    """Saying more threads would not help, for a trainer in a single-threaded BLAS, is fine."""
    r = good_report()
    r["where"] = {"roles": {"TRAINER": {"samples": 200, "interpreter_samples": 4,
                                        "single_threaded_library_samples": 180}}}
    add_rec(r, "serial_code", "More intra-op threads would not help: at most 1.05x steps/s with "
            "torch.set_num_threads(2), as 92% of the trainer's CPU runs on one thread.")
    assert recs_rules.violations(r) == []
