// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <argp.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include "procnet.h"
#include "proctree.h"
#include "report_cmd.h"
#include "ranks.h"
#include "flamegraph.h"
#include "html_report.h"
#include "record_cmd.h"
#include "target.h"
#include "tracer.h"

#define TICK_MS 100
/* Low and prime: few samples to walk, and no lockstep with a loop's own 10 ms or 100 ms
 * periods. */
#define DEFAULT_SAMPLE_HZ 49
/* How long past the window a wait open at its close may take to end and be named: a starved
 * DataLoader can keep the trainer waiting this long for one batch. A wait still open then has
 * lasted most of a short window (a step longer than -d): it is given up to the window's own
 * length, at least NAMING_LONG_MS and at most NAMING_MAX_MS, unless a signal ended the window. */
#define NAMING_GRACE_MS 500
#define NAMING_LONG_MS 5000
#define NAMING_MAX_MS 10000

static volatile sig_atomic_t exiting;

static void on_signal(int sig)
{
	exiting = sig;
}

static const char report_doc[] =
	"Attach to a running training job and say where its wall time goes.\n"
	"\n"
	"COMMANDS:\n"
	"  pipeprof -p PID             the report: a verdict on where the time goes\n"
	"  pipeprof hist -p PID KIND   BCC-style histograms of one job\n"
	"                              (see 'pipeprof hist --help' for the kinds)\n"
	"  pipeprof top [-p PID]       a live view, redrawn every second: each role's\n"
	"                              states over the last 30 s, the verdict, steps/s\n"
	"  pipeprof profile -p PID -o FILE\n"
	"                              folded stacks for a flame graph: CPU samples\n"
	"                              with Python frames, or the trainer's waits\n"
	"                              (see 'pipeprof profile --help')\n"
	"  pipeprof flamegraph FOLDED -o FILE.svg\n"
	"                              folded stacks drawn as an SVG flame graph\n"
	"  pipeprof daemon             trace every training job on the host and\n"
	"                              serve Prometheus metrics (see 'pipeprof daemon\n"
	"                              --help')\n"
	"  pipeprof record -p PID -o FILE\n"
	"                              a timeline of every thread's states for\n"
	"                              ui.perfetto.dev (see 'pipeprof record --help')\n"
	"  pipeprof diff BEFORE.json AFTER.json\n"
	"                              two JSON reports compared, with --fail-if\n"
	"                              rules for CI (see 'pipeprof diff --help')\n"
	"\n"
	"Options of the report:\v"
	"The trainer thread's time is split into the stall model's states (RUNNING,\n"
	"RUNQ, GPU_WAIT, IO_WAIT, DATA_WAIT, THREAD_WAIT, COMM_WAIT, OTHER); the\n"
	"verdict names the largest stall, with the DataLoader workers' and helper\n"
	"threads' own breakdowns as evidence. Each recommendation says what it rests\n"
	"on and, where a model of the pipeline (trainer, workers, the machine's CPUs)\n"
	"accounts for today's rate, predicts its effect on steps/s.\n"
	"\n"
	"EXAMPLES:\n"
	"  sudo pipeprof -p 4242           # trace until Ctrl-C, then report\n"
	"  sudo pipeprof -p 4242 -d 10     # trace 10 seconds\n"
	"  sudo pipeprof -p 4242 -d 10 -j  # JSON report (pipeprof.report/v1)\n"
	"  sudo pipeprof -d 10 -- /usr/bin/python3 train.py  # launch and follow\n"
	"  sudo pipeprof -p 4242 -d 10 --folded out.folded  # and a flame graph's input\n"
	"  sudo pipeprof -p 4242 -d 10 --step-symbol libmodel.so:train_step  # steps\n"
	"  sudo pipeprof -p 4242 -d 10 --html report.html  # and a page with plots\n"
	"\n"
	"A launched command is sent SIGTERM if it still runs when tracing ends.\n"
	"Exit status: 0 report printed, 1 tracing failed, 2 bad arguments or no\n"
	"such process.";

enum { OPT_HTML = 0x100, OPT_ALL_LAUNCHES };

static const struct argp_option report_options[] = {
	{ "pid", 'p', "PID", 0, "Process to trace (with its descendants)", 0 },
	{ "duration", 'd', "SECS", 0, "Trace this long, then report (default: until Ctrl-C or exit)", 0 },
	{ "json", 'j', NULL, 0, "Print the report as JSON (schema pipeprof.report/v1)", 0 },
	{ "tid", 't', "TID", 0, "The trainer thread (default: most GPU calls, else the main thread)", 0 },
	{ "threshold", 'T', "PCT", 0, "Share of wall time a stall needs for a verdict (default 20)", 0 },
	{ "frequency", 'F', "HZ", 0, "CPU samples a second on each CPU for the \"where\" section "
	  "(default 49; 0 turns sampling off)", 0 },
	{ "folded", 'f', "FILE", 0, "Write the CPU samples as folded stacks (flamegraph.pl, "
	  "speedscope): role;Python frames, outermost first;[native leaf] count", 0 },
	{ "step-symbol", 'S', "FILE:SYMBOL", 0, "Steps start at each outermost call of SYMBOL in "
	  "the mapped file FILE (default: libtorch's autograd backward pass, else each batch the "
	  "trainer waits for)", 0 },
	{ "html", OPT_HTML, "FILE", 0, "Also write the report as one self-contained HTML page "
	  "(the trainer's states step by step, each role's, the latency histograms, the flame "
	  "graph; no script, nothing fetched) to FILE", 0 },
	{ "all-launches", OPT_ALL_LAUNCHES, NULL, 0, "Probe every kernel launch: exact launch "
	  "counts in every step, at a uprobe trap or two a launch (default: every launch while "
	  "the probes are hit under 1000 times a second, else in bursts, the steps' launch "
	  "figures over the steps a burst spanned)", 0 },
	{ "verbose", 'v', NULL, 0, "Verbose: libbpf logs and every probe attached", 0 },
	{},
};

/* FILE:SYMBOL: a file name as the process maps it (any version suffix), and a symbol of its
 * ELF tables (mangled, as C++ exports it). */
static bool valid_step_symbol(const char *arg)
{
	const char *colon = strchr(arg, ':');

	if (!colon || colon == arg || !colon[1] || strchr(arg, '/') ||
	    colon - arg >= STEP_FILE_MAX || strlen(colon + 1) >= STEP_SYMBOL_MAX)
		return false;
	for (const char *c = colon + 1; *c; c++)
		if (!isalnum((unsigned char)*c) && !strchr("_.$@", *c))
			return false;
	return true;
}

int cli_parse_long(const char *arg, long min, long max, long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(arg, &end, 10);
	if (errno || end == arg || *end || v < min || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

int cli_parse_double(const char *arg, double min, double max, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(arg, &end);
	/* Written so that NaN, which compares false with everything, is refused too. */
	if (errno || end == arg || *end || !(v >= min && v <= max))
		return -EINVAL;
	*out = v;
	return 0;
}

/*
 * argp_error() exits, unless the caller passed ARGP_NO_EXIT (the fuzzer does): then the
 * parser must stop by itself, or it would go on with a value it never parsed.
 */
int cli_parse_target_opt(int key, const char *arg, struct argp_state *state,
			 struct report_opts *o)
{
	long v;

	switch (key) {
	case 'p':
	case 't':
		if (cli_parse_long(arg, 1, INT_MAX, &v)) {
			argp_error(state, "invalid %s: %s", key == 'p' ? "PID" : "TID", arg);
			return EINVAL;
		}
		*(key == 'p' ? &o->pid : &o->tid) = (pid_t)v;
		return 0;
	case 'd':
		if (cli_parse_double(arg, 0.001, 1e7, &o->duration)) {
			argp_error(state, "invalid duration (seconds > 0): %s", arg);
			return EINVAL;
		}
		return 0;
	}
	return ARGP_ERR_UNKNOWN;
}

static error_t report_parse(int key, char *arg, struct argp_state *state)
{
	struct report_opts *o = state->input;
	int err = cli_parse_target_opt(key, arg, state, o);
	long v;

	if (err != ARGP_ERR_UNKNOWN)
		return err;
	switch (key) {
	case 'j':
		o->json = true;
		break;
	case 'T':
		if (cli_parse_double(arg, 1, 100, &o->threshold)) {
			argp_error(state, "invalid threshold (1-100 percent): %s", arg);
			return EINVAL;
		}
		o->threshold /= 100;
		break;
	case 'F':
		if (cli_parse_long(arg, 0, 1000, &v)) {
			argp_error(state, "invalid sampling frequency (0-1000 Hz): %s", arg);
			return EINVAL;
		}
		o->sample_hz = (unsigned int)v;
		break;
	case 'f':
		if (!*arg) {
			argp_error(state, "--folded needs a file name");
			return EINVAL;
		}
		o->folded = arg;
		break;
	case 'S':
		if (!valid_step_symbol(arg)) {
			argp_error(state, "invalid --step-symbol (FILE:SYMBOL, a file name without a "
				   "directory and a mangled symbol name): %s", arg);
			return EINVAL;
		}
		o->step_symbol = arg;
		break;
	case OPT_HTML:
		/* Standard output holds the report itself: two documents there would be neither. */
		if (!*arg || !strcmp(arg, "-")) {
			argp_error(state, "--html needs a file name (not -: the report goes to standard "
				   "output)");
			return EINVAL;
		}
		o->html = arg;
		break;
	case OPT_ALL_LAUNCHES:
		o->all_launches = true;
		break;
	case 'v':
		o->verbose = true;
		break;
	case ARGP_KEY_ARG:
		/* The first operand starts the command to launch; argp stops parsing at "--". */
		o->argv = &state->argv[state->next - 1];
		state->next = state->argc;
		break;
	case ARGP_KEY_END:
		if (o->pid && o->argv) {
			argp_error(state, "give either -p PID or -- COMMAND, not both");
			return EINVAL;
		}
		if (!o->pid && !o->argv) {
			argp_error(state, "nothing to trace: give -p PID or -- COMMAND");
			return EINVAL;
		}
		if (o->folded && !o->sample_hz) {
			argp_error(state, "--folded needs samples: -F 0 turns them off");
			return EINVAL;
		}
		break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

int report_cmd_parse(int argc, char **argv, unsigned int flags, struct report_opts *o)
{
	const struct argp argp = {
		.options = report_options,
		.parser = report_parse,
		.args_doc = "-p PID\n[-- COMMAND [ARGS...]]\nhist -p PID KIND... [INTERVAL [COUNT]]\n"
			    "profile -p PID -o FILE\nrecord -p PID -o FILE\nflamegraph FOLDED -o FILE.svg\n"
			    "daemon [OPTION...]\ndiff BEFORE.json AFTER.json [--fail-if RULE]...\n"
			    "top [-p PID] [-n N]",
		.doc = report_doc,
	};
	error_t err;

	*o = (struct report_opts){ .threshold = 0.20, .sample_hz = DEFAULT_SAMPLE_HZ,
				   .folded_role = -1 };
	/* argp exits with status 64 on usage errors; the report's contract says 2. */
	argp_err_exit_status = 2;
	err = argp_parse(&argp, argc, argv, ARGP_IN_ORDER | flags, NULL, o);
	return err ? -err : 0;
}

static int pidfd_open_compat(pid_t pid)
{
	return syscall(SYS_pidfd_open, pid, 0);
}

struct launch {
	pid_t pid;
	int go_fd;	/* write a byte to let the command exec; close to abort it */
	int err_fd;	/* the child's errno if exec fails; EOF once exec succeeded */
};

/*
 * Fork the command held on a pipe; it execs only once the tracer is attached, so the report
 * sees it from its first instruction. A close-on-exec pipe carries back exec's failure.
 */
static int launch_held(char **argv, struct launch *l)
{
	int go[2], status[2];
	char c;

	if (pipe2(go, O_CLOEXEC))
		return -errno;
	if (pipe2(status, O_CLOEXEC)) {
		close(go[0]);
		close(go[1]);
		return -errno;
	}
	l->pid = fork();
	if (l->pid < 0) {
		int err = -errno;

		close(go[0]);
		close(go[1]);
		close(status[0]);
		close(status[1]);
		return err;
	}
	if (l->pid == 0) {
		int err;

		/* The command gets the dispositions pipeprof found, not its handlers or its
		 * ignored SIGPIPE; a Ctrl-C while held simply ends it. */
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		signal(SIGPIPE, SIG_DFL);
		close(go[1]);
		close(status[0]);
		if (read(go[0], &c, 1) != 1)
			_exit(127);
		execvp(argv[0], argv);
		err = errno;
		if (write(status[1], &err, sizeof(err)) < 0)
			_exit(127);
		_exit(127);
	}
	close(go[0]);
	close(status[1]);
	l->go_fd = go[1];
	l->err_fd = status[0];
	return 0;
}

/* Let the held command go; returns 0 once it has exec'd, or the -errno exec failed with. */
static int launch_release(struct launch *l)
{
	int err = 0;
	ssize_t n;

	if (write(l->go_fd, "g", 1) != 1)
		return -errno;
	close(l->go_fd);
	l->go_fd = -1;
	n = read(l->err_fd, &err, sizeof(err));
	close(l->err_fd);
	l->err_fd = -1;
	return n == sizeof(err) ? -err : 0;
}

static void cpu_sample(struct cpu_window *w)
{
	unsigned long long busy, total;
	int running;

	if (!proc_cpu_times(PROCFS, &busy, &total, &running))
		cpu_window_sample(w, running);
}

/* Worker processes started inside the window after another ended: an epoch's re-fork. A job
 * launched under pipeprof forks its first workers inside the window, and one that ends there
 * ends them: neither is a re-fork. */
static int workers_reforked(const struct report *r)
{
	uint64_t first_exit = 0;
	int forked = 0;

	for (int i = 0; i < r->nr_procs; i++)
		if (!r->procs[i].root && r->procs[i].exit_ns &&
		    (!first_exit || r->procs[i].exit_ns < first_exit))
			first_exit = r->procs[i].exit_ns;
	for (int i = 0; first_exit && i < r->nr_procs; i++)
		forked += !r->procs[i].root && r->procs[i].fork_ns > first_exit;
	return forked;
}

static void fill_input(struct report *r, pid_t tid, double threshold, const struct cpu_window *w)
{
	unsigned long long busy = 0, total = 0;
	__u64 gpu_calls = 0, gpu_ns = 0;
	int running;
	bool ok;

	r->input.root_pid = r->root_pid;
	r->input.tid_override = tid;
	r->input.threshold = threshold;
	r->input.ncpus = sysconf(_SC_NPROCESSORS_ONLN);
	ok = !proc_cpu_times(PROCFS, &busy, &total, &running);
	cpu_window_result(w, ok, busy, total, &r->input.cpu_busy, &r->input.runnable_avg);
	for (int k = 0; k < r->nr_apis; k++) {
		gpu_calls += r->apis[k].calls;
		gpu_ns += r->apis[k].total_ns;
	}
	r->input.gpu_sync_mean_us = gpu_calls ? gpu_ns / 1e3 / gpu_calls : 0;
	r->input.window_ns = r->end_ns - r->start_ns;
	r->input.io_requests = r->io.count;
	r->input.gpu_unprobed = r->gpu_libs_unprobed;
	r->input.gpu_mapped = r->nr_libs > 0 || r->gpu_libs_unprobed;
	r->input.workers_forked = workers_reforked(r);
	r->input.h2d_traced = r->copies_traced;
	r->input.h2d_bytes = r->copies.bytes[PP_COPY_HTOD];
	r->input.h2d_pinned_bytes = r->copies.pinned_bytes[PP_COPY_HTOD];
	r->input.wakes = r->wakes;
	r->input.nr_wakes = r->nr_wakes;
}

/* The trainer's wait that no wakeup named within the grace: honest about what OTHER holds. */
static void note_open_wait(struct report *r, int naming_ms)
{
	int i = r->analysis.trainer_index;

	if (i >= 0 && r->threads[i].open_wait_ns)
		report_not_traced(r, "the trainer's last wait (%.3f s of the window) had not ended %d ms "
				  "after the window closed: its cause is unknown and it counts as OTHER",
				  r->threads[i].open_wait_ns / 1e9, naming_ms);
	if (i >= 0 && r->threads[i].named_before_ns)
		report_not_traced(r, "the trainer's last timed-out waits (%.3f s of the window) were "
				  "retried, and no end of that chain was seen %d ms after the window "
				  "closed: they count as %s, as the last such chain at their call did",
				  r->threads[i].named_before_ns / 1e9, naming_ms,
				  state_name(r->threads[i].named_before_state));
}

/* Wakers pipeprof does not trace are named from /proc, while they still exist. */
static void name_untraced_wakers(struct analysis *a)
{
	for (int i = 0; i < a->nr_waited_on; i++) {
		struct waited_on *w = &a->waited_on[i];

		if (w->ctx == PP_WAKE_TASK && w->thread_index < 0 && !w->comm[0])
			proc_comm(PROCFS, w->tgid, w->tid, w->comm, sizeof(w->comm));
	}
}

static void free_report(struct report *r)
{
	free(r->job);
	free(r->threads);
	free(r->procs);
	free(r->libs);
	free(r->wakes);
	where_free(r);
	step_store_free(&r->step_points);
}

/*
 * A launcher's ranks: each analysed as a trainer of its own (ranks.c), and the rest of the
 * report is about the focus rank, the one the others wait for, whose threads alone stay in
 * r->threads: the launcher's own threads and the other ranks' are not its helpers or workers.
 */
static int prepare_ranks(struct report *r)
{
	struct rank_hint *hints = calloc(r->nr_procs + 1, sizeof(*hints));
	pid_t *pids = calloc(r->nr_procs ? r->nr_procs : 1, sizeof(*pids));
	bool *joined = calloc(r->nr_procs ? r->nr_procs : 1, sizeof(*joined));
	struct job_ranks *job = calloc(1, sizeof(*job));
	struct thread_result *focus = NULL;
	int n = 0, err = 0;

	if (!hints || !pids || !joined || !job) {
		err = -ENOMEM;
		goto cleanup;
	}
	for (int i = 0; i < r->nr_procs; i++)
		if (!r->procs[i].exited && !r->procs[i].root)
			pids[n++] = r->procs[i].pid;
	/* Unreadable connections leave the environment to tell. */
	proc_joined_peers(PROCFS, r->root_pid, pids, n, joined);
	for (int i = 0; i < n; i++)
		hints[i] = (struct rank_hint){ pids[i], proc_env_rank(PROCFS, pids[i]), joined[i] };
	hints[n++] = (struct rank_hint){ r->root_pid, proc_env_rank(PROCFS, r->root_pid), false };
	if (ranks_find(r, hints, n, job) <= 0)
		goto cleanup;
	err = ranks_analyse(r, job);
	if (err)
		goto cleanup;
	focus = calloc(r->nr_threads ? r->nr_threads : 1, sizeof(*focus));
	if (!focus) {
		err = -ENOMEM;
		goto cleanup;
	}
	n = ranks_subtree_threads(r, job->ranks[job->focus].pid, focus);
	r->job_threads = r->nr_threads;
	memcpy(r->threads, focus, n * sizeof(*focus));
	r->nr_threads = n;
	r->input.root_pid = job->ranks[job->focus].pid;
	r->job = job;
	job = NULL;
cleanup:
	free(focus);
	free(job);
	free(joined);
	free(pids);
	free(hints);
	return err;
}

/* `profile --offcpu --role worker|helper`: every thread of that role's processes sends its
 * waits (the trainer's are left out when written); otherwise only the trainer's. */
static unsigned int wait_stack_scope(const struct report_opts *o)
{
	if (!o->folded_offcpu || o->folded_role < 0 || o->folded_role == ROLE_TRAINER)
		return PP_WAIT_STACKS_TID;
	return o->folded_role == ROLE_WORKER ? PP_WAIT_STACKS_DESCENDANTS : PP_WAIT_STACKS_ROOT;
}

/* How many samples or waits the folded output stands for (before the microsecond floor). */
static uint64_t folded_count(const struct report_opts *o, const struct report *r)
{
	uint64_t n = 0;
	int role = o->folded_offcpu && wait_stack_scope(o) == PP_WAIT_STACKS_TID ? -1 :
		o->folded_role;

	if (o->folded_offcpu) {
		for (int i = 0; i < r->nr_waits; i++)
			n += role < 0 || r->waits[i].role == role ? r->waits[i].count : 0;
		return n;
	}
	for (int i = 0; i < r->nr_where_samples; i++)
		n += role < 0 || r->where_samples[i].role == role;
	return n;
}

static int write_folded(const struct report_opts *o, const struct report *r)
{
	bool to_stdout = !strcmp(o->folded, "-");
	FILE *f = to_stdout ? stdout : fopen(o->folded, "we");
	char *text = NULL, title[128];
	FILE *stacks = f;
	size_t len = 0;
	int err;

	if (!f)
		return -errno;
	if (o->folded_svg && !(stacks = open_memstream(&text, &len))) {
		err = -ENOMEM;
		goto cleanup;
	}
	if (o->folded_offcpu)
		/* The trainer's waits are --tid's or the main thread's, whichever thread the
		 * report names the trainer; a role's are filtered by the role found. */
		err = where_write_folded_waits(stacks, r->waits, r->nr_waits,
					       wait_stack_scope(o) == PP_WAIT_STACKS_TID ? -1 :
					       o->folded_role, &r->where_names);
	else
		err = where_write_folded(stacks, r->where_samples, r->nr_where_samples, o->folded_role,
					 &r->where_names);
	if (o->folded_svg) {
		if (fclose(stacks) && !err)
			err = -ENOMEM;
		snprintf(title, sizeof(title), "pipeprof: PID %d, %s%s", (int)o->pid,
			 o->folded_role >= 0 ? role_name(o->folded_role) :
			 o->folded_offcpu ? "TRAINER" : "CPU samples",
			 o->folded_offcpu ? " waits" : "");
		if (!err)
			err = flamegraph_svg(f, text, len, &(struct flamegraph_opts){
				.title = title, .unit = o->folded_offcpu ? "us" : "samples" }, NULL);
	}
cleanup:
	free(text);
	if ((to_stdout ? fflush(f) : fclose(f)) && !err)
		err = -errno;
	return err;
}

static int write_html(const char *path, const struct report *r)
{
	FILE *f = fopen(path, "we");
	int err;

	if (!f)
		return -errno;
	err = report_print_html(f, r);
	if (fclose(f) && !err)
		err = -errno;
	return err;
}

int report_cmd_run(const struct report_opts *o)
{
	struct sigaction sa = { .sa_handler = on_signal };
	struct tracer tracer = {};
	struct report report = {};
	struct cpu_window cpu = {};
	struct launch launch = { .go_fd = -1, .err_fd = -1 };
	int pidfd = -1, err = 0, status = 1;
	bool launched = o->argv != NULL, child_reaped = false;
	__u64 deadline = 0, end_ns, window_ms;
	int naming_ms;
	pid_t pid = o->pid, tid = o->tid;

	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	/* A held command that died on Ctrl-C must give an error, not kill us on write. */
	signal(SIGPIPE, SIG_IGN);

	if (launched) {
		err = launch_held(o->argv, &launch);
		if (err) {
			fprintf(stderr, "pipeprof: cannot start %s: %s\n", o->argv[0], strerror(-err));
			return 1;
		}
		pid = launch.pid;
	} else {
		err = target_resolve(PROCFS, &pid, &tid);
		if (err) {
			status = err == -ESRCH || err == -EINVAL ? 2 : 1;
			goto cleanup;
		}
	}

	err = tracer_start(&tracer, &(struct tracer_opts){ .root = pid, .trainer_tid = tid,
							   .verbose = o->verbose, .record_wakers = true,
							   .python_gc = true,
							   .sample_hz = o->sample_hz, .steps = true,
							   .memory = true,
							   .record = o->record != NULL,
							   .step_symbol = o->step_symbol,
							   .all_launches = o->all_launches,
							   .wait_stack_scope = wait_stack_scope(o) });
	if (err) {
		status = err == -ESRCH ? 2 : 1;
		goto cleanup;
	}
	if (exiting) {
		fprintf(stderr, "pipeprof: interrupted while attaching; nothing traced\n");
		goto cleanup;
	}
	if (launched) {
		err = launch_release(&launch);
		if (err && exiting) {
			/* Ctrl-C just after the attach ended the held command too. */
			fprintf(stderr, "pipeprof: interrupted while attaching; nothing traced\n");
			goto cleanup;
		}
		if (err) {
			fprintf(stderr, "pipeprof: cannot run %s: %s\n", o->argv[0], strerror(-err));
			status = err == -ENOENT || err == -EACCES ? 2 : 1;
			goto cleanup;
		}
	}

	pidfd = pidfd_open_compat(pid);
	if (o->duration > 0)
		deadline = tracer.start_ns + (__u64)(o->duration * 1e9);
	cpu_window_open(&cpu, PROCFS);
	if (!o->json)
		fprintf(stderr, "pipeprof: tracing PID %d%s...%s\n", pid, launched ? " (launched)" : "",
			o->duration > 0 ? "" : " Ctrl-C to stop and print the report");

	while (!exiting) {
		__u64 now;

		err = tracer_wait(&tracer, pidfd, TICK_MS);
		if (err < 0) {
			fprintf(stderr, "pipeprof: %s\n", strerror(-err));
			goto cleanup;
		}
		if (err)
			break;
		if (pidfd < 0 && kill(pid, 0) && errno == ESRCH)
			break;
		if (launched && !child_reaped && waitpid(pid, NULL, WNOHANG) == pid) {
			child_reaped = true;
			break;
		}
		now = monotonic_ns();
		if (deadline && now >= deadline)
			break;
		cpu_sample(&cpu);
	}
	end_ns = tracer_end_accounting(&tracer);
	window_ms = (end_ns - tracer.start_ns) / 1000000;
	naming_ms = tracer_close_window(&tracer, end_ns, tid, NAMING_GRACE_MS,
					exiting ? NAMING_GRACE_MS :
					window_ms < NAMING_LONG_MS ? NAMING_LONG_MS :
					window_ms < NAMING_MAX_MS ? (int)window_ms : NAMING_MAX_MS,
					&exiting, o->json);

	report.root_pid = pid;
	report.launched = launched;
	report.interrupted = exiting != 0;
	proc_cmdline(PROCFS, pid, report.cmdline, sizeof(report.cmdline));
	if (!report.cmdline[0] && launched)
		snprintf(report.cmdline, sizeof(report.cmdline), "%s", o->argv[0]);
	/* The probes stay attached until the report is out: each uprobe's detach waits out an
	 * RCU grace period, one after another (~70 ms each here), and a user should not wait
	 * seconds for figures already read. */
	err = tracer_collect(&tracer, end_ns, &report);
	if (err) {
		fprintf(stderr, "pipeprof: cannot read the results: %s\n", strerror(-err));
		goto cleanup;
	}
	if (!report.cmdline[0]) {
		for (int i = 0; i < report.nr_procs; i++)
			if (report.procs[i].root)
				snprintf(report.cmdline, sizeof(report.cmdline), "%s", report.procs[i].comm);
	}
	if (report.target_exited && !report.cmdline[0])
		snprintf(report.cmdline, sizeof(report.cmdline), "exited");

	fill_input(&report, tid, o->threshold, &cpu);
	err = prepare_ranks(&report);
	if (err) {
		fprintf(stderr, "pipeprof: cannot sum up the ranks: %s\n", strerror(-err));
		goto cleanup;
	}
	analyse(report.threads, report.nr_threads, &report.input, &report.analysis);
	name_untraced_wakers(&report.analysis);
	note_open_wait(&report, naming_ms);
	err = where_finish(&report);
	if (err) {
		fprintf(stderr, "pipeprof: cannot sum up the CPU samples: %s\n", strerror(-err));
		goto cleanup;
	}
	where_annotate(&report);
	err = steps_finish(&report);
	if (err) {
		fprintf(stderr, "pipeprof: cannot sum up the steps: %s\n", strerror(-err));
		goto cleanup;
	}
	recommend_memory(&report.analysis, &report.mem, report.steps.count ? report.steps.mean_s : 0);
	if (report.gpu_traced)
		recommend_gpu_steps(&report.analysis, &report.steps, report.launch_bound);
	if (tid && report.analysis.trainer_index < 0)
		report_not_traced(&report, "--tid %d: no such thread in the traced processes", tid);

	if (o->folded) {
		err = write_folded(o, &report);
		if (err) {
			fprintf(stderr, "pipeprof: cannot write %s: %s\n", o->folded, strerror(-err));
			goto cleanup;
		}
	}
	if (o->record)
		err = record_finish(o, &tracer, &report);
	else if (o->profile)
		fprintf(stderr, "pipeprof: %llu %s%s written to %s\n",
			(unsigned long long)folded_count(o, &report),
			o->folded_offcpu ? "waits of " : "CPU samples",
			!o->folded_offcpu ? "" : o->folded_role >= 0 ? role_name(o->folded_role) :
			"the trainer", strcmp(o->folded, "-") ? o->folded : "standard output");
	else if (o->json)
		err = report_print_json(stdout, &report);
	else
		report_print_text(stdout, &report);
	/* Closed, not only flushed: a reader of a pipe gets its EOF now rather than after the
	 * detach, and a failed write (a full disk, a closed pipe) is an error, never exit 0. */
	if (fclose(stdout) && !err)
		err = -errno;
	if (err) {
		if (!o->record)	/* record_finish() said which file */
			fprintf(stderr, "pipeprof: cannot write the report: %s\n", strerror(-err));
		goto cleanup;
	}
	/* After the report: a page that cannot be written costs the exit status, not the
	 * report already out. */
	if (o->html && !o->profile) {
		err = write_html(o->html, &report);
		if (err) {
			fprintf(stderr, "pipeprof: cannot write the HTML report %s: %s\n", o->html,
				strerror(-err));
			goto cleanup;
		}
	}
	status = 0;

cleanup:
	tracer_stop(&tracer);
	if (launch.go_fd >= 0)
		close(launch.go_fd);	/* aborts a launched command that never got going */
	if (launch.err_fd >= 0)
		close(launch.err_fd);
	if (pidfd >= 0)
		close(pidfd);
	if (launched && !child_reaped) {
		/* The command is ours: do not leave it running unobserved. */
		kill(pid, SIGTERM);
		waitpid(pid, NULL, 0);
	}
	free_report(&report);
	return status;
}
