# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""`make install` puts the binary, the manual page, the bash completion, the systemd unit and a
default daemon config in place, and systemd accepts the unit."""
import os
import shutil
import subprocess

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_install_and_unit(tmp_path):
    dest = tmp_path / "root"
    r = subprocess.run(["make", "-C", REPO, "install", "DESTDIR=%s" % dest, "PREFIX=/usr/local"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    binary = dest / "usr/local/sbin/pipeprof"
    unit = dest / "etc/systemd/system/pipeprof.service"
    conf = dest / "etc/pipeprof/daemon.conf"
    assert os.access(binary, os.X_OK)
    assert conf.exists()
    for installed, source in (("usr/local/share/man/man8/pipeprof.8", "tools/pipeprof.8"),
                              ("usr/local/share/bash-completion/completions/pipeprof",
                               "tools/pipeprof.bash-completion")):
        with open(os.path.join(REPO, source)) as f:
            assert (dest / installed).read_text() == f.read(), installed
    text = unit.read_text()
    assert "ExecStart=/usr/local/sbin/pipeprof daemon --config /etc/pipeprof/daemon.conf" in text
    assert "ExecReload=/bin/kill -HUP $MAINPID" in text
    verify = shutil.which("systemd-analyze")
    if not verify:
        pytest.skip("systemd-analyze not installed")
    # point the unit at binaries that exist here, so verify checks the unit, not this machine
    local = tmp_path / "pipeprof.service"
    local.write_text(text.replace("/usr/local/sbin/pipeprof", str(binary)))
    r = subprocess.run([verify, "verify", str(local)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and not r.stderr.strip(), r.stderr
