// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/membarrier.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "elfsym.h"
#include "symcache.h"
#include "gpu_apis.h"
#include "kfeatures.h"
#include "tp_btf.h"
#include "pipeprof.h"	/* the types the skeleton's globals use */
#include "pipeprof.skel.h"
#include "proctree.h"
#include "caps.h"
#include "core_btf.h"
#include "sanitize.h"
#include "dispatcher.h"
#include "tracer.h"
#include "uprobe_multi.h"

#define MAX_SEED_PIDS TRACER_MAX_SEED
#define MAX_SEED_TIDS TRACER_MAX_SEED


__u64 monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (__u64)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

bool errno_is_privilege(int err)
{
	err = err < 0 ? -err : err;
	return err == EPERM || err == EACCES;
}

static int track_process(struct tracer *t, pid_t pid, pid_t parent, bool root)
{
	struct pp_proc proc = { .parent_tgid = parent, .is_root = root };
	int fd = bpf_map__fd(t->skel->maps.tracked_procs);

	if (bpf_map_update_elem(fd, &pid, &proc, BPF_NOEXIST) && errno != EEXIST)
		return -errno;
	/* The record in the map, which a fork event may have written first; gone already (an
	 * exit the daemon's window dropped), the programs look it up. */
	if (bpf_map_lookup_elem(fd, &pid, &proc))
		return tracer_mark_pid(t, pid, PP_PID_LOOKUP);
	return tracer_mark_pid(t, pid, pp_pid_kind(&proc));
}

/*
 * The call of the wait a thread is in at the attach, as the programs read it at the switch-out
 * into a wait (pp_retry_call). They read it again at the wait's end, where they see it; where
 * this guest loses both that wakeup and its switch-in, nothing else reads it, and a timed-out
 * wait with no call cannot be held for its retry: the first wait of a chain open at the attach
 * read OTHER (575 ms of a 3 s window at one attach beside CPU hogs).
 */
static __u64 seed_wait_call(pid_t pid, pid_t tid)
{
	unsigned long args[6];
	long nr;

	if (proc_thread_syscall(PROCFS, pid, tid, &nr, args))
		return 0;
	return pp_retry_call(nr, args[0], args[1], args[2], args[3], args[4]);
}

/*
 * Threads that sleep through the whole window leave no events; seed them so they show. A thread
 * asleep now also gets its CPU clock, as its wakeup would give it (pp_switch_in_unseen): should
 * that wakeup and its switch-in both go untraced, its first switch-out places the switch-in,
 * and the sleep reads as a wait nothing was seen to end (OTHER). Without it, that sleep read
 * RUNNING (+25 pts of a thread loader's trainer, one attach in 25 on a quiet machine,
 * 2026-11-29), and a sleep whose wakeup alone went untraced read RUNQ. One read of the stat
 * file gives the name and the state; a sleeping thread's schedstat and syscall files are two
 * more.
 */
static void seed_threads(struct tracer *t, pid_t pid)
{
	int fd = bpf_map__fd(t->skel->maps.threads);
	pid_t tids[MAX_SEED_TIDS];
	int n = proc_threads(PROCFS, pid, tids, MAX_SEED_TIDS);

	if (n == MAX_SEED_TIDS)
		t->seed_truncated = true;
	for (int i = 0; i < n; i++) {
		struct pp_thread th = {};
		char state = 0;

		pp_thread_init(&th, pid, PP_PHASE_UNKNOWN, t->start_ns);
		/* Gone since the listing: it has no record to seed. */
		if (proc_thread_stat(PROCFS, pid, tids[i], th.comm, sizeof(th.comm), &state))
			continue;
		if (state == 'S' || state == 'D') {
			th.exec_at_out_ns = proc_thread_exec_ns(PROCFS, pid, tids[i]);
			th.wait_call = seed_wait_call(pid, tids[i]);
		}
		if (bpf_map_update_elem(fd, &tids[i], &th, BPF_NOEXIST) && errno != EEXIST)
			t->seed_failures++;
	}
}

/* Descendants that existed at attach; forks after the tracepoints attached are the BPF side's. */
static int seed_descendants(struct tracer *t)
{
	pid_t *pids = calloc(MAX_SEED_PIDS, sizeof(*pids));
	pid_t *ppids = calloc(MAX_SEED_PIDS, sizeof(*ppids));
	int n, err = 0;

	if (!pids || !ppids) {
		err = -ENOMEM;
		goto cleanup;
	}
	n = proc_descendants(PROCFS, t->root, pids, ppids, MAX_SEED_PIDS);
	if (n < 0) {
		err = n;
		goto cleanup;
	}
	if (n == MAX_SEED_PIDS)
		t->seed_truncated = true;
	for (int i = 0; i < n; i++) {
		err = track_process(t, pids[i], ppids[i], false);
		/* A full process map is reported with what it cost, not fatal. */
		if (err == -E2BIG || err == -ENOMEM) {
			t->seed_proc_failures++;
			err = 0;
		}
		if (err)
			goto cleanup;
	}
cleanup:
	free(pids);
	free(ppids);
	return err;
}

void pipeprof_selftest_target(void);

/* The self-test's probe site: a real function the uprobe machinery must reach. */
__attribute__((noinline, used)) void pipeprof_selftest_target(void)
{
	asm volatile("" ::: "memory");
}

__u64 tracer_counter(struct tracer *t, enum pp_counter c)
{
	int ncpus = libbpf_num_possible_cpus(), fd = bpf_map__fd(t->skel->maps.counters);
	__u64 *vals, sum = 0;
	__u32 key = c;

	if (ncpus <= 0)
		return 0;
	vals = calloc(ncpus, sizeof(*vals));
	if (!vals)
		return 0;
	if (!bpf_map_lookup_elem(fd, &key, vals))
		for (int i = 0; i < ncpus; i++)
			sum += vals[i];
	free(vals);
	return sum;
}

/* Interrupt context is read from the preempt count only once it proved right here: read inside
 * softirq and hard interrupt handlers (the timer tick brings both within milliseconds), it must
 * say so every time. Otherwise the tracepoint nesting stands in, and the report says so. */
static void check_preempt_count(struct tracer *t)
{
	__u64 ok = 0, bad = 0;

	if (t->skel->bss->irq_from_preempt_count)
		return;		/* proven earlier in this boot; the nesting programs never loaded */
	if (!t->skel->rodata->preempt_count_rq_delta) {
		snprintf(t->irq_fallback, sizeof(t->irq_fallback), "the kernel's BTF does not place "
			 "the preempt count relative to the run queue");
		return;
	}
	for (int i = 0; i < 200 && ok < 8; i++) {
		usleep(1000);
		ok = tracer_counter(t, PP_CNT_PCOUNT_OK);
	}
	bad = tracer_counter(t, PP_CNT_PCOUNT_BAD);
	if (bad || ok < 8) {
		snprintf(t->irq_fallback, sizeof(t->irq_fallback), "the preempt count read wrong in "
			 "%llu of %llu interrupts", (unsigned long long)bad, (unsigned long long)(ok + bad));
		return;
	}
	t->skel->bss->irq_from_preempt_count = true;
	kfeatures_remember_preempt_count(&t->kf);
	/* The preempt count now says hard interrupt or not, and whether a softirq is being served:
	 * the nesting these programs kept is not read again, and they ran on every interrupt and
	 * timer on the host. softirq_entry stays: only it names the vector (NET_RX). */
	bpf_link__destroy(t->skel->links.on_irq_handler_entry);
	bpf_link__destroy(t->skel->links.on_irq_handler_exit);
	bpf_link__destroy(t->skel->links.on_hrtimer_expire_entry);
	bpf_link__destroy(t->skel->links.on_hrtimer_expire_exit);
	bpf_link__destroy(t->skel->links.on_softirq_exit);
	t->skel->links.on_irq_handler_entry = t->skel->links.on_irq_handler_exit = NULL;
	t->skel->links.on_hrtimer_expire_entry = t->skel->links.on_hrtimer_expire_exit = NULL;
	t->skel->links.on_softirq_exit = NULL;
	if (t->dispatched) {
		/* The dispatcher's softirq_entry names the vector for every job. */
		bpf_link__destroy(t->skel->links.on_softirq_entry);
		t->skel->links.on_softirq_entry = NULL;
	}
}

/* The preempt count proved right earlier in this boot: the programs that kept interrupt
 * nesting, run on every interrupt and timer on the host only to stand in for it, are neither
 * loaded nor attached. */
static void skip_irq_nesting(struct tracer *t)
{
	bpf_program__set_autoload(t->skel->progs.on_irq_handler_entry, false);
	bpf_program__set_autoload(t->skel->progs.on_irq_handler_exit, false);
	bpf_program__set_autoload(t->skel->progs.on_hrtimer_expire_entry, false);
	bpf_program__set_autoload(t->skel->progs.on_hrtimer_expire_exit, false);
	bpf_program__set_autoload(t->skel->progs.on_softirq_exit, false);
}

/* Uprobe programs of the histogram kinds not asked for are not loaded: verifying them was
 * ~5 ms of every attach, and want_probe() never attaches them. */
static void skip_unused_probes(struct tracer *t)
{
	struct pipeprof_bpf *skel = t->skel;

	if (!(t->hist_kinds & 1u << PP_HK_LAUNCH) && !t->steps)
		bpf_program__set_autoload(skel->progs.on_launch, false);
	if (!(t->hist_kinds & 1u << PP_HK_COPY_BYTES) && !t->steps)
		bpf_program__set_autoload(skel->progs.on_copy, false);
	if (!(t->hist_kinds & 1u << PP_HK_COPY_BYTES))
		bpf_program__set_autoload(skel->progs.on_copy_return, false);
	tracer_steps_skip_probes(t);
	skel->rodata->step_probe_on = (t->hist_kinds & 1u << PP_HK_STEP) || t->steps;
	if (!t->python_gc) {
		bpf_program__set_autoload(skel->progs.on_gc_start, false);
		bpf_program__set_autoload(skel->progs.on_gc_done, false);
	}
	if (!t->sample_hz)
		bpf_program__set_autoload(skel->progs.on_cpu_sample, false);
}

/* Prove the scheduler tracepoints and the uprobe path fire on this kernel before trusting
 * a report built on them. */
static int self_check(struct tracer *t)
{
	LIBBPF_OPTS(bpf_uprobe_opts, opts, .bpf_cookie = PP_SELFTEST_API);
	struct elf_func fn = { .name = "pipeprof_selftest_target" };
	struct bpf_link *enter = NULL, *ret = NULL;
	int err = 0;

	/* Dispatched, this object's program sees only the job's own switches, and a job may sleep
	 * through the check: the dispatcher proved its tracepoint when it opened, and the job's
	 * program went into its array (dispatcher_enter). */
	for (int i = 0; i < 50 && !t->dispatched && !tracer_counter(t, PP_CNT_SCHED_EVENTS); i++)
		usleep(1000);
	if (!t->dispatched && !tracer_counter(t, PP_CNT_SCHED_EVENTS)) {
		fprintf(stderr, "pipeprof: self-check failed: sched_switch tracepoint never fired\n");
		return -EIO;
	}

	if (symcache_resolve("/proc/self/exe", &fn, 1) != 1) {
		fprintf(stderr, "pipeprof: self-check failed: cannot find %s in /proc/self/exe\n", fn.name);
		return -ENOENT;
	}
	if (t->uprobe_multi) {
		uint64_t offset = fn.offset, cookie = PP_SELFTEST_API;

		t->selftest_fds[1] = uprobe_multi_attach(t->skel->progs.on_gpu_return, getpid(),
							 "/proc/self/exe", &offset, &cookie, 1, true);
		if (t->selftest_fds[1] > 0)
			t->selftest_fds[0] = uprobe_multi_attach(t->skel->progs.on_gpu_enter, getpid(),
								 "/proc/self/exe", &offset, &cookie, 1,
								 false);
		err = t->selftest_fds[1] < 0 ? t->selftest_fds[1] :
		      t->selftest_fds[0] < 0 ? t->selftest_fds[0] : 0;
		if (err) {
			t->selftest_fds[0] = t->selftest_fds[0] < 0 ? 0 : t->selftest_fds[0];
			t->selftest_fds[1] = t->selftest_fds[1] < 0 ? 0 : t->selftest_fds[1];
			fprintf(stderr, "pipeprof: self-check failed: cannot attach a multi-uprobe link: "
				"%s\n", strerror(-err));
			return err;
		}
	} else {
		enter = bpf_program__attach_uprobe_opts(t->skel->progs.on_gpu_enter, getpid(),
							"/proc/self/exe", fn.offset, &opts);
		opts.retprobe = true;
		ret = enter ? bpf_program__attach_uprobe_opts(t->skel->progs.on_gpu_return, getpid(),
							      "/proc/self/exe", fn.offset, &opts) : NULL;
	}
	if (!t->uprobe_multi && !ret) {
		err = -errno;
		fprintf(stderr, "pipeprof: self-check failed: cannot attach a uprobe: %s\n",
			strerror(-err));
		goto cleanup;
	}
	pipeprof_selftest_target();
	if (tracer_counter(t, PP_CNT_SELFTEST_HITS) != 2) {
		fprintf(stderr, "pipeprof: self-check failed: uprobe entry/return did not fire\n");
		err = -EIO;
		goto cleanup;
	}
	check_preempt_count(t);
	/* Kept until tracer_stop(): detaching now would wait out two RCU grace periods (~0.1 s
	 * each) before tracing starts, and nothing calls the function again. */
	t->selftest_links[0] = enter;
	t->selftest_links[1] = ret;
	return 0;
cleanup:
	bpf_link__destroy(enter);
	bpf_link__destroy(ret);
	return err;
}

/* Wall and CPU time of each attach phase, for -v: where a slow attach spends its time. */
struct attach_clock {
	__u64 wall0, cpu0, wall, cpu;
	char line[320];
	size_t len;
};

static __u64 cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (__u64)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static void attach_clock_start(struct attach_clock *c)
{
	memset(c, 0, sizeof(*c));
	c->wall0 = c->wall = monotonic_ns();
	c->cpu0 = c->cpu = cpu_ns();
}

static void attach_phase(struct attach_clock *c, const char *name)
{
	__u64 wall = monotonic_ns(), cpu = cpu_ns();
	int n = snprintf(c->line + c->len, sizeof(c->line) - c->len, "%s%s %.1f/%.1f",
			 c->len ? ", " : "", name, (wall - c->wall) / 1e6, (cpu - c->cpu) / 1e6);

	if (n > 0 && (size_t)n < sizeof(c->line) - c->len)
		c->len += n;
	c->wall = wall;
	c->cpu = cpu;
}

/* Reading the kernel's BTF (5.5 MB) into fresh heap pages cost ~11 ms here, most of it page
 * faults, which are dear under a paravirtual MMU. Faulting a heap area in with one madvise()
 * and keeping it for the reads (libbpf's CO-RE and the kernel features', on a boot's first
 * run) makes each ~4 ms; the area goes back once the object is loaded.
 * In 2 MB pages where the kernel gives them (THP "madvise" or "always"), the faulting itself
 * costs ~1.6 ms rather than ~5 (2,560 small faults), but 14-30 ms in the runs where the
 * kernel compacts memory to find them: only a run that reads the BTF pays it. */
/* One parsed copy and its index: kernel_btf_load() maps the file where libbpf's read copies it
 * once more; 12 MB, sized for that, were a third of a cold attach's peak RSS. */
#define BTF_HEAP_BYTES (8u << 20)
#define HUGE_PAGE (2ul << 20)

static void heap_prefault(void)
{
	uintptr_t huge_lo, huge_hi;
	void *area;

	mallopt(M_MMAP_THRESHOLD, 2 * BTF_HEAP_BYTES);	/* the BTF buffers come from the heap */
	mallopt(M_TRIM_THRESHOLD, 4 * BTF_HEAP_BYTES);	/* and stay there between the reads */
	area = malloc(BTF_HEAP_BYTES);
	if (!area)
		return;
	huge_lo = ((uintptr_t)area + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
	huge_hi = ((uintptr_t)area + BTF_HEAP_BYTES) & ~(HUGE_PAGE - 1);
	/* Best effort, both: without THP the pages are small, and kernels before 5.14 lack
	 * MADV_POPULATE_WRITE, and then the read faults as before. */
	if (huge_hi > huge_lo)
		madvise((void *)huge_lo, huge_hi - huge_lo, MADV_HUGEPAGE);
	madvise((void *)(((uintptr_t)area + 4095) & ~(uintptr_t)4095), BTF_HEAP_BYTES - 4096,
		MADV_POPULATE_WRITE);
	free(area);
}

static void heap_release(void)
{
	mallopt(M_TRIM_THRESHOLD, 128 * 1024);
	malloc_trim(0);
}

static int libbpf_print_fn(enum libbpf_print_level level, const char *format, va_list args)
{
	return vfprintf(stderr, format, args);
}

static int libbpf_quiet_fn(enum libbpf_print_level level, const char *format, va_list args)
{
	return 0;
}

static void seed_window(struct tracer *t)
{
	int fd = bpf_map__fd(t->skel->maps.tracked_procs);
	__u32 key, next, *prev = NULL;

	/* The job's own process first: a thread map too small for the job still holds the trainer. */
	seed_threads(t, t->root);
	while (!bpf_map_get_next_key(fd, prev, &next)) {
		key = next;
		prev = &key;
		if (key != (__u32)t->root)
			seed_threads(t, key);
	}
}

/* Start accounting now that every probe is attached: attaching GPU probes takes a while,
 * and calls made meanwhile would be missed while their time still counted. */
static int open_window(struct tracer *t)
{
	tracer_begin_accounting(t, seed_window);
	return 0;
}

int tracer_start(struct tracer *t, const struct tracer_opts *o)
{
	pid_t root = o->root;
	LIBBPF_OPTS(bpf_object_open_opts, open_opts);
	struct attach_clock clock;
	const void *elf;
	size_t elf_size;
	struct stat st;
	int err;

	attach_clock_start(&clock);
	memset(t, 0, sizeof(*t));
	t->root = root;
	t->dispatch_id = o->dispatcher ? dispatcher_claim(o->dispatcher) : 0;
	t->dispatcher = t->dispatch_id ? o->dispatcher : NULL;
	t->verbose = o->verbose;
	t->hist_kinds = o->hist_kinds;
	t->python_gc = o->python_gc;
	t->sample_hz = o->sample_hz;
	t->wait_stack_scope = o->sample_hz ? o->wait_stack_scope : PP_WAIT_STACKS_TID;
	t->steps = o->steps;
	t->record = o->record;
	/* Launches in bursts only where a burst's steps are what they serve: not for hist
	 * launch's every gap, nor for a recording's every instant. */
	t->launches_on = true;
	t->launches_sampled = o->steps && !o->record && !o->all_launches &&
			      !(o->hist_kinds & 1u << PP_HK_LAUNCH);
	t->root_in_group = o->distributed;
	t->memory = o->memory;
	if (o->step_symbol) {
		const char *colon = strchr(o->step_symbol, ':');

		snprintf(t->step_file, sizeof(t->step_file), "%.*s", (int)(colon - o->step_symbol),
			 o->step_symbol);
		snprintf(t->step_func, sizeof(t->step_func), "%s", colon + 1);
	}
	libbpf_set_print(o->verbose ? libbpf_print_fn : libbpf_quiet_fn);

	if (stat("/sys/kernel/btf/vmlinux", &st)) {
		fprintf(stderr, "pipeprof: /sys/kernel/btf/vmlinux is missing: pipeprof needs a kernel "
			"built with CONFIG_DEBUG_INFO_BTF=y\n");
		return -ENOENT;
	}
	if (kill(root, 0) && errno == ESRCH) {
		fprintf(stderr, "pipeprof: no such process: %d\n", root);
		return -ESRCH;
	}
	err = caps_check(root);
	if (err)
		return err;

	elf = pipeprof_bpf__elf_bytes(&elf_size);
	core_btf_find(&t->core_btf, elf, elf_size, t->verbose);
	/* With this boot's kernel features and CO-RE types cached, nothing reads the kernel's
	 * BTF (tp_btf.h): no heap to fault in for it. */
	if (kfeatures_read_cached(&t->kf)) {
		heap_prefault();
		err = kfeatures_read_btf(&t->kf);
		if (err) {
			core_btf_release(&t->core_btf);
			return err;
		}
	} else if (t->core_btf.fd < 0) {
		heap_prefault();
	}
	attach_phase(&clock, "checks+kernel features");
	/* Before the open: libbpf gives each program its section's handler there. */
	tp_btf_use_ids(tp_btf_register() ? NULL : &t->kf);
	open_opts.btf_custom_path = t->core_btf.fd >= 0 ? t->core_btf.path : NULL;
	t->skel = pipeprof_bpf__open_opts(&open_opts);
	if (!t->skel) {
		err = -errno;
		core_btf_release(&t->core_btf);
		fprintf(stderr, "pipeprof: cannot open the BPF object: %s\n", strerror(-err));
		return err;
	}
	attach_phase(&clock, "open");
	kfeatures_apply(t->skel, &t->kf, &t->uprobe_multi);
	if (t->kf.preempt_count_proven && t->kf.preempt_count_rq_delta)
		skip_irq_nesting(t);
	skip_unused_probes(t);
	/* Hash maps allocated as they fill, not at load: the thread records alone (32768 of 328
	 * B) took ~4 ms of every attach to preallocate, the seven smaller ones ~6 ms together on
	 * a 2-CPU VM. Tracing and perf_event programs may use them since 6.1 (34dd3bad1a6f, "bpf:
	 * Relax the requirement to use preallocated hash maps in tracing progs"); every kernel
	 * with multi-uprobe links (6.6) has that. Each CPU's cache of elements starts with 4 of
	 * up to 256 B and 1 larger, refilled after the program: no program run inserts twice into
	 * one map but into the thread and waker records, which tracer_warm_grown_maps() fills. */
	if (t->kf.uprobe_multi) {
		struct bpf_map *grown[] = {
			t->skel->maps.threads, t->skel->maps.wakers, t->skel->maps.dev_allocs,
			t->skel->maps.tracked_procs, t->skel->maps.thread_gpu, t->skel->maps.dev_mem,
			t->skel->maps.py_procs, t->skel->maps.runtime_text, t->skel->maps.nccl_comms,
			t->skel->maps.pinned_regions,
		};

		for (size_t i = 0; i < sizeof(grown) / sizeof(grown[0]); i++)
			bpf_map__set_map_flags(grown[i], bpf_map__map_flags(grown[i]) |
					       BPF_F_NO_PREALLOC);
	} else {
		bpf_program__set_autoload(t->skel->progs.warm_grown_maps, false);
	}
	t->skel->rodata->trainer_tid = o->trainer_tid;
	/* The trainer's waits with their stacks: --tid's thread, else the main thread. */
	if (o->sample_hz)
		t->skel->rodata->wait_stack_tid = o->trainer_tid ? (__u32)o->trainer_tid : (__u32)root;
	t->skel->rodata->wait_stack_scope = t->wait_stack_scope;
	/* Steps from the trainer's waits for batches where no probe marks them: --tid's thread,
	 * else the main thread, as for the wait stacks. */
	if (o->steps)
		t->skel->rodata->step_wait_tid = o->trainer_tid ? (__u32)o->trainer_tid : (__u32)root;
	t->skel->rodata->record_wakers = o->record_wakers;
	if (!o->record_wakers)
		bpf_map__set_max_entries(t->skel->maps.wakers, 1);
	t->skel->rodata->hist_kinds = o->hist_kinds;
	t->skel->rodata->hist_keying = o->hist_keying;
	if (o->hist_time_div)
		t->skel->rodata->hist_time_div = o->hist_time_div;
	tracer_size_hists(t, o);
	tracer_size_sample_buffers(t);
	t->skel->rodata->step_records_on = o->steps;
	tracer_size_step_buffer(t);
	tracer_record_size(t);
	err = tracer_size_maps(t);
	if (err)
		return err;
	if (t->dispatcher) {
		err = dispatcher_prepare(t->dispatcher, t->skel, t->dispatch_id);
		if (err) {
			fprintf(stderr, "pipeprof: cannot share the dispatcher's maps: %s\n",
				strerror(-err));
			return err;
		}
		/* The dispatcher keeps the softirq vector; this one served the start-up check. */
		if (t->kf.preempt_count_proven && t->kf.preempt_count_rq_delta)
			bpf_program__set_autoattach(t->skel->progs.on_softirq_entry, false);
	}
	/* The verifier's statistics replace libbpf's log of a program that fails to load, so
	 * PIPEPROF_VERIFIER_LOG=1 asks for that log instead. */
	if (t->verbose && !getenv("PIPEPROF_VERIFIER_LOG"))
		tracer_verifier_stats_arm(t);
	err = pipeprof_bpf__load(t->skel);
	core_btf_release(&t->core_btf);		/* libbpf read it during the load */
	tp_btf_release();
	heap_release();
	attach_phase(&clock, "load");
	if (!err && t->verbose)
		tracer_verifier_stats_print(t);
	if (!err && t->kf.preempt_count_proven && t->kf.preempt_count_rq_delta)
		t->skel->bss->irq_from_preempt_count = true;
	if (!err)
		tracer_warm_grown_maps(t);
	if (err) {
		/* The verifier refuses a program with EACCES too, as a security module does. */
		if (err == -EACCES)
			fprintf(stderr, "pipeprof: the kernel refused the BPF programs: its verifier "
				"rejected one, or a security module denied the load (-v with "
				"PIPEPROF_VERIFIER_LOG=1 shows the verifier's log): %s\n",
				strerror(-err));
		else if (errno_is_privilege(err))
			fprintf(stderr, "pipeprof: permission denied loading BPF programs although "
				"CAP_BPF and CAP_PERFMON are held (a security module or "
				"kernel.unprivileged_bpf_disabled?): %s\n", strerror(-err));
		else
			fprintf(stderr, "pipeprof: cannot load the BPF programs: %s (-v with "
				"PIPEPROF_VERIFIER_LOG=1 shows the verifier's log)\n", strerror(-err));
		return err;
	}

	/* Before any pid is marked for it: a marked pid whose job has no program loses its
	 * events, and a switch from it to another job's task that one's switch-in. */
	if (t->dispatcher) {
		err = dispatcher_enter(t->dispatcher, t->skel, t->dispatch_id);
		if (err) {
			fprintf(stderr, "pipeprof: cannot hand the job's programs to the dispatcher: "
				"%s\n", strerror(-err));
			return err;
		}
		t->dispatched = true;
	}
	/* The root goes in before the fork tracepoint attaches, so no child of it is missed;
	 * the /proc walk after attaching catches the ones forked before. */
	err = track_process(t, root, 0, true);
	if (err) {
		fprintf(stderr, "pipeprof: cannot track PID %d: %s\n", root, strerror(-err));
		return err;
	}

	err = tracer_notes_open(t);
	if (err) {
		fprintf(stderr, "pipeprof: cannot read the library notes: %s\n", strerror(-err));
		return err;
	}
	err = pipeprof_bpf__attach(t->skel);
	if (err) {
		fprintf(stderr, "pipeprof: cannot attach the scheduler tracepoints: %s\n", strerror(-err));
		return err;
	}
	attach_phase(&clock, "attach");
	err = seed_descendants(t);
	if (err) {
		fprintf(stderr, "pipeprof: cannot follow the process tree of %d: %s\n", root, strerror(-err));
		return err;
	}
	if (kill(root, 0) && errno == ESRCH) {
		fprintf(stderr, "pipeprof: process %d exited while attaching\n", root);
		return -ESRCH;
	}
	attach_phase(&clock, "process tree");
	err = self_check(t);
	if (err)
		return err;
	attach_phase(&clock, "self-check");
	err = tracer_refresh(t);
	if (err)
		return err;
	tracer_launches_start(t);
	attach_phase(&clock, "libraries");
	err = tracer_steps_start(t);
	if (err)
		return err;
	err = tracer_record_start(t);
	if (err)
		return err;
	/* The report goes on without the "where" section, and says why, when sampling fails. */
	if (tracer_sampler_start(t) && t->verbose)
		fprintf(stderr, "pipeprof: %s\n", t->sample_err);
	attach_phase(&clock, "sampler");
	err = open_window(t);
	tracer_memory_poll(t, true);
	attach_phase(&clock, "threads");
	if (t->verbose) {
		struct symcache_stats sc;

		symcache_stats(&sc);
		fprintf(stderr, "pipeprof: attached in %.1f ms (%.1f ms CPU); per phase, ms wall/CPU: "
			"%s; kernel features %s; symbol lookups: %d read, %d from the cache, %d "
			"from memory\n", (clock.wall - clock.wall0) / 1e6,
			(clock.cpu - clock.cpu0) / 1e6, clock.line,
			t->kf.from_cache ? "cached" : "read from BTF", sc.reads, sc.disk_hits,
			sc.memory_hits);
	}
	return err;
}


void tracer_wait_programs(void)
{
	const struct timespec pause = { .tv_nsec = 20 * 1000000 };

	/* Tracing programs run inside RCU read-side sections, and this command is
	 * synchronize_rcu(): every program that may have read the old epoch has returned. */
	if (sysconf(_SC_NPROCESSORS_ONLN) > 1 &&
	    !syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0))
		return;
	/* nohz_full kernels refuse it and one CPU skips the wait: programs run for
	 * microseconds, so a pause outlasts any of them. */
	nanosleep(&pause, NULL);
}

void tracer_cache_core_btf(bool verbose)
{
	size_t elf_size;
	const void *elf = pipeprof_bpf__elf_bytes(&elf_size);

	core_btf_save(elf, elf_size, verbose);
}

void tracer_stop(struct tracer *t)
{
	/* Before anything closes: its pids first, so that a switch from one of them reaches the
	 * next task's job; then its programs, which the dispatcher's arrays hold alive. */
	if (t->dispatched) {
		dispatcher_unmark(t->dispatcher, t->dispatch_id);
		dispatcher_leave(t->dispatcher, t->dispatch_id);
	}
	t->dispatched = false;
	tracer_launches_close(t);
	for (int i = 0; i < t->nr_attached; i++) {
		for (int k = 0; k < t->attached[i].nr_links; k++)
			bpf_link__destroy(t->attached[i].links[k]);
		for (int k = 0; k < t->attached[i].nr_fds; k++)
			close(t->attached[i].fds[k]);
	}
	tracer_notes_close(t);
	tracer_python_close(t);
	tracer_sampler_close(t);
	tracer_steps_close(t);
	tracer_record_close(t);
	tracer_memory_close(t);
	free(t->close_states);
	t->close_states = NULL;
	t->nr_close_states = 0;
	for (int k = 0; k < 2; k++)
		if (t->selftest_fds[k] > 0)
			close(t->selftest_fds[k]);
	t->selftest_fds[0] = t->selftest_fds[1] = 0;
	bpf_link__destroy(t->selftest_links[0]);
	bpf_link__destroy(t->selftest_links[1]);
	t->selftest_links[0] = t->selftest_links[1] = NULL;
	free(t->attached);
	free(t->joined);
	t->attached = NULL;
	t->nr_attached = 0;
	tracer_unmap_pids(t);
	pipeprof_bpf__destroy(t->skel);
	t->skel = NULL;
	core_btf_release(&t->core_btf);
	if (t->core_btf.missing)
		tracer_cache_core_btf(t->verbose);
	t->core_btf.missing = false;
	if (t->dispatcher) {
		tracer_wait_programs();		/* its fork program may still be marking */
		dispatcher_release(t->dispatcher, t->dispatch_id);
	}
	t->dispatcher = NULL;
}
