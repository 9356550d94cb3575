/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* What a -p PID names, checked before anything attaches: a process to trace, a thread of one
 * (traced through its process), or something there is no job in: a zombie, a kernel thread,
 * the namespace's init. Pure: reads only the procfs root it is given. */
#ifndef PIPEPROF_TARGET_H
#define PIPEPROF_TARGET_H

#include <stddef.h>
#include <sys/types.h>

enum target_kind {
	TARGET_PROCESS,
	TARGET_THREAD,		/* pid is a thread; tgid is its process */
	TARGET_GONE,
	TARGET_ZOMBIE,		/* exited, not yet reaped: every thread is dead */
	TARGET_KERNEL_THREAD,
	TARGET_INIT,		/* PID 1 supervising the namespace: every process descends from it */
};

struct target_info {
	enum target_kind kind;
	pid_t pid, tgid, ppid;
	char comm[64];		/* raw: sanitise before printing */
	char process_comm[64];	/* the process's, when pid is a thread */
};

/* Classify pid under procfs, as seen by process self (PID 1 is an init to refuse when self
 * descends from it). Returns 0 (info filled, whatever the kind) or -errno when procfs cannot
 * be read for another reason than the process being gone. */
int target_inspect(const char *procfs, pid_t pid, pid_t self, struct target_info *info);

/* Whether a stat line's flags mark a kernel thread (PF_KTHREAD). -EINVAL when malformed. */
int target_parse_stat(const char *line, char *state, pid_t *ppid, unsigned int *flags);

/* True for the basenames of init systems and container inits that supervise other jobs. */
int target_is_init_system(const char *comm);

/* One line (no newline) saying why kind refuses, or what a thread target becomes. The names
 * in it are made terminal-safe. Returns buf. */
char *target_describe(const struct target_info *info, char *buf, size_t size);

/* For the commands: resolve -p PID. A thread becomes its process, and the trainer unless *tid
 * is already set; the rest is refused. Prints one line on stderr for a thread (what it became)
 * and for a refusal. Returns 0 with *pid the process to trace, -ESRCH when there is no such
 * process, -EINVAL when the target holds no job, or another -errno. */
int target_resolve(const char *procfs, pid_t *pid, pid_t *tid);

#endif
