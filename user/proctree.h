/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Reading the process tree and per-task facts from procfs. Every function takes the procfs
 * root so unit tests can point it at a fixture tree. */
#ifndef PIPEPROF_PROCTREE_H
#define PIPEPROF_PROCTREE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define PROCFS "/proc"

/* Parse the ppid and state out of a /proc/PID/stat line; comm may hold spaces and ')'.
 * Returns 0 or -EINVAL. */
int proc_parse_stat(const char *line, pid_t *ppid, char *state);

/* The ppid and the start time (clock ticks after boot) out of the same line. Returns 0 or
 * -EINVAL. */
int proc_parse_stat_start(const char *line, pid_t *ppid, unsigned long long *start_ticks);

/* Every process whose parent chain reaches root (root excluded), parents before children,
 * with each one's parent in out_ppid when that is not NULL. Returns the count (at most max)
 * or -errno. */
int proc_descendants(const char *procfs, pid_t root, pid_t *out, pid_t *out_ppid, int max);

/* The first line of a file (newline kept), into buf: 0, -errno, or -EIO when empty. */
int proc_read_line(const char *path, char *buf, size_t size);

/* A thread's name (tid == tgid: the process's); "" when it cannot be read. */
void proc_comm(const char *procfs, pid_t tgid, pid_t tid, char *buf, size_t size);
/* The rank a process's environment names, as torchrun, accelerate and DeepSpeed set it: RANK,
 * else LOCAL_RANK; -1 when none (or the environment cannot be read). The environment is what
 * the process was started with: a rank's variables appear at its exec. The _text form parses
 * an environ block of len bytes (NUL-separated). */
int proc_env_rank(const char *procfs, pid_t pid);
int proc_env_rank_text(const char *env, size_t len);
/* The value of variable name in a process's environment, into out; -ENOENT when it has none
 * (or cannot be read). */
int proc_env_value(const char *procfs, pid_t pid, const char *name, char *out, size_t size);

/* Thread ids of a process. Returns the count or -errno (-ESRCH when gone). */
int proc_threads(const char *procfs, pid_t pid, pid_t *out, int max);

/* A process's parent, or 0 when it cannot be read. */
pid_t proc_ppid(const char *procfs, pid_t pid);

/* State letter of one thread ('R', 'S', 'D', ...), or 0 when it cannot be read. */
char proc_thread_state(const char *procfs, pid_t tgid, pid_t tid);

/* A thread's name (into comm, truncated to size) and state letter from one read of its stat
 * file, where /proc's comm and stat files would take two: 0, or -errno (-EINVAL when it does
 * not parse). The _comm form parses len bytes of a stat file's text. */
int proc_thread_stat(const char *procfs, pid_t tgid, pid_t tid, char *comm, size_t size,
		     char *state);
int proc_parse_stat_comm(const char *text, size_t len, char *comm, size_t size, char *state);

/* One thread's CPU time in nanoseconds (schedstat's first field, the scheduler's
 * se.sum_exec_runtime), or 0 when it cannot be read. */
unsigned long long proc_thread_exec_ns(const char *procfs, pid_t tgid, pid_t tid);

/* The system call a thread is blocked in: its number and its first six arguments, from
 * /proc's syscall file. 0, or -errno: -EAGAIN where it is running or in no system call,
 * -EINVAL where the file does not parse. The _parse form reads the file's text. */
int proc_thread_syscall(const char *procfs, pid_t tgid, pid_t tid, long *nr,
			unsigned long args[6]);
int proc_parse_syscall(const char *text, long *nr, unsigned long args[6]);

/* The command line with NULs turned into spaces; "" when unreadable. */
void proc_cmdline(const char *procfs, pid_t pid, char *buf, size_t size);

/* Aggregate CPU jiffies from the first line of /proc/stat, and procs_running. */
int proc_cpu_times(const char *procfs, unsigned long long *busy, unsigned long long *total,
		   int *procs_running);

/* The host's CPUs over a window: the busy share between its two /proc/stat readings, and the
 * run queue sampled along it (procs_running less the reader, which is running as it reads). */
struct cpu_window {
	unsigned long long busy0, total0;
	double runnable_sum;
	int samples;
	bool ok;	/* the start was read */
};

void cpu_window_start(struct cpu_window *w, bool ok, unsigned long long busy,
		      unsigned long long total);
/* cpu_window_start() from a reading of procfs's stat taken now. */
void cpu_window_open(struct cpu_window *w, const char *procfs);
void cpu_window_sample(struct cpu_window *w, int procs_running);
/* The busy fraction and the mean number of runnable tasks; -1 for what is unknown. */
void cpu_window_result(const struct cpu_window *w, bool ok, unsigned long long busy,
		       unsigned long long total, double *busy_fraction, double *runnable_avg);

#endif
