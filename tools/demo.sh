#!/usr/bin/env bash
# The README's first command: start the bundled demo training job, attach pipeprof to it
# while it runs, print the report, stop the job.
set -euo pipefail
cd "$(dirname "$0")/.."

duration=${DEMO_SECONDS:-10}
log=$(mktemp)
/usr/bin/python3 tools/workloads/demo_train.py --duration $((duration + 30)) >"$log" 2>&1 &
job=$!
trap 'kill $job 2>/dev/null || true; wait $job 2>/dev/null || true; rm -f "$log"' EXIT

echo "demo: starting a PyTorch training job with a DataLoader (pid $job)..."
for _ in $(seq 180); do
	grep -q READY "$log" && break
	kill -0 $job 2>/dev/null || { cat "$log"; echo "demo: the job died" >&2; exit 1; }
	sleep 0.5
done
grep -q READY "$log" || { echo "demo: the job never got going" >&2; exit 1; }

echo "demo: sudo ./pipeprof -p $job -d $duration"
./pipeprof -p "$job" -d "$duration"
