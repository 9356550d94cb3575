# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""What a site with many hosts loads into its own Prometheus and Grafana: the alerting rules
(tools/prometheus/pipeprof.rules.yml) and the dashboard (tools/grafana/pipeprof-dashboard.json).

The rules pass `promtool check rules`, and their unit tests (`promtool test rules`) fire each
alert on the series that should fire it and not on the others; a rule file with its thresholds
moved fails those unit tests, so they can fail. Every query of the dashboard is valid PromQL (as
promtool parses it) over metrics the daemon exports. tests/test_daemon.py loads both into a real
Prometheus scraping a real daemon.
"""
import json
import os
import re
import shutil
import subprocess

import pytest

from conftest import ROOT

PROMTOOL = "/usr/bin/promtool"
RULES = os.path.join(ROOT, "tools", "prometheus", "pipeprof.rules.yml")
RULE_TESTS = os.path.join(ROOT, "tools", "prometheus", "pipeprof.rules.test.yml")
DASHBOARD = os.path.join(ROOT, "tools", "grafana", "pipeprof-dashboard.json")
METRICS_SRC = os.path.join(ROOT, "user", "daemon_metrics.c")

pytestmark = pytest.mark.skipif(not os.access(PROMTOOL, os.X_OK),
                                reason="promtool is not installed (make deps installs it)")


def promtool(*args, cwd=None):
    return subprocess.run([PROMTOOL] + list(args), capture_output=True, text=True, timeout=120,
                          cwd=cwd)


def exported_metrics():
    """The daemon's metric families, from its source, with a histogram's series."""
    src = open(METRICS_SRC).read()
    out = set()
    for name, typ in re.findall(r'prom_family\(f, "(pipeprof_\w+)", "(\w+)"', src):
        out.add(name)
        if typ == "histogram":
            out |= {name + "_bucket", name + "_sum", name + "_count"}
    assert len(out) > 10, out
    return out


def dashboard_exprs(dash):
    for p in dash["panels"]:
        for t in p.get("targets", []):
            yield p["title"], t["expr"]
    for v in dash["templating"]["list"]:
        if v["type"] == "query":
            yield "variable " + v["name"], v["definition"]


def concrete(expr):
    """A dashboard query as Prometheus would get it from Grafana."""
    return expr.replace("$__rate_interval", "1m").replace("$comm", ".*")


def test_rules_pass_promtool():
    r = promtool("check", "rules", RULES)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS: 9 rules found" in r.stdout, r.stdout
    r = promtool("test", "rules", RULE_TESTS)
    assert r.returncode == 0 and "SUCCESS" in r.stdout, r.stdout + r.stderr
    # Every alert is exercised by the unit tests.
    alerts = set(re.findall(r"^\s+- alert: (\w+)$", open(RULES).read(), re.M))
    tested = set(re.findall(r"alertname: (\w+)$", open(RULE_TESTS).read(), re.M))
    assert alerts == tested, (alerts - tested, tested - alerts)
    for name in alerts:
        assert re.search(r"alertname: %s\n\s+exp_alerts:\n\s+- exp_labels" % name,
                         open(RULE_TESTS).read()), "%s is never expected to fire" % name


@pytest.mark.parametrize("mutation", [
    ("> 1.2 * (rate", "> 1.6 * (rate"),          # a regression threshold moved
    ("        for: 5m\n        labels:\n          severity: warning\n        annotations:\n"
     "          summary: \"{{ $labels.comm }} (pid {{ $labels.pid }}) waits for its input",
     "        for: 9m\n        labels:\n          severity: warning\n        annotations:\n"
     "          summary: \"{{ $labels.comm }} (pid {{ $labels.pid }}) waits for its input"),
    ('verdict="io_bound"', 'verdict="gpu_bound"'),  # the wrong verdict
])
def test_rule_unit_tests_can_fail(tmp_path, mutation):
    old, new = mutation
    text = open(RULES).read()
    assert old in text, old
    (tmp_path / "pipeprof.rules.yml").write_text(text.replace(old, new, 1))
    shutil.copy(RULE_TESTS, tmp_path / "pipeprof.rules.test.yml")
    r = promtool("test", "rules", "pipeprof.rules.test.yml", cwd=str(tmp_path))
    assert r.returncode != 0, "the unit tests passed a broken rule file:\n" + r.stdout


def test_dashboard_queries_are_promql_over_exported_metrics(tmp_path):
    dash = json.load(open(DASHBOARD))
    exported = exported_metrics()
    rules = ["groups:", "  - name: dashboard", "    rules:"]
    for i, (title, expr) in enumerate(dashboard_exprs(dash)):
        used = set(re.findall(r"\bpipeprof_\w+", expr))
        assert used and used <= exported, (title, used - exported)
        if expr.startswith("label_values("):
            continue
        rules += ["      - record: dashboard:q%d" % i, "        expr: %s" % json.dumps(concrete(expr))]
    path = tmp_path / "dashboard-queries.yml"
    path.write_text("\n".join(rules) + "\n")
    r = promtool("check", "rules", str(path))
    assert r.returncode == 0, r.stdout + r.stderr + path.read_text()


def test_dashboard_layout():
    dash = json.load(open(DASHBOARD))
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids)), ids
    cells = set()
    for p in dash["panels"]:
        g = p["gridPos"]
        assert g["x"] >= 0 and g["w"] > 0 and g["x"] + g["w"] <= 24 and g["h"] > 0, p["title"]
        mine = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not mine & cells, "%s overlaps another panel" % p["title"]
        cells |= mine
        assert p["datasource"]["uid"] == "${DS_PROMETHEUS}", p["title"]
        assert p["targets"] and p["description"], p["title"]
    names = [v["name"] for v in dash["templating"]["list"]]
    assert names == ["DS_PROMETHEUS", "comm"], names
    # Every job panel follows the job picker.
    for p in dash["panels"]:
        for t in p["targets"]:
            if "pipeprof_job_" in t["expr"]:
                assert '$comm' in t["expr"], (p["title"], t["expr"])
