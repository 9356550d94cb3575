// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * pipeprof daemon: every training job on the host, from its start, in rolling windows;
 * Prometheus metrics over HTTP and JSON lines.
 *
 * Each job gets its own tracer (BPF object): attaching and detaching a job then cannot
 * disturb another, and a job's exit frees everything it held. New jobs are found from exec
 * events (discover.bpf.c) and a once-a-second look at the new process's maps until it loads
 * an ML library or two minutes pass.
 */
#include <argp.h>
#include <errno.h>
#include <pthread.h>
#include <regex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "caps.h"
#include "cgroup.h"
#include "daemon.h"
#include "daemon_cmd.h"
#include "discover.skel.h"
#include "pipeprof.skel.h"
#include "proctree.h"

static volatile sig_atomic_t exiting, reload;

static void on_signal(int sig)
{
	if (sig == SIGHUP)
		reload = 1;
	else
		exiting = sig;
}

/* ---- options ---- */

enum {
	OPT_LISTEN = 1000, OPT_JSONL, OPT_JSONL_MAX, OPT_JSONL_KEEP, OPT_WINDOW, OPT_MATCH,
	OPT_MATCH_CGROUP, OPT_STEP_REGRESSION, OPT_SERVE, OPT_CONFIG,
};

static const char *const opt_keys[] = {
	[OPT_LISTEN - OPT_LISTEN] = "listen", [OPT_JSONL - OPT_LISTEN] = "jsonl",
	[OPT_JSONL_MAX - OPT_LISTEN] = "jsonl_max_bytes", [OPT_JSONL_KEEP - OPT_LISTEN] = "jsonl_keep",
	[OPT_WINDOW - OPT_LISTEN] = "window", [OPT_MATCH - OPT_LISTEN] = "match",
	[OPT_MATCH_CGROUP - OPT_LISTEN] = "match_cgroup",
	[OPT_STEP_REGRESSION - OPT_LISTEN] = "step_regression", [OPT_SERVE - OPT_LISTEN] = "serve",
};

static const char daemon_doc[] =
	"Trace every training job on this host continuously; Prometheus metrics over HTTP.\v"
	"Jobs are processes that map libtorch, libcudart, libcuda or libnccl: those\n"
	"running at start and new ones (found from exec events). DataLoader workers\n"
	"belong to their job; each rank of a distributed job is a job of its own.\n"
	"Per job and rolling window: the stall model's seconds per role and state, the\n"
	"verdict, step time, GPU sync and block I/O latency, NCCL calls and bytes.\n"
	"\n"
	"HTTP (loopback by default): /metrics (Prometheus text), /healthz,\n"
	"/api/v1/report?pid=N (the job's last window as pipeprof -p N -j prints it).\n"
	"No authentication: whoever can connect reads each traced job's full command\n"
	"line (it may hold secrets) in its report, its pid and name in the metrics.\n"
	"On an address other than loopback the daemon warns at start. --serve\n"
	"no-cmdline names jobs in reports by command name only; --serve metrics\n"
	"serves /metrics and /healthz and no reports.\n"
	"\n"
	"SIGHUP re-reads --config (key = value, the long options' names) and reopens the\n"
	"JSON lines file; options given on the command line win over the file.\n"
	"\n"
	"EXAMPLES:\n"
	"  sudo pipeprof daemon --listen 127.0.0.1:9464 \\\n"
	"      --jsonl /var/log/pipeprof/events.jsonl\n"
	"  curl -s 127.0.0.1:9464/metrics\n"
	"  sudo pipeprof daemon --match '^python' --window 30\n"
	"  systemctl enable --now pipeprof   # tools/pipeprof.service, installed by make install";

static const struct argp_option daemon_options[] = {
	{ "listen", OPT_LISTEN, "ADDR:PORT", 0, "HTTP address (default 127.0.0.1:9464)", 0 },
	{ "jsonl", OPT_JSONL, "PATH", 0, "Append window snapshots and events as JSON lines", 0 },
	{ "jsonl-max-bytes", OPT_JSONL_MAX, "BYTES", 0, "Rotate the JSON lines file at this size (default 100 MiB)", 0 },
	{ "jsonl-keep", OPT_JSONL_KEEP, "N", 0, "Rotated files kept (default 5)", 0 },
	{ "window", OPT_WINDOW, "SECS", 0, "Rolling window length (default 10)", 0 },
	{ "match", OPT_MATCH, "REGEX", 0, "Only jobs whose command name matches", 0 },
	{ "match-cgroup", OPT_MATCH_CGROUP, "PATH", 0, "Only jobs in this cgroup or below", 0 },
	{ "step-regression", OPT_STEP_REGRESSION, "PCT", 0, "Flag a median step time this much over its trailing baseline (default 20)", 0 },
	{ "serve", OPT_SERVE, "WHAT", 0, "What HTTP gives away: all (default), no-cmdline (reports without command lines), metrics (/metrics and /healthz only)", 0 },
	{ "config", OPT_CONFIG, "FILE", 0, "Settings file, re-read on SIGHUP", 0 },
	{ "verbose", 'v', NULL, 0, "Verbose: libbpf logs, every probe, every discovery", 0 },
	{},
};

static error_t daemon_parse(int key, char *arg, struct argp_state *state)
{
	struct daemon *d = state->input;
	char err[256];

	switch (key) {
	case 'v':
		d->cli.verbose = true;
		break;
	case OPT_CONFIG:
		snprintf(d->cli.config, sizeof(d->cli.config), "%s", arg);
		break;
	case ARGP_KEY_ARG:
		argp_error(state, "unexpected argument: %s", arg);
		/* With ARGP_NO_EXIT (the fuzzer's), argp_error() returns: stop here all the same. */
		return EINVAL;
	default:
		if (key < OPT_LISTEN || key > OPT_SERVE)
			return ARGP_ERR_UNKNOWN;
		/* One line that says what is wrong: argp_error() would add a second. */
		if (daemon_config_set(&d->cli, opt_keys[key - OPT_LISTEN], arg, err, sizeof(err))) {
			fprintf(stderr, "%s: %s\n", state->name, err);
			return EINVAL;
		}
		d->cli_set[key - OPT_LISTEN] = true;
		break;
	}
	return 0;
}

/* A cgroup path that names nothing would match no job, ever, and say nothing. */
static int check_cgroup(const char *path, const char *name)
{
	char where[PATH_MAX];
	int ret;

	if (!path[0])
		return 0;
	ret = cgroup_find(CGROUP_MOUNTINFO, path, where, sizeof(where));
	if (ret == 1)
		return 0;
	if (ret < 0)
		fprintf(stderr, "pipeprof: %s %s: cannot read %s: %s\n", name, path,
			CGROUP_MOUNTINFO, strerror(-ret));
	else if (!where[0])
		fprintf(stderr, "pipeprof: %s %s: no cgroup file system is mounted\n", name, path);
	else
		fprintf(stderr, "pipeprof: %s %s: no such cgroup (not under %s)\n", name, path,
			where);
	return ret < 0 ? ret : -ENOENT;
}

/* The file's settings, then the command line's on top. */
static int load_config(struct daemon *d, struct daemon_config *out)
{
	struct daemon_config c;
	char err[512], why[256];
	struct stat st;
	FILE *f;
	int ret;

	daemon_config_defaults(&c);
	if (d->cli.config[0]) {
		f = fopen(d->cli.config, "r");
		if (!f) {
			ret = -errno;
			fprintf(stderr, "pipeprof: cannot read %s: %s\n", d->cli.config, strerror(-ret));
			return ret;
		}
		/* A directory opens for reading; only reading it fails, and less clearly. */
		if (!fstat(fileno(f), &st) && S_ISDIR(st.st_mode)) {
			fprintf(stderr, "pipeprof: cannot read %s: is a directory, not a settings file\n",
				d->cli.config);
			fclose(f);
			return -EISDIR;
		}
		ret = daemon_config_parse(f, &c, err, sizeof(err));
		fclose(f);
		if (ret) {
			fprintf(stderr, "pipeprof: %s: %s\n", d->cli.config, err);
			return ret;
		}
	}
	for (int i = 0; i <= OPT_SERVE - OPT_LISTEN; i++) {
		char value[PATH_MAX];

		if (!d->cli_set[i])
			continue;
		switch (i + OPT_LISTEN) {
		case OPT_LISTEN: snprintf(value, sizeof(value), "%s", d->cli.listen); break;
		case OPT_JSONL: snprintf(value, sizeof(value), "%s", d->cli.jsonl); break;
		case OPT_JSONL_MAX: snprintf(value, sizeof(value), "%lld", d->cli.jsonl_max_bytes); break;
		case OPT_JSONL_KEEP: snprintf(value, sizeof(value), "%d", d->cli.jsonl_keep); break;
		case OPT_WINDOW: snprintf(value, sizeof(value), "%ld", d->cli.window_s); break;
		case OPT_MATCH: snprintf(value, sizeof(value), "%s", d->cli.match); break;
		case OPT_MATCH_CGROUP: snprintf(value, sizeof(value), "%s", d->cli.match_cgroup); break;
		case OPT_STEP_REGRESSION:
			snprintf(value, sizeof(value), "%.17g", d->cli.step_regression * 100);
			break;
		case OPT_SERVE: snprintf(value, sizeof(value), "%s", daemon_serve_name(d->cli.serve)); break;
		}
		if (daemon_config_set(&c, opt_keys[i], value, why, sizeof(why))) {
			fprintf(stderr, "pipeprof: %s\n", why);
			return -EINVAL;
		}
	}
	ret = check_cgroup(c.match_cgroup, d->cli_set[OPT_MATCH_CGROUP - OPT_LISTEN] ?
			   "--match-cgroup" : "match_cgroup");
	if (ret)
		return ret;
	snprintf(c.config, sizeof(c.config), "%s", d->cli.config);
	c.verbose = d->cli.verbose;
	*out = c;
	return 0;
}

static int apply_config(struct daemon *d, const struct daemon_config *c)
{
	regex_t re;
	int err;

	if (c->match[0] && regcomp(&re, c->match, REG_EXTENDED | REG_NOSUB))
		return -EINVAL;	/* daemon_config_set compiled it once already */
	if (d->have_re)
		regfree(&d->match_re);
	d->have_re = c->match[0] != 0;
	if (d->have_re)
		d->match_re = re;
	if (d->jsonl_open && (strcmp(c->jsonl, d->cfg.jsonl) || !c->jsonl[0])) {
		jsonl_close(&d->jsonl);
		d->jsonl_open = false;
	}
	if (c->jsonl[0] && !d->jsonl_open) {
		err = jsonl_open(&d->jsonl, c->jsonl, c->jsonl_max_bytes, c->jsonl_keep);
		if (err) {
			fprintf(stderr, "pipeprof: cannot open %s: %s\n", c->jsonl,
				d->jsonl.error[0] ? d->jsonl.error : strerror(-err));
			return err;
		}
		d->jsonl_open = true;
	} else if (d->jsonl_open) {
		d->jsonl.max_bytes = c->jsonl_max_bytes;
		d->jsonl.keep = c->jsonl_keep;
		jsonl_reopen(&d->jsonl);	/* after logrotate moved it away */
	}
	pthread_mutex_lock(&d->lock);
	/* Reports kept from before a SIGHUP may show what is no longer to be shown. */
	if (c->serve != d->serve)
		for (struct job *j = d->jobs; j; j = j->next) {
			free(j->report_json);
			j->report_json = NULL;
		}
	d->serve = c->serve;
	pthread_mutex_unlock(&d->lock);
	d->cfg = *c;
	return 0;
}

/* ---- main loop ---- */

/* Nothing is authenticated: say so when more than this host can connect. */
static void warn_exposed(const struct daemon_config *c)
{
	static const char *const what[] = {
		[SERVE_ALL] = "every traced job's full command line and report (see --serve)",
		[SERVE_NO_CMDLINE] = "every traced job's report (command lines left out)",
		[SERVE_METRICS] = "the metrics: the traced jobs' pids and command names",
	};

	if (http_listen_is_loopback(c->listen) == 0)
		fprintf(stderr, "pipeprof: warning: %s is not loopback: anyone who can connect "
			"reads %s, unauthenticated\n", c->listen, what[c->serve]);
}

static void do_reload(struct daemon *d)
{
	struct daemon_config c;

	if (load_config(d, &c)) {
		fprintf(stderr, "pipeprof: SIGHUP: settings unchanged\n");
		return;
	}
	if (strcmp(c.listen, d->cfg.listen)) {
		fprintf(stderr, "pipeprof: SIGHUP: listen %s needs a restart; still on %s\n",
			c.listen, d->cfg.listen);
		snprintf(c.listen, sizeof(c.listen), "%s", d->cfg.listen);
	}
	if (c.serve != d->cfg.serve)
		warn_exposed(&c);
	if (apply_config(d, &c))
		fprintf(stderr, "pipeprof: SIGHUP: settings partly applied\n");
	else
		fprintf(stderr, "pipeprof: SIGHUP: settings reloaded (window %ld s)\n", d->cfg.window_s);
}

/* One reading of the run queue a second serves every job's window. */
static void sample_cpus(struct daemon *d)
{
	unsigned long long busy, total;
	int running;

	if (d->jobs && !proc_cpu_times(PROCFS, &busy, &total, &running))
		for (struct job *j = d->jobs; j; j = j->next)
			cpu_window_sample(&j->cpu, running);
}

static __u64 window_end_ns(const struct daemon *d, const struct job *j)
{
	return j->window_start_ns + d->cfg.window_s * 1000000000ULL;
}

static int daemon_run(struct daemon *d)
{
	struct sigaction sa = { .sa_handler = on_signal };
	struct http_handlers handlers = {
		.metrics = http_metrics, .report = http_report, .ctx = d, .verbose = d->cli.verbose,
	};
	struct daemon_config c;
	char err_text[256];
	__u64 next_tick, ticks = 0;
	int err, status = 1;

	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	d->stats_fd = -1;

	err = load_config(d, &c);
	if (err)
		return 2;
	/* Bound before anything slow: a busy or unusable address fails in milliseconds, not
	 * after attaching to every job on the host. */
	err = http_listen(&d->http, c.listen, err_text, sizeof(err_text));
	if (err) {
		fprintf(stderr, "pipeprof: %s\n", err_text);
		return 1;
	}
	warn_exposed(&c);
	err = apply_config(d, &c);
	if (err)
		goto cleanup;
	/* Before any job is looked at: one line naming a missing capability, not one per job. */
	err = caps_check(0);
	if (err)
		goto cleanup;
	err = start_discovery(d);
	if (err)
		goto cleanup;
	tracer_cache_core_btf(d->cli.verbose);
	d->dispatching = dispatcher_start(&d->dispatcher);
	if (!d->dispatching) {
		fprintf(stderr, "pipeprof: each job attaches its own scheduler programs: they run once "
			"per job on every context switch\n");
	}
	/* Self-metrics report the BPF programs' cost: ask the kernel to measure it while we run. */
	d->stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	scan_existing(d);
	refresh_metrics(d);
	err = http_serve(d->http, &handlers, err_text, sizeof(err_text));
	if (err) {
		fprintf(stderr, "pipeprof: %s\n", err_text);
		goto cleanup;
	}
	{
		/* With port 0 the kernel chose one: say which, so clients can find it. */
		char shown[sizeof(d->cfg.listen) + 8];
		char *colon = strrchr(d->cfg.listen, ':');

		snprintf(shown, sizeof(shown), "%.*s:%d", colon ? (int)(colon - d->cfg.listen) : 0,
			 d->cfg.listen, http_port(d->http));
		fprintf(stderr, "pipeprof: daemon listening on %s\n", shown);
	}

	next_tick = monotonic_ns() + TICK_NS;
	while (!exiting) {
		__u64 now = monotonic_ns(), wake = next_tick;
		bool windows_due = false, ticked = false;

		/* Each job's windows run from its own attach, so a job's first window is as long
		 * as the others; wake for the nearest window end, not only on the tick. */
		for (struct job *j = d->jobs; j; j = j->next)
			if (window_end_ns(d, j) < wake)
				wake = window_end_ns(d, j);
		ring_buffer__poll(d->execs, wake > now ? (int)((wake - now + 999999) / 1000000) : 0);
		if (exiting)
			break;
		if (reload) {
			reload = 0;
			do_reload(d);
		}
		/* An exec storm returns from the poll at every event: the per-second work keeps
		 * to the clock, not to the number of wakeups. */
		now = monotonic_ns();
		if (now >= next_tick) {
			check_candidates(d);
			if (d->dispatching)
				dispatcher_sweep(&d->dispatcher);
			ticks++;
			sample_cpus(d);
			for (struct job *j = d->jobs, *next; j; j = next) {
				next = j->next;
				if (kill(j->pid, 0) && errno == ESRCH)
					detach_job(d, j, "exited");
				else if (ticks % REFRESH_EVERY_TICKS == 0) {
					tracer_refresh(&j->tracer);
					split_ranks(d, j);
				} else
					tracer_handle_notes(&j->tracer);	/* new libraries, forks */
			}
			next_tick += TICK_NS;
			if (next_tick <= now)
				next_tick = now + TICK_NS;
			ticked = true;
		}
		/* Every job whose window ends now starts its next step interval, and one wait
		 * for in-flight BPF programs serves them all. */
		now = monotonic_ns();
		for (struct job *j = d->jobs; j; j = j->next)
			if (now >= window_end_ns(d, j)) {
				tracer_flip_hists(&j->tracer);
				windows_due = true;
			}
		if (windows_due) {
			tracer_wait_programs();
			for (struct job *j = d->jobs; j; j = j->next)
				if (j->tracer.hist_flipped)
					process_window(d, j, now);
		}
		/* The exposition holds every job: rebuilt at each tick, not at each of their
		 * windows, which come at N times the rate with N jobs (with 32 jobs of 5 s windows
		 * that was most of the daemon's CPU). A window is served a second late at most. */
		if (ticked)
			refresh_metrics(d);
	}
	fprintf(stderr, "pipeprof: %s: detaching %d job(s)\n", strsignal(exiting), d->nr_jobs);
	status = 0;
cleanup:
	http_stop(d->http);
	while (d->jobs)
		detach_job(d, d->jobs, "pipeprof exiting");
	ring_buffer__free(d->execs);
	discover_bpf__destroy(d->discover);
	if (d->dispatching)
		dispatcher_close(&d->dispatcher);
	if (d->stats_fd >= 0)
		close(d->stats_fd);
	if (d->jsonl_open)
		jsonl_close(&d->jsonl);
	if (d->have_re)
		regfree(&d->match_re);
	free(d->metrics);
	return status;
}

static int parse_args(struct daemon *d, int argc, char **argv, unsigned int flags)
{
	const struct argp argp = {
		.options = daemon_options,
		.parser = daemon_parse,
		.args_doc = "",
		.doc = daemon_doc,
	};
	error_t err;

	daemon_config_defaults(&d->cli);
	argp_err_exit_status = 2;
	err = argp_parse(&argp, argc, argv, flags, NULL, d);
	return err ? -err : 0;
}

int daemon_cmd_parse(int argc, char **argv, unsigned int flags, struct daemon_config *cli)
{
	/* Too big for a stack: it holds the candidate table. */
	struct daemon *d = calloc(1, sizeof(*d));
	int err;

	if (!d)
		return -ENOMEM;
	err = parse_args(d, argc, argv, flags);
	if (!err)
		*cli = d->cli;
	free(d);
	return err;
}

int daemon_cmd_main(int argc, char **argv)
{
	static struct daemon d;

	pthread_mutex_init(&d.lock, NULL);
	if (parse_args(&d, argc, argv, 0))
		return 2;
	return daemon_run(&d);
}
