/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The `pipeprof -p PID` report: what was measured, and its text and JSON renderings
 * (schema pipeprof.report/v1). Pure: fed a filled struct report, writes a stream. */
#ifndef PIPEPROF_REPORT_H
#define PIPEPROF_REPORT_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include "classify.h"
#include "intern.h"
#include "procmaps.h"
#include "pystack.h"
#include "memory.h"
#include "steps.h"

#define REPORT_SCHEMA "pipeprof.report/v1"
#define MAX_NOT_TRACED 24
#define MAX_LIB_PROBES 64
#define MAX_GPUMEM_PROCS 64

struct probe_result {
	const char *api;
	uint64_t value;		/* symbol value, as nm prints it */
	uint64_t offset;	/* file offset the uprobe sits at */
	bool skipped_endbr64;	/* probe placed after a leading endbr64 */
	bool attached;
	int err;		/* -errno when not attached */
};

struct lib_result {
	pid_t pid;
	enum lib_kind kind;
	char path[PATH_MAX];
	bool deleted;		/* unlinked while mapped: probed through /proc/PID/map_files */
	int nr_probes;
	struct probe_result probes[MAX_LIB_PROBES];
	/* Functions wanted and not in its symbol tables, where each should be (libnccl's
	 * collectives): the calls they would have counted are missing from the report. */
	int nr_missing;
	const char *missing[MAX_LIB_PROBES];
};

/* NCCL (nccl.bpf.c): one per enum pp_nccl_op below PP_NR_NCCL_CALLS. */
struct nccl_result {
	const char *name;
	uint64_t calls;
	uint64_t bytes;		/* count x type size; for AllGather, the bytes received */
	uint64_t unsized;	/* calls whose bytes are unknown: AllGathers on a communicator
				 * made before the attach, or an unknown data type */
	uint64_t total_ns, max_ns;
	__u64 slots[PP_HIST_SLOTS];	/* log2 usecs */
};

struct api_result {
	const char *name;
	uint64_t calls, total_ns, max_ns;
	__u64 slots[PP_HIST_SLOTS];	/* log2 usecs */
};

struct proc_result {
	pid_t pid, parent;
	bool root;
	bool forked_while_tracing;
	bool exited;
	uint64_t fork_ns, exit_ns;	/* CLOCK_MONOTONIC; 0: before the window, still alive */
	char comm[16];
};

#define MAX_PY_PROCS 64

/* A process that maps a Python interpreter: walked, or why not. */
struct py_proc_result {
	pid_t pid;
	int major, minor;
	int err;		/* 0: its stacks are walked */
};

/* Steps as a window's histogram tells them (the daemon's): on says the report is the daemon's. */
struct step_hist_summary {
	bool on;
	uint64_t count;
	double per_second, p50_s, p90_s, mean_s;
	int other_threads;		/* threads other than the trainer with backward passes */
};

struct report {
	pid_t root_pid;
	char cmdline[512];
	bool launched;			/* started by pipeprof (-- CMD) */
	uint64_t start_ns, end_ns;	/* CLOCK_MONOTONIC */
	bool target_exited;
	uint64_t target_exit_ns;
	bool interrupted;		/* ended by a signal rather than -d or exit */

	int nr_threads;
	struct thread_result *threads;
	int nr_procs;
	struct proc_result *procs;
	/* A launcher's ranks (ranks.c): the threads above are then the focus rank's alone,
	 * out of job_threads. NULL for a job of one trainer. */
	struct job_ranks *job;
	int job_threads;

	struct analysis_input input;
	struct analysis analysis;

	bool gpu_traced;
	bool gpu_libs_unprobed;	/* a GPU library is mapped, and no synchronising call is timed */
	char gpu_why_not[512];
	bool gc_traced;			/* a Python interpreter's GC probes are attached */
	char gc_why_not[512];
	int nr_libs;
	struct lib_result *libs;
	int nr_apis;
	struct api_result apis[PP_MAX_GPU_APIS];
	/* NCCL (nccl_report.c): the libnccl files probed, in the libs allocation after the GPU
	 * libraries (freed with it), and the figures per call. */
	int nr_nccl_libs;
	struct lib_result *nccl_libs;
	bool nccl_traced;		/* a collective of a mapped libnccl is probed */
	struct nccl_result nccl[PP_NR_NCCL_CALLS];
	struct pp_io_stats io;

	int nr_wakes;
	struct wake_record *wakes;	/* the wakers map: who ended each wait */

	/* "Where": CPU samples of the job's threads (0 Hz: not sampled). */
	unsigned int sample_hz;
	char sample_err[160];		/* why sampling failed, "" when it ran */
	uint64_t samples_lost;
	/* Samples taken in the window: where_samples is a uniform draw of them past
	 * SAMPLES_KEPT (tracer_pyrecords.h). */
	uint64_t samples_seen;
	int samples_cap;		/* SAMPLES_KEPT */
	uint64_t samples_truncated;	/* Python stacks cut at PP_PY_MAX_DEPTH frames */
	int nr_where_samples;
	struct where_sample *where_samples;
	struct where_names where_names;
	struct where_role where[NR_ROLES];	/* filled by where_finish() */
	int nr_waits;				/* the trainer's waits with their stacks */
	struct where_wait *waits;
	/* The samples' py and callers, the waits' py and waker_py: one copy of each array. */
	struct intern_set name_stacks;
	uint64_t wait_records_lost;
	struct where_wait_state wait_states[PP_NR_STATES];	/* filled by where_finish() */
	int nr_py_procs;
	struct py_proc_result py_procs[MAX_PY_PROCS];

	/* Training steps: the trainer's backward passes (steps.c, steps_report.c). */
	bool steps_on;			/* asked for (the report; the daemon keeps a histogram) */
	bool steps_probed;		/* libtorch's autograd engine is probed */
	char steps_why_not[STEP_FILE_MAX + STEP_SYMBOL_MAX + 128];
	char step_symbol[STEP_FILE_MAX + STEP_SYMBOL_MAX];	/* --step-symbol; "" for autograd */
	struct step_store step_points;	/* the step records (step_store.h) */
	uint64_t step_recs_lost;
	uint64_t step_recs_unkept;	/* boundaries past STEP_STORE_MAX, the first at ... */
	uint64_t step_unkept_from_ns;	/* ... (CLOCK_MONOTONIC) */
	uint32_t steps_tid;		/* whose steps: the trainer's */
	struct step_summary steps;	/* filled by steps_finish() */
	/* The daemon's steps (steps_from_hist()): it keeps no step record, only each window's
	 * log2 histogram of the trainer's step times, which gives a count, a mean and
	 * slot-interpolated quantiles, not the breakdowns. Kept apart from steps, which the
	 * other sections read as whole records' figures; -p never sets it. */
	struct step_hist_summary steps_hist;
	/* The job's host/device copies over the window, every thread (the steps' copy probes;
	 * pinned: from or to host memory seen pinned since the attach). */
	bool copies_traced;
	struct pp_copy_counts copies;
	/* Host regions the driver had pinned before the attach, read from the maps, and those
	 * that could not be tracked (map full, past PROCMAPS_PINNED_MAX). */
	int pinned_before_attach, pinned_before_attach_lost;
	/* Launch-bound (CPU-side), from the steps and the verdict (steps_finish()). */
	bool launch_bound;
	/* Device memory each process allocated and freed in the window (devmem.bpf.c,
	 * tracer_gpumem.c): the root process first. */
	bool devmem_traced;		/* an allocation probe is attached */
	int nr_devmem;
	struct gpumem_proc devmem[MAX_GPUMEM_PROCS];
	uint64_t devmem_lost;		/* allocations not followed: map full */

	/* Host memory over the window (memory.c, memory_report.c). */
	bool memory_on;
	struct mem_summary mem;
	uint64_t mem_readings_lost;

	uint64_t counters[PP_NR_COUNTERS];
	int probe_attach_failures;
	/* Kernel launch probes in bursts (launch_sample.h): how often they came off, for how
	 * long in all, and re-attaches that failed. */
	bool launches_in_bursts;
	int launch_pauses, launch_reattach_failures;
	double launch_off_s;
	uint64_t bpf_recursion_misses;	/* program runs the kernel skipped: re-entry on a CPU */
	/* Kernel BPF stats (sysctl kernel.bpf_stats_enabled=1), else 0: what tracing costs. */
	uint64_t bpf_run_ns, bpf_run_count;
	/* What read the traced processes' /proc/PID/maps while tracing (each read takes the
	 * process's mmap_lock): scans of every process (the attach's, then the safety scans),
	 * reads of one process at its loader notes, and to name samples (once per process, again
	 * after a note). */
	int maps_full_scans, maps_reads_notes, maps_reads_naming;
	int nr_not_traced;
	char not_traced[MAX_NOT_TRACED][256];
	int not_traced_dropped;		/* lines beyond MAX_NOT_TRACED */
	/* What full maps cost, counted in /proc at the end: live threads of the job with no
	 * record (those of unfollowed processes included), live processes of its tree not
	 * followed. */
	int threads_missed, procs_missed;
	/* The figures lack threads, processes or events (partial_why says which). */
	bool partial;
	char partial_why[512];
};

/* The trainer's steps from the step records (after the analysis). */
int steps_finish(struct report *r);
/* The trainer's steps from the window's step histogram instead (the daemon's): slots in log2
 * usecs, sum_s their total in seconds; r's window must be set. */
void steps_from_hist(struct report *r, const __u64 *slots, double sum_s, int other_threads);
void steps_print_text(FILE *out, const struct report *r);
/* Where the report stopped keeping step boundaries (STEP_STORE_MAX), in a sentence: "" when
 * it kept them all. No markup: the HTML report prints it as it is. */
void steps_unkept_text(char *buf, size_t size, const struct report *r);
/* What lost step records did to the figures, in words. */
const char *steps_lost_effect(const struct step_summary *s);
/* Why a report with steps gives no step time (step_summary.times false), in words. */
const char *steps_untimed_why(const struct step_summary *s);
struct json_object *steps_json(const struct report *r);
/* The job's copies over the window (report JSON gpu.copies), or null when not traced. */
struct json_object *gpu_copies_json(const struct report *r);

/* Where the trainer's step boundaries came from (JSON steps.source: "data_waits", "symbol",
 * "autograd_engine"); NULL where no step was found. */
const char *steps_source_name(const struct report *r);
/* A step's (or any breakdown's) states in words: the largest first, those of 1% or more, at
 * most four ("DATA_WAIT 75%, RUNNING 25%"); "" for none. */
void steps_shares_text(char *buf, size_t size, const double share[PP_NR_STATES]);
/* The figures as the report writes them: a count per step whole where it is, else to two
 * decimals; bytes in decimal units (a sign where negative); a rate, thousands as "k". */
const char *report_fmt_count(char *buf, size_t size, double v);
const char *report_fmt_bytes(char *buf, size_t size, double v);
const char *report_fmt_rate(char *buf, size_t size, double v);
/* A copy direction as the report labels it: H2H, H2D, D2H, D2D, default. */
const char *copy_dir_label(unsigned int dir);

/* The trainer's process's device-memory growth across steps (with its leak flag), NULL where
 * the GPU was not traced or no step was found. */
const struct gpumem_fit *gpumem_growth(const struct report *r);

/* The report's "GPU memory" section, text and JSON key gpu_memory (gpumem_report.c). */
void gpumem_print_text(FILE *out, const struct report *r);
struct json_object *gpumem_json(const struct report *r);

/* The report's "NCCL" section, text and JSON key nccl (nccl_report.c); whether any probed
 * NCCL call was made in the window. */
void nccl_print_text(FILE *out, const struct report *r);
bool nccl_called(const struct report *r);
struct json_object *nccl_json(const struct report *r);

/* Shared by the sections' renderings (report.c): a call's time percentile from its log2
 * usecs histogram, bounded by the longest call; a histogram and a probed library in JSON. */
double report_percentile_us(const __u64 *slots, uint64_t max_ns, double p);
struct json_object *report_hist_json(const __u64 *slots);
struct json_object *lib_result_json(const struct lib_result *lib);

/* The report's "Memory" section, text and JSON (memory_report.c). memory_step_s(): the
 * seconds a step its per-step figures use, 0 where no step was found (they are per second). */
double memory_step_s(const struct report *r);
void memory_print_text(FILE *out, const struct report *r);
struct json_object *memory_json(const struct report *r);

/* Gives each sample its thread's role and counts them per role (after the analysis). */
int where_finish(struct report *r);
/* Names the hottest Python function in the advice about that role's code, where the samples
 * support it (after where_finish()). */
void where_annotate(struct report *r);
void where_print_text(FILE *out, const struct report *r);
/* Where the samples are a draw of the window's (samples_seen), that in a sentence, else "". */
void where_draw_text(char *buf, size_t size, const struct report *r);
/* A Python frame's name by its id in where_names; "no Python frame" for -1. */
const char *where_name_of(const struct report *r, int id);
/* The trainer's wait states worth a line: those of at least this share of its wait time. */
#define WHERE_WAIT_STATE_MIN_SHARE 0.01
struct json_object;
struct json_object *where_json(const struct report *r);
void where_free(struct report *r);

void report_not_traced(struct report *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The report's trainer thread (NULL when none was seen), and how it was chosen, in words. */
const struct thread_result *report_trainer(const struct report *r);
const char *trainer_choice_text(enum trainer_choice how);
/* Who ended the trainer's waits: the traced thread behind a waker (NULL for an interrupt or a
 * thread not traced), and its role's name ("INTERRUPT", "UNTRACKED" where none). */
const struct thread_result *report_waker_thread(const struct report *r, const struct waited_on *w);
const char *report_waker_role(const struct report *r, const struct waited_on *w);

void report_print_text(FILE *out, const struct report *r);
int report_print_json(FILE *out, const struct report *r);

#endif
