#!/usr/bin/env bash
# Installs everything pipeprof needs to build, run its demo and pass its tests, from Debian's
# packages only. Idempotent: skips apt when every package is already installed.
set -euo pipefail

packages=(
	# build
	make gcc clang llvm pkg-config libbpf-dev libelf-dev zlib1g-dev libjson-c-dev libmicrohttpd-dev bpftool
	# tests: ELF inspection, PyTorch workloads, the test runner
	binutils python3 python3-pytest python3-torch python3-torchvision util-linux procps
	# tests: BCC's own tools to cross-check `pipeprof hist`, promtool for the exposition format
	libbpf-tools prometheus
	# tests: clang's sanitizer and libFuzzer runtimes (make check-asan, make fuzz)
	libclang-rt-dev
	# benchmark: the bpftrace column of tools/bench/compare.py
	bpftrace
	# tests: the flame graph drawn by a browser, its picture read back
	chromium python3-pil
	# tests: the manual page rendered and checked for warnings, the bash completion loaded
	man-db groff-base bash-completion
	# tests: pipeprof top driven in a terminal
	tmux
	# tests: the attach's system calls (strace); where a hung pipeprof waits (gdb)
	strace gdb
)

missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
	echo "install-deps: all ${#packages[@]} packages present"
	exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "install-deps: missing ${missing[*]}; run as root (sudo make deps)" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q "${missing[@]}"
