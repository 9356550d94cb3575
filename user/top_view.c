// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* `pipeprof top`'s screen from the figures of the last seconds. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "sanitize.h"
#include "top_view.h"

#define STRIP_COLS TOP_HISTORY
#define BAR_COLS 30

static const char state_letters[PP_NR_STATES] = {
	[PP_RUNNING] = 'R', [PP_RUNQ] = 'q', [PP_GPU_WAIT] = 'G', [PP_IO_WAIT] = 'I',
	[PP_DATA_WAIT] = 'D', [PP_THREAD_WAIT] = 'T', [PP_COMM_WAIT] = 'C', [PP_OTHER] = '.',
};

/* Black on a background colour, so that the letter stays readable; OTHER (mostly sleep) is left
 * uncoloured, so that the stalls stand out. */
static const char *const state_colours[PP_NR_STATES] = {
	[PP_RUNNING] = "\033[30;42m", [PP_RUNQ] = "\033[30;43m", [PP_GPU_WAIT] = "\033[30;45m",
	[PP_IO_WAIT] = "\033[30;44m", [PP_DATA_WAIT] = "\033[30;41m",
	[PP_THREAD_WAIT] = "\033[30;46m", [PP_COMM_WAIT] = "\033[30;47m", [PP_OTHER] = NULL,
};

static const char *const state_legend[PP_NR_STATES] = {
	[PP_RUNNING] = "running", [PP_RUNQ] = "run queue", [PP_GPU_WAIT] = "GPU wait",
	[PP_IO_WAIT] = "I/O wait", [PP_DATA_WAIT] = "data wait", [PP_THREAD_WAIT] = "thread wait",
	[PP_COMM_WAIT] = "comm wait", [PP_OTHER] = "other (sleep)",
};

char top_state_letter(enum pp_state s)
{
	return s < PP_NR_STATES ? state_letters[s] : '?';
}

void top_push_second(struct top_role *role, const struct role_result *r)
{
	struct top_second *last = &role->hist[TOP_HISTORY - 1];

	memmove(role->hist, role->hist + 1, (TOP_HISTORY - 1) * sizeof(role->hist[0]));
	memset(last, 0, sizeof(*last));
	role->threads = r->threads;
	role->processes = r->processes;
	if (!r->threads || !r->wall_ns)
		return;
	last->seen = true;
	for (int s = 0; s < PP_NR_STATES; s++)
		last->share[s] = (double)r->ns[s] / r->wall_ns;
}

int top_merge_seconds(const struct thread_result *const *secs, const int *nr, int nr_secs,
		      struct thread_result *out)
{
	int n = 0;

	for (int i = 0; i < nr_secs; i++)
		for (int k = 0; k < nr[i]; k++) {
			const struct thread_result *t = &secs[i][k];
			struct thread_result *m = NULL;

			for (int j = 0; j < n; j++)
				if (out[j].tid == t->tid) {
					m = &out[j];
					break;
				}
			if (!m) {
				m = &out[n++];
				*m = *t;
				continue;
			}
			/* Later seconds name the thread: it may have renamed itself. */
			memcpy(m->comm, t->comm, sizeof(m->comm));
			m->tgid = t->tgid;
			m->role = t->role;
			m->exited |= t->exited;
			m->wall_ns += t->wall_ns;
			for (int s = 0; s < PP_NR_STATES; s++)
				m->ns[s] += t->ns[s];
			m->gpu_calls += t->gpu_calls;
			m->open_wait_ns = t->open_wait_ns;
			m->gc_ns += t->gc_ns;
			m->gc_count += t->gc_count;
			m->gil_ns += t->gil_ns;
		}
	return n;
}

/* A line clipped at the screen's width: columns are counted as they are written, escape
 * sequences aside. */
struct line {
	FILE *out;
	int col, width;
	int rows, height;	/* rows past height are not written */
	bool ansi;
};

static void put_text(struct line *l, const char *s)
{
	int room = l->width - l->col, len = strlen(s);

	if (room <= 0 || l->rows >= l->height)
		return;
	if (len > room)
		len = room;
	fwrite(s, 1, len, l->out);
	l->col += len;
}

static void __attribute__((format(printf, 2, 3))) put_fmt(struct line *l, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	put_text(l, buf);
}

static void put_cell(struct line *l, char c, enum pp_state s)
{
	const char *colour = s < PP_NR_STATES ? state_colours[s] : NULL;

	if (l->col >= l->width || l->rows >= l->height)
		return;
	if (l->ansi && colour)
		fprintf(l->out, "%s%c\033[0m", colour, c);
	else
		fputc(c, l->out);
	l->col++;
}

/* Clears what a longer line of the last frame left, and ends this one. */
static void end_line(struct line *l)
{
	if (l->rows >= l->height)
		return;
	if (l->ansi)
		fputs("\033[K", l->out);
	fputc('\n', l->out);
	l->col = 0;
	l->rows++;
}

/* Text over up to two rows, broken at a space; the second indented, and clipped. */
static void put_wrapped(struct line *l, const char *s)
{
	int room = l->width - l->col, len = strlen(s), cut;

	if (len <= room) {
		put_text(l, s);
		end_line(l);
		return;
	}
	for (cut = room; cut > 0 && s[cut] != ' '; cut--)
		;
	if (cut <= 0)
		cut = room;
	put_fmt(l, "%.*s", cut, s);
	end_line(l);
	while (s[cut] == ' ')
		cut++;
	put_fmt(l, "    %s", s + cut);
	end_line(l);
}

static enum pp_state dominant(const struct top_second *sec)
{
	enum pp_state best = PP_OTHER;

	for (int s = 0; s < PP_NR_STATES; s++)
		if (sec->share[s] > sec->share[best])
			best = s;
	return best;
}

/* Each state's cells of a bar of n, rounded so that they fill it exactly (largest remainder). */
static void bar_cells(const double *share, int n, int *cells)
{
	double rest[PP_NR_STATES];
	double total = 0;
	int used = 0;

	for (int s = 0; s < PP_NR_STATES; s++)
		total += share[s];
	for (int s = 0; s < PP_NR_STATES; s++) {
		double exact = total > 0 ? share[s] / total * n : 0;

		cells[s] = (int)exact;
		rest[s] = exact - cells[s];
		used += cells[s];
	}
	while (total > 0 && used < n) {
		int best = 0;

		for (int s = 1; s < PP_NR_STATES; s++)
			if (rest[s] > rest[best])
				best = s;
		cells[best]++;
		rest[best] = -1;
		used++;
	}
}

static void put_strip(struct line *l, const struct top_role *r)
{
	put_text(l, "|");
	for (int i = 0; i < STRIP_COLS; i++) {
		const struct top_second *sec = &r->hist[TOP_HISTORY - STRIP_COLS + i];
		enum pp_state s = dominant(sec);

		if (sec->seen)
			put_cell(l, top_state_letter(s), s);
		else
			put_cell(l, ' ', PP_NR_STATES);
	}
	put_text(l, "|");
}

static void put_bar(struct line *l, const struct top_second *sec)
{
	int cells[PP_NR_STATES];

	put_text(l, "[");
	bar_cells(sec->share, BAR_COLS, cells);
	for (int s = 0; s < PP_NR_STATES; s++)
		for (int i = 0; i < cells[s]; i++)
			put_cell(l, top_state_letter(s), s);
	put_text(l, "]");
}

/* The largest shares of the last second, largest first, down to 1%. */
static void put_shares(struct line *l, const struct top_second *sec)
{
	bool done[PP_NR_STATES] = {};

	for (int k = 0; k < 3; k++) {
		int best = -1;

		for (int s = 0; s < PP_NR_STATES; s++)
			if (!done[s] && (best < 0 || sec->share[s] > sec->share[best]))
				best = s;
		if (best < 0 || sec->share[best] < 0.01)
			break;
		done[best] = true;
		put_fmt(l, "%s%s %.0f%%", k ? "  " : "", state_name(best), 100 * sec->share[best]);
	}
}

/* The share of one state a second, as a sparkline of ASCII levels, oldest first. */
static void put_sparkline(struct line *l, const struct top_role *r, enum pp_state s)
{
	static const char levels[] = " _.-=+*#";
	const int top = sizeof(levels) - 2;

	put_text(l, "|");
	for (int i = 0; i < STRIP_COLS; i++) {
		const struct top_second *sec = &r->hist[TOP_HISTORY - STRIP_COLS + i];
		int level = sec->seen ? (int)(sec->share[s] * top + 0.5) : 0;

		put_cell(l, levels[level < 0 ? 0 : level > top ? top : level], PP_NR_STATES);
	}
	put_text(l, "|");
}

/* The trainer's main stall: what the verdict rests on, else its largest wait now. */
static enum pp_state main_stall(const struct top_view *v)
{
	const struct top_second *last = &v->roles[ROLE_TRAINER].hist[TOP_HISTORY - 1];
	enum pp_state best = PP_NR_STATES;

	if (v->have_verdict && v->verdict_state < PP_NR_STATES &&
	    verdict_of_stall(v->verdict_state) == v->verdict)
		return v->verdict_state;
	for (int s = 0; s < PP_NR_STATES; s++)
		if (s != PP_RUNNING && s != PP_OTHER && last->share[s] > 0 &&
		    (best == PP_NR_STATES || last->share[s] > last->share[best]))
			best = s;
	return best == PP_NR_STATES ? PP_DATA_WAIT : best;
}

static void elapsed_text(double s, char *buf, size_t size)
{
	long t = s > 0 ? (long)s : 0;

	if (t >= 3600)
		snprintf(buf, size, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
	else
		snprintf(buf, size, "%ld:%02ld", t / 60, t % 60);
}

/* A role's row: its threads, its strip, its last second's bar and largest shares. */
static void put_role(struct line *l, const struct top_view *v, int r, const char *indent)
{
	const struct top_role *role = &v->roles[r];
	const struct top_second *last = &role->hist[TOP_HISTORY - 1];

	put_fmt(l, "%s%-8s %4d  ", indent, role_name(r), role->threads);
	put_strip(l, role);
	put_text(l, "  ");
	if (last->seen) {
		put_bar(l, last);
		put_text(l, "  ");
		put_shares(l, last);
	} else {
		put_text(l, v->seconds ? "no thread in the last second" : "");
	}
	end_line(l);
}

static void put_legend(struct line *l)
{
	for (int s = 0; s < PP_NR_STATES; s++) {
		put_text(l, s ? "  " : "");
		put_cell(l, top_state_letter(s), s);
		put_fmt(l, " %s", state_legend[s]);
	}
	end_line(l);
}

void top_view_render(FILE *out, const struct top_view *v, int width, int height, bool ansi)
{
	char comm[SAN_TEXT_SIZE(sizeof(v->comm))], cmdline[SAN_TEXT_SIZE(sizeof(v->cmdline))];
	char elapsed[32];
	/* A newline on a terminal's last row would scroll the frame's first away. */
	struct line l = { .out = out, .width = width, .height = ansi ? height - 1 : height,
			  .ansi = ansi };
	enum pp_state stall = main_stall(v);

	/* Its owner chose the name and arguments: shown escaped, lest they drive the terminal. */
	san_text(comm, sizeof(comm), v->comm, sizeof(v->comm));
	san_text(cmdline, sizeof(cmdline), v->cmdline, sizeof(v->cmdline));
	elapsed_text(v->elapsed_s, elapsed, sizeof(elapsed));
	if (ansi)
		fputs("\033[H", out);

	if (ansi)
		fputs("\033[1m", out);
	put_fmt(&l, "pipeprof top - PID %d (%s)  elapsed %s", (int)v->pid, comm, elapsed);
	if (v->target_exited)
		put_text(&l, "  TARGET EXITED");
	put_text(&l, ansi ? "   q: quit" : "");
	if (ansi)
		fputs("\033[0m", out);
	end_line(&l);
	put_fmt(&l, "command: %s", cmdline[0] ? cmdline : comm);
	end_line(&l);
	if (v->have_verdict) {
		char verdict[sizeof(v->verdict_line) + 32];

		snprintf(verdict, sizeof(verdict), "verdict (last %d s): %s", v->verdict_seconds,
			 v->verdict_line);
		put_wrapped(&l, verdict);
	} else {
		put_text(&l, "verdict: measuring the first second...");
		end_line(&l);
	}
	if (v->steps_per_s >= 0)
		put_fmt(&l, "steps: %.2f/s over the last %d s (trainer TID %u)", v->steps_per_s,
			v->verdict_seconds, v->trainer_tid);
	else
		put_fmt(&l, "steps: none seen%s%s", v->steps_note[0] ? ": " : "", v->steps_note);
	end_line(&l);
	end_line(&l);

	put_fmt(&l, "%-8s %4s  %-*s  %-*s  %s", "ROLE", "THR", STRIP_COLS + 2,
		"last 30 s (newest right)", BAR_COLS + 2, "last second", "largest shares");
	end_line(&l);
	for (int r = 0; r < NR_ROLES; r++) {
		const struct top_role *role = &v->roles[r];

		put_role(&l, v, r, "");
		if (r == ROLE_TRAINER) {
			put_fmt(&l, "%-8s %4s  ", "", "");
			put_sparkline(&l, role, stall);
			put_fmt(&l, "  the trainer's %s a second (_ little, # all)",
				state_name(stall));
			end_line(&l);
		}
	}
	end_line(&l);
	put_legend(&l);
	if (ansi)
		fputs("\033[J", out);
	fflush(out);
}

/* Rows one job takes in the host's view: header, verdict, a row per role. */
#define JOB_ROWS (2 + NR_ROLES)

static void put_job(struct line *l, const struct top_view *v)
{
	char comm[SAN_TEXT_SIZE(sizeof(v->comm))], cmdline[SAN_TEXT_SIZE(sizeof(v->cmdline))];
	char elapsed[32];

	/* Its owner chose the name and arguments: shown escaped, lest they drive the terminal. */
	san_text(comm, sizeof(comm), v->comm, sizeof(v->comm));
	san_text(cmdline, sizeof(cmdline), v->cmdline, sizeof(v->cmdline));
	elapsed_text(v->elapsed_s, elapsed, sizeof(elapsed));
	if (l->ansi)
		fputs("\033[1m", l->out);
	put_fmt(l, "PID %d (%s)", (int)v->pid, comm);
	if (l->ansi)
		fputs("\033[0m", l->out);
	if (v->target_exited)
		put_text(l, "  EXITED");
	if (v->failed[0]) {
		put_fmt(l, "  %s", cmdline[0] ? cmdline : comm);
		end_line(l);
		put_fmt(l, "  not traced: %s", v->failed);
		end_line(l);
		return;
	}
	put_fmt(l, "  %s", elapsed);
	if (v->steps_per_s >= 0)
		put_fmt(l, "  steps %.2f/s", v->steps_per_s);
	else
		put_text(l, "  steps -");
	put_fmt(l, "  %s", cmdline[0] ? cmdline : comm);
	end_line(l);
	if (v->have_verdict)
		put_fmt(l, "  verdict (last %d s): %s", v->verdict_seconds, v->verdict_line);
	else
		put_text(l, "  verdict: measuring the first second...");
	end_line(l);
	for (int r = 0; r < NR_ROLES; r++)
		put_role(l, v, r, "  ");
}

void top_view_render_jobs(FILE *out, const struct top_view *const *views, int n,
			  const struct top_jobs_frame *f, int width, int height, bool ansi)
{
	/* A newline on a terminal's last row would scroll the frame's first away. */
	struct line l = { .out = out, .width = width, .height = ansi ? height - 1 : height,
			  .ansi = ansi };
	/* Under the jobs: a blank line (or the count of those left out), the legend, the rescan. */
	int footer = 2 + (f->rescan_s > 0) + !n, shown = 0;
	char elapsed[32];

	elapsed_text(f->elapsed_s, elapsed, sizeof(elapsed));
	if (ansi)
		fputs("\033[H\033[1m", out);
	put_fmt(&l, "pipeprof top - %d training job%s  elapsed %s", n, n == 1 ? "" : "s", elapsed);
	if (f->not_traced)
		put_fmt(&l, "  (%d more found, not traced: at most %d)", f->not_traced, f->cap);
	put_text(&l, ansi ? "   q: quit" : "");
	if (ansi)
		fputs("\033[0m", out);
	end_line(&l);
	put_fmt(&l, "  %-8s %4s  %-*s  %-*s  %s", "ROLE", "THR", STRIP_COLS + 2,
		"last 30 s (newest right)", BAR_COLS + 2, "last second", "largest shares");
	end_line(&l);
	/* Whole jobs only, a blank line between two. */
	for (; shown < n; shown++) {
		if (l.rows + (shown > 0) + JOB_ROWS + footer > l.height)
			break;
		if (shown)
			end_line(&l);
		put_job(&l, views[shown]);
	}
	if (shown < n)
		put_fmt(&l, "%d more job%s not shown: the terminal is too short", n - shown,
			n - shown == 1 ? "" : "s");
	end_line(&l);
	put_legend(&l);
	if (!n) {
		put_text(&l, "no training job (no process maps libtorch, libcudart, libcuda or libnccl)");
		end_line(&l);
	}
	if (f->rescan_s) {
		put_fmt(&l, "new jobs are looked for every %d s", f->rescan_s);
		end_line(&l);
	}
	if (ansi)
		fputs("\033[J", out);
	fflush(out);
}
