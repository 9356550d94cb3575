# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""The attach cache: a warm attach probes exactly what a cold one does, loads none of the
interrupt-nesting programs once the preempt count proved right in this boot, relocates its
programs against the cached kernel types exactly as against the kernel's whole BTF, attaches
each tracepoint program where its section says without reading that BTF, and an entry someone
else could have written, one altered, or one that points outside a library's code, is not
used."""
import contextlib
import glob
import json
import os
import re
import signal
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
        # either; the report's steps take the launch and copy probes (and the step probe,
        # on the sync calls' programs)
        assert not warm & {"on_copy_return"}, warm
        assert {"on_launch", "on_copy", "on_gpu_enter"} <= warm, warm
        time.sleep(0.2)

    # A planted entry that claims the count was proven is ignored when others could write it.
    text = open(cache / kernel[0]).read()
    os.unlink(cache / kernel[0])
    with open(cache / kernel[0], "w") as f:
        f.write(text)
    os.chmod(cache / kernel[0], 0o646)
    assert "on_irq_handler_entry" in programs_loaded(pid, cache)


MAP_ID = re.compile(r"map\[id:\d+\]")


@contextlib.contextmanager
def tracing_verbose(pid, cache):
    """`pipeprof -p -v` over cache, held while the block runs (once it says "tracing"), then
    interrupted; yields the process and its stderr lines, the rest added at the end."""
    env = dict(os.environ, PIPEPROF_CACHE_DIR=str(cache))
    p = subprocess.Popen([PIPEPROF, "-p", str(pid), "-d", "60", "-v"], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)
    err = []
    try:
        for line in p.stderr:
            err.append(line)
            if line.startswith("pipeprof: tracing"):
                break
        assert err and err[-1].startswith("pipeprof: tracing"), "".join(err)[-3000:]
        yield p, err
    finally:
        p.send_signal(signal.SIGINT)
        err.append(p.stderr.read())
        assert p.wait(30) == 0, "".join(err)[-3000:]


def loaded_code(pid, cache, dump=True):
    """`pipeprof -p -v` over cache: its stderr, and (dump) the translated code of each program
    it loaded (map ids, which differ between loads, left out)."""
    code = {}
    with tracing_verbose(pid, cache) as (p, err):
        held = bpf_objects(p.pid)["prog"] if dump else set()
        shown = subprocess.run(["bpftool", "prog", "show", "-j"], capture_output=True, text=True,
                               timeout=30, check=True).stdout
        for prog in json.loads(shown):
            if prog["id"] in held:
                dump = subprocess.run(["bpftool", "prog", "dump", "xlated", "id", str(prog["id"])],
                                      capture_output=True, text=True, timeout=30)
                assert dump.returncode == 0, (prog.get("name"), prog.get("type"), dump.stderr)
                code[prog["name"]] = MAP_ID.sub("map", dump.stdout)
    return "".join(err), code


def core_entries(cache):
    return sorted(e for e in os.listdir(cache) if e.startswith("corebtf-"))


def fnv1a(data):
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
    return h


def framed(btf):
    return b"pipeprof-core-btf 1 %d %016x\n" % (len(btf), fnv1a(btf)) + btf


def test_cached_core_types_relocate_as_the_whole_btf(pipeprof_bin, procs, tmp_path):
    _, pid, _ = start_workload(procs, "gpu.py", [], truth="/dev/null")
    cache = tmp_path / "cache"

    # The first run on a boot reads the kernel's whole BTF and leaves the types it needed.
    err, _ = loaded_code(pid, cache)
    assert "CO-RE against the cached kernel types" not in err, err[-3000:]
    assert "cached the kernel types CO-RE needs" in err, err[-3000:]
    made = core_entries(cache)
    assert len(made) == 1, made
    assert (os.stat(cache / made[0]).st_mode & 0o777) == 0o600
    with open(cache / made[0], "rb") as f:
        entry = f.read()
    assert entry.startswith(b"pipeprof-core-btf 1 ") and len(entry) < 64 * 1024, entry[:64]

    err, cached = loaded_code(pid, cache)
    assert "CO-RE against the cached kernel types" in err, err[-3000:]
    assert "on_sched_switch" in cached and "on_gpu_enter" in cached, sorted(cached)

    # The same attach without the entry: every program's code must be the same, instruction
    # for instruction (a field at another offset would read another field).
    os.unlink(cache / made[0])
    err, whole = loaded_code(pid, cache)
    assert "CO-RE against the cached kernel types" not in err, err[-3000:]
    assert sorted(whole) == sorted(cached)
    differ = [name for name in whole if whole[name] != cached[name]]
    assert not differ, (differ, whole[differ[0]][:2000], cached[differ[0]][:2000])
    # and it is made again, the same
    assert core_entries(cache) == made
    with open(cache / made[0], "rb") as f:
        assert f.read() == entry

    # The equality above proves something only if the cached types are what relocates: in
    # an entry (well framed, root's) that puts task_struct's pid where its tgid is, the
    # programs that read a pid read at the other offset.
    btf = entry[entry.index(b"\n") + 1:]
    raw = subprocess.run(["bpftool", "btf", "dump", "file", "/sys/kernel/btf/vmlinux"],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    members = re.search(r"^\[\d+\] STRUCT 'task_struct' size=\d+ vlen=\d+\n((?:\t.*\n)+)",
                        raw, re.M).group(1)
    offsets = {m.group(1): int(m.group(2)) for m in
               re.finditer(r"'(\w+)' type_id=\d+ bits_offset=(\d+)", members)}
    forged = btf.replace(offsets["pid"].to_bytes(4, "little"), offsets["tgid"].to_bytes(4, "little"))
    assert forged != btf
    (cache / made[0]).write_bytes(framed(forged))
    err, moved = loaded_code(pid, cache)
    assert "CO-RE against the cached kernel types" in err, err[-3000:]
    assert any(moved[name] != whole[name] for name in whole), "the cached types were not used"


def test_cached_core_types_refused_when_altered_or_unsafe(pipeprof_bin, procs, tmp_path):
    _, pid, _ = start_workload(procs, "gpu.py", [], truth="/dev/null")
    cache = tmp_path / "cache"
    loaded_code(pid, cache, dump=False)
    name = core_entries(cache)[0]
    with open(cache / name, "rb") as f:
        good = f.read()

    # One byte of the types changed: not used, and made again at the end.
    altered = bytearray(good)
    altered[-5] ^= 0x01
    (cache / name).write_bytes(bytes(altered))
    err, _ = loaded_code(pid, cache, dump=False)
    assert "cached CO-RE types %s unreadable: ignored" % name in err, err[-3000:]
    assert "CO-RE against the cached kernel types" not in err, err[-3000:]
    assert (cache / name).read_bytes() == good

    # Writable by a group, or another user's: not read; replaced by root's own.
    for spoil in (lambda path: os.chmod(path, 0o660), lambda path: os.chown(path, 65534, 65534)):
        spoil(cache / name)
        err, _ = loaded_code(pid, cache, dump=False)
        assert "CO-RE against the cached kernel types" not in err, err[-3000:]
        st = os.stat(cache / name)
        assert st.st_uid == 0 and (st.st_mode & 0o777) == 0o600, st
        assert (cache / name).read_bytes() == good
    err, _ = loaded_code(pid, cache, dump=False)
    assert "CO-RE against the cached kernel types" in err, err[-3000:]

    # Without a cache at all, the attach reads the whole BTF and leaves nothing behind.
    off = dict(os.environ, PIPEPROF_CACHE_DIR="off")
    r = subprocess.run([PIPEPROF, "-p", str(pid), "-d", "0.5", "-v"], capture_output=True,
                       text=True, timeout=60, cwd=ROOT, env=off)
    assert r.returncode == 0 and "Verdict:" in r.stdout, r.stderr[-3000:]
    assert "CO-RE" not in r.stderr.replace("CO-RE relocating", "").replace(
        "CO-RE relocations", ""), r.stderr[-3000:]


def test_cached_core_types_of_other_builds_kept_this_boot(pipeprof_bin, procs, tmp_path):
    """Two builds in use side by side (a daemon and a newer CLI) must not evict each other's
    entry at every run: an earlier boot's entries go, and of this boot's the four most
    recently written stay."""
    _, pid, _ = start_workload(procs, "gpu.py", [], truth="/dev/null")
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    with open("/proc/sys/kernel/random/boot_id") as f:
        boot = f.read().strip()
    earlier_boot = "corebtf-00000000-0000-0000-0000-000000000000-%016x" % 1
    builds = ["corebtf-%s-%016x" % (boot, i) for i in range(1, 5)]
    for age, name in enumerate([earlier_boot] + builds):
        (cache / name).write_bytes(framed(b"not this build's"))
        os.chmod(cache / name, 0o600)
        written = time.time() - 100 + age
        os.utime(cache / name, (written, written))

    err, _ = loaded_code(pid, cache, dump=False)
    assert "cached the kernel types CO-RE needs" in err, err[-3000:]
    left = core_entries(cache)
    ours = [e for e in left if e not in builds]
    assert len(ours) == 1 and ours[0].startswith("corebtf-%s-" % boot), left
    # The oldest of this boot's other builds made room; the three newer ones stay.
    assert sorted(e for e in left if e in builds) == builds[1:], left

    # and this build's entry is what the next attach uses
    err, _ = loaded_code(pid, cache, dump=False)
    assert "CO-RE against the cached kernel types" in err, err[-3000:]


TP_BTF_PROG = re.compile(r'SEC\("tp_btf/(\w+)"\)\s*\n\s*int\s+BPF_PROG\((\w+)')


def tp_btf_programs():
    """{program: tracepoint} of every tp_btf program in the BPF sources."""
    progs = {}
    for path in glob.glob(os.path.join(ROOT, "bpf", "**", "*.bpf.c"), recursive=True):
        with open(path) as f:
            for tp, name in TP_BTF_PROG.findall(f.read()):
                progs[name] = tp
    return progs


def test_every_tp_btf_tracepoint_has_its_id_cached():
    """A tracepoint missing from the cached list costs every attach a read of the kernel's
    whole BTF, silently: the list must name every tracepoint a program attaches to."""
    with open(os.path.join(ROOT, "user", "kfeatures_entry.c")) as f:
        body = re.search(r"kfeatures_tracepoints\[KF_TRACEPOINTS\] = \{(.*?)\};", f.read(),
                         re.S).group(1)
    listed = re.findall(r'"(\w+)"', body)
    used = set()
    for path in glob.glob(os.path.join(ROOT, "bpf", "**", "*.bpf.c"), recursive=True):
        with open(path) as f:
            used |= set(re.findall(r'SEC\("tp_btf/(\w+)"\)', f.read()))
    assert len(used) >= 10, used
    assert used <= set(listed), sorted(used - set(listed))
    assert len(listed) == len(set(listed)), listed


def attached(pid, cache):
    """`pipeprof -p -v` over cache: its stderr, and {program: tracepoint} of the raw
    tracepoint links it holds, read while it traces."""
    links = {}
    with tracing_verbose(pid, cache) as (p, err):
        held = bpf_objects(p.pid)
        progs = {prog["id"]: prog.get("name") for prog in json.loads(subprocess.run(
            ["bpftool", "prog", "show", "-j"], capture_output=True, text=True, timeout=30,
            check=True).stdout) if prog["id"] in held["prog"]}
        for link in json.loads(subprocess.run(["bpftool", "link", "show", "-j"],
                                              capture_output=True, text=True, timeout=30,
                                              check=True).stdout):
            if link["id"] in held["link"] and link.get("type") == "raw_tracepoint":
                links[progs.get(link["prog_id"])] = link.get("tp_name")
    return "".join(err), links


def test_tp_btf_targets_from_the_cache(pipeprof_bin, procs, tmp_path):
    """With this boot's entry, no attach reads the kernel's BTF (libbpf's -v log says when it
    does), and every tracepoint program is attached where its section says, as when the ids
    came from the BTF. An entry with two ids swapped moves the two programs: the cached ids
    are what the kernel is given."""
    _, pid, _ = start_workload(procs, "gpu.py", [], truth="/dev/null")
    cache = tmp_path / "cache"
    sections = tp_btf_programs()

    for run in range(3):
        err, links = attached(pid, cache)
        read_btf = "loading kernel BTF" in err
        assert read_btf == (run == 0), (run, err[-3000:])
        assert {"on_sched_switch", "on_sched_waking", "on_sched_wakeup",
                "on_sched_process_fork"} <= set(links), links
        wrong = {prog: tp for prog, tp in links.items() if sections.get(prog) != tp}
        assert not wrong, (wrong, sections)

    kernel = [e for e in os.listdir(cache) if e.startswith("kernel-")][0]
    text = (cache / kernel).read_text()
    ids = re.search(r"^tp_btf_ids (.*)$", text, re.M).group(1).split()
    ids[1], ids[2] = ids[2], ids[1]		# sched_waking's and sched_wakeup's, one argument each
    os.unlink(cache / kernel)
    (cache / kernel).write_text(re.sub(r"^tp_btf_ids .*$", "tp_btf_ids " + " ".join(ids), text,
                                       flags=re.M))
    os.chmod(cache / kernel, 0o600)
    err, links = attached(pid, cache)
    assert "loading kernel BTF" not in err and "kernel features cached" in err, err[-3000:]
    assert links["on_sched_waking"] == "sched_wakeup", links
    assert links["on_sched_wakeup"] == "sched_waking", links
