# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""`pipeprof -p PID -d 3 --html FILE -j`: the report as one self-contained HTML page.

Three jobs, each attached once (module fixtures), their pages checked in two ways:

- parsed (html.parser): tags balanced, no <script>, no event handler, nothing that names a
  resource outside the page (no src, no attribute value starting http:, https: or //, links
  to anchors only, no url() or @import in the style); the JSON report's verdict line is the
  page's; every plot the report has data for is there as an <svg> with its id (steps-states
  with one bar a step, roles with one row a role, hist-<api> for each GPU sync API called,
  hist-io with block I/O, flamegraph with CPU samples), and a sentence where it has none;
- drawn by Debian's headless chromium: a screenshot that is not blank and shows the steps'
  colour, no console message, no "Failed to load resource", and no request from the page in
  chromium's network log. A page known to be bad shows that these checks catch what they look
  for. Skipped, with the reason, where chromium is not installed.

Every page also has the text report's sections (ids waited-on, gpu-steps, gpu-memory, memory,
and job for a job of ranks), each with the JSON report's figures where it has data and a
sentence where it has none.

The jobs: tools/workloads/data_bound.py (DATA-LOADING BOUND, steps from the autograd engine,
CPU samples; with --leak-kb 64 attached twice for 6 s, the workers' memory leak in both pages),
gpu.py on the fake CUDA runtime (GPU sync histograms; launches, allocations and a device leak a
step for the GPU API per step and GPU memory sections), ddp_gloo.py's two ranks attached at
their launcher (the Job section, the straggler marked), and hostile_names.py run
from a copy at a path that holds <script>alert(1)</script>&"', its main thread (the trainer)
named <script>&"' and its command line carrying the same markup: the page must show each as
text and hold no <script> element. Also: --html - is refused, and a page that cannot be written
costs exit status 1 with a one-line error while the report is still printed.

Loads BPF for real: run as root.
"""
import json
import os
import re
import shutil
import subprocess
from html.parser import HTMLParser

import pytest

from conftest import PYTHON, READY_TIMEOUT, ROOT, WORKLOADS, Proc, keep_report

PIPEPROF = os.path.join(ROOT, "pipeprof")
FAKECUDA = os.path.join(ROOT, ".output", "fakecuda", "libcudart.so.13")
WINDOW_S = 3
MARKUP = "<script>alert(1)</script>&\"'"
MARKUP_COMM = "<script>&\"'"
# user/html_svg.c's colour of DATA_WAIT: the data-bound job's steps are mostly it.
DATA_WAIT_RGB = (0x00, 0x72, 0xb2)
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
        "track", "wbr"}


class Page(HTMLParser):
    """What the checks need from a page: its tags, attributes, text, the text of elements by id,
    and each <svg>'s tooltips (<title>), with any markup error."""

    def __init__(self, text):
        super().__init__(convert_charrefs=True)
        self.stack, self.errors, self.tags, self.attrs = [], [], [], []
        self.svg_ids, self.text, self.by_id, self.titles = [], [], {}, {}
        self._open_ids = []     # (id, depth) of elements whose text is being collected
        self._svg = None
        self._title = None
        self.feed(text)
        self.close()
        if self.stack:
            self.errors.append("unclosed at the end: %s" % self.stack)

    def _start(self, tag, attrs):
        self.tags.append(tag)
        self.attrs.extend((tag, k, v) for k, v in attrs)
        a = dict(attrs)
        if tag == "svg":
            self.svg_ids.append(a.get("id"))
            self._svg = a.get("id")
            self.titles.setdefault(self._svg, [])
        if tag == "title" and self._svg is not None:
            self._title = []

    def handle_starttag(self, tag, attrs):
        self._start(tag, attrs)
        if tag in VOID:
            return
        self.stack.append(tag)
        i = dict(attrs).get("id")
        if i:
            self.by_id[i] = ""
            self._open_ids.append((i, len(self.stack)))

    def handle_startendtag(self, tag, attrs):
        self._start(tag, attrs)

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append("</%s> closes <%s> (at %s)" % (
                tag, self.stack[-1] if self.stack else "nothing", self.getpos()))
            return
        if tag == "title" and self._title is not None:
            self.titles[self._svg].append("".join(self._title))
            self._title = None
        if tag == "svg":
            self._svg = None
        self._open_ids = [(i, d) for i, d in self._open_ids if d < len(self.stack)]
        self.stack.pop()

    def handle_data(self, data):
        self.text.append(data)
        for i, _ in self._open_ids:
            self.by_id[i] += data
        if self._title is not None:
            self._title.append(data)


def page_problems(raw):
    """Everything that makes raw (bytes) not a self-contained, script-free, well-formed page."""
    problems = []
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return ["not UTF-8: %s" % e], None
    if not text.startswith("<!DOCTYPE html>"):
        problems.append("no doctype")
    p = Page(text)
    problems += p.errors
    if "script" in p.tags:
        problems.append("a <script> element")
    for tag, k, v in p.attrs:
        v = (v or "").strip().lower()
        if k.startswith("on"):
            problems.append("event handler %s on <%s>" % (k, tag))
        if k in ("src", "srcset", "xlink:href") or v.startswith(("http:", "https:", "//")):
            problems.append("<%s %s=%r>: names a resource" % (tag, k, v))
        if k == "href" and not v.startswith("#"):
            problems.append("<%s href=%r>: a link out of the page" % (tag, v))
    style = text.lower()
    for bad in ("url(", "@import", "@font-face"):
        if bad in style:
            problems.append("%s in the page" % bad)
    return problems, p


def attach(w, pid, out_html, extra=()):
    argv = [PIPEPROF, "-p", str(pid), "-d", str(WINDOW_S), "--html", str(out_html), "-j"] + \
        list(extra)
    r = subprocess.run(argv, capture_output=True, timeout=120, cwd=ROOT)
    assert w.alive(), "%s exited while traced\n%s" % (w.name, w.output())
    assert r.returncode == 0, "%s exited %d\n%s" % (argv, r.returncode, r.stderr[-3000:])
    report = json.loads(r.stdout.decode("utf-8"))
    return report, r


def start(argv, name):
    w = Proc(argv, name)
    m = w.wait_line(r"^READY pid=(\d+)", READY_TIMEOUT)
    if m is None:
        w.kill_group()
        pytest.fail("%s did not print READY\n%s" % (name, w.output()), pytrace=False)
    return w, int(m.group(1))


@pytest.fixture(scope="module", autouse=True)
def preconditions():
    assert os.geteuid() == 0, "these tests load BPF programs: run them as root"
    assert os.path.exists(PIPEPROF), "build first: make"


@pytest.fixture(scope="module")
def data_page(tmp_path_factory):
    """data_bound.py's page, and two more attaches: --html to a path that cannot be written,
    and --html -."""
    d = tmp_path_factory.mktemp("html")
    w, pid = start([PYTHON, os.path.join(WORKLOADS, "data_bound.py"), "--duration", "120",
                    "--truth", str(d / "truth.json")], "data_bound.py")
    try:
        report, _ = attach(w, pid, d / "report.html")
        unwritable = subprocess.run([PIPEPROF, "-p", str(pid), "-d", "1", "-j", "--html",
                                     str(d / "no-such-dir" / "x.html")],
                                    capture_output=True, text=True, timeout=120, cwd=ROOT)
        to_stdout = subprocess.run([PIPEPROF, "-p", str(pid), "-d", "1", "--html", "-"],
                                   capture_output=True, text=True, timeout=60, cwd=ROOT)
    finally:
        w.kill_group()
    yield {"report": report, "html": d / "report.html", "unwritable": unwritable,
           "to_stdout": to_stdout}


@pytest.fixture(scope="module")
def gpu_page(tmp_path_factory):
    if not os.path.exists(FAKECUDA):
        pytest.fail("%s is missing: build the GPU fixtures with `make fixtures`" % FAKECUDA,
                    pytrace=False)
    d = tmp_path_factory.mktemp("html-gpu")
    w, pid = start([PYTHON, os.path.join(WORKLOADS, "gpu.py"), "--gpu-ms", "2", "--duration",
                    "120", "--truth", "/dev/null", "--launches", "4", "--allocs-per-step", "2",
                    "--alloc-bytes", "65536", "--leak-allocs-per-step", "1"], "gpu.py")
    try:
        report, _ = attach(w, pid, d / "report.html")
    finally:
        w.kill_group()
    yield {"report": report, "html": d / "report.html"}


LEAK_WINDOW_S = 6


@pytest.fixture(scope="module")
def leak_pages(tmp_path_factory):
    """data_bound.py --leak-kb 64 (each sample keeps 64 KiB in the worker), attached twice for
    LEAK_WINDOW_S: long enough for the growth to hold all window."""
    d = tmp_path_factory.mktemp("html-leak")
    w, pid = start([PYTHON, os.path.join(WORKLOADS, "data_bound.py"), "--duration", "120",
                    "--leak-kb", "64", "--truth", str(d / "truth.json")], "data_bound.py")
    pages = []
    try:
        for i in range(2):
            html = d / ("report%d.html" % i)
            report, _ = attach(w, pid, html, ["-d", str(LEAK_WINDOW_S)])
            pages.append({"report": report, "html": html})
            # Beside the page, for a failure's diagnosis.
            (d / ("report%d.json" % i)).write_text(json.dumps(report))
    finally:
        w.kill_group()
    yield pages


@pytest.fixture(scope="module")
def ranks_page(tmp_path_factory):
    """ddp_gloo.py (two gloo ranks, rank 1 slower: --slow-ms 25, as tests/test_ranks.py runs
    it) attached at its launcher."""
    d = tmp_path_factory.mktemp("html-ranks")
    w, _ = start([PYTHON, os.path.join(WORKLOADS, "ddp_gloo.py"), "--slow-ms", "25",
                  "--duration", "120", "--truth", str(d / "truth.json")], "ddp_gloo.py")
    try:
        report, _ = attach(w, w.p.pid, d / "report.html")
    finally:
        w.kill_group()
    yield {"report": report, "html": d / "report.html"}


@pytest.fixture(scope="module")
def hostile_page(tmp_path_factory):
    """hostile_names.py run as <tmp>/<script>alert(1)</script>&"'.py (two directories deep:
    a file name holds no '/'), its trainer named <script>&"', MARKUP in its command line."""
    d = tmp_path_factory.mktemp("html-hostile")
    script = os.path.join(str(d), MARKUP + ".py")
    os.makedirs(os.path.dirname(script))
    shutil.copy(os.path.join(WORKLOADS, "hostile_names.py"), script)
    w, pid = start([PYTHON, script, "--duration", "120", "--main-name", MARKUP_COMM,
                    "--tag", MARKUP], "hostile_names.py")
    try:
        report, _ = attach(w, pid, d / "report.html")
    finally:
        w.kill_group()
    yield {"report": report, "html": d / "report.html", "script": script}


def plain(s):
    """Text the page shows exactly as JSON has it: nothing san_text() would escape."""
    return all(c.isprintable() and c not in "\\\ufffd" for c in s)


def check_page(page):
    """The checks every page passes; returns the parsed page."""
    raw = page["html"].read_bytes()
    problems, p = page_problems(raw)
    assert not problems, "\n".join(problems)
    rep = keep_report(page["report"])
    line, shown = rep["verdict"]["line"], p.by_id.get("verdict") or ""
    if plain(line):
        assert shown == line, (shown, line)
    else:   # a name in it shown with its \xNN escapes
        assert shown.split(":")[0] == line.split(":")[0] == rep["verdict"]["name"], (shown, line)
    assert "steps-states" in p.svg_ids and "roles" in p.svg_ids, p.svg_ids
    # One bar a step, a bar a run of consecutive steps past 120; else the whole window as one.
    steps = [t for t in p.titles["steps-states"] if re.match(r"steps? \d+", t)]
    n = rep["steps"]["count"]
    if n:
        per_bar = -(-n // 120)
        assert len(steps) == -(-n // per_bar), (len(steps), n)
        # (the last run may hold one step, and says "step N")
        assert all(t.startswith("step " if per_bar == 1 else "steps ") for t in steps[:-1]), \
            steps[:3]
    else:
        assert any(t.startswith("the whole window") for t in p.titles["steps-states"]), p.titles
    # One row a role that has threads, with its share of each state in its tooltips.
    for role, ro in rep["roles"].items():
        rows = [t for t in p.titles["roles"] if t.startswith(role + " (")]
        assert bool(rows) == bool(ro["threads"]), (role, ro["threads"], p.titles["roles"])
    # A histogram a GPU sync API called, block I/O's when there was any.
    called = {a["name"] for a in rep["gpu"]["apis"] if a["calls"]} if rep["gpu"]["traced"] else set()
    hists = {i[len("hist-"):] for i in p.svg_ids if i and i.startswith("hist-")}
    assert hists == called | ({"io"} if rep["io"]["requests"] else set()), (hists, called)
    text = "".join(p.text)
    if not called:
        assert "GPU synchronising calls: " in text
    if not rep["io"]["requests"]:
        assert "Block I/O: the job issued none in the window." in text
    samples = sum(r["samples"] for r in rep["where"]["roles"].values())
    assert ("flamegraph" in p.svg_ids) == (samples > 0), (samples, p.svg_ids)
    for rec in rep["recommendations"]:
        for what in (rec["text"], "measured: " + rec["evidence"]):
            if plain(what):
                assert what in text, what
    check_text_sections(p, raw.decode("utf-8"), rep)
    return p


def check_text_sections(p, html, rep):
    """The text report's sections: each there, with the JSON's figures or a sentence."""
    for sid in ("waited-on", "gpu-steps", "gpu-memory", "memory", "waits"):
        assert sid in p.by_id, (sid, sorted(p.by_id))
    assert ("job" in p.by_id) == bool(rep.get("job")), rep.get("job")
    # Waited on: the first five wakers, each with its share of the trainer's woken time.
    wo, shown = rep["waited_on"], p.by_id["waited-on"]
    if not wo:
        assert "No wakeup" in shown, shown
    for x in wo[:5]:
        who = "thread %d" % x["tid"] if x["tid"] is not None else x["comm"].strip("[]")
        assert who in shown, (who, shown)
        assert "%.1f%%" % (100 * x["share"]) in shown, (x, shown)
    # GPU API per step: launches and syncs a step as the JSON has them.
    g, shown = rep["steps"]["gpu"], p.by_id["gpu-steps"]
    if not rep["gpu"]["traced"]:
        assert "Not traced" in shown, shown
    elif g is None:
        assert "No whole step" in shown, shown
    else:
        for what, key in (("kernel launches", "launches"), ("synchronising calls", "syncs")):
            if key == "launches" and not g["launch_steps"]:
                assert "launches not counted" in shown, shown
                continue
            row = re.search(r"<tr><td>%s</td><td>([\d.]+)</td><td>(\d+) to (\d+)</td>"
                            r"<td>(\d+)</td></tr>" % what, html)
            assert row, (what, shown)
            assert abs(float(row.group(1)) - g[key + "_per_step"]) < 0.006, (row.group(0), g)
            assert (int(row.group(2)), int(row.group(3))) == (g[key + "_min"], g[key + "_max"])
            assert int(row.group(4)) == g[key], (row.group(0), g)
    # GPU memory: a row a process, the leak sentence with the JSON's flag.
    gm, shown = rep["gpu_memory"], p.by_id["gpu-memory"]
    if not gm["traced"]:
        assert "Not traced" in shown, shown
    elif not gm["processes"]:
        assert "No device memory" in shown, shown
    else:
        for proc in gm["processes"]:
            assert "pid %d" % proc["pid"] in shown, (proc, shown)
    assert ("a probable device-memory leak" in shown) == bool(gm["leak"]), (gm, shown)
    # Where the trainer waits: a heading a state of 1% or more of its waits, with their time.
    states = rep["where"]["waits"]["states"]
    total = sum(st["seconds"] for st in states.values())
    shown = p.by_id["waits"]
    if not states:
        assert "No wait of the trainer" in shown, shown
    for name, st in states.items():
        heading = "%s: %.2f s in %d waits" % (name, st["seconds"], st["count"])
        assert (heading in shown) == (st["seconds"] >= 0.01 * total), (heading, shown)
    # Memory: a row a group with processes, the leak wording where the JSON has a leak.
    m, shown = rep["memory"], p.by_id["memory"]
    if m["readings"]:
        for name, grp in m["groups"].items():
            assert (name in shown) == (grp["processes"] > 0), (name, grp, shown)
        leaks = sum(1 for grp in m["groups"].values() if grp["leak"])
        assert shown.count("a probable leak") == leaks, (m, shown)


CHROMIUM = shutil.which("chromium")


def render(html, tmp_path, name):
    """Screenshot of the page by headless chromium: (png path, console lines, the page's own
    network requests, chromium's stderr)."""
    if not CHROMIUM:
        pytest.skip("chromium is not installed (tools/install-deps.sh installs it)")
    png, netlog = tmp_path / (name + ".png"), tmp_path / (name + ".netlog.json")
    r = subprocess.run([CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu",
                        "--user-data-dir=%s" % (tmp_path / (name + ".profile")),
                        "--enable-logging=stderr", "--v=0", "--log-net-log=%s" % netlog,
                        "--screenshot=%s" % png, "--window-size=1280,2000",
                        "file://%s" % html], capture_output=True, text=True, timeout=120)
    assert png.exists(), "chromium wrote no screenshot (exit %d)\n%s" % (r.returncode,
                                                                       r.stderr[-3000:])
    console = [line for line in r.stderr.splitlines()
               if ":CONSOLE" in line or "Failed to load resource" in line]
    # Chromium fetches things of its own (updates, time): the page's requests are those
    # whose network isolation key is its file:// origin.
    fetched = []
    try:
        with open(netlog) as f:
            events = json.load(f).get("events", [])
    except (OSError, ValueError):
        events = []
    for e in events:
        params = e.get("params") or {}
        if "url" in params and "file://" in str(params.get("network_isolation_key", "")):
            fetched.append(params["url"])
    return png, console, fetched, r.stderr


def check_render(html, tmp_path, name, colour=None):
    png, console, fetched, _ = render(html, tmp_path, name)
    assert not console, "console messages:\n" + "\n".join(console)
    assert not fetched, "the page fetched: %s" % sorted(set(fetched))
    assert png.stat().st_size > 20000, "a blank screenshot: %d bytes" % png.stat().st_size
    try:
        from PIL import Image
    except ImportError:
        return png
    img = Image.open(png).convert("RGB")
    colours = img.getcolors(maxcolors=1 << 20) or []
    assert len(colours) > 50, "a blank or nearly blank picture (%d colours)" % len(colours)
    if colour:
        n = sum(c for c, rgb in colours if rgb == colour)
        assert n > 2000, "the plots are not drawn: %d pixels of %s" % (n, colour)
    return png


def test_page_of_a_data_loading_job(data_page):
    p = check_page(data_page)
    rep = data_page["report"]
    assert rep["verdict"]["name"] == "DATA-LOADING BOUND", rep["verdict"]
    assert rep["steps"]["count"] >= 10, rep["steps"]
    assert "flamegraph" in p.svg_ids
    # The page leads with who was traced.
    assert "PID %d" % rep["pid"] in "".join(p.text)


def test_page_of_a_data_loading_job_renders(data_page, tmp_path):
    png = check_render(data_page["html"], tmp_path, "data_bound", DATA_WAIT_RGB)
    shutil.copy(png, os.path.join(ROOT, ".output", "test_html_data_bound.png"))


def test_gpu_histograms(gpu_page):
    p = check_page(gpu_page)
    assert "hist-cudaStreamSynchronize" in p.svg_ids, p.svg_ids
    api = [a for a in gpu_page["report"]["gpu"]["apis"] if a["name"] == "cudaStreamSynchronize"][0]
    # Each bar's tooltip counts its bucket's calls: together, every call.
    counts = [int(m.group(1)) for t in p.titles["hist-cudaStreamSynchronize"]
              for m in [re.search(r": (\d+) calls", t)] if m]
    assert sum(counts) == api["calls"], (counts, api["calls"])


def test_gpu_api_per_step_and_memory(gpu_page):
    """gpu.py --launches 4 --allocs-per-step 2: the page's GPU API per step has its 4 launches
    and 1 sync a step, and GPU memory the trainer's process with its allocations."""
    p = check_page(gpu_page)
    rep = gpu_page["report"]
    g = rep["steps"]["gpu"]
    assert g is not None and g["launches_per_step"] == 4 and g["syncs_per_step"] == 1, g
    assert "4 to 4" in p.by_id["gpu-steps"], p.by_id["gpu-steps"]
    assert "cudaStreamSynchronize" in p.by_id["gpu-steps"]
    assert rep["gpu_memory"]["traced"] and rep["gpu_memory"]["processes"], rep["gpu_memory"]
    assert "TRAINER pid %d" % rep["pid"] in p.by_id["gpu-memory"], p.by_id["gpu-memory"]


def test_gpu_page_renders(gpu_page, tmp_path):
    check_render(gpu_page["html"], tmp_path, "gpu")


@pytest.fixture(scope="module")
def nccl_page(tmp_path_factory, fakenccl):
    """nccl_job.py on the fake libnccl (every collective a step, the communicator made each
    step): the page's NCCL section."""
    d = tmp_path_factory.mktemp("html-nccl")
    w, pid = start([PYTHON, os.path.join(WORKLOADS, "nccl_job.py"), "--lib", fakenccl,
                    "--comm-every", "1", "--duration", "120", "--truth", "/dev/null"],
                   "nccl_job.py")
    try:
        report, _ = attach(w, pid, d / "report.html")
    finally:
        w.kill_group()
    yield {"report": report, "html": d / "report.html"}


def test_nccl_on_the_page(nccl_page):
    """Each NCCL call the JSON counts has its row, with the same calls and bytes."""
    p = check_page(nccl_page)
    calls = nccl_page["report"]["nccl"]["calls"]
    assert calls, nccl_page["report"]["nccl"]
    assert "COMM_WAIT" in p.by_id["nccl"], p.by_id["nccl"]
    page = nccl_page["html"].read_text()
    for c in calls:
        row = re.search(r"<tr><td><code>%s</code></td><td>(\d+)</td>" % c["name"], page)
        assert row and int(row.group(1)) == c["calls"], (c, p.by_id["nccl"])


def test_memory_leak_on_the_page(leak_pages):
    """The workers' leak in the Memory section of both attaches' pages, as their JSON has it;
    who the trainer waited on (the worker's threads) in both."""
    for i, page in enumerate(leak_pages):
        p = check_page(page)
        rep = page["report"]
        assert rep["memory"]["groups"]["WORKERS"]["leak"], (i, page["html"], rep["memory"])
        assert not rep["memory"]["groups"]["TRAINER"]["leak"], rep["memory"]
        html = page["html"].read_text()
        assert re.search(r'<tr class="leak"><td>WORKERS</td><td>1</td><td>[\d.]+ [kMG]?B</td>'
                         r'<td>[\d.]+ [kMG]?B</td><td class="l">[\d.]+ [kMG]?B a step \(',
                         html), p.by_id["memory"]
        wo = rep["waited_on"]
        assert wo and wo[0]["role"] == "WORKER", wo
        assert "WORKER" in p.by_id["waited-on"], p.by_id["waited-on"]


def test_leak_page_renders(leak_pages, tmp_path):
    check_render(leak_pages[0]["html"], tmp_path, "leak", DATA_WAIT_RGB)


def test_ranks_on_the_page(ranks_page):
    """A job of ranks: the Job section first, the JSON's summary, a row a rank with its pid
    and verdict, the straggler's row marked as the JSON names it."""
    p = check_page(ranks_page)
    job = ranks_page["report"]["job"]
    assert job and len(job["ranks"]) == 2, job
    html = ranks_page["html"].read_text()
    assert html.index('<section id="job">') < html.index('<section id="steps">')
    assert job["summary"] in p.by_id["job"], (job["summary"], p.by_id["job"])
    for rk in job["ranks"]:
        straggler = rk["rank"] == job["straggler_rank"]
        row = '<tr%s><td>%d%s</td><td>%d</td><td class="l">%s</td>' % (
            ' class="straggler"' if straggler else "", rk["rank"],
            " (the straggler)" if straggler else "", rk["pid"], rk["verdict"])
        assert row in html, (row, p.by_id["job"])
    assert html.count('class="straggler"') == (job["straggler_rank"] is not None)


def test_hostile_names_are_text(hostile_page):
    raw = hostile_page["html"].read_bytes()
    p = check_page(hostile_page)
    rep = hostile_page["report"]
    assert rep["trainer"]["comm"] == MARKUP_COMM, rep["trainer"]
    assert MARKUP.encode() not in raw and b"<script" not in raw.lower()
    escaped = b"&lt;script&gt;alert(1)&lt;/script&gt;&amp;&quot;&#39;"
    assert escaped in raw, "the command line's markup is not shown escaped"
    # As text, the reader sees the names as the target set them.
    text = "".join(p.text)
    assert MARKUP in text and hostile_page["script"] in text, text[:2000]
    assert "trainer thread %d (%s" % (rep["trainer"]["tid"], MARKUP_COMM) in text, text[:2000]


def test_hostile_page_renders(hostile_page, tmp_path):
    check_render(hostile_page["html"], tmp_path, "hostile")


def test_render_checks_catch_a_bad_page(tmp_path):
    """The checks above, on a page with a script error and a fetch: they must fire."""
    bad = tmp_path / "bad.html"
    bad.write_text('<!DOCTYPE html><html><head><link rel="stylesheet" '
                   'href="http://127.0.0.1:9/x.css"></head><body><p>x</p>'
                   '<script>no_such_function();</script></body></html>')
    problems, _ = page_problems(bad.read_bytes())
    assert any("<script>" in x for x in problems) and any("names a resource" in x
                                                          for x in problems), problems
    _, console, fetched, stderr = render(bad, tmp_path, "bad")
    assert any("no_such_function" in line for line in console), stderr[-3000:]
    assert "http://127.0.0.1:9/x.css" in fetched, fetched


def test_html_option_errors(data_page):
    r = data_page["unwritable"]
    assert r.returncode == 1, (r.returncode, r.stderr)
    # The report is out all the same.
    assert json.loads(r.stdout)["schema"] == "pipeprof.report/v1"
    lines = [line for line in r.stderr.splitlines() if line.startswith("pipeprof: cannot write")]
    assert len(lines) == 1 and "x.html" in lines[0] and "No such file or directory" in lines[0], \
        r.stderr
    r = data_page["to_stdout"]
    assert r.returncode == 2 and r.stdout == "", (r.returncode, r.stdout)
    assert r.stderr.splitlines()[0] == ("pipeprof: --html needs a file name (not -: the report "
                                        "goes to standard output)"), r.stderr
