#!/usr/bin/env bash
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
# Run libFuzzer targets. Each one first runs every input of its seed corpus
# (tests/fuzz/corpus/NAME/) once; then, with -t SECONDS above 0, it fuzzes for that long,
# starting from the corpus. A crash, a sanitizer report, a leak, a timeout or a target without
# seeds fails the check; its log's tail is shown and the crashing input kept under
# DIR/fuzz-crashes/. Ends with "fuzz: N passed, N failed" over every check (one or two per
# target), as tools/run-unit-tests.sh does.
set -u

usage() {
	echo "usage: $0 [-t SECONDS] [-o DIR] [-k] FUZZER..." >&2
	echo "  -t SECONDS  fuzz each target this long after its corpus (default 0: corpus only)" >&2
	echo "  -o DIR      logs and crashing inputs (default .output/asan)" >&2
	echo "  -k          keep what fuzzing finds in DIR/fuzz-corpus/NAME for the next run" >&2
	exit 2
}

seconds=0
out=.output/asan
keep=false
while getopts "t:o:k" opt; do
	case $opt in
	t) seconds=$OPTARG ;;
	o) out=$OPTARG ;;
	k) keep=true ;;
	*) usage ;;
	esac
done
shift $((OPTIND - 1))
[ $# -eq 0 ] && usage
[[ $seconds =~ ^[0-9]+$ ]] || usage

corpus_root=$(dirname "$0")/../tests/fuzz/corpus
mkdir -p "$out/fuzz-logs" "$out/fuzz-crashes"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
# Time and memory are bounded per input so that a hang or a blow-up is a finding, not a stuck
# `make test`. Inputs take milliseconds, but on a machine shared with BPF-heavy tests a process
# that maps and unmaps memory was seen to stall for minutes (munmap() for 99 s): the bound is
# for hangs, not for speed. 1 GiB leaves room for the others.
common=(-timeout=300 -rss_limit_mb=1024 -artifact_prefix="$out/fuzz-crashes/")

passed=0
failed=0

# check NAME WHAT LOG CMD...: run one check, count it, show the log's tail when it fails.
check() {
	local name=$1 what=$2 log=$3 rc
	shift 3
	"$@" >"$log" 2>&1
	rc=$?
	if [ "$rc" -eq 0 ]; then
		passed=$((passed + 1))
		echo "fuzz: $name: $what: ok$(summary "$log")"
		return 0
	fi
	failed=$((failed + 1))
	echo "fuzz: $name: $what: FAILED (exit status $rc), log $log:"
	tail -n 40 "$log" | sed 's/^/    /'
	return 1
}

# libFuzzer's final statistics, when it printed them.
summary() {
	local runs
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$1" | tail -n 1)
	[ -n "$runs" ] && echo " ($runs runs)"
}

for bin in "$@"; do
	name=$(basename "$bin")
	seeds=$corpus_root/$name
	if [ ! -x "$bin" ]; then
		echo "fuzz: $name: not an executable" >&2
		failed=$((failed + 1))
		continue
	fi
	files=()
	[ -d "$seeds" ] && mapfile -t files < <(find "$seeds" -type f | sort)
	if [ ${#files[@]} -eq 0 ]; then
		echo "fuzz: $name: no seed corpus in $seeds" >&2
		failed=$((failed + 1))
		continue
	fi

	# Every seed on its own, so a regression input fails however fuzzing would have gone.
	check "$name" "corpus (${#files[@]} inputs)" "$out/fuzz-logs/$name.corpus.log" \
		"$bin" "${common[@]}" "${files[@]}" || continue
	[ "$seconds" -eq 0 ] && continue

	# New inputs go to the first directory; the seed corpus stays as committed.
	if $keep; then
		found=$out/fuzz-corpus/$name
	else
		found=$scratch/$name
	fi
	mkdir -p "$found"
	check "$name" "fuzzing ${seconds} s" "$out/fuzz-logs/$name.log" \
		"$bin" "${common[@]}" -max_total_time="$seconds" -print_final_stats=1 \
		"$found" "$seeds"
done

echo "fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
