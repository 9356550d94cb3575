# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""pipeprof diff as a user meets it: an improvement, a regression and no change between two
hand-written reports (tests/fixtures/diff/), their text held against tests/golden/diff_*.txt,
the --fail-if gate's exit status, -j, and the one-line errors of exit status 2. Needs no root
and no BPF. PIPEPROF_UPDATE_GOLDEN=1 rewrites the golden files from what ./pipeprof prints."""
import json
import os
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PIPEPROF = os.path.join(ROOT, "pipeprof")
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "diff")
GOLDEN = os.path.join(ROOT, "tests", "golden")
UPDATE = os.environ.get("PIPEPROF_UPDATE_GOLDEN") == "1"

# A CI gate: slower median step, more waiting for data, fewer steps a second.
RULES = ["--fail-if", "step_p50>+10%", "--fail-if", "data_wait>+5pt",
         "--fail-if", "steps_per_s<-10%"]


@pytest.fixture(scope="module", autouse=True)
def built():
    if not os.access(PIPEPROF, os.X_OK):
        pytest.fail("%s is missing: build it with `make` first" % PIPEPROF, pytrace=False)


def diff(*args, cwd=FIXTURES):
    """./pipeprof diff ARGS, run beside the fixtures so that the output names them alone."""
    return subprocess.run([PIPEPROF, "diff"] + list(args), cwd=cwd, capture_output=True,
                          text=True, timeout=30)


def check_golden(name, got):
    path = os.path.join(GOLDEN, name)
    if UPDATE:
        with open(path, "w") as f:
            f.write(got)
    with open(path) as f:
        want = f.read()
    assert got == want, "stdout differs from %s (PIPEPROF_UPDATE_GOLDEN=1 rewrites it)" % path


@pytest.mark.parametrize("after,golden,status", [
    ("improved.json", "diff_improved.txt", 0),
    ("regressed.json", "diff_regressed.txt", 1),
    ("before.json", "diff_same.txt", 0),
    ("nosteps.json", "diff_nosteps.txt", 1),
])
def test_text_and_gate(after, golden, status):
    r = diff("before.json", after, *RULES)
    assert r.returncode == status, r
    check_golden(golden, r.stdout)
    assert r.stderr == ""
    fails = [line for line in r.stdout.splitlines() if line.startswith("FAIL: ")]
    assert bool(fails) == (status == 1)


def test_regression_names_each_rule():
    r = diff("before.json", "regressed.json", *RULES)
    assert r.returncode == 1
    assert "FAIL: step_p50 +23.1% > +10%\n" in r.stdout
    assert "FAIL: data_wait +9.0pt > +5pt\n" in r.stdout
    assert "FAIL: steps_per_s -18.6% < -10%\n" in r.stdout


def test_without_rules_nothing_fails():
    r = diff("before.json", "regressed.json")
    assert r.returncode == 0, r
    assert "FAIL" not in r.stdout


def test_verdict_rule():
    assert diff("before.json", "improved.json", "--fail-if", "verdict!=SAME").returncode == 1
    assert diff("before.json", "regressed.json", "--fail-if", "verdict!=SAME").returncode == 0


def test_no_steps_is_said_and_gates():
    r = diff("before.json", "nosteps.json", "--fail-if", "step_p50>+10%")
    assert r.returncode == 1
    assert "no steps in AFTER: libtorch_cpu is not mapped" in r.stdout
    assert "FAIL: step_p50>+10% cannot be checked: no steps in AFTER (nosteps.json)" in r.stdout
    r = diff("nosteps.json", "nosteps.json")
    assert r.returncode == 0, r
    assert "Predictions: none in BEFORE" in r.stdout


def test_verbose_lists_every_state_and_passing_rules():
    r = diff("-v", "before.json", "improved.json", *RULES)
    assert r.returncode == 0
    for state in ("RUNNING", "RUNQ", "GPU_WAIT", "IO_WAIT", "DATA_WAIT", "THREAD_WAIT",
                  "COMM_WAIT", "OTHER"):
        assert "\n  %s " % state in r.stdout, state
    assert "pass: step_p50 -31.2% not > +10%" in r.stdout


def test_json():
    r = diff("-j", "before.json", "regressed.json", *RULES)
    assert r.returncode == 1
    check_golden("diff_regressed_json.txt", r.stdout)
    d = json.loads(r.stdout)
    assert d["schema"] == "pipeprof.diff/v1"
    assert d["failed"] is True
    assert d["verdict"] == {
        "before": "DATA-LOADING BOUND", "after": "DATA-LOADING BOUND", "changed": False,
        "before_line": d["verdict"]["before_line"], "after_line": d["verdict"]["after_line"]}
    assert sorted(d["states"]) == sorted(["RUNNING", "RUNQ", "GPU_WAIT", "IO_WAIT", "DATA_WAIT",
                                          "THREAD_WAIT", "COMM_WAIT", "OTHER"])
    assert d["states"]["DATA_WAIT"]["change_pt"] == pytest.approx(9.0)
    assert d["steps"]["p50_s"]["change_pct"] == pytest.approx(23.125)
    assert d["steps"]["per_second"]["change_pct"] == pytest.approx(-18.6, abs=0.05)
    assert [p["id"] for p in d["predictions"]] == ["num_workers"]
    assert d["predictions"][0]["tested"] is False
    assert [(x["rule"], x["fired"]) for x in d["rules"]] == [
        ("step_p50>+10%", True), ("data_wait>+5pt", True), ("steps_per_s<-10%", True)]
    # Standard output stays one JSON document; the firing rules go to standard error.
    assert r.stderr.splitlines() == ["FAIL: step_p50 +23.1% > +10%",
                                     "FAIL: data_wait +9.0pt > +5pt",
                                     "FAIL: steps_per_s -18.6% < -10%"]


def test_json_improvement():
    r = diff("-j", "before.json", "improved.json", *RULES)
    assert r.returncode == 0, r
    d = json.loads(r.stdout)
    assert d["failed"] is False
    assert d["verdict"]["changed"] is True
    p = d["predictions"][0]
    assert p["tested"] is True
    assert p["measured_speedup"] == pytest.approx(17.6 / (1 / 0.0831), rel=1e-3)
    assert p["error_pct"] == pytest.approx(-1.2, abs=0.05)
    assert r.stderr == ""


@pytest.mark.parametrize("args,msg", [
    ([], "give two reports"),
    (["before.json"], "give two reports"),
    (["before.json", "improved.json", "regressed.json"], "two reports, not more: regressed.json"),
    (["before.json", "improved.json", "--fail-if", "step_p99>+10%"],
     "--fail-if 'step_p99>+10%': unknown metric 'step_p99'"),
    (["before.json", "improved.json", "--fail-if", "step_p50>+3pt"],
     "--fail-if 'step_p50>+3pt': pt is for a state's share"),
    (["before.json", "improved.json", "--fail-if", "step_p50>10"],
     "--fail-if 'step_p50>10': the value needs a unit"),
    (["before.json", "improved.json", "--fail-if", "verdict>+1%"],
     "--fail-if 'verdict>+1%': verdict takes only verdict!=SAME"),
    (["before.json", "improved.json", "--bogus"], "unrecognized option '--bogus'"),
])
def test_usage_errors_are_exit_2(args, msg):
    r = diff(*args)
    assert r.returncode == 2, r
    assert msg in r.stderr, r.stderr
    assert r.stdout == ""


def test_rule_errors_are_one_line():
    r = diff("before.json", "improved.json", "--fail-if", "data_wait>>5pt")
    assert r.returncode == 2
    assert r.stderr == "pipeprof diff: --fail-if 'data_wait>>5pt': the operator is > or <, alone\n"


@pytest.mark.parametrize("content,msg", [
    (None, "missing.json: cannot read: No such file or directory"),
    ("", "bad.json: empty: not a JSON document"),
    ('{"schema": "pipeprof.report/v1", "verdict": ', "bad.json: invalid JSON: it ends early"),
    ('{"schema": "pipeprof.report/v1"} trailing', "bad.json: invalid JSON: more after the document"),
    ('[1, 2]', "bad.json: not a pipeprof report: a JSON array, not an object"),
    ('{"verdict": {}}', "bad.json: not a pipeprof report: no schema"),
    ('{"schema": "pipeprof.hist/v1", "interval": 1}',
     "bad.json: schema is pipeprof.hist/v1, not pipeprof.report/v1"),
])
def test_bad_input_is_exit_2(tmp_path, content, msg):
    name = "missing.json" if content is None else "bad.json"
    if content is not None:
        (tmp_path / name).write_text(content)
    shutil.copy(os.path.join(FIXTURES, "before.json"), tmp_path / "before.json")
    for args in (["before.json", name], [name, "before.json"]):
        r = diff(*args, *RULES, cwd=str(tmp_path))
        assert r.returncode == 2, r
        # One line, naming the file.
        assert r.stderr.startswith("pipeprof diff: %s" % msg), r.stderr
        assert r.stderr.count("\n") == 1 and r.stderr.endswith("\n"), r.stderr
        assert r.stdout == ""


def test_a_directory_is_exit_2(tmp_path):
    r = diff(os.path.join(FIXTURES, "before.json"), str(tmp_path))
    assert r.returncode == 2
    assert "cannot read: Is a directory" in r.stderr


def test_help_has_rules_and_examples():
    r = diff("--help")
    assert r.returncode == 0
    for text in ("RULES", "step_p50", "data_wait", "verdict!=SAME", "EXAMPLES",
                 "pipeprof diff before.json after.json --fail-if 'step_p50>+10%'",
                 "Exit status: 0 no rule fired, 1 a rule fired"):
        assert text in r.stdout, text
    r = subprocess.run([PIPEPROF, "--help"], capture_output=True, text=True, timeout=30)
    assert "pipeprof diff BEFORE.json AFTER.json" in r.stdout
