// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* pipeprof top: a live view of one training job, or of the host's, redrawn every second. */
#include <argp.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include "classify.h"
#include "daemon.h"
#include "pipeprof.h"
#include "proctree.h"
#include "sanitize.h"
#include "target.h"
#include "top_cmd.h"
#include "top_job.h"
#include "top_view.h"
#include "tracer.h"

#define TOP_TICK_NS 1000000000ULL
/* Jobs asked of discovery at a scan: those past TOP_MAX_JOBS are only counted. */
#define MAX_LISTED_JOBS 64
/* How often keys are looked for between frames: q is answered within this. */
#define KEY_POLL_MS 100
/* A pipe has no width: frames are as wide as a wide terminal. */
#define PLAIN_WIDTH 120

static volatile sig_atomic_t exiting;

static void on_signal(int sig)
{
	exiting = sig;
}

static const char top_doc[] =
	"A live view of training jobs, redrawn every second: with -p, one job (the PID\n"
	"and its DataLoader workers); without, every job on the host. Each role's time\n"
	"per state over the last 30 seconds, the last second's shares, the verdict of\n"
	"the last 5 seconds and the trainer's steps a second.\v"
	"Without -p, the jobs are those the daemon would find: processes that map\n"
	"libtorch, libcudart, libcuda or libnccl, under no other that does. Up to 8 are\n"
	"traced, one tracer each (the rest are counted in the title); every job gets a\n"
	"header (PID, name, steps a second, command line), its verdict and a row per\n"
	"role. Jobs that start later are picked up every 5 seconds; a job that exits\n"
	"stays on screen marked EXITED. Jobs a short terminal has no rows for are\n"
	"counted under the last one shown.\n"
	"\n"
	"Keys: q quits (so do Ctrl-C and SIGTERM); everything is detached on the\n"
	"way out. When standard output is not a terminal, one plain frame is\n"
	"printed a second instead, with no colours and no keys read.\n"
	"\n"
	"Letters: R running, q run queue, G GPU wait, I I/O wait, D data wait,\n"
	"T thread wait, C communication wait, . other (mostly sleep). A role's\n"
	"strip shows each second's largest state, its bar the last second's shares.\n"
	"\n"
	"EXAMPLES:\n"
	"  sudo pipeprof top                      # every training job on the host\n"
	"  sudo pipeprof top -n 5 > jobs.log      # five plain frames of them all\n"
	"  sudo pipeprof top -p 4242              # one job, until q\n"
	"  sudo pipeprof top -p 4242 -t 4250      # the trainer is thread 4250\n"
	"  sudo pipeprof top -p 4242 -n 10 > top.log   # ten plain frames\n"
	"\n"
	"Exit status: 0 quit by q, a signal, -n or (with -p) the job's exit, 1 tracing\n"
	"failed (without -p: for every job found), 2 bad arguments, no such process,\n"
	"or without -p no job.";

static const struct argp_option top_options[] = {
	{ "pid", 'p', "PID", 0, "Process to watch (with its descendants; default: every training "
	  "job on the host)", 0 },
	{ "tid", 't', "TID", 0, "The trainer thread (default: most GPU calls, else the main "
	  "thread)", 0 },
	{ "iterations", 'n', "N", 0, "Draw N frames, then exit", 0 },
	{ "verbose", 'v', NULL, 0, "Verbose: libbpf logs and every probe attached", 0 },
	{},
};

static int parse_positive(const char *arg, long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(arg, &end, 10);
	if (errno || end == arg || *end || v < 1 || v > INT_MAX)
		return -EINVAL;
	*out = v;
	return 0;
}

/* argp_error() exits unless ARGP_NO_EXIT is given (the fuzzer's): then return the error. */
static error_t top_parse(int key, char *arg, struct argp_state *state)
{
	struct top_opts *o = state->input;
	long v;

	switch (key) {
	case 'p':
	case 't':
	case 'n':
		if (parse_positive(arg, &v)) {
			argp_error(state, "invalid %s: %s", key == 'p' ? "PID" : key == 't' ? "TID" :
				   "number of iterations", arg);
			return EINVAL;
		}
		if (key == 'p')
			o->pid = v;
		else if (key == 't')
			o->tid = v;
		else
			o->iterations = v;
		break;
	case 'v':
		o->verbose = true;
		break;
	case ARGP_KEY_ARG:
		argp_error(state, "unexpected argument: %s", arg);
		return EINVAL;
	case ARGP_KEY_END:
		if (o->tid && !o->pid) {
			argp_error(state, "--tid needs -p PID");
			return EINVAL;
		}
		break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

int top_cmd_parse(int argc, char **argv, unsigned int flags, struct top_opts *o)
{
	const struct argp argp = {
		.options = top_options,
		.parser = top_parse,
		.args_doc = "[-p PID]",
		.doc = top_doc,
	};
	error_t err;

	*o = (struct top_opts){};
	argp_err_exit_status = 2;
	err = argp_parse(&argp, argc, argv, flags, NULL, o);
	return err ? -err : 0;
}

/* ---- the terminal ---- */

struct term {
	bool ansi;		/* stdout is a terminal: redraw in place */
	bool keys;		/* stdin is a terminal put in non-canonical mode */
	struct termios saved;
};

/* The alternate screen keeps the user's scrollback as it was; keys arrive one by one, unechoed,
 * while Ctrl-C still raises SIGINT. Ctrl-Z is off: stopped, the view would leave the terminal
 * in its modes, on its screen, with the probes still attached. */
static void term_enter(struct term *t)
{
	struct termios raw;

	t->ansi = isatty(STDOUT_FILENO);
	if (!t->ansi)
		return;
	if (isatty(STDIN_FILENO) && !tcgetattr(STDIN_FILENO, &t->saved)) {
		raw = t->saved;
		raw.c_lflag &= ~(ICANON | ECHO);
		raw.c_cc[VMIN] = 0;
		raw.c_cc[VTIME] = 0;
		raw.c_cc[VSUSP] = _POSIX_VDISABLE;
		t->keys = !tcsetattr(STDIN_FILENO, TCSANOW, &raw);
	}
	fputs("\033[?1049h\033[?25l\033[H\033[2J", stdout);
	fflush(stdout);
}

static void term_leave(struct term *t)
{
	if (!t->ansi)
		return;
	fputs("\033[0m\033[?25h\033[?1049l", stdout);
	fflush(stdout);
	if (t->keys)
		tcsetattr(STDIN_FILENO, TCSANOW, &t->saved);
	t->ansi = t->keys = false;
}

static void term_size(const struct term *t, int *width, int *height)
{
	struct winsize ws;

	*width = PLAIN_WIDTH;
	*height = INT_MAX;
	if (t->ansi && !ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) && ws.ws_col && ws.ws_row) {
		*width = ws.ws_col;
		*height = ws.ws_row;
	}
}

/* Whether q was typed since the last look. */
static bool quit_typed(const struct term *t)
{
	struct pollfd pfd = { .fd = STDIN_FILENO, .events = POLLIN };
	char buf[64];
	ssize_t n;

	if (!t->keys || poll(&pfd, 1, 0) <= 0)
		return false;
	n = read(STDIN_FILENO, buf, sizeof(buf));
	for (ssize_t i = 0; i < n; i++)
		if (buf[i] == 'q' || buf[i] == 'Q')
			return true;
	return false;
}

/*
 * A frame for the terminal, rendered into memory and written with one write(): line by line
 * (stdout is line-buffered on a terminal), a terminal or a screen capture (tmux capture-pane)
 * could show the new frame's first lines over the last frame's rest, a role missing. Without
 * memory for it (and off a terminal) the frame goes to stdout as it is made.
 */
static FILE *frame_open(const struct term *t, char **buf, size_t *len)
{
	FILE *f;

	if (!t->ansi)
		return stdout;
	f = open_memstream(buf, len);
	return f ? f : stdout;
}

static void frame_close(FILE *f, char *buf, size_t len)
{
	if (f == stdout) {
		fflush(stdout);
		return;
	}
	if (fclose(f) == 0) {
		fflush(stdout);
		for (size_t done = 0; done < len;) {
			ssize_t n = write(STDOUT_FILENO, buf + done, len - done);

			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				break;
			done += n;
		}
	}
	free(buf);
}

static void draw(struct top_job *s, const struct term *t, __u64 now)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = frame_open(t, &buf, &len);
	int width, height;

	s->view.elapsed_s = (now - s->tracer.start_ns) / 1e9;
	term_size(t, &width, &height);
	top_view_render(f, &s->view, width, height, t->ansi);
	if (!t->ansi)
		fputc('\n', f);
	frame_close(f, buf, len);
}

static void catch_signals(void)
{
	struct sigaction sa = { .sa_handler = on_signal };

	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
}

static int top_run(const struct top_opts *o)
{
	struct top_job *s = calloc(1, sizeof(*s));
	struct term term = {};
	int err, status = 1;
	long frames = 0;
	bool was_ansi;

	if (!s) {
		fprintf(stderr, "pipeprof: %s\n", strerror(ENOMEM));
		return 1;
	}
	catch_signals();
	err = top_job_start(s, o->pid, o->tid, o->verbose, NULL);
	if (err) {
		status = err == -ESRCH ? 2 : 1;
		goto cleanup;
	}
	if (exiting) {
		status = 0;
		goto cleanup;
	}

	term_enter(&term);
	if (term.ansi)
		draw(s, &term, monotonic_ns());
	for (;;) {
		__u64 now;

		err = exiting ? 0 : top_job_wait(s, KEY_POLL_MS);
		if (err < 0) {
			term_leave(&term);
			fprintf(stderr, "pipeprof: %s\n", strerror(-err));
			goto cleanup;
		}
		if (exiting || quit_typed(&term))
			break;
		now = monotonic_ns();
		if (!s->gone && now - s->last_tick_ns < TOP_TICK_NS)
			continue;
		err = top_job_tick(s, now);
		if (err) {
			term_leave(&term);
			fprintf(stderr, "pipeprof: %s\n", strerror(-err));
			goto cleanup;
		}
		s->view.target_exited = s->gone;
		draw(s, &term, now);
		frames++;
		if (s->gone || (o->iterations && frames >= o->iterations))
			break;
	}
	/* The screen comes back before the probes detach, which takes ~70 ms a uprobe. */
	was_ansi = term.ansi;
	term_leave(&term);
	if (s->gone && was_ansi) {
		/* The alternate screen is gone: its last frame stays in the scrollback. */
		top_view_render(stdout, &s->view, PLAIN_WIDTH, INT_MAX, false);
		fflush(stdout);
	}
	if (s->gone)
		fprintf(stderr, "pipeprof: PID %d exited\n", o->pid);
	status = 0;
cleanup:
	term_leave(&term);
	top_job_stop(s);
	free(s);
	return status;
}

/* ---- without -p: the host's jobs ---- */

/* Jobs traced at once: each holds its own BPF object and probes (its scheduler programs run
 * inside the dispatcher's, once per context switch for them all). */
#define TOP_MAX_JOBS 8
/* Jobs kept on screen, those that exited included: the oldest exited one makes room. */
#define TOP_KEPT_JOBS 16
#define TOP_RESCAN_S 5

struct top_host {
	struct top_job *jobs[TOP_KEPT_JOBS];
	int nr_jobs;
	int not_traced;		/* found at the last scan past TOP_MAX_JOBS */
	__u64 start_ns, last_scan_ns;
	struct dispatcher dispatcher;
	bool dispatching;	/* it loaded; else each job attaches its own */
};

static struct top_job *host_find(const struct top_host *h, pid_t pid)
{
	for (int i = 0; i < h->nr_jobs; i++)
		if (h->jobs[i]->pid == pid)
			return h->jobs[i];
	return NULL;
}

static int host_traced(const struct top_host *h)
{
	int n = 0;

	for (int i = 0; i < h->nr_jobs; i++)
		n += h->jobs[i]->started;
	return n;
}

/* Room for one more job on screen: the oldest that exited (or was not traced) goes. */
static bool host_make_room(struct top_host *h)
{
	if (h->nr_jobs < TOP_KEPT_JOBS)
		return true;
	for (int i = 0; i < h->nr_jobs; i++)
		if (!h->jobs[i]->started) {
			free(h->jobs[i]);
			memmove(h->jobs + i, h->jobs + i + 1, (h->nr_jobs - i - 1) * sizeof(h->jobs[0]));
			h->nr_jobs--;
			return true;
		}
	return false;
}

/*
 * Attaches to the jobs discovery finds that are not watched yet, up to TOP_MAX_JOBS traced;
 * the rest are counted. A job that cannot be traced stays on screen with the reason, said on
 * stderr too unless on_screen (where it would scribble over the frame). Returns the number of
 * jobs found, or -errno when the processes cannot be listed.
 */
static int host_scan(struct top_host *h, const struct top_opts *o, bool on_screen)
{
	pid_t found[MAX_LISTED_JOBS];
	int n = discover_jobs(found, MAX_LISTED_JOBS);

	if (n < 0)
		return n;
	/* Attaching takes ~70 ms a job, more on a busy host: a terminal left blank that long
	 * looks hung. */
	if (!h->nr_jobs && n && isatty(STDOUT_FILENO))
		fprintf(stderr, "pipeprof top: attaching to %d training job%s...\n",
			n < TOP_MAX_JOBS ? n : TOP_MAX_JOBS, n == 1 ? "" : "s");
	h->not_traced = 0;
	for (int i = 0; i < n; i++) {
		struct top_job *j;
		int err;

		if (host_find(h, found[i]))
			continue;
		if (host_traced(h) >= TOP_MAX_JOBS || !host_make_room(h)) {
			h->not_traced++;
			continue;
		}
		j = calloc(1, sizeof(*j));
		if (!j)
			return -ENOMEM;
		err = top_job_start(j, found[i], 0, o->verbose, h->dispatching ? &h->dispatcher : NULL);
		if (err) {
			top_job_stop(j);
			if (err == -ESRCH) {	/* gone already: no job to show */
				free(j);
				continue;
			}
			snprintf(j->view.failed, sizeof(j->view.failed), "%s", strerror(-err));
			if (!on_screen)
				fprintf(stderr, "pipeprof top: cannot trace PID %d: %s\n", found[i],
					strerror(-err));
		}
		h->jobs[h->nr_jobs++] = j;
	}
	h->last_scan_ns = monotonic_ns();
	return n;
}

static void host_draw(struct top_host *h, const struct term *t, __u64 now)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *out;
	const struct top_view *views[TOP_KEPT_JOBS];
	struct top_jobs_frame f = {
		.elapsed_s = (now - h->start_ns) / 1e9, .not_traced = h->not_traced,
		.cap = TOP_MAX_JOBS, .rescan_s = TOP_RESCAN_S,
	};
	int width, height;

	for (int i = 0; i < h->nr_jobs; i++)
		views[i] = &h->jobs[i]->view;
	term_size(t, &width, &height);
	out = frame_open(t, &buf, &len);
	top_view_render_jobs(out, views, h->nr_jobs, &f, width, height, t->ansi);
	if (!t->ansi)
		fputc('\n', out);
	frame_close(out, buf, len);
}

/* A job that ended, or whose tracing failed, keeps its last figures and lets go of its probes. */
static void job_ended(struct top_job *j, int err)
{
	if (err)
		snprintf(j->view.failed, sizeof(j->view.failed), "tracing failed: %s",
			 strerror(-err));
	j->view.target_exited = j->gone;
	top_job_stop(j);
}

/* Sleeps up to timeout_ms, waking early for a key. */
static void wait_key(const struct term *t, int timeout_ms)
{
	struct pollfd pfd = { .fd = t->keys ? STDIN_FILENO : -1, .events = POLLIN };

	poll(&pfd, 1, timeout_ms);
}

/* One second of every traced job; a job that exited gets its last second, then is let go. A
 * job attached at a rescan, less than half a second ago, waits for the next tick: its first
 * "second" would be too short to say much. */
static void host_tick(struct top_host *h, __u64 now)
{
	for (int i = 0; i < h->nr_jobs; i++) {
		struct top_job *j = h->jobs[i];
		int err;

		if (!j->started || (!j->gone && now - j->last_tick_ns < TOP_TICK_NS / 2))
			continue;
		err = top_job_tick(j, now);
		if (err || j->gone)
			job_ended(j, err);
	}
}

static int top_host_run(const struct top_opts *o)
{
	struct top_host *h = calloc(1, sizeof(*h));
	struct term term = {};
	__u64 last_tick_ns;
	int status = 1, n;
	long frames = 0;

	if (!h) {
		fprintf(stderr, "pipeprof: %s\n", strerror(ENOMEM));
		return 1;
	}
	catch_signals();
	h->start_ns = monotonic_ns();
	tracer_cache_core_btf(o->verbose);
	h->dispatching = dispatcher_start(&h->dispatcher);
	n = host_scan(h, o, false);
	if (n < 0) {
		fprintf(stderr, "pipeprof top: cannot list processes: %s\n", strerror(-n));
		goto cleanup;
	}
	/* Jobs found may have exited before their attach: then there is none either. */
	if (!h->nr_jobs && !h->not_traced) {
		fprintf(stderr, "pipeprof top: no training job found (no process maps libtorch, "
			"libcudart, libcuda or libnccl); give -p PID\n");
		status = 2;
		goto cleanup;
	}
	if (!host_traced(h))
		goto cleanup;		/* none could be traced: each said why */
	status = 0;
	if (exiting)
		goto cleanup;

	term_enter(&term);
	last_tick_ns = monotonic_ns();
	if (term.ansi)
		host_draw(h, &term, last_tick_ns);
	for (;;) {
		__u64 now;

		wait_key(&term, KEY_POLL_MS);
		for (int i = 0; i < h->nr_jobs && !exiting; i++) {
			struct top_job *j = h->jobs[i];
			int err;

			if (j->started && (err = top_job_wait(j, 0)) < 0)
				job_ended(j, err);
		}
		if (exiting || quit_typed(&term))
			break;
		now = monotonic_ns();
		if (now - last_tick_ns < TOP_TICK_NS)
			continue;
		last_tick_ns = now;
		host_tick(h, now);
		if (h->dispatching)
			dispatcher_sweep(&h->dispatcher);
		/* /proc unreadable a moment: the next rescan retries. */
		if (now - h->last_scan_ns >= TOP_RESCAN_S * TOP_TICK_NS &&
		    host_scan(h, o, term.ansi) < 0)
			h->last_scan_ns = now;
		host_draw(h, &term, now);
		frames++;
		if (o->iterations && frames >= o->iterations)
			break;
	}
cleanup:
	/* The screen comes back before the probes detach, which takes ~70 ms a uprobe. */
	term_leave(&term);
	for (int i = 0; i < h->nr_jobs; i++) {
		top_job_stop(h->jobs[i]);
		free(h->jobs[i]);
	}
	if (h->dispatching)
		dispatcher_close(&h->dispatcher);
	free(h);
	return status;
}

int top_cmd_main(int argc, char **argv)
{
	struct top_opts opts;
	int err;

	if (top_cmd_parse(argc, argv, 0, &opts))
		return 2;
	if (!opts.pid)
		return top_host_run(&opts);
	err = target_resolve(PROCFS, &opts.pid, &opts.tid);
	if (err)
		return err == -ESRCH || err == -EINVAL ? 2 : 1;
	return top_run(&opts);
}
