// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* pipeprof top: a live view of one training job, redrawn every second. */
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
#include "top_view.h"
#include "tracer.h"

#define TOP_TICK_NS 1000000000ULL
/* Jobs listed when there are several to choose from. */
#define MAX_LISTED_JOBS 64
/* How often keys are looked for between frames: q is answered within this. */
#define KEY_POLL_MS 100
/* Step histograms: one per thread running backward passes, a few per job. */
#define TOP_STEP_HISTS 256
/* A pipe has no width: frames are as wide as a wide terminal. */
#define PLAIN_WIDTH 120

static volatile sig_atomic_t exiting;

static void on_signal(int sig)
{
	exiting = sig;
}

static const char top_doc[] =
	"A live view of one training job (the PID and its DataLoader workers),\n"
	"redrawn every second: each role's time per state over the last 30 seconds,\n"
	"the last second's shares, the verdict of the last 5 seconds and the\n"
	"trainer's steps a second.\v"
	"Without -p, the job is the one the daemon would find: a process that maps\n"
	"libtorch, libcudart, libcuda or libnccl, under no other that does. With\n"
	"several, they are listed and nothing is traced.\n"
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
	"  sudo pipeprof top                      # the host's one training job\n"
	"  sudo pipeprof top -p 4242              # until q\n"
	"  sudo pipeprof top -p 4242 -t 4250      # the trainer is thread 4250\n"
	"  sudo pipeprof top -p 4242 -n 10 > top.log   # ten plain frames\n"
	"\n"
	"Exit status: 0 quit by q, a signal, -n or the job's exit, 1 tracing\n"
	"failed, 2 bad arguments, no such process, or without -p no job or\n"
	"several.";

static const struct argp_option top_options[] = {
	{ "pid", 'p', "PID", 0, "Process to watch (with its descendants; default: the host's one "
	  "training job)", 0 },
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

/* ---- the figures of the last seconds ---- */

struct top_state {
	struct tracer tracer;
	struct thread_snaps snaps;
	/* The last TOP_VERDICT_SECONDS seconds' threads, steps and CPU readings, oldest first. */
	struct thread_result *secs[TOP_VERDICT_SECONDS];
	int nr_threads[TOP_VERDICT_SECONDS];
	__u64 steps[TOP_VERDICT_SECONDS];
	double secs_ns[TOP_VERDICT_SECONDS];
	int nr_secs;
	unsigned long long busy[TOP_VERDICT_SECONDS + 1], total[TOP_VERDICT_SECONDS + 1];
	bool cpu_ok[TOP_VERDICT_SECONDS + 1];
	double runnable[TOP_VERDICT_SECONDS];
	__u64 last_tick_ns;
	__u32 trainer_tid;
	struct top_view view;
};

struct step_count {
	__u32 tid;
	__u64 count;
};

static void count_steps(const struct pp_hist_key *key, const struct pp_hist *h, void *ctx)
{
	struct step_count *sc = ctx;

	if (key->kind == PP_HK_STEP && (!sc->tid || key->id == sc->tid))
		sc->count += h->count;
}

/* Drops the oldest second when the ring is full, making room at its end. */
static void shift_seconds(struct top_state *s)
{
	if (s->nr_secs < TOP_VERDICT_SECONDS)
		return;
	free(s->secs[0]);
	memmove(s->secs, s->secs + 1, (TOP_VERDICT_SECONDS - 1) * sizeof(s->secs[0]));
	memmove(s->nr_threads, s->nr_threads + 1, (TOP_VERDICT_SECONDS - 1) * sizeof(int));
	memmove(s->steps, s->steps + 1, (TOP_VERDICT_SECONDS - 1) * sizeof(s->steps[0]));
	memmove(s->secs_ns, s->secs_ns + 1, (TOP_VERDICT_SECONDS - 1) * sizeof(s->secs_ns[0]));
	memmove(s->runnable, s->runnable + 1, (TOP_VERDICT_SECONDS - 1) * sizeof(s->runnable[0]));
	memmove(s->busy, s->busy + 1, TOP_VERDICT_SECONDS * sizeof(s->busy[0]));
	memmove(s->total, s->total + 1, TOP_VERDICT_SECONDS * sizeof(s->total[0]));
	memmove(s->cpu_ok, s->cpu_ok + 1, TOP_VERDICT_SECONDS * sizeof(s->cpu_ok[0]));
	s->nr_secs--;
}

static void base_input(struct top_state *s, const struct top_opts *o,
		       struct analysis_input *in)
{
	*in = (struct analysis_input){
		.root_pid = o->pid, .tid_override = o->tid, .threshold = 0.20,
		.ncpus = sysconf(_SC_NPROCESSORS_ONLN), .cpu_busy = -1, .runnable_avg = -1,
	};
	gpu_io_input(&s->tracer, in);
	in->gpu_unprobed = tracer_gpu_unprobed(&s->tracer);
	in->gpu_mapped = tracer_gpu_mapped(&s->tracer);
}

/* The verdict and steps over the seconds the ring holds. */
static int analyse_recent(struct top_state *s, const struct top_opts *o)
{
	struct thread_result *merged;
	struct analysis_input in;
	struct analysis *an;
	double span_ns = 0, runnable = 0;
	__u64 steps = 0;
	int total = 0, n;

	for (int i = 0; i < s->nr_secs; i++) {
		total += s->nr_threads[i];
		span_ns += s->secs_ns[i];
		steps += s->steps[i];
		runnable += s->runnable[i];
	}
	merged = calloc(total ? total : 1, sizeof(*merged));
	an = calloc(1, sizeof(*an));
	if (!merged || !an) {
		free(merged);
		free(an);
		return -ENOMEM;
	}
	n = top_merge_seconds((const struct thread_result *const *)s->secs, s->nr_threads,
			      s->nr_secs, merged);
	base_input(s, o, &in);
	in.window_ns = span_ns;
	if (s->cpu_ok[0] && s->cpu_ok[s->nr_secs] && s->total[s->nr_secs] > s->total[0]) {
		in.cpu_busy = (double)(s->busy[s->nr_secs] - s->busy[0]) /
			      (s->total[s->nr_secs] - s->total[0]);
		in.runnable_avg = runnable / s->nr_secs;
	}
	analyse(merged, n, &in, an);
	s->view.have_verdict = true;
	s->view.verdict = an->verdict;
	s->view.verdict_state = an->verdict_state;
	s->view.verdict_seconds = s->nr_secs;
	snprintf(s->view.verdict_line, sizeof(s->view.verdict_line), "%s", an->verdict_line);
	s->view.steps_per_s = steps && span_ns > 0 ? steps / (span_ns / 1e9) : -1;
	snprintf(s->view.steps_note, sizeof(s->view.steps_note), "%s",
		 tracer_probed(&s->tracer, TRACER_STEP_PROBE) ?
		 "no backward pass (torch autograd) in these seconds" :
		 "libtorch_cpu is not mapped by the traced processes");
	free(merged);
	free(an);
	return 0;
}

/* One second's figures: each role's states, then the recent verdict. */
static int take_second(struct top_state *s, const struct top_opts *o, __u64 now)
{
	struct step_count sc = {};
	struct analysis_input in;
	struct analysis *an = calloc(1, sizeof(*an));
	struct thread_result *threads = NULL;
	int nr = 0, running = 0, err;
	unsigned long long busy, total;

	if (!an)
		return -ENOMEM;
	err = tracer_window_threads(&s->tracer, &s->snaps, now, &threads, &nr);
	if (err)
		goto cleanup;
	/* Roles and the trainer as the second shows them; analyse() gives each thread its role. */
	base_input(s, o, &in);
	in.window_ns = now - s->last_tick_ns;
	analyse(threads, nr, &in, an);
	if (an->trainer_index >= 0)
		s->trainer_tid = threads[an->trainer_index].tid;
	for (int r = 0; r < NR_ROLES; r++)
		top_push_second(&s->view.roles[r], &an->roles[r]);
	sc.tid = s->trainer_tid;
	tracer_drain_hists(&s->tracer, count_steps, &sc);

	shift_seconds(s);
	s->secs[s->nr_secs] = threads;
	s->nr_threads[s->nr_secs] = nr;
	s->steps[s->nr_secs] = sc.count;
	s->secs_ns[s->nr_secs] = now - s->last_tick_ns;
	s->cpu_ok[s->nr_secs + 1] = !proc_cpu_times(PROCFS, &busy, &total, &running);
	s->busy[s->nr_secs + 1] = busy;
	s->total[s->nr_secs + 1] = total;
	/* procs_running counts this reader, which runs as it reads. */
	s->runnable[s->nr_secs] = running > 0 ? running - 1 : 0;
	s->nr_secs++;
	threads = NULL;
	s->last_tick_ns = now;
	s->view.seconds++;
	s->view.trainer_tid = s->trainer_tid;
	err = analyse_recent(s, o);
cleanup:
	free(threads);
	free(an);
	return err;
}

static void draw(struct top_state *s, const struct term *t, __u64 now)
{
	int width, height;

	s->view.elapsed_s = (now - s->tracer.start_ns) / 1e9;
	term_size(t, &width, &height);
	top_view_render(stdout, &s->view, width, height, t->ansi);
	if (!t->ansi) {
		fputc('\n', stdout);
		fflush(stdout);
	}
}

static int top_run(const struct top_opts *o)
{
	struct sigaction sa = { .sa_handler = on_signal };
	struct tracer_opts topts = {
		.root = o->pid, .trainer_tid = o->tid, .verbose = o->verbose,
		.hist_kinds = 1u << PP_HK_STEP, .hist_keying = PP_HKEY_NONE, .hist_time_div = 1000,
		.hist_entries = TOP_STEP_HISTS,
	};
	struct top_state *s = calloc(1, sizeof(*s));
	struct term term = {};
	unsigned long long busy, total;
	int pidfd = -1, err, status = 1, running;
	long frames = 0;
	bool target_gone = false, was_ansi;

	if (!s) {
		fprintf(stderr, "pipeprof: %s\n", strerror(ENOMEM));
		return 1;
	}
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);

	err = tracer_start(&s->tracer, &topts);
	if (err) {
		status = err == -ESRCH ? 2 : 1;
		goto cleanup;
	}
	if (exiting) {
		status = 0;
		goto cleanup;
	}
	pidfd = syscall(SYS_pidfd_open, o->pid, 0);
	s->last_tick_ns = s->tracer.start_ns;
	s->cpu_ok[0] = !proc_cpu_times(PROCFS, &busy, &total, &running);
	s->busy[0] = busy;
	s->total[0] = total;
	s->view.pid = o->pid;
	s->view.steps_per_s = -1;
	proc_comm(PROCFS, o->pid, o->pid, s->view.comm, sizeof(s->view.comm));
	proc_cmdline(PROCFS, o->pid, s->view.cmdline, sizeof(s->view.cmdline));

	term_enter(&term);
	if (term.ansi)
		draw(s, &term, monotonic_ns());
	for (;;) {
		__u64 now;

		err = exiting ? 0 : tracer_wait(&s->tracer, pidfd, KEY_POLL_MS);
		if (err < 0) {
			term_leave(&term);
			fprintf(stderr, "pipeprof: %s\n", strerror(-err));
			goto cleanup;
		}
		if (err || (pidfd < 0 && kill(o->pid, 0) && errno == ESRCH))
			target_gone = true;
		if (exiting || quit_typed(&term))
			break;
		now = monotonic_ns();
		if (!target_gone && now - s->last_tick_ns < TOP_TICK_NS)
			continue;
		err = take_second(s, o, now);
		if (err) {
			term_leave(&term);
			fprintf(stderr, "pipeprof: %s\n", strerror(-err));
			goto cleanup;
		}
		s->view.target_exited = target_gone;
		draw(s, &term, now);
		frames++;
		if (target_gone || (o->iterations && frames >= o->iterations))
			break;
	}
	/* The screen comes back before the probes detach, which takes ~70 ms a uprobe. */
	was_ansi = term.ansi;
	term_leave(&term);
	if (target_gone && was_ansi) {
		/* The alternate screen is gone: its last frame stays in the scrollback. */
		top_view_render(stdout, &s->view, PLAIN_WIDTH, INT_MAX, false);
		fflush(stdout);
	}
	if (target_gone)
		fprintf(stderr, "pipeprof: PID %d exited\n", o->pid);
	status = 0;
cleanup:
	term_leave(&term);
	tracer_stop(&s->tracer);
	thread_snaps_free(&s->snaps);
	for (int i = 0; i < s->nr_secs; i++)
		free(s->secs[i]);
	if (pidfd >= 0)
		close(pidfd);
	free(s);
	return status;
}

/*
 * No -p: the job the daemon would find, when the host has one. With several, which one is
 * meant is the user's to say: they are listed, and nothing is traced.
 */
static int pick_job(pid_t *pid)
{
	pid_t jobs[MAX_LISTED_JOBS];
	int n = discover_jobs(jobs, MAX_LISTED_JOBS);

	if (n < 0) {
		fprintf(stderr, "pipeprof top: cannot list processes: %s\n", strerror(-n));
		return n;
	}
	if (n == 1) {
		*pid = jobs[0];
		return 0;
	}
	if (!n) {
		fprintf(stderr, "pipeprof top: no training job found (no process maps libtorch, "
			"libcudart, libcuda or libnccl); give -p PID\n");
		return -ESRCH;
	}
	fprintf(stderr, "pipeprof top: %d training jobs; give -p with one of them:\n", n);
	for (int i = 0; i < n; i++) {
		char comm[16], cmdline[256], shown[SAN_TEXT_SIZE(sizeof(cmdline))];

		proc_comm(PROCFS, jobs[i], jobs[i], comm, sizeof(comm));
		proc_cmdline(PROCFS, jobs[i], cmdline, sizeof(cmdline));
		/* Their owners chose the names: escaped, lest they drive the terminal. */
		san_text(shown, sizeof(shown), cmdline[0] ? cmdline : comm, sizeof(cmdline));
		fprintf(stderr, "  %7d  %s\n", (int)jobs[i], shown);
	}
	return -EINVAL;
}

int top_cmd_main(int argc, char **argv)
{
	struct top_opts opts;
	int err;

	if (top_cmd_parse(argc, argv, 0, &opts))
		return 2;
	if (!opts.pid)
		return pick_job(&opts.pid) ? 2 : top_run(&opts);
	err = target_resolve(PROCFS, &opts.pid, &opts.tid);
	if (err)
		return err == -ESRCH || err == -EINVAL ? 2 : 1;
	return top_run(&opts);
}
