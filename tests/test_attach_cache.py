# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""The attach cache: a warm attach probes exactly what a cold one does, loads none of the
interrupt-nesting programs once the preempt count proved right in this boot, and an entry
someone else could have written, or one that points outside a library's code, is not used."""
import json
import os
import re
import subprocess
import time

from conftest import PIPEPROF, ROOT, bpf_objects, start_workload

PROBE_LINE = re.compile(r"^pipeprof: pid \d+ (.+?) value 0x[0-9a-f]+ offset 0x[0-9a-f]+.*$", re.M)
LOOKUPS = re.compile(r"symbol lookups: (\d+) read, (\d+) from the cache, (\d+) from memory")


def hist(pid, cache, kinds=("gpu-sync", "step")):
    env = dict(os.environ, PIPEPROF_CACHE_DIR=str(cache))
    r = subprocess.run([PIPEPROF, "hist", "-v", "-p", str(pid)] + list(kinds) + ["1", "1"],
                       capture_output=True, text=True, timeout=60, cwd=ROOT, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    m = LOOKUPS.search(r.stderr)
    assert m, r.stderr[-3000:]
    features = "cached" if "kernel features cached" in r.stderr else "read"
    probes = sorted(PROBE_LINE.findall(r.stderr))
    assert probes, r.stderr[-3000:]
    return features, tuple(int(x) for x in m.groups()), probes, r.stdout


def programs_loaded(pid, cache):
    """The names of the BPF programs a running `pipeprof -p` holds."""
    env = dict(os.environ, PIPEPROF_CACHE_DIR=str(cache))
    p = subprocess.Popen([PIPEPROF, "-p", str(pid), "-d", "2"], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)
    try:
        line = p.stderr.readline()
        assert "tracing" in line, line + p.stderr.read()
        held = bpf_objects(p.pid)["prog"]
        shown = subprocess.run(["bpftool", "prog", "show", "-j"], capture_output=True, text=True,
                               timeout=30, check=True).stdout
        return {prog.get("name") for prog in json.loads(shown) if prog["id"] in held}
    finally:
        p.stderr.read()
        assert p.wait(30) == 0


def test_warm_attach_probes_what_a_cold_one_does(pipeprof_bin, procs, tmp_path):
    _, pid, _ = start_workload(procs, "gpu.py", [], truth="/dev/null")
    cache = tmp_path / "cache"

    features, (reads, disk, _), cold_probes, cold_out = hist(pid, cache)
    assert features == "read" and reads >= 3 and disk == 0, (features, reads, disk)
    assert (cache.stat().st_mode & 0o777) == 0o700
    entries = sorted(os.listdir(cache))
    assert any(e.startswith("kernel-") for e in entries), entries
    assert sum(e.startswith("elf-") for e in entries) >= 3, entries

    features, (reads, disk, _), warm_probes, warm_out = hist(pid, cache)
    assert features == "cached" and reads == 0 and disk >= 3, (features, reads, disk)
    assert warm_probes == cold_probes
    for out in (cold_out, warm_out):
        assert "count " in out and "no events" not in out, out

    # Entries someone else could have written, or that move a probe out of the code, are
    # refused; the libraries are read again and the probes land where they belong.
    elf = [e for e in entries if e.startswith("elf-")]
    with open(cache / elf[0]) as f:
        good = f.read()
    forged = re.sub(r"^(sym 1 [0-9a-f]+ [0-9a-f]+ )[0-9a-f]+", r"\g<1>10", good, count=1, flags=re.M)
    assert forged != good, good
    (cache / elf[0]).write_text(forged)
    os.chown(cache / elf[1], 65534, 65534)
    os.chmod(cache / elf[2], 0o666)
    _, (reads, disk, _), probes, _ = hist(pid, cache)
    assert reads >= 3, (reads, disk)
    assert probes == cold_probes


def test_interrupt_programs_only_until_proven(pipeprof_bin, procs, tmp_path):
    _, pid, _ = start_workload(procs, "gpu.py", [], truth="/dev/null")
    cache = tmp_path / "cache"

    cold = programs_loaded(pid, cache)
    assert "on_sched_switch" in cold and "on_irq_handler_entry" in cold, cold
    kernel = [e for e in os.listdir(cache) if e.startswith("kernel-")]
    assert len(kernel) == 1, kernel
    with open(cache / kernel[0]) as f:
        assert "preempt_count_proven 1" in f.read()
    for _ in range(3):
        warm = programs_loaded(pid, cache)
        assert "on_sched_switch" in warm and "on_softirq_entry" in warm, warm
        assert not warm & {"on_irq_handler_entry", "on_irq_handler_exit",
                           "on_hrtimer_expire_entry", "on_hrtimer_expire_exit",
                           "on_softirq_exit"}, warm
        # what only the histograms need (a copy's return, for its throughput) is not loaded
        # either; the report's steps take the launch, copy and step probes
        assert not warm & {"on_copy_return"}, warm
        assert {"on_launch", "on_copy", "on_step"} <= warm, warm
        time.sleep(0.2)

    # A planted entry that claims the count was proven is ignored when others could write it.
    text = open(cache / kernel[0]).read()
    os.unlink(cache / kernel[0])
    with open(cache / kernel[0], "w") as f:
        f.write(text)
    os.chmod(cache / kernel[0], 0o646)
    assert "on_irq_handler_entry" in programs_loaded(pid, cache)
