// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* pipeprof hist: BCC-style latency histograms for one training job, per interval. */
#include <argp.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <bpf/bpf.h>
#include "classify.h"
#include "gpu_apis.h"
#include "hist_cmd.h"
#include "hist_fmt.h"
#include "pipeprof.skel.h"
#include "proctree.h"
#include "target.h"
#include "tracer.h"

#define TICK_MS 100

static volatile sig_atomic_t exiting;

static void on_signal(int sig)
{
	exiting = sig;
}

static const char hist_doc[] =
	"Latency histograms of one training job (the PID and its DataLoader workers), in\n"
	"BCC's format.\v"
	"KINDS (several may be given; they are traced together):\n"
	"  offcpu      off-CPU episodes, switch-out to wakeup, a histogram per cause\n"
	"  runq        run-queue latency: wakeup or preemption to running\n"
	"  io          block request latency, issue to completion, per disk\n"
	"  gpu-sync    synchronising GPU API calls, per API\n"
	"  launch      kernel launches: count, rate, gap between a thread's launches\n"
	"  memcpy      host/device copies: bytes per direction, synchronous ones' MB/s\n"
	"  batch-wait  the trainer waiting for its next batch (DATA_WAIT episodes)\n"
	"  step        training step time, between the trainer's backward passes\n"
	"\n"
	"Without an interval, traces until Ctrl-C or the job exits, then prints. With\n"
	"one, prints and clears the histograms every INTERVAL seconds, COUNT times.\n"
	"Percentiles are estimated by interpolating inside the log2 slots.\n"
	"\n"
	"EXAMPLES:\n"
	"  sudo pipeprof hist -p 4242 gpu-sync            # until Ctrl-C\n"
	"  sudo pipeprof hist -p 4242 -m offcpu 5 3     # 3 intervals of 5 s, msecs\n"
	"  sudo pipeprof hist -p 4242 -T --per-thread runq 1\n"
	"  sudo pipeprof hist -p 4242 -j io 10 1          # JSON (pipeprof.hist/v1)\n"
	"\n"
	"Exit status: 0 histograms printed, 1 tracing failed, 2 bad arguments or no such\n"
	"process.";

enum { OPT_PER_THREAD = 'L', OPT_PER_PROCESS = 'P' };

static const struct argp_option hist_options[] = {
	{ "pid", 'p', "PID", 0, "Process to trace (with its descendants)", 0 },
	{ "milliseconds", 'm', NULL, 0, "Time histograms in msecs (default usecs)", 0 },
	{ "timestamp", 'T', NULL, 0, "Print a timestamp before each interval", 0 },
	{ "json", 'j', NULL, 0, "One JSON object per interval (schema pipeprof.hist/v1)", 0 },
	{ "per-thread", OPT_PER_THREAD, NULL, 0, "One histogram per thread", 0 },
	{ "per-process", OPT_PER_PROCESS, NULL, 0, "One histogram per process", 0 },
	{ "tid", 't', "TID", 0, "The trainer thread, for batch-wait and step (default: most GPU "
	  "calls, else the most backward passes, else the main thread)", 0 },
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

static bool looks_numeric(const char *arg)
{
	if (*arg == '-' || *arg == '+')
		arg++;
	return *arg >= '0' && *arg <= '9';
}

/*
 * argp_error() exits, unless the caller passed ARGP_NO_EXIT (the fuzzer does): then the
 * parser must stop by itself, or it would go on with a value it never parsed.
 */
static error_t hist_parse(int key, char *arg, struct argp_state *state)
{
	struct hist_opts *o = state->input;
	__u32 mask;
	long v;

	switch (key) {
	case 'p':
		if (parse_positive(arg, &v)) {
			argp_error(state, "invalid PID: %s", arg);
			return EINVAL;
		}
		o->pid = v;
		break;
	case 't':
		if (parse_positive(arg, &v)) {
			argp_error(state, "invalid TID: %s", arg);
			return EINVAL;
		}
		o->tid = v;
		break;
	case 'm':
		o->msecs = true;
		break;
	case 'T':
		o->timestamps = true;
		break;
	case 'j':
		o->json = true;
		break;
	case OPT_PER_THREAD:
	case OPT_PER_PROCESS:
		if (o->keying) {
			argp_error(state, "give --per-thread or --per-process, not both");
			return EINVAL;
		}
		o->keying = key == OPT_PER_THREAD ? PP_HKEY_THREAD : PP_HKEY_PROCESS;
		break;
	case 'v':
		o->verbose = true;
		break;
	case ARGP_KEY_ARG:
		if (looks_numeric(arg)) {
			if (parse_positive(arg, &v)) {
				argp_error(state, "invalid %s: %s (a whole number of %s, at least 1)",
					   o->nr_numbers ? "count" : "interval", arg,
					   o->nr_numbers ? "intervals" : "seconds");
				return EINVAL;
			}
			if (o->nr_numbers == 2) {
				argp_error(state, "unexpected argument: %s", arg);
				return EINVAL;
			}
			if (o->nr_numbers++)
				o->count = v;
			else
				o->interval = v;
			break;
		}
		if (o->nr_numbers) {
			argp_error(state, "kinds come before [interval [count]]: %s", arg);
			return EINVAL;
		}
		mask = hist_kind_parse(arg);
		if (!mask) {
			argp_error(state, "unknown kind: %s (offcpu, runq, io, gpu-sync, launch, memcpy, "
				   "batch-wait, step)", arg);
			return EINVAL;
		}
		o->kinds |= mask;
		break;
	case ARGP_KEY_END:
		if (!o->pid) {
			argp_error(state, "nothing to trace: give -p PID");
			return EINVAL;
		}
		if (!o->kinds) {
			argp_error(state, "no kind given: offcpu, runq, io, gpu-sync, launch, memcpy, "
				   "batch-wait or step");
			return EINVAL;
		}
		break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

/* "-p" or "-t" on its own: the next argument is its value, and may well look negative. An
 * empty argument ends at its first byte, so nothing past that may be read. */
static bool takes_value(const char *arg)
{
	return arg[0] == '-' && (arg[1] == 'p' || arg[1] == 't') && !arg[2];
}

int hist_cmd_parse(int argc, char **argv, unsigned int flags, struct hist_opts *o)
{
	const struct argp argp = {
		.options = hist_options,
		.parser = hist_parse,
		.args_doc = "-p PID KIND [KIND...] [INTERVAL [COUNT]]",
		.doc = hist_doc,
	};
	error_t err;

	*o = (struct hist_opts){};
	/* A negative interval or count would otherwise read as an unknown option. */
	for (int i = 1; i < argc; i++) {
		if (!(i > 1 && takes_value(argv[i - 1])) && argv[i][0] == '-' &&
		    argv[i][1] >= '0' && argv[i][1] <= '9') {
			fprintf(stderr, "pipeprof hist: invalid interval or count: %s (a whole number, "
				"at least 1)\nTry 'pipeprof hist --help' for more information.\n", argv[i]);
			return -EINVAL;
		}
	}
	argp_err_exit_status = 2;
	err = argp_parse(&argp, argc, argv, flags, NULL, o);
	return err ? -err : 0;
}

/* "/sys/dev/block/MAJ:MIN" links to the disk's directory, whose name is the disk's. */
static void disk_name(__u32 dev, char *buf, size_t size)
{
	char path[64], target[PATH_MAX];
	ssize_t n;

	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u", dev >> 20, dev & 0xfffff);
	n = readlink(path, target, sizeof(target) - 1);
	if (n > 0) {
		const char *base;

		target[n] = 0;
		base = strrchr(target, '/');
		snprintf(buf, size, "%.63s", base ? base + 1 : target);
		return;
	}
	snprintf(buf, size, "%u:%u", dev >> 20, dev & 0xfffff);
}

static void label_entry(struct hist_entry *e)
{
	switch (e->kind) {
	case PP_HK_OFFCPU:
		snprintf(e->label, sizeof(e->label), "%s", state_name(e->sub));
		break;
	case PP_HK_IO:
		disk_name(e->sub, e->label, sizeof(e->label));
		break;
	case PP_HK_GPU_SYNC:
	case PP_HK_LAUNCH:
		snprintf(e->label, sizeof(e->label), "%s",
			 (int)e->sub < gpu_api_count ? gpu_apis[e->sub].name : "?");
		break;
	case PP_HK_COPY_BYTES:
	case PP_HK_COPY_RATE:
		snprintf(e->label, sizeof(e->label), "%s", copy_dir_name(e->sub));
		break;
	default:
		break;
	}
}

/* Who an entry's id is: the thread map knows every tracked thread's process and name. */
static void name_entry(struct tracer *t, __u32 keying, struct hist_entry *e)
{
	int fd = bpf_map__fd(t->skel->maps.threads);
	bool by_tid = keying == PP_HKEY_THREAD || e->kind == PP_HK_BATCH_WAIT || e->kind == PP_HK_STEP;
	struct pp_thread th;

	if (!by_tid && keying != PP_HKEY_PROCESS)
		return;
	if (!bpf_map_lookup_elem(fd, &e->id, &th)) {
		e->pid = by_tid ? (pid_t)th.tgid : (pid_t)e->id;
		/* Bounded: nothing checks that a comm read from the map ends in a NUL. */
		snprintf(e->comm, sizeof(e->comm), "%.*s", (int)sizeof(th.comm), th.comm);
		return;
	}
	e->pid = by_tid ? 0 : (pid_t)e->id;
	proc_comm(PROCFS, e->pid ? e->pid : (pid_t)e->id, e->id, e->comm, sizeof(e->comm));
}

/*
 * The stall model's trainer: --tid, else the job's thread with the most GPU calls; a CPU job
 * has none, so then the thread with the most backward passes, else the main thread.
 */
static pid_t pick_trainer(struct tracer *t, const struct hist_opts *o, const struct hist_entry *e,
			  int n)
{
	int fd = bpf_map__fd(t->skel->maps.threads);
	__u32 key, next, *prev = NULL, best = 0;
	__u64 best_calls = 0;
	struct pp_thread th;

	if (o->tid)
		return o->tid;
	while (!bpf_map_get_next_key(fd, prev, &next)) {
		key = next;
		prev = &key;
		if (!bpf_map_lookup_elem(fd, &key, &th) && th.tgid == (__u32)o->pid &&
		    th.gpu_calls > best_calls) {
			best_calls = th.gpu_calls;
			best = key;
		}
	}
	if (best)
		return best;
	best_calls = 0;
	for (int i = 0; i < n; i++)
		if (e[i].kind == PP_HK_STEP && e[i].count > best_calls) {
			best_calls = e[i].count;
			best = e[i].id;
		}
	return best ? (pid_t)best : o->pid;
}

struct drained {
	struct hist_entry *entries;
	int nr;
};

static void keep_entry(const struct pp_hist_key *key, const struct pp_hist *h, void *ctx)
{
	struct drained *d = ctx;
	struct hist_entry *e = &d->entries[d->nr++];

	e->kind = key->kind;
	e->sub = key->sub;
	e->id = key->id;
	e->count = h->count;
	e->sum = h->sum;
	e->aux = h->aux;
	memcpy(e->slots, h->slots, sizeof(h->slots));
}

static int drain_hists(struct tracer *t, struct hist_entry **out, int *nr)
{
	struct drained d = { .entries = calloc(tracer_hist_capacity(t) + PP_SWITCH_HISTS,
					       sizeof(*d.entries)) };
	int err;

	if (!d.entries)
		return -ENOMEM;
	err = tracer_drain_hists(t, keep_entry, &d);
	if (err) {
		free(d.entries);
		return err;
	}
	*out = d.entries;
	*nr = d.nr;
	return 0;
}

static const char *gpu_note(struct tracer *t)
{
	static char note[600];
	char why[512];

	if (tracer_probed(t, NULL))
		return NULL;
	snprintf(note, sizeof(note), "no events: %s", tracer_gpu_why_not(t, why, sizeof(why)));
	return note;
}

static const char *step_note(struct tracer *t)
{
	return tracer_probed(t, TRACER_STEP_PROBE) ?
	       "no steps detected: no backward pass (torch autograd) in this interval" :
	       "no steps detected: libtorch_cpu is not mapped by the traced processes, so backward "
	       "passes cannot be seen";
}

static int print_interval(struct tracer *t, const struct hist_opts *o, __u64 from_ns, __u64 to_ns)
{
	struct hist_interval iv = {
		.root = o->pid, .timestamps = o->timestamps, .msecs = o->msecs,
		.keying = o->keying, .kinds = o->kinds,
	};
	uint64_t recursion, run_ns, run_count;
	time_t now = time(NULL);
	int err;

	err = drain_hists(t, &iv.entries, &iv.nr_entries);
	if (err)
		return err;
	iv.interval_s = (to_ns - from_ns) / 1e9;
	strftime(iv.timestamp, sizeof(iv.timestamp), "%H:%M:%S", localtime(&now));
	for (int i = 0; i < iv.nr_entries; i++) {
		label_entry(&iv.entries[i]);
		name_entry(t, o->keying, &iv.entries[i]);
	}
	hist_sort(iv.entries, iv.nr_entries);
	iv.trainer_tid = pick_trainer(t, o, iv.entries, iv.nr_entries);
	iv.lost_hist_full = tracer_counter(t, PP_CNT_HIST_FULL);
	iv.lost_threads_full = tracer_counter(t, PP_CNT_THREADS_FULL);
	iv.lost_rq_full = tracer_counter(t, PP_CNT_RQ_FULL);
	tracer_prog_stats(t, &recursion, &run_ns, &run_count);
	iv.lost_recursion = recursion;
	iv.probe_failures = t->probe_attach_failures;
	iv.step_note = step_note(t);
	iv.gpu_note = gpu_note(t);
	if (o->json)
		err = hist_print_interval_json(stdout, &iv);
	else
		hist_print_interval_text(stdout, &iv);
	free(iv.entries);
	/* Each interval reaches its reader when it ends, and a failed write stops the run. */
	if (!err && (fflush(stdout) || ferror(stdout)))
		err = errno ? -errno : -EIO;
	return err;
}

/* What was lost or could not be traced, on stderr at exit: nothing goes missing silently. */
static void report_losses(struct tracer *t)
{
	uint64_t misses, run_ns, run_count;
	__u64 full = tracer_counter(t, PP_CNT_HIST_FULL);
	__u64 threads = tracer_counter(t, PP_CNT_THREADS_FULL);
	__u64 rq = tracer_counter(t, PP_CNT_RQ_FULL);

	tracer_prog_stats(t, &misses, &run_ns, &run_count);
	if (full)
		fprintf(stderr, "pipeprof: %llu samples lost: histogram map full (%d entries, "
			"shared by an interval and the one being drained)\n",
			(unsigned long long)full, tracer_hist_capacity(t));
	if (threads)
		fprintf(stderr, "pipeprof: %llu events of threads beyond the thread map dropped\n",
			(unsigned long long)threads);
	if (rq)
		fprintf(stderr, "pipeprof: %llu block requests not timed: in-flight map full\n",
			(unsigned long long)rq);
	if (misses)
		fprintf(stderr, "pipeprof: %llu events lost: a BPF program was re-entered on the same "
			"CPU\n", (unsigned long long)misses);
	if (t->probe_attach_failures)
		fprintf(stderr, "pipeprof: %d probes could not be attached (-v lists them)\n",
			t->probe_attach_failures);
}

static void kinds_text(__u32 kinds, char *buf, size_t size)
{
	size_t len = 0;

	buf[0] = 0;
	for (int k = 0; k < hist_user_kind_count && len < size; k++)
		if (kinds & hist_user_kinds[k].bpf_mask)
			len += snprintf(buf + len, size - len, "%s%s", len ? " " : "",
					hist_user_kinds[k].name);
}

static int hist_run(const struct hist_opts *o)
{
	struct sigaction sa = { .sa_handler = on_signal };
	struct tracer_opts topts = {
		.root = o->pid, .trainer_tid = o->tid, .verbose = o->verbose,
		.hist_kinds = o->kinds, .hist_keying = o->keying,
		.hist_time_div = o->msecs ? 1000000 : 1000,
	};
	struct tracer tracer = {};
	__u64 interval_start, deadline = 0;
	int pidfd = -1, err, status = 1;
	long printed = 0;
	bool target_gone = false;
	char kinds[128];

	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	err = tracer_start(&tracer, &topts);
	if (err) {
		status = err == -ESRCH ? 2 : 1;
		goto cleanup;
	}
	if (exiting) {
		fprintf(stderr, "pipeprof: interrupted while attaching; nothing traced\n");
		goto cleanup;
	}
	pidfd = syscall(SYS_pidfd_open, o->pid, 0);
	kinds_text(o->kinds, kinds, sizeof(kinds));
	fprintf(stderr, "pipeprof: tracing PID %d: %s...%s\n", o->pid, kinds,
		o->interval && o->count ? "" : " Hit Ctrl-C to end.");

	interval_start = tracer.start_ns;
	if (o->interval)
		deadline = interval_start + o->interval * 1000000000ULL;
	for (;;) {
		bool stop = false;
		__u64 now;

		err = exiting ? 0 : tracer_wait(&tracer, pidfd, TICK_MS);
		if (err < 0) {
			fprintf(stderr, "pipeprof: %s\n", strerror(-err));
			goto cleanup;
		}
		if (err)
			target_gone = true;
		if (pidfd < 0 && kill(o->pid, 0) && errno == ESRCH)
			target_gone = true;
		now = monotonic_ns();
		stop = exiting || target_gone;
		if (stop || (deadline && now >= deadline)) {
			errno = 0;
			err = print_interval(&tracer, o, interval_start, now);
			if (err) {
				fprintf(stderr, "pipeprof: cannot write the histograms: %s\n", strerror(-err));
				goto cleanup;
			}
			printed++;
			if (stop || (o->count && printed >= o->count))
				break;
			interval_start = now;
			deadline += o->interval * 1000000000ULL;
			if (deadline <= now)	/* stalled past a whole interval: realign */
				deadline = now + o->interval * 1000000000ULL;
		}
	}
	if (target_gone)
		fprintf(stderr, "pipeprof: PID %d exited; the last interval ends there\n", o->pid);
	report_losses(&tracer);
	/* Out before the probes detach, which takes ~70 ms a uprobe. */
	if (fclose(stdout)) {
		fprintf(stderr, "pipeprof: cannot write the histograms: %s\n", strerror(errno));
		goto cleanup;
	}
	status = 0;
cleanup:
	tracer_stop(&tracer);
	if (pidfd >= 0)
		close(pidfd);
	return status;
}

int hist_cmd_main(int argc, char **argv)
{
	struct hist_opts opts;
	int err;

	if (hist_cmd_parse(argc, argv, 0, &opts))
		return 2;
	err = target_resolve(PROCFS, &opts.pid, &opts.tid);
	if (err)
		return err == -ESRCH || err == -EINVAL ? 2 : 1;
	return hist_run(&opts);
}
