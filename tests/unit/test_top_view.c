// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <limits.h>
#include <stdlib.h>
#include "top_view.h"
#include "unit.h"

#define MS 1000000ULL

static char *render(const struct top_view *v, int width, int height, bool ansi)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	top_view_render(f, v, width, height, ansi);
	fclose(f);
	return buf;
}

static int count_lines(const char *s)
{
	int n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n;
}

static int longest_line(const char *s)
{
	int best = 0, cur = 0;

	for (; *s; s++) {
		if (*s == '\n') {
			cur = 0;
			continue;
		}
		if (++cur > best)
			best = cur;
	}
	return best;
}

/* A data-bound job: the trainer waits for batches 3/4 of each second, two workers compute. */
static void data_bound_view(struct top_view *v, int seconds)
{
	struct role_result trainer = { .wall_ns = 1000 * MS, .threads = 1, .processes = 1 };
	struct role_result workers = { .wall_ns = 2000 * MS, .threads = 2, .processes = 2 };

	memset(v, 0, sizeof(*v));
	v->pid = 4242;
	snprintf(v->comm, sizeof(v->comm), "python3");
	snprintf(v->cmdline, sizeof(v->cmdline), "python3 train.py --epochs 3");
	trainer.ns[PP_DATA_WAIT] = 750 * MS;
	trainer.ns[PP_RUNNING] = 250 * MS;
	workers.ns[PP_RUNNING] = 1800 * MS;
	workers.ns[PP_OTHER] = 200 * MS;
	for (int i = 0; i < seconds; i++) {
		top_push_second(&v->roles[ROLE_TRAINER], &trainer);
		top_push_second(&v->roles[ROLE_WORKER], &workers);
		top_push_second(&v->roles[ROLE_HELPER], &(struct role_result){});
	}
	v->seconds = seconds;
	v->elapsed_s = seconds + 0.4;
	v->trainer_tid = 4242;
	v->have_verdict = true;
	v->verdict = VERDICT_DATA_LOADING;
	v->verdict_state = PP_DATA_WAIT;
	v->verdict_seconds = 5;
	snprintf(v->verdict_line, sizeof(v->verdict_line), "DATA-LOADING BOUND: 75.0%% DATA_WAIT");
	v->steps_per_s = 12.5;
}

TEST(test_push_shifts_and_shares)
{
	struct top_role role = {};
	struct role_result r = { .wall_ns = 1000 * MS, .threads = 3, .processes = 1 };

	r.ns[PP_RUNNING] = 400 * MS;
	r.ns[PP_GPU_WAIT] = 600 * MS;
	top_push_second(&role, &r);
	CHECK(role.hist[TOP_HISTORY - 1].seen);
	CHECK(!role.hist[TOP_HISTORY - 2].seen);
	CHECK(role.hist[TOP_HISTORY - 1].share[PP_GPU_WAIT] > 0.599 &&
	      role.hist[TOP_HISTORY - 1].share[PP_GPU_WAIT] < 0.601);
	CHECK_EQ_INT(role.threads, 3);
	/* A second without a thread of the role is drawn blank, not as sleep. */
	top_push_second(&role, &(struct role_result){});
	CHECK(!role.hist[TOP_HISTORY - 1].seen);
	CHECK(role.hist[TOP_HISTORY - 2].seen);
	CHECK_EQ_INT(role.threads, 0);
	for (int i = 0; i < 2 * TOP_HISTORY; i++)
		top_push_second(&role, &r);
	CHECK(role.hist[0].seen);
}

TEST(test_merge_by_thread)
{
	struct thread_result a[2] = {
		{ .tid = 10, .tgid = 10, .comm = "old", .wall_ns = 1000 * MS, .gpu_calls = 3 },
		{ .tid = 11, .tgid = 10, .comm = "w", .wall_ns = 500 * MS, .exited = true },
	};
	struct thread_result b[1] = {
		{ .tid = 10, .tgid = 10, .comm = "new", .wall_ns = 1000 * MS, .gpu_calls = 4 },
	};
	const struct thread_result *secs[] = { a, b };
	int nr[] = { 2, 1 };
	struct thread_result out[3];
	int n;

	a[0].ns[PP_DATA_WAIT] = 1000 * MS;
	a[1].ns[PP_RUNNING] = 500 * MS;
	b[0].ns[PP_RUNNING] = 1000 * MS;
	n = top_merge_seconds(secs, nr, 2, out);
	CHECK_EQ_INT(n, 2);
	CHECK_EQ_INT(out[0].tid, 10);
	CHECK_EQ_U64(out[0].wall_ns, 2000 * MS);
	CHECK_EQ_U64(out[0].ns[PP_DATA_WAIT], 1000 * MS);
	CHECK_EQ_U64(out[0].ns[PP_RUNNING], 1000 * MS);
	CHECK_EQ_U64(out[0].gpu_calls, 7);
	CHECK_STR(out[0].comm, "new");
	CHECK(out[1].exited);
	CHECK_EQ_INT(top_merge_seconds(secs, nr, 0, out), 0);
}

TEST(test_plain_frame)
{
	struct top_view v;
	char *s;

	data_bound_view(&v, 3);
	s = render(&v, 120, 40, false);
	CHECK_MSG(strstr(s, "PID 4242 (python3)"), "%s", s);
	CHECK(strstr(s, "elapsed 0:03"));
	CHECK(strstr(s, "python3 train.py --epochs 3"));
	CHECK(strstr(s, "verdict (last 5 s): DATA-LOADING BOUND"));
	CHECK(strstr(s, "steps: 12.50/s"));
	CHECK(strstr(s, "DATA_WAIT 75%  RUNNING 25%"));
	CHECK(strstr(s, "RUNNING 90%  OTHER 10%"));
	/* The trainer's strip: 27 blank seconds, then three data-wait ones, newest right. */
	CHECK_MSG(strstr(s, "|                           DDD|"), "%s", s);
	/* Its last second's bar: 30 cells, largest remainder rounding. */
	CHECK(strstr(s, "[RRRRRRRRDDDDDDDDDDDDDDDDDDDDDD]"));
	CHECK(strstr(s, "HELPER      0"));
	CHECK(strstr(s, "no thread in the last second"));
	CHECK(strstr(s, "the trainer's DATA_WAIT a second"));
	CHECK(!strchr(s, '\033'));
	CHECK(longest_line(s) <= 120);
	free(s);
}

TEST(test_ansi_frame_and_clipping)
{
	struct top_view v;
	char *s;

	data_bound_view(&v, TOP_HISTORY + 5);
	s = render(&v, 120, 40, true);
	/* Home, colours, clear to the end of each line and below. */
	CHECK(!strncmp(s, "\033[H", 3));
	CHECK(strstr(s, "\033[30;41mD\033[0m"));
	CHECK(strstr(s, "\033[K\n"));
	CHECK(strstr(s, "\033[J"));
	CHECK(strstr(s, "q: quit"));
	free(s);

	s = render(&v, 40, 40, false);
	CHECK_MSG(longest_line(s) <= 40, "%s", s);
	/* A verdict longer than the screen goes on over a second row, broken at a space. */
	CHECK_MSG(strstr(s, "verdict (last 5 s): DATA-LOADING BOUND:\n    75.0% DATA_WAIT\n"),
		  "%s", s);
	free(s);
	/* A short terminal: no more rows than it has, less one so that it never scrolls. */
	s = render(&v, 120, 6, true);
	CHECK_EQ_INT(count_lines(s), 5);
	free(s);
	s = render(&v, 120, 6, false);
	CHECK_EQ_INT(count_lines(s), 6);
	free(s);
}

TEST(test_hostile_names_and_no_verdict)
{
	struct top_view v = { .pid = 1, .steps_per_s = -1, .elapsed_s = 3725 };
	char *s;

	snprintf(v.comm, sizeof(v.comm), "x\033]0;pwn\007");
	snprintf(v.steps_note, sizeof(v.steps_note), "libtorch_cpu is not mapped");
	s = render(&v, 120, 40, false);
	CHECK_MSG(!strchr(s, '\033') && !strchr(s, '\007'), "%s", s);
	CHECK(strstr(s, "verdict: measuring"));
	CHECK(strstr(s, "steps: none seen: libtorch_cpu is not mapped"));
	CHECK(strstr(s, "elapsed 1:02:05"));
	free(s);
}

static char *render_jobs(const struct top_view *const *views, int n,
			 const struct top_jobs_frame *f, int width, int height, bool ansi)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f_out = open_memstream(&buf, &len);

	top_view_render_jobs(f_out, views, n, f, width, height, ansi);
	fclose(f_out);
	return buf;
}

/* Three jobs: data-bound, one measuring its first second, one that exited. */
static void three_jobs(struct top_view *v)
{
	data_bound_view(&v[0], 3);
	data_bound_view(&v[1], 0);
	v[1].pid = 5000;
	v[1].have_verdict = false;
	v[1].steps_per_s = -1;
	snprintf(v[1].cmdline, sizeof(v[1].cmdline), "python3 other.py");
	data_bound_view(&v[2], 7);
	v[2].pid = 6000;
	v[2].target_exited = true;
}

TEST(test_jobs_plain_frame)
{
	struct top_view v[3];
	const struct top_view *views[] = { &v[0], &v[1], &v[2] };
	struct top_jobs_frame f = { .elapsed_s = 12, .not_traced = 2, .cap = 8, .rescan_s = 5 };
	char *s;

	three_jobs(v);
	s = render_jobs(views, 3, &f, 120, INT_MAX, false);
	CHECK_MSG(strstr(s, "pipeprof top - 3 training jobs  elapsed 0:12  (2 more found, not "
			 "traced: at most 8)\n"), "%s", s);
	CHECK(strstr(s, "PID 4242 (python3)  0:03  steps 12.50/s  python3 train.py --epochs 3\n"
		     "  verdict (last 5 s): DATA-LOADING BOUND: 75.0% DATA_WAIT\n"
		     "  TRAINER     1  |                           DDD|  "
		     "[RRRRRRRRDDDDDDDDDDDDDDDDDDDDDD]  DATA_WAIT 75%  RUNNING 25%\n"));
	CHECK(strstr(s, "PID 5000 (python3)  0:00  steps -  python3 other.py\n"
		     "  verdict: measuring the first second...\n"));
	CHECK(strstr(s, "PID 6000 (python3)  EXITED  0:07  steps 12.50/s"));
	CHECK(strstr(s, "new jobs are looked for every 5 s"));
	CHECK(!strstr(s, "not shown"));
	CHECK(!strchr(s, '\033'));
	CHECK(longest_line(s) <= 120);
	/* Title, column heads, 3 jobs of 5 rows with a blank between, blank, legend, rescan. */
	CHECK_EQ_INT(count_lines(s), 2 + 3 * 5 + 2 + 3);
	free(s);
}

TEST(test_jobs_that_do_not_fit)
{
	struct top_view v[3];
	const struct top_view *views[] = { &v[0], &v[1], &v[2] };
	struct top_jobs_frame f = { .rescan_s = 5 };
	char *s;

	three_jobs(v);
	/* 2 + 5 + 1 + 5 + 3 rows fit two jobs, not the third's blank line and rows. */
	s = render_jobs(views, 3, &f, 120, 17, false);
	CHECK_MSG(strstr(s, "PID 5000 ") && !strstr(s, "PID 6000 "), "%s", s);
	CHECK(strstr(s, "\n1 more job not shown: the terminal is too short\n"));
	CHECK_EQ_INT(count_lines(s), 16);
	free(s);
	/* On a terminal, the last row stays empty: a row less, and a job less. */
	s = render_jobs(views, 3, &f, 120, 16, true);
	CHECK_MSG(strstr(s, "PID 4242 ") && !strstr(s, "PID 5000 "), "%s", s);
	CHECK(strstr(s, "2 more jobs not shown"));
	CHECK(count_lines(s) <= 15);
	CHECK(!strncmp(s, "\033[H", 3));
	free(s);
	/* Narrow: every line clipped. */
	s = render_jobs(views, 3, &f, 30, INT_MAX, false);
	CHECK_MSG(longest_line(s) <= 30, "%s", s);
	free(s);
}

TEST(test_jobs_failed_and_hostile)
{
	struct top_view v = { .pid = 7, .steps_per_s = -1 };
	const struct top_view *views[] = { &v };
	struct top_jobs_frame f = {};
	char *s;

	snprintf(v.comm, sizeof(v.comm), "x\033]0;pwn\007");
	snprintf(v.cmdline, sizeof(v.cmdline), "evil\033[2J");
	snprintf(v.failed, sizeof(v.failed), "Operation not permitted");
	s = render_jobs(views, 1, &f, 120, 40, false);
	CHECK_MSG(!strchr(s, '\033') && !strchr(s, '\007'), "%s", s);
	CHECK(strstr(s, "pipeprof top - 1 training job  elapsed 0:00\n"));
	CHECK(strstr(s, "  not traced: Operation not permitted\n"));
	CHECK(!strstr(s, "looked for"));
	free(s);
	s = render_jobs(views, 0, &f, 120, 40, false);
	CHECK_MSG(strstr(s, "pipeprof top - 0 training jobs ") && strstr(s, "no training job"),
		  "%s", s);
	free(s);
}

int main(void)
{
	RUN_TEST(test_push_shifts_and_shares);
	RUN_TEST(test_merge_by_thread);
	RUN_TEST(test_plain_frame);
	RUN_TEST(test_ansi_frame_and_clipping);
	RUN_TEST(test_hostile_names_and_no_verdict);
	RUN_TEST(test_jobs_plain_frame);
	RUN_TEST(test_jobs_that_do_not_fit);
	RUN_TEST(test_jobs_failed_and_hostile);
	return unit_summary();
}
