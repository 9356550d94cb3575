#!/usr/bin/env bash
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
# Run unit-test binaries, show their output, and add up the "N passed, N failed" line each
# one ends with. A binary that crashes, exits non-zero or never prints that line is a failure
# of its own, so a test that dies early cannot pass by saying nothing.
set -u

if [ $# -eq 0 ]; then
	echo "usage: $0 TEST_BINARY..." >&2
	exit 2
fi

total_passed=0
total_failed=0
bad_bins=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT

for bin in "$@"; do
	echo "=== $bin"
	if [ ! -x "$bin" ]; then
		echo "unit: $bin: not an executable" >&2
		total_failed=$((total_failed + 1))
		bad_bins=$((bad_bins + 1))
		continue
	fi
	"$bin" 2>&1 | tee "$log"
	rc=${PIPESTATUS[0]}

	last=$(tail -n 1 "$log")
	if [[ $last =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]; then
		passed=${BASH_REMATCH[1]}
		failed=${BASH_REMATCH[2]}
	else
		passed=0
		failed=0
		echo "unit: $bin: no final 'N passed, N failed' line" >&2
	fi

	if [ "$rc" -gt 128 ]; then
		echo "unit: $bin: killed by signal $((rc - 128))" >&2
	elif [ "$rc" -ne 0 ]; then
		echo "unit: $bin: exit status $rc" >&2
	fi
	# A broken binary whose own count shows no failure still has to count as one.
	if [ "$rc" -ne 0 ] || [ "$failed" -gt 0 ] || [[ ! $last =~ ^[0-9]+\ passed ]]; then
		bad_bins=$((bad_bins + 1))
		[ "$failed" -eq 0 ] && failed=1
	fi
	total_passed=$((total_passed + passed))
	total_failed=$((total_failed + failed))
done

echo "unit: $total_passed passed, $total_failed failed"
[ "$bad_bins" -eq 0 ] && [ "$total_failed" -eq 0 ]
