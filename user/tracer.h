/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The BPF session behind every front-end: load, follow a process tree, attach GPU probes to
 * whatever libraries it maps, and read the per-thread accounting back. */
#ifndef PIPEPROF_TRACER_H
#define PIPEPROF_TRACER_H

#include <signal.h>
#include <stdbool.h>
#include <sys/types.h>
#include <limits.h>
#include <pthread.h>
#include "core_btf.h"
#include "intern.h"
#include "kfeatures.h"
#include "launch_sample.h"
#include "report.h"
#include "reservoir.h"
#include "uprobe_multi.h"

struct pipeprof_bpf;
struct bpf_object;
struct dispatcher;
struct pp_pid_block;

struct tracer_loader;
struct tracer_interp;
struct tracer_sample;
struct tracer_pyproc;
struct py_file;
struct tracer_wait;
struct tracer_close_state {
	__u32 tid;
	char state;
};
struct ring_buffer;
struct mapped_lib;

struct tracer_opts {
	pid_t root;
	pid_t trainer_tid;	/* the user's --tid, or 0 */
	bool verbose;
	/* `pipeprof hist`: bit per enum pp_hist_kind, enum pp_hist_keying, slot unit in ns */
	__u32 hist_kinds;
	__u32 hist_keying;
	__u64 hist_time_div;
	__u32 hist_entries;	/* histograms per interval; 0: PP_MAX_HISTS */
	bool record_wakers;	/* who ended each wait, for the report's "waited on" */
	bool python_gc;		/* time the interpreters' garbage collections */
	unsigned int sample_hz;	/* CPU samples a second per CPU ("where"); 0: none */
	/* Whose waits go out with their stacks (sampling on): the trainer's, or all of the root
	 * process's or of its descendants' threads (enum pp_wait_stack_scope). */
	unsigned int wait_stack_scope;
	bool steps;		/* the report's steps: a record per backward pass */
	bool memory;		/* the report's host memory: /proc readings through the window */
	const char *step_symbol;	/* FILE:SYMBOL whose calls start steps; NULL: autograd */
	bool record;		/* `pipeprof record`: every state episode (tracer_record.c) */
	bool distributed;	/* the target is known to be a rank (the daemon split a launcher) */
	bool all_launches;	/* probe every kernel launch, never in bursts (launch_sample.h) */
	/* The scheduler tracepoints through a dispatcher many jobs share (dispatcher.h), under an
	 * id the tracer claims; NULL, or every id taken: this object attaches its own. */
	struct dispatcher *dispatcher;
};

/* The launch probes of one library file in one process, apart from its other probes: they
 * are the hot ones, taken off between bursts when launches are many (tracer_launches.c). */
struct launch_probes {
	struct uprobe_spec specs[MAX_LIB_PROBES];
	int nr;
	pid_t pid;
	char path[PATH_MAX + 64];	/* as opened: through /proc/PID/root or map_files */
	struct bpf_link *links[MAX_LIB_PROBES];
	int nr_links;
	int fds[MAX_LIB_PROBES];	/* multi-uprobe links */
	int nr_fds;
};

/* The probes on one library file in one process. */
struct tracer_lib_attach {
	pid_t pid;
	uint64_t inode;
	unsigned int dev_major, dev_minor;
	struct lib_result result;
	struct bpf_link *links[2 * MAX_LIB_PROBES];
	int nr_links;
	int fds[2 * MAX_LIB_PROBES];	/* multi-uprobe links */
	int nr_fds;
	struct launch_probes *launch;	/* NULL: none in this file */
};

struct tracer {
	struct pipeprof_bpf *skel;
	struct core_btf core_btf;	/* the cached CO-RE types, until the load */
	struct dispatcher *dispatcher;	/* as in tracer_opts, once an id was claimed */
	__u8 dispatch_id;
	bool dispatched;		/* its programs are in the dispatcher's arrays */
	pid_t root;
	__u64 start_ns;
	bool verbose;
	__u32 hist_kinds;
	__u32 hist_drain_epoch;	/* the epoch tracer_flip_hists() closed */
	bool hist_flipped;

	/* One per (process, library file) we have looked at. */
	struct tracer_lib_attach *attached;
	int nr_attached, cap_attached;
	int probe_attach_failures;
	/* Driver-pinned host regions read from the maps (tracer_attach.c seed_pinned). */
	int pinned_seeded, pinned_seed_lost;
	int ranks_marked;		/* processes found in a rank (tracer_mark_rank) */
	bool root_rank_read;
	int root_rank;			/* the rank the target's environment names, -1 none */
	/* The target is in a process group: it names a rank, or a rendezvous (MASTER_ADDR,
	 * WORLD_SIZE: env:// initialisation), or the daemon knows it is a rank. */
	bool root_in_group;
	int sibling_checks;		/* connected_to_sibling() reads so far */
	/* Processes under the root connected to another one (procnet.h), as of the last full
	 * scan: ranks whose environment names none. */
	pid_t *joined;
	int nr_joined;
	__u64 joined_set_sig;		/* which processes were looked at */
	int joined_rechecks;		/* full scans left to look again at the same ones */
	int libs_unreadable;
	int seed_failures;	/* threads seen at attach that did not fit the thread map */
	int seed_proc_failures;	/* processes seen at attach that did not fit the process map */
	bool seed_truncated;	/* a process or thread list at attach hit its bound */
	/* The pid filter (tracked_pids), shared with the programs. */
	struct pp_pid_block *pids_mem;
	size_t pids_len;
	char last_lib_error[320];
	struct bpf_link *selftest_links[2];
	int selftest_fds[2];	/* the same as multi-uprobe links; 0 when not */
	bool uprobe_multi;	/* the kernel has multi-uprobe links and they are used */
	struct kfeatures kf;

	/* The dynamic loaders probed (one probe per file serves every process that maps it). */
	struct tracer_loader *loaders;
	int nr_loaders;
	/* The Python interpreters whose GC probes were looked for (tracer_python.c). */
	bool python_gc;
	struct tracer_interp *interps;
	int nr_interps;
	/* /proc states, at the window's close, of the threads no event had shown by then. */
	struct tracer_close_state *close_states;
	int nr_close_states;
	struct ring_buffer *notes;
	__u32 *noted;		/* processes named by notes since they were last handled */
	int nr_noted, cap_noted;
	__u64 notes_lost_seen;	/* PP_CNT_NOTES_LOST when last handled */
	int full_scans, pid_scans;
	__u64 last_scan_ns;
	/* The CPU sampler (tracer_pystack.c). */
	unsigned int sample_hz;
	unsigned int wait_stack_scope;
	int sample_ncpus, nr_sample_cpus;
	int *sample_fds;
	struct bpf_link **sample_links;
	struct ring_buffer *samples_rb;
	struct tracer_sample *samples;	/* a uniform draw (sample_draw) of at most SAMPLES_KEPT */
	int nr_samples, cap_samples;
	struct reservoir sample_draw;
	int *samples_redrawn;		/* slots replaced since the last tick: to be named */
	int nr_samples_redrawn, cap_samples_redrawn;
	__u64 samples_over_cap;		/* out of memory */
	__u64 waits_over_cap;		/* wait stacks past the cap, or out of memory */
	struct tracer_pyproc *pyprocs;
	int nr_pyprocs;
	struct py_file *pyfiles;
	int nr_pyfiles;
	struct tracer_wait *waits;	/* the trainer's waits with their stacks, summed by key */
	struct intern_set wait_keys;	/* their keys: t->waits' index of each */
	struct intern_set stacks;	/* the samples' and waits' stacks, one copy of each */
	int nr_waits, cap_waits;
	char sample_err[160];
	__u64 dither_state;
	/* Interrupt context from the tracepoint nesting instead of the preempt count: why. */
	char irq_fallback[160];
	/* The report's step boundaries (tracer_steps.c). */
	bool steps;
	struct ring_buffer *steps_rb;
	struct step_store step_points;
	__u64 step_recs_over_cap;	/* out of memory */
	__u64 step_recs_unkept;		/* past STEP_STORE_MAX, from step_unkept_from_ns */
	__u64 step_unkept_from_ns;
	int wait_tid_passes;		/* backward passes of step_wait_tid seen (tracer_steps.c) */
	__u64 probe_steps_seen;		/* step records from the step probe: the bursts' clock */
	__u64 data_steps_seen;		/* ... from the trainer's data waits */
	/* Kernel launches probed all along, or in bursts (tracer_launches.c). */
	bool launches_sampled;		/* bursts allowed: the report's steps, no --all-launches */
	bool launches_on;		/* the launch probes are attached */
	struct launch_sampler launch_sampler;
	int launch_attach_failures;	/* re-attaches after a pause that failed */
	pthread_t launch_detacher;	/* closing the last burst's links */
	bool launch_detaching;
	/* `pipeprof record`'s state episodes (tracer_record.c). */
	bool record;
	struct ring_buffer *record_rb;
	struct pp_episode *eps;
	size_t nr_eps, cap_eps;
	__u64 eps_over_cap;
	struct tracer_naming *naming;	/* names of what was sampled, kept from tick to tick */
	char *verifier_logs;	/* -v: each program's verifier statistics (tracer_verifier.c) */
	/* --step-symbol, split: steps start at calls of step_func in the file named step_file. */
	char step_file[STEP_FILE_MAX], step_func[STEP_SYMBOL_MAX];
	/* The report's host memory (tracer_memory.c). */
	bool memory;
	__u64 last_mem_ns;
	struct mem_reading *mem;
	int nr_mem, cap_mem;
	__u64 mem_over_cap;
};

/* Processes, and threads per process, that the /proc walks at attach take. */
#define TRACER_MAX_SEED 4096

__u64 monotonic_ns(void);

/* Fails with a message on stderr and -errno: -EPERM (not root), -ENOENT (no BTF), -ESRCH. */
int tracer_start(struct tracer *t, const struct tracer_opts *o);

/* Reads a global counter, summed over CPUs. */
__u64 tracer_counter(struct tracer *t, enum pp_counter c);

/* A GPU library (libcudart, libcuda) is mapped by a tracked process, probed or not. */
bool tracer_gpu_mapped(struct tracer *t);

/* A GPU library is mapped (or could not be read) and none of its calls is timed. */
bool tracer_gpu_unprobed(struct tracer *t);

/* Why no GPU call is timed, the truth of it: no library, an unreadable one, failed attaches. */
const char *tracer_gpu_why_not(struct tracer *t, char *buf, size_t size);

/* Where to open the very file pid maps as lib (its root, or map_files when that path no longer
 * leads to the mapped inode). */
void lib_open_path(pid_t pid, const struct mapped_lib *lib, char *path, size_t size);

/* Looks at one process's mappings: probes the GPU libraries (and its loader) not yet probed. */
void tracer_mark_rank(struct tracer *t, pid_t pid);
int tracer_refresh_pid(struct tracer *t, pid_t pid);

/* tracer_notes.c: the loader probe, and the notes that make periodic rescans unnecessary. */
void tracer_attach_loader(struct tracer *t, pid_t pid, const struct mapped_lib *lib);
int tracer_notes_open(struct tracer *t);
/* tracer_python.c: GC probes on an interpreter file, once per file; why none is probed (NULL
 * when one is); detach. */
void tracer_attach_python(struct tracer *t, pid_t pid, const struct mapped_lib *lib);
const char *tracer_python_gc_why_not(struct tracer *t, char *buf, size_t size);
/* Fills r's GC fields, with a "not traced" line when an interpreter is mapped unprobed. */
void tracer_collect_python(struct tracer *t, struct report *r);
void tracer_python_close(struct tracer *t);
/* tracer_pystack.c: the CPU sampler. Start after the programs load; register a process that
 * maps an interpreter (its stacks are walked where its version can be); take what the ring
 * buffer holds; resolve every sample into r (before tracer_stop()); stop. */
void tracer_size_sample_buffers(struct tracer *t);
int tracer_sampler_start(struct tracer *t);
void tracer_sampler_add_process(struct tracer *t, pid_t pid, const struct mapped_lib *lib);
void tracer_sampler_poll(struct tracer *t);
/* pid (0: any process) mapped a library since its maps were kept for naming samples. */
void tracer_sampler_maps_changed(struct tracer *t, pid_t pid);
int tracer_collect_samples(struct tracer *t, struct report *r);
void tracer_sampler_close(struct tracer *t);
/* tracer_steps.c: the report's step boundaries. Size before load, start after, take what
 * the ring buffer holds at each tick, copy into r, free. */
void tracer_size_step_buffer(struct tracer *t);
void tracer_steps_skip_probes(struct tracer *t);
int tracer_steps_start(struct tracer *t);
void tracer_steps_poll(struct tracer *t);
int tracer_collect_steps(struct tracer *t, struct report *r);
/* Whether the step probe is attached (r->steps_probed), and where not, why (steps_why_not):
 * -p's step records and the daemon's step histogram both hang on it. */
void tracer_steps_probe_state(struct tracer *t, struct report *r);
void tracer_steps_close(struct tracer *t);
/* tracer_attach.c: one perf-event uprobe per spec (kernels before multi-uprobe links, 6.6). */
void tracer_attach_singly(struct uprobe_spec *specs, int n, pid_t pid, const char *path,
			  struct bpf_link **links, int *nr_links);
/* tracer_launches.c: the kernel launch probes, all along or in bursts (launch_sample.h).
 * add: lib a's launch specs specs[idx[0..n)], attached now if launches are probed now, with
 * each spec's outcome written back. */
void tracer_launches_add(struct tracer *t, struct tracer_lib_attach *a, struct uprobe_spec *specs,
			 const int *idx, int n, const char *path);
/* After the first scan: the launches are probed from now on (launch_epoch odd). */
void tracer_launches_start(struct tracer *t);
/* At each tick: a burst ended or the pause is over. */
void tracer_launches_tick(struct tracer *t);
void tracer_launches_close(struct tracer *t);
/* tracer_record.c: `pipeprof record`'s episodes. Size (and set record_on) before load, start
 * after, poll each tick; the episodes stay in t->eps until close. */
void tracer_record_size(struct tracer *t);
int tracer_record_start(struct tracer *t);
void tracer_record_poll(struct tracer *t);
void tracer_record_close(struct tracer *t);
/* tracer_gpumem.c: device memory, for the steps only: size the maps and leave the programs
 * unloaded without them (before load); each process's figures into r. */
void tracer_gpumem_size(struct tracer *t);
void tracer_gpumem_skip_probes(struct tracer *t);
void tracer_collect_gpumem(struct tracer *t, struct report *r);
/* tracer_memory.c: the job's resident memory and major faults, read from /proc every 250 ms
 * while tracing (now_or_never: at once), summed up into r, freed. */
void tracer_memory_poll(struct tracer *t, bool now_or_never);
int tracer_collect_memory(struct tracer *t, struct report *r);
void tracer_memory_close(struct tracer *t);
/* A pollable fd that is readable when notes wait; -1 when there is none. */
int tracer_notes_fd(const struct tracer *t);
/* Handles the waiting notes: looks at each process named (a full scan when notes were lost). */
int tracer_handle_notes(struct tracer *t);
void tracer_notes_close(struct tracer *t);
/* The front-ends' sleep: up to timeout_ms, handling notes as they come and scanning every
 * tracked process now and then. Returns 1 when pidfd became readable (the target exited), 0,
 * or -errno. */
int tracer_wait(struct tracer *t, int pidfd, int timeout_ms);

/* Picks up processes and libraries that appeared since the last call: a full scan of every
 * tracked process's maps. */
int tracer_refresh(struct tracer *t);

/* Fills every measured part of r except the analysis. Call before tracer_stop(). */
int tracer_collect(struct tracer *t, __u64 end_ns, struct report *r);

/* Starts a new interval of `hist` histograms: new events go to the other half of the map.
 * The closed half is ready once tracer_wait_programs() has returned. */
void tracer_flip_hists(struct tracer *t);

/* Returns once no BPF program that started before the call can still be running. One wait
 * serves every tracer flipped before it. */
void tracer_wait_programs(void);

/* Sizes the histogram maps to what o asks for: between open and load. */
void tracer_size_hists(struct tracer *t, const struct tracer_opts *o);

/* How many histograms the hash map holds, both epochs: one drain returns at most this plus
 * PP_SWITCH_HISTS (the switch-in's per-CPU ones). */
int tracer_hist_capacity(const struct tracer *t);

/* Takes every `hist` histogram of the closed interval out of the BPF maps, calling fn for each:
 * each interval then starts from zero, as BCC's tools do. Flips and waits first unless the
 * caller did. Returns 0 or -errno. */
int tracer_drain_hists(struct tracer *t,
		       void (*fn)(const struct pp_hist_key *key, const struct pp_hist *h, void *ctx),
		       void *ctx);

/* Opens the accounting at a time the programs learn before it comes, t->start_ns, once seed
 * has put the threads already running in place with it; returns when it has passed. Stamped
 * first and stored after, a call made in between would be in the window and never counted. */
void tracer_begin_accounting(struct tracer *t, void (*seed)(struct tracer *t));

/* Stops the accounting at a time the programs learn before it comes, and returns it: the
 * end_ns to hand tracer_close_window(). A program that finds the window open counts without
 * reading its clock, so an end stamped first and stored after would let a call made in
 * between (pipeprof preempted: milliseconds) count past the end the report states. */
__u64 tracer_end_accounting(struct tracer *t);

/* end_ns is tracer_end_accounting()'s: from it on nothing more is accounted, while
 * tracer_collect() reads the maps. Waits of thread `tid` (else of the trainer candidates of
 * the root and of each rank under it) still open at end_ns are given up to naming_ms to end,
 * so that their wakeups name them; only their part before end_ns counts.
 * A wait still open then is given up to max_naming_ms in all, saying so on stderr unless
 * quiet, until *stop is set. Returns the milliseconds the naming was open. */
int tracer_close_window(struct tracer *t, __u64 end_ns, pid_t tid, int naming_ms, int max_naming_ms,
			const volatile sig_atomic_t *stop, bool quiet);

/* The /proc state letter tid had at the window's close if no event had shown it by then,
 * else 0. */
char tracer_close_state_of(const struct tracer *t, __u32 tid);

/* Summed over the programs: re-entries the kernel skipped (each a lost event) and, with
 * kernel.bpf_stats_enabled on, their run time and count. */
void tracer_prog_stats(struct tracer *t, uint64_t *recursion_misses, uint64_t *run_ns, uint64_t *run_count);
/* The same for any loaded object's programs, added to the sums. */
void object_prog_stats(struct bpf_object *obj, uint64_t *recursion_misses, uint64_t *run_ns,
		       uint64_t *run_count);

/* tracer_verifier.c, with -v: each program's verification time and instructions. */
void tracer_verifier_stats_arm(struct tracer *t);
void tracer_verifier_stats_print(struct tracer *t);
/* The step probe's api name: --step-symbol's symbol, else TRACER_STEP_PROBE. */
const char *tracer_step_api(const struct tracer *t);
/* Whether a probe on api (a GPU API name or TRACER_STEP_PROBE; NULL: any) is attached. */
#define TRACER_STEP_PROBE "torch::autograd::Engine::execute"
bool tracer_probed(struct tracer *t, const char *api);

/* tracer_maps.c: sizes the maps before load (the pid filter to pid_max; the test hook
 * PIPEPROF_TEST_MAP_ENTRIES="threads=N,procs=M" shrinks those two), and applies the test hook
 * PIPEPROF_TEST_DROP_SWITCH_INS and PIPEPROF_TEST_DROP_WAKEUPS. -EINVAL for a bad hook. */
int tracer_size_maps(struct tracer *t);
/* Fills each CPU's cache of the maps allocated as they fill (after load, before attach). */
void tracer_warm_grown_maps(struct tracer *t);
/* Sets pid's tracked_pids byte (enum pp_pid_kind; 0: not followed). 0 or -errno (the map's
 * mapping). */
/* The kernel's pid_max now, or every possible pid where it cannot be read. */
long tracer_pid_max(void);
int tracer_mark_pid(struct tracer *t, pid_t pid, __u8 kind);
void tracer_unmap_pids(struct tracer *t);
/* The "Not traced" lines of full thread and process maps, with how many of the job's threads and
 * processes alive at end_ns they cost (a census of /proc), of lost events, and r->partial. Needs
 * r's counters, processes and program stats. */
void tracer_note_limits(struct tracer *t, __u64 end_ns, struct report *r);
/* Says the report's figures lack something, and what (appended to r->partial_why). */
void tracer_mark_partial(struct report *r, const char *why);

/* A thread's cumulative figures when a window was last taken (tracer_window_threads). */
struct thread_snap {
	__u32 tid;
	__u64 ns[PP_NR_STATES];
	__u64 gpu_calls;
	__u64 gc_ns, gc_count, gil_ns;
};

struct thread_snaps {
	struct thread_snap *v;
	int nr, cap;
};

/* Each tracked thread's state times and GPU calls since the previous call with the same snaps
 * (since the attach at the first), its open phase closed at now_ns; *out is the caller's to
 * free. Exited threads and processes leave the maps, so one caller reads a tracer's windows.
 * 0 or -ENOMEM. */
int tracer_window_threads(struct tracer *t, struct thread_snaps *snaps, __u64 now_ns,
			  struct thread_result **out, int *nr);
void thread_snaps_free(struct thread_snaps *s);

/* Detaches and frees everything; safe on a partly started tracer. */
void tracer_stop(struct tracer *t);
/* Makes the cached CO-RE types (core_btf.h) now rather than when the first tracer stops: for
 * the daemon and `top`, whose first jobs stay attached. */
void tracer_cache_core_btf(bool verbose);

/* Whether an error from bpf/perf means missing privileges. */
bool errno_is_privilege(int err);

#endif
