// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A CPU-bound thread that measures what is taken from it, for tools/bench/stolen.py: it spins
 * reading the TSC, and every gap between two reads longer than a threshold is time the thread
 * did not run its own code: an interrupt and what runs in it (a sampler's perf event and its
 * BPF program), a probe's trap, an IPI, another task on its CPU, the host. A loop's throughput
 * on a VM drifts by 1-3% over seconds; these gaps are counted one by one, so a tracer's direct
 * cost reads to 0.01% in seconds. What they cannot see: caches and TLBs a handler evicted,
 * refilled after its return (a spin loop has almost nothing to refill).
 *
 *   stolen [--comm NAME] [--cpu N] [--threshold-ns NS] [--dlopen LIB]
 *
 * Prints `READY pid=<pid>`, then answers each line `SECONDS` on its standard input with one
 * line, after spinning that long on its main thread:
 *
 *   WINDOW wall_ns gaps gap_ns c0 .. c11 n0 .. n11
 *
 * c<k> counts the gaps of [2^k, 2^(k+1)) us (c0 also holds those under 1 us, c11 those of
 * 2 ms and more) and n<k> their nanoseconds. End of input ends it. --dlopen maps a library
 * that is never called: the daemon traces only processes that map a GPU runtime or libtorch.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define read_ticks() __rdtsc()
#else
/* Elsewhere a raw clock read, through the vDSO: slower, and its cost is in every iteration. */
static inline uint64_t read_ticks(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}
#endif

#define NR_BUCKETS 12

struct window {
	uint64_t wall_ns, gaps, gap_ns;
	uint64_t count[NR_BUCKETS], ns[NR_BUCKETS];
};

static uint64_t monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static int bucket_of(uint64_t ns)
{
	int k = 0;

	for (uint64_t us = ns / 1000; us > 1 && k < NR_BUCKETS - 1; us >>= 1)
		k++;
	return k;
}

/* A short calibration places the gaps in their buckets; their nanoseconds come from each
 * window's own ticks over its CLOCK_MONOTONIC span, so no calibration can go stale there. */
static uint64_t ticks_per_us(void)
{
	uint64_t t0 = monotonic_ns(), c0 = read_ticks(), t1;

	do
		t1 = monotonic_ns();
	while (t1 - t0 < 20000000);
	return (read_ticks() - c0) * 1000 / (t1 - t0) + 1;
}

static void spin(double seconds, uint64_t threshold_ticks, uint64_t per_us, struct window *w)
{
	uint64_t start_ns = monotonic_ns(), start = read_ticks(), prev = start, now, end_ticks;
	uint64_t budget = (uint64_t)(seconds * 1e9), ticks[NR_BUCKETS] = { 0 };
	double ns_per_tick;

	memset(w, 0, sizeof(*w));
	/* The clock is read only once the TSC says the window is nearly over: a vDSO read in
	 * the loop would be a gap of its own on some clocksources. */
	end_ticks = start + (uint64_t)(seconds * 1e6 * (double)per_us * 0.999);
	for (;;) {
		now = read_ticks();
		if (now - prev > threshold_ticks) {
			int k = bucket_of((now - prev) * 1000 / per_us);

			w->count[k]++;
			ticks[k] += now - prev;
		}
		if (now > end_ticks && monotonic_ns() - start_ns >= budget)
			break;
		prev = now;
	}
	w->wall_ns = monotonic_ns() - start_ns;
	ns_per_tick = (double)w->wall_ns / (double)(read_ticks() - start);
	for (int k = 0; k < NR_BUCKETS; k++) {
		w->ns[k] = (uint64_t)((double)ticks[k] * ns_per_tick);
		w->gaps += w->count[k];
		w->gap_ns += w->ns[k];
	}
}

static void usage(FILE *f)
{
	fprintf(f, "usage: stolen [--comm NAME] [--cpu N] [--threshold-ns NS] [--dlopen LIB]\n"
		"  then one line SECONDS per window on stdin; see tools/bench/stolen.py\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "comm", required_argument, NULL, 'c' },
		{ "cpu", required_argument, NULL, 'C' },
		{ "threshold-ns", required_argument, NULL, 't' },
		{ "dlopen", required_argument, NULL, 'd' },
		{ "help", no_argument, NULL, 'h' },
		{}
	};
	uint64_t threshold_ns = 1000, per_us;
	char line[64], *end;
	int opt, cpu = -1;

	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (opt) {
		case 'c':
			if (prctl(PR_SET_NAME, optarg)) {
				fprintf(stderr, "stolen: cannot set the command name: %s\n", strerror(errno));
				return 1;
			}
			break;
		case 'C':
			cpu = (int)strtol(optarg, &end, 10);
			if (*end || cpu < 0) {
				fprintf(stderr, "stolen: --cpu takes a CPU number, not '%s'\n", optarg);
				return 1;
			}
			break;
		case 't':
			threshold_ns = strtoull(optarg, &end, 10);
			if (*end || threshold_ns < 100) {
				fprintf(stderr, "stolen: --threshold-ns takes at least 100, not '%s'\n", optarg);
				return 1;
			}
			break;
		case 'd':
			if (!dlopen(optarg, RTLD_NOW)) {
				fprintf(stderr, "stolen: %s\n", dlerror());
				return 1;
			}
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 1;
		}
	}
	if (cpu >= 0) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(cpu, &set);
		if (sched_setaffinity(0, sizeof(set), &set)) {
			fprintf(stderr, "stolen: cannot pin to CPU %d: %s\n", cpu, strerror(errno));
			return 1;
		}
	}
	per_us = ticks_per_us();
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("READY pid=%d\n", getpid());
	while (fgets(line, sizeof(line), stdin)) {
		double seconds = strtod(line, &end);
		struct window w;

		if (end == line || seconds <= 0 || seconds > 3600) {
			fprintf(stderr, "stolen: a window is SECONDS (0-3600), not '%s'\n", line);
			return 1;
		}
		spin(seconds, threshold_ns * per_us / 1000, per_us, &w);
		printf("WINDOW %llu %llu %llu", (unsigned long long)w.wall_ns,
		       (unsigned long long)w.gaps, (unsigned long long)w.gap_ns);
		for (int k = 0; k < NR_BUCKETS; k++)
			printf(" %llu", (unsigned long long)w.count[k]);
		for (int k = 0; k < NR_BUCKETS; k++)
			printf(" %llu", (unsigned long long)w.ns[k]);
		printf("\n");
	}
	return 0;
}
