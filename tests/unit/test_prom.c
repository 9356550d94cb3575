// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <sys/wait.h>
#include "prom.h"
#include "unit.h"

/* The stream a writer call produced, as one string; the caller frees it. */
struct capture {
	FILE *f;
	char *buf;
	size_t len;
};

static FILE *cap_open(struct capture *c)
{
	memset(c, 0, sizeof(*c));
	c->f = open_memstream(&c->buf, &c->len);
	return c->f;
}

static char *cap_close(struct capture *c)
{
	fclose(c->f);
	return c->buf;
}

static const char *fmt(double v)
{
	static char buf[PROM_VALUE_MAX];

	return prom_format_value(buf, sizeof(buf), v);
}

TEST(test_names)
{
	CHECK(prom_valid_name("pipeprof_up"));
	CHECK(prom_valid_name("_x"));
	CHECK(prom_valid_name("job:pipeprof_state_seconds:rate5m"));
	CHECK(prom_valid_name("A9_b"));
	CHECK(!prom_valid_name(""));
	CHECK(!prom_valid_name(NULL));
	CHECK(!prom_valid_name("9lives"));
	CHECK(!prom_valid_name("pipeprof-up"));
	CHECK(!prom_valid_name("pipeprof up"));
	CHECK(!prom_valid_name("pipeprof.up"));
	CHECK(!prom_valid_name("caf\xc3\xa9"));

	CHECK(prom_valid_label_name("state"));
	CHECK(prom_valid_label_name("_role"));
	CHECK(prom_valid_label_name("le"));
	CHECK(!prom_valid_label_name("job:role"));	/* colons are for metric names only */
	CHECK(!prom_valid_label_name("__name__"));	/* reserved */
	CHECK(!prom_valid_label_name("1st"));
	CHECK(!prom_valid_label_name(""));
}

TEST(test_value_format)
{
	/* Integral values stay integral, whatever their size, and exact. */
	CHECK_STR(fmt(0), "0");
	CHECK_STR(fmt(-0.0), "0");
	CHECK_STR(fmt(1), "1");
	CHECK_STR(fmt(42), "42");
	CHECK_STR(fmt(-7), "-7");
	CHECK_STR(fmt(1e15), "1000000000000000");
	CHECK_STR(fmt(0x1p53), "9007199254740992");
	CHECK_STR(fmt(0x1p53 + 2), "9007199254740994");
	CHECK_STR(fmt(-0x1p63), "-9223372036854775808");
	CHECK_STR(fmt(0x1p63 - 1024), "9223372036854774784");
	/* Beyond int64 an exponent is the only sane spelling. */
	CHECK_STR(fmt(0x1p63), "9.223372036854776e+18");
	CHECK_STR(fmt(1e300), "1e+300");

	/* Fractions in the fewest digits that read back. */
	CHECK_STR(fmt(0.5), "0.5");
	CHECK_STR(fmt(2.085), "2.085");
	CHECK_STR(fmt(0.1), "0.1");
	CHECK_STR(fmt(0.1 + 0.2), "0.30000000000000004");
	CHECK_STR(fmt(1.0 / 3), "0.3333333333333333");
	CHECK_STR(fmt(1e-6), "1e-06");
	CHECK_STR(fmt(-2.5e-9), "-2.5e-09");
	CHECK_STR(fmt(0.000128), "0.000128");

	/* Prometheus's spellings, not printf's "nan" and "inf". */
	CHECK_STR(fmt(NAN), "NaN");
	CHECK_STR(fmt(-NAN), "NaN");
	CHECK_STR(fmt(INFINITY), "+Inf");
	CHECK_STR(fmt(-INFINITY), "-Inf");

	/* Any double survives the round trip through text (one check, not 20000). */
	uint64_t x = 88172645463325252ULL;
	double v = 0;
	bool same = true;

	for (int n = 0; n < 20000 && same; n++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		memcpy(&v, &x, sizeof(v));
		same = isnan(v) || isinf(v) || strtod(fmt(v), NULL) == v;
	}
	CHECK_MSG(same, "%a printed as %s", v, fmt(v));
}

TEST(test_escaping)
{
	struct capture c;
	char *got;

	/* HELP escapes backslash and newline but leaves quotes alone. */
	cap_open(&c);
	prom_write_help_escaped(c.f, "a\\b\nc\"d");
	got = cap_close(&c);
	CHECK_STR(got, "a\\\\b\\nc\"d");
	free(got);

	/* Label values escape the quote too. */
	cap_open(&c);
	prom_write_label_value_escaped(c.f, "a\\b\nc\"d\te");
	got = cap_close(&c);
	CHECK_STR(got, "a\\\\b\\nc\\\"d\te");
	free(got);

	cap_open(&c);
	CHECK_EQ_INT(prom_family(c.f, "x_total", "counter", "Two\nlines, C:\\ and \"quotes\"."), 0);
	got = cap_close(&c);
	CHECK_STR(got, "# HELP x_total Two\\nlines, C:\\\\ and \"quotes\".\n# TYPE x_total counter\n");
	free(got);

	/* No help text still makes a well-formed HELP line. */
	cap_open(&c);
	CHECK_EQ_INT(prom_family(c.f, "y", "gauge", NULL), 0);
	got = cap_close(&c);
	CHECK_STR(got, "# HELP y \n# TYPE y gauge\n");
	free(got);

	const struct prom_label labels[] = {
		{ "cmdline", "python3 \"a b.py\" C:\\x\ny" },
		{ "pid", "42" },
		{ "empty", "" },
		{},
	};

	cap_open(&c);
	CHECK_EQ_INT(prom_sample(c.f, "x_total", labels, 3), 0);
	CHECK_EQ_INT(prom_sample(c.f, "x_total", NULL, 0.25), 0);
	CHECK_EQ_INT(prom_sample(c.f, "x_total", &labels[3], 1), 0);	/* an empty list */
	CHECK_EQ_INT(prom_sample_u64(c.f, "x_total", &labels[1], UINT64_MAX), 0);
	got = cap_close(&c);
	CHECK_STR(got, "x_total{cmdline=\"python3 \\\"a b.py\\\" C:\\\\x\\ny\",pid=\"42\",empty=\"\"} 3\n"
		  "x_total 0.25\n"
		  "x_total 1\n"
		  "x_total{pid=\"42\",empty=\"\"} 18446744073709551615\n");
	free(got);
}

TEST(test_invalid_input_writes_nothing)
{
	const struct prom_label bad_key[] = { { "a-b", "1" }, {} };
	const struct prom_label reserved[] = { { "__name__", "x" }, {} };
	const struct prom_label no_value[] = { { "a", NULL }, {} };
	const struct prom_label le[] = { { "api", "x" }, { "le", "1" }, {} };
	__u64 slots[32] = { [3] = 1 };
	struct capture c;
	char *got;

	cap_open(&c);
	CHECK_EQ_INT(prom_family(c.f, "bad-name", "gauge", "x"), -EINVAL);
	CHECK_EQ_INT(prom_family(c.f, "x", "gauges", "x"), -EINVAL);
	CHECK_EQ_INT(prom_family(c.f, "x", NULL, "x"), -EINVAL);
	CHECK_EQ_INT(prom_sample(c.f, "1x", NULL, 1), -EINVAL);
	CHECK_EQ_INT(prom_sample(c.f, "x", bad_key, 1), -EINVAL);
	CHECK_EQ_INT(prom_sample(c.f, "x", reserved, 1), -EINVAL);
	CHECK_EQ_INT(prom_sample(c.f, "x", no_value, 1), -EINVAL);
	CHECK_EQ_INT(prom_sample_u64(c.f, "x", bad_key, 1), -EINVAL);
	/* A caller's le would collide with the buckets' own. */
	CHECK_EQ_INT(prom_log2_histogram(c.f, "x", le, slots, 32, 1, 0), -EINVAL);
	CHECK_EQ_INT(prom_log2_histogram(c.f, "x y", NULL, slots, 32, 1, 0), -EINVAL);
	CHECK_EQ_INT(prom_log2_histogram(c.f, "x", NULL, slots, 0, 1, 0), -EINVAL);
	CHECK_EQ_INT(prom_log2_histogram(c.f, "x", NULL, slots, 32, 0, 0), -EINVAL);
	CHECK_EQ_INT(prom_log2_histogram(c.f, "x", NULL, slots, 32, NAN, 0), -EINVAL);
	got = cap_close(&c);
	CHECK_STR(got, "");
	free(got);
}

TEST(test_stream_errors)
{
	FILE *f = fopen("/dev/full", "w");

	if (!f) {
		SKIP("no /dev/full");
		return;
	}
	/* Unbuffered, so the failure shows at once instead of at fclose(). */
	setvbuf(f, NULL, _IONBF, 0);
	CHECK_EQ_INT(prom_family(f, "x", "gauge", "x"), -EIO);
	CHECK_EQ_INT(prom_sample(f, "x", NULL, 1), -EIO);
	fclose(f);
}

/* Splits histogram output into its lines' series and values. */
struct hline {
	char le[64];	/* "" when the line has no le label */
	char series[128];
	char value[64];
};

static int parse_lines(char *text, struct hline *out, int max)
{
	int n = 0;

	for (char *line = strtok(text, "\n"); line && n < max; line = strtok(NULL, "\n"), n++) {
		char *le = strstr(line, "le=\""), *sp = strrchr(line, ' ');

		memset(&out[n], 0, sizeof(out[n]));
		if (le)
			snprintf(out[n].le, sizeof(out[n].le), "%.*s",
				 (int)strcspn(le + 4, "\""), le + 4);
		if (sp) {
			snprintf(out[n].series, sizeof(out[n].series), "%.*s", (int)(sp - line), line);
			snprintf(out[n].value, sizeof(out[n].value), "%s", sp + 1);
		}
	}
	return n;
}

static int render_hist(const __u64 *slots, unsigned int nr_slots, double scale, double sum,
		       struct hline *lines, int max)
{
	const struct prom_label labels[] = { { "api", "cudaMemcpy" }, {} };
	struct capture c;
	char *got;
	int n;

	cap_open(&c);
	CHECK_EQ_INT(prom_log2_histogram(c.f, "lat_seconds", labels, slots, nr_slots, scale, sum), 0);
	got = cap_close(&c);
	n = parse_lines(got, lines, max);
	free(got);
	return n;
}

TEST(test_histogram_buckets)
{
	__u64 slots[32] = { [0] = 1, [2] = 4, [3] = 20, [5] = 10, [12] = 3 };
	static const char *const le_usecs[] = {
		"2e-06", "4e-06", "8e-06", "1.6e-05", "3.2e-05", "6.4e-05", "0.000128", "0.000256",
		"0.000512", "0.001024", "0.002048", "0.004096", "0.008192",
	};
	struct hline l[40];
	uint64_t prev = 0;
	int n;

	/* Buckets for slots 0..12 only, then +Inf, _sum and _count. */
	n = render_hist(slots, 32, 1e-6, 0.0125, l, 40);
	CHECK_EQ_INT(n, 13 + 3);
	for (int i = 0; i < 13 && i < n; i++) {
		uint64_t count = strtoull(l[i].value, NULL, 10), want = 0;

		for (int k = 0; k <= i; k++)
			want += slots[k];
		CHECK_MSG(!strncmp(l[i].series, "lat_seconds_bucket{api=\"cudaMemcpy\",le=\"", 40),
			  "line %d: %s", i, l[i].series);
		/* Slot i holds values below 2^(i+1) usecs. */
		CHECK_STR(l[i].le, le_usecs[i]);
		CHECK_MSG(strtod(l[i].le, NULL) == (double)(2ULL << i) / 1e6, "le %s", l[i].le);
		CHECK_MSG(count == want, "bucket %d: %" PRIu64 " != %" PRIu64, i, count, want);
		CHECK_MSG(count >= prev, "bucket %d not cumulative", i);
		prev = count;
	}
	if (n == 16) {
		CHECK_STR(l[13].series, "lat_seconds_bucket{api=\"cudaMemcpy\",le=\"+Inf\"}");
		CHECK_STR(l[13].value, "38");
		CHECK_STR(l[14].series, "lat_seconds_sum{api=\"cudaMemcpy\"}");
		CHECK_STR(l[14].value, "0.0125");
		CHECK_STR(l[15].series, "lat_seconds_count{api=\"cudaMemcpy\"}");
		CHECK_STR(l[15].value, "38");
	}

	/* In the slots' own unit the bounds are exact integers: 2, 4, ..., 2^13. */
	n = render_hist(slots, 32, 1, 0, l, 40);
	CHECK_EQ_INT(n, 16);
	CHECK_STR(l[0].le, "2");
	CHECK_STR(l[1].le, "4");
	CHECK_STR(l[12].le, "8192");
	/* Milliseconds and nanoseconds scale as cleanly as microseconds. */
	n = render_hist(slots, 32, 1e-3, 0, l, 40);
	CHECK_STR(l[0].le, "0.002");
	CHECK_STR(l[12].le, "8.192");
	n = render_hist(slots, 32, 1e-9, 0, l, 40);
	CHECK_STR(l[4].le, "3.2e-08");
	/* Any other scale too. */
	n = render_hist(slots, 32, 0.75, 0, l, 40);
	CHECK_STR(l[0].le, "1.5");
	CHECK_STR(l[12].le, "6144");

	/* An idle histogram: +Inf, _sum and _count, nothing else. */
	memset(slots, 0, sizeof(slots));
	n = render_hist(slots, 32, 1e-6, 0, l, 40);
	CHECK_EQ_INT(n, 3);
	CHECK_STR(l[0].series, "lat_seconds_bucket{api=\"cudaMemcpy\",le=\"+Inf\"}");
	CHECK_STR(l[0].value, "0");
	CHECK_STR(l[1].series, "lat_seconds_sum{api=\"cudaMemcpy\"}");
	CHECK_STR(l[1].value, "0");
	CHECK_STR(l[2].value, "0");

	/* Everything in slot 0: one finite bucket. */
	slots[0] = 5;
	n = render_hist(slots, 32, 1, 3, l, 40);
	CHECK_EQ_INT(n, 4);
	CHECK_STR(l[0].le, "2");
	CHECK_STR(l[0].value, "5");
	CHECK_STR(l[1].le, "+Inf");
	CHECK_STR(l[1].value, "5");

	/* The last slot also holds everything the BPF side clamped into it: no finite bound. */
	memset(slots, 0, sizeof(slots));
	slots[1] = 1;
	slots[31] = 2;
	n = render_hist(slots, 32, 1, 0, l, 40);
	CHECK_EQ_INT(n, 31 + 3);
	CHECK_STR(l[30].le, "2147483648");
	CHECK_STR(l[30].value, "1");
	CHECK_STR(l[31].le, "+Inf");
	CHECK_STR(l[31].value, "3");
	CHECK_STR(l[33].value, "3");

	/* Fewer slots than BCC's 32 work the same way. */
	memset(slots, 0, sizeof(slots));
	slots[2] = 7;
	n = render_hist(slots, 4, 1, 0, l, 40);
	CHECK_EQ_INT(n, 3 + 3);
	CHECK_STR(l[2].le, "8");
	CHECK_STR(l[2].value, "7");
}

/* The exposition a daemon scrape would serve, touching every feature once. */
static char *render_exposition(void)
{
	static const char *const states[] = { "RUNNING", "DATA_WAIT", "GPU_WAIT" };
	static const double secs[] = { 2.085, 7.751, 0 };
	const struct prom_label target[] = {
		{ "pid", "4242" },
		{ "cmdline", "/usr/bin/python3 train.py --data \"C:\\imagenet\"\n--epochs 3" },
		{},
	};
	struct prom_label state[] = { { "role", "trainer" }, { "state", NULL }, {} };
	const struct prom_label sync[] = { { "api", "cudaStreamSynchronize" }, {} };
	const struct prom_label idle[] = { { "api", "cuCtxSynchronize" }, {} };
	const struct prom_label dev[] = { { "device", "nvme0n1" }, {} };
	__u64 sync_slots[32] = { [0] = 1, [2] = 4, [3] = 20, [5] = 10 };
	__u64 idle_slots[32] = {};
	__u64 io_slots[32] = { [12] = 30, [17] = 5 };
	struct capture c;

	cap_open(&c);
	prom_family(c.f, "pipeprof_up", "gauge", "Whether the traced job is still being traced (1) or has gone (0).");
	prom_sample(c.f, "pipeprof_up", NULL, 1);

	prom_family(c.f, "pipeprof_target_info", "gauge",
		    "The traced job, as labels; the value is always 1.\n"
		    "cmdline is /proc/PID/cmdline with NULs as spaces and \\ kept.");
	prom_sample(c.f, "pipeprof_target_info", target, 1);

	prom_family(c.f, "pipeprof_state_seconds_total", "counter",
		    "Seconds each role's threads spent in each state of the stall model.");
	for (int i = 0; i < 3; i++) {
		state[1].value = states[i];
		prom_sample(c.f, "pipeprof_state_seconds_total", state, secs[i]);
	}

	prom_family(c.f, "pipeprof_lost_events_total", "counter",
		    "Events the BPF side could not record (map full).");
	prom_sample_u64(c.f, "pipeprof_lost_events_total", NULL, 12345678901234567890ULL);

	prom_family(c.f, "pipeprof_speedup_bound", "gauge",
		    "1/(1-f) for the largest stall's share f: +Inf when it takes all the time, NaN before the first window.");
	prom_sample(c.f, "pipeprof_speedup_bound", NULL, INFINITY);
	prom_family(c.f, "pipeprof_stall_ratio", "gauge", "Share of the trainer's time in its largest stall.");
	prom_sample(c.f, "pipeprof_stall_ratio", NULL, NAN);

	prom_family(c.f, "pipeprof_gpu_sync_duration_seconds", "histogram",
		    "Time inside synchronising GPU API calls, from log2 usec slots.");
	prom_log2_histogram(c.f, "pipeprof_gpu_sync_duration_seconds", sync, sync_slots, 32, 1e-6,
			    0.000812);
	prom_log2_histogram(c.f, "pipeprof_gpu_sync_duration_seconds", idle, idle_slots, 32, 1e-6, 0);

	prom_family(c.f, "pipeprof_io_request_bytes", "histogram", "Sizes of the job's block requests.");
	prom_log2_histogram(c.f, "pipeprof_io_request_bytes", dev, io_slots, 32, 1, 778240);
	return cap_close(&c);
}

static char *read_file(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	size_t len = 0;
	FILE *m;
	int ch;

	if (!f)
		return NULL;
	m = open_memstream(&buf, &len);
	while ((ch = fgetc(f)) != EOF)
		fputc(ch, m);
	fclose(m);
	fclose(f);
	return buf;
}

TEST(test_golden_exposition)
{
	char path[PATH_MAX], *got = render_exposition(), *want;

	want = read_file(UNIT_SRC_PATH(path, "tests/golden/prom_exposition.txt"));
	if (CHECK_MSG(want, "golden file %s missing", path))
		CHECK_STR(got, want);
	free(want);
	free(got);
}

static bool on_path(const char *prog, char *buf, size_t size)
{
	const char *path = getenv("PATH"), *p, *end;

	for (p = path ? path : "/usr/bin:/bin"; *p; p = *end ? end + 1 : end) {
		end = strchrnul(p, ':');
		if (snprintf(buf, size, "%.*s/%s", (int)(end - p), end == p ? "." : p, prog) <
		    (int)size && access(buf, X_OK) == 0)
			return true;
	}
	return false;
}

/* Prometheus's own parser and linter, when this machine has it (Debian: prometheus). */
TEST(test_promtool_accepts_golden)
{
	char path[PATH_MAX], promtool[PATH_MAX];
	int fd, status;
	pid_t pid;

	if (!on_path("promtool", promtool, sizeof(promtool))) {
		SKIP("promtool not on PATH (apt-get install prometheus)");
		return;
	}
	fd = open(UNIT_SRC_PATH(path, "tests/golden/prom_exposition.txt"), O_RDONLY | O_CLOEXEC);
	if (!CHECK_MSG(fd >= 0, "%s: %s", path, strerror(errno)))
		return;
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		dup2(fd, STDIN_FILENO);
		execl(promtool, "promtool", "check", "metrics", (char *)NULL);
		_exit(127);
	}
	close(fd);
	if (!CHECK_MSG(pid > 0, "fork: %s", strerror(errno)))
		return;
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		  "promtool check metrics < %s: status 0x%x", path, status);
}

int main(void)
{
	RUN_TEST(test_names);
	RUN_TEST(test_value_format);
	RUN_TEST(test_escaping);
	RUN_TEST(test_invalid_input_writes_nothing);
	RUN_TEST(test_stream_errors);
	RUN_TEST(test_histogram_buckets);
	RUN_TEST(test_golden_exposition);
	RUN_TEST(test_promtool_accepts_golden);
	return unit_summary();
}
