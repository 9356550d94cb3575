# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""The manual page and the bash completion, held against the commands they describe: the page
renders with no warning from man or groff, and names every subcommand and every long option
that each command's --help lists, in that command's section; the completion offers the
subcommands, each command's options (the same lists as --help), hist's kinds, PIDs and files.
Needs no root and no BPF; skips, saying why, where man, groff or bash is missing."""
import os
import re
import shlex
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PIPEPROF = os.path.join(ROOT, "pipeprof")
MANPAGE = os.path.join(ROOT, "tools", "pipeprof.8")
COMPLETION = os.path.join(ROOT, "tools", "pipeprof.bash-completion")
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "diff")

SUBCOMMANDS = ["hist", "top", "profile", "record", "flamegraph", "daemon", "diff"]
# Each command, and the section of the page that documents its options.
COMMANDS = {"report": "REPORT OPTIONS", "hist": "HIST", "top": "TOP", "profile": "PROFILE", "record": "RECORD",
            "flamegraph": "FLAMEGRAPH", "daemon": "DAEMON", "diff": "DIFF"}
# argp's own, in every command's --help: documented once, under COMMON OPTIONS.
COMMON = {"--help", "--usage", "--version"}


@pytest.fixture(scope="module", autouse=True)
def built():
    if not os.access(PIPEPROF, os.X_OK):
        pytest.fail("%s is missing: build it with `make` first" % PIPEPROF, pytrace=False)


def help_text(cmd):
    argv = [PIPEPROF] + ([] if cmd == "report" else [cmd]) + ["--help"]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=30,
                       env=dict(os.environ, COLUMNS="80"))
    assert r.returncode == 0, r
    return r.stdout


def long_options(cmd):
    """The long options the command's --help lists (its option lines alone: the text around
    them mentions other commands' options)."""
    text = help_text(cmd).split("Mandatory or optional arguments")[0]
    opts = set(re.findall(r"^ {2,6}(?:-\S, )?(--[a-z][a-z-]*)", text, re.M))
    assert COMMON <= opts, (cmd, opts)
    return opts


def short_options(cmd):
    text = help_text(cmd).split("Mandatory or optional arguments")[0]
    return set(re.findall(r"^ {2}(-[A-Za-z]), --", text, re.M))


def hist_kinds():
    text = help_text("hist").split("KINDS", 1)[1].split("\n\n", 1)[0]
    kinds = re.findall(r"^  ([a-z][a-z-]*)  ", text, re.M)
    assert len(kinds) >= 8, text
    return kinds


# --- the manual page ---

def render(tool):
    if tool == "man":
        if not shutil.which("man"):
            pytest.skip("man is not installed (Debian: man-db)")
        argv = ["man", "--warnings", "-l", MANPAGE]
    else:
        if not shutil.which("groff"):
            pytest.skip("groff is not installed (Debian: groff-base)")
        argv = ["groff", "-man", "-ww", "-Tascii", MANPAGE]
    # C locale: ASCII hyphens, so that options read as typed.
    env = dict(os.environ, MANWIDTH="80", LC_ALL="C", MANPAGER="cat", PAGER="cat")
    r = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)
    # groff -Tascii overstrikes bold and underlines: plain text to search.
    r.stdout = re.sub(r".\x08", "", r.stdout)
    return r


@pytest.mark.parametrize("tool", ["man", "groff"])
def test_manpage_renders_without_warnings(tool):
    r = render(tool)
    assert r.returncode == 0, r.stderr
    assert r.stderr == "", "%s warns:\n%s" % (tool, r.stderr)
    assert "PIPEPROF(8)" in r.stdout or tool == "groff"
    for heading in ("NAME", "SYNOPSIS", "DESCRIPTION", "EXIT STATUS", "ENVIRONMENT", "FILES",
                    "EXAMPLES"):
        assert re.search(r"^%s$" % heading, r.stdout, re.M), heading


@pytest.fixture(scope="module")
def page():
    r = render("man" if shutil.which("man") else "groff")
    assert r.returncode == 0, r.stderr
    return r.stdout


def sections(text):
    """{heading: body} of the rendered page."""
    parts = re.split(r"^([A-Z][A-Z ]+)$", text, flags=re.M)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def test_manpage_version_is_the_program_s():
    r = subprocess.run([PIPEPROF, "--version"], capture_output=True, text=True, timeout=30)
    with open(MANPAGE) as f:
        th = next(line for line in f if line.startswith(".TH "))
    assert '"%s"' % r.stdout.strip() in th, (r.stdout, th)


def test_manpage_names_every_subcommand(page):
    r = subprocess.run([PIPEPROF, "--help"], capture_output=True, text=True, timeout=30)
    listed = set(re.findall(r"pipeprof \[OPTION\.\.\.\] ([a-z]+)", r.stdout))
    assert listed == set(SUBCOMMANDS), listed
    synopsis = sections(page)["SYNOPSIS"]
    for cmd in SUBCOMMANDS:
        assert "pipeprof %s" % cmd in synopsis, cmd
        assert cmd.upper() in sections(page), cmd


@pytest.mark.parametrize("cmd", sorted(COMMANDS))
def test_manpage_has_every_option(page, cmd):
    body = sections(page)[COMMANDS[cmd]]
    for opt in sorted(long_options(cmd) - COMMON):
        assert re.search(r"(?<![\w-])%s(?![\w-])" % re.escape(opt), body), \
            "%s of %s is not in the page's %s section" % (opt, cmd, COMMANDS[cmd])
    for opt in sorted(short_options(cmd) - {"-V"}):
        assert re.search(r"(?<![\w-])%s, --" % re.escape(opt), body), (cmd, opt)
    common = sections(page)["COMMON OPTIONS"]
    for opt in COMMON:
        assert opt in common, opt


def test_manpage_has_files_environment_and_kinds(page):
    s = sections(page)
    for path in ("/var/cache/pipeprof", "/etc/pipeprof/daemon.conf"):
        assert path in s["FILES"], path
    for name in re.findall(r'getenv\("(PIPEPROF_[A-Z_]+)"\)',
                           subprocess.run(["grep", "-rh", "getenv", os.path.join(ROOT, "user")],
                                          capture_output=True, text=True).stdout):
        assert name in s["ENVIRONMENT"], name
    for kind in hist_kinds():
        assert re.search(r"^ +%s +\S" % re.escape(kind), s["HIST"], re.M), kind
    for cmd in ["pipeprof -p"] + ["pipeprof %s" % c for c in SUBCOMMANDS if c != "hist"] + ["hist"]:
        assert cmd in s["EXIT STATUS"] or cmd.split()[-1] in s["EXIT STATUS"], cmd


# --- the bash completion ---

def complete(*words, cwd=ROOT):
    """What _pipeprof offers for the command line WORDS, the last being the one completed
    (bash splits "--pid=1" at '=' as COMP_WORDBREAKS says; tests give the words as split)."""
    if not shutil.which("bash"):
        pytest.skip("bash is not installed")
    line = " ".join(words)
    script = """
source %s || exit 3
COMP_WORDS=(%s)
COMP_CWORD=%d
COMP_LINE=%s
COMP_POINT=${#COMP_LINE}
_pipeprof pipeprof "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}" || exit 4
printf '%%s\\n' "${COMPREPLY[@]}"
""" % (shlex.quote(COMPLETION), " ".join(shlex.quote(w) for w in words), len(words) - 1,
       shlex.quote(line))
    r = subprocess.run(["bash", "--norc", "--noprofile", "-c", script], capture_output=True,
                       text=True, timeout=30, cwd=cwd)
    assert r.returncode == 0 and r.stderr == "", r
    return [w for w in r.stdout.split("\n") if w]


def test_completion_registers_and_is_quiet():
    r = subprocess.run(["bash", "--norc", "--noprofile", "-c",
                        "source %s && complete -p pipeprof && shopt -p extglob"
                        % shlex.quote(COMPLETION)],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode != 2 and r.stderr == "", r
    assert "complete -F _pipeprof pipeprof" in r.stdout
    # Sourcing it changes no shell option of the user's.
    assert "shopt -u extglob" in r.stdout


def test_completion_with_bash_completion_loaded():
    lib = "/usr/share/bash-completion/bash_completion"
    if not os.path.exists(lib):
        pytest.skip("the bash-completion package is not installed (Debian: bash-completion)")
    r = subprocess.run(["bash", "--norc", "--noprofile", "-c",
                        "source %s; source %s && COMP_WORDS=(pipeprof h) COMP_CWORD=1 && "
                        "_pipeprof && echo ${COMPREPLY[*]}" % (lib, shlex.quote(COMPLETION))],
                       capture_output=True, text=True, timeout=30)
    assert r.stdout.strip() == "hist", r


def test_completion_subcommands():
    assert complete("pipeprof", "h") == ["hist"]
    assert complete("pipeprof", "d") == ["daemon", "diff"]
    assert sorted(complete("pipeprof", "")) == sorted(SUBCOMMANDS)


@pytest.mark.parametrize("cmd", sorted(COMMANDS))
def test_completion_offers_every_long_option(cmd):
    words = ["pipeprof"] + ([] if cmd == "report" else [cmd]) + ["--"]
    offered = set(complete(*words))
    assert offered == long_options(cmd), offered ^ long_options(cmd)


@pytest.mark.parametrize("cmd", sorted(COMMANDS))
def test_completion_offers_every_short_option(cmd):
    words = ["pipeprof"] + ([] if cmd == "report" else [cmd]) + ["-"]
    offered = set(complete(*words))
    assert short_options(cmd) <= offered, short_options(cmd) - offered


def test_completion_hist_kinds():
    kinds = hist_kinds()
    assert complete("pipeprof", "hist", "") == kinds
    assert complete("pipeprof", "hist", "-p", "1", "") == kinds
    assert complete("pipeprof", "hist", "-p", "1", "runq", "") == [k for k in kinds if k != "runq"]
    assert complete("pipeprof", "hist", "-p", "1", "g") == ["gpu-sync"]
    # After the interval, no kind goes.
    assert complete("pipeprof", "hist", "-p", "1", "runq", "5", "") == []


def test_completion_diff():
    assert complete("pipeprof", "diff", "--f") == ["--fail-if"]
    assert complete("pipeprof", "diff", "--fail-if", "data") == ["data_wait"]
    assert "before.json" in complete("pipeprof", "diff", "", cwd=FIXTURES)
    assert complete("pipeprof", "diff", "before.json", "imp", cwd=FIXTURES) == ["improved.json"]


def test_completion_pids_and_values():
    mine = str(os.getpid())
    for words in (("pipeprof", "-p", ""), ("pipeprof", "hist", "-p", ""),
                  ("pipeprof", "top", "-p", ""),
                  ("pipeprof", "profile", "--pid", ""), ("pipeprof", "--pid", "=", ""),
                  ("pipeprof", "-t", "")):
        assert mine in complete(*words), words
    assert complete("pipeprof", "--pid=%s" % mine) == ["--pid=%s" % mine]
    assert complete("pipeprof", "profile", "--role", "") == ["trainer", "worker", "helper"]
    assert complete("pipeprof", "profile", "--role=w") == ["--role=worker"]
    assert complete("pipeprof", "profile", "--format", "s") == ["svg"]
    assert complete("pipeprof", "daemon", "--serve", "") == ["all", "no-cmdline", "metrics"]
    # A value with nothing to offer offers nothing, not options.
    assert complete("pipeprof", "-d", "") == []


def test_completion_files():
    assert "before.json" in complete("pipeprof", "flamegraph", "", cwd=FIXTURES)
    assert complete("pipeprof", "flamegraph", "-o", "impr", cwd=FIXTURES) == ["improved.json"]
    assert complete("pipeprof", "-d", "10", "--", "true", "bef", cwd=FIXTURES) == ["before.json"]
