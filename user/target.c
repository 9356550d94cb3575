// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "proctree.h"
#include "sanitize.h"
#include "target.h"

/* include/linux/sched.h: stable since 2.6 and the only sure sign, since a kernel thread's
 * empty cmdline is easy for a user process to imitate. */
#define PF_KTHREAD 0x00200000u

static int read_first_line(const char *path, char *buf, size_t size)
{
	FILE *f = fopen(path, "re");
	int err = 0;

	if (!f)
		return -errno;
	if (!fgets(buf, size, f))
		err = ferror(f) ? -EIO : -ESRCH;	/* a task reaped after the open reads empty */
	fclose(f);
	return err;
}

int target_parse_stat(const char *line, char *state, pid_t *ppid, unsigned int *flags)
{
	/* comm is free text in parentheses: the last ')' ends it. */
	const char *p = strrchr(line, ')');
	int pp, pgrp, session, tty, tpgid;
	unsigned int fl;
	char st;

	if (!p || sscanf(p + 1, " %c %d %d %d %d %d %u", &st, &pp, &pgrp, &session, &tty, &tpgid,
			 &fl) != 7)
		return -EINVAL;
	*state = st;
	*ppid = pp;
	*flags = fl;
	return 0;
}

/* Tgid from /proc/PID/status; /proc/TID is there for any thread, though readdir hides it. */
static int read_tgid(const char *procfs, pid_t pid, pid_t *tgid)
{
	char path[PATH_MAX], line[256];
	int err = -EINVAL;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%d/status", procfs, pid);
	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? -ESRCH : -errno;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "Tgid:", 5)) {
			char *end;
			long v = strtol(line + 5, &end, 10);

			if (end != line + 5 && v > 0 && v <= INT_MAX) {
				*tgid = v;
				err = 0;
			}
			break;
		}
	}
	fclose(f);
	return err;
}

/* A group leader that called pthread_exit() reads as a zombie while its threads run: the
 * process is a zombie only when no thread is alive. Exited threads other than the leader are
 * reaped at once, so the bound is never what decides. */
static int any_thread_alive(const char *procfs, pid_t tgid)
{
	pid_t tids[4096];
	int n = proc_threads(procfs, tgid, tids, sizeof(tids) / sizeof(tids[0]));

	for (int i = 0; i < n; i++) {
		char st = proc_thread_state(procfs, tgid, tids[i]);

		if (st && st != 'Z' && st != 'X')
			return 1;
	}
	return 0;
}

int target_is_init_system(const char *comm)
{
	static const char *const inits[] = {
		"systemd", "init", "tini", "dumb-init", "catatonit", "docker-init", "runit",
		"s6-svscan", "openrc-init", "supervisord", "launchd", "upstart", "busybox",
	};

	for (size_t i = 0; i < sizeof(inits) / sizeof(inits[0]); i++)
		if (!strcmp(comm, inits[i]))
			return 1;
	return 0;
}

/* Whether pid is an ancestor of self: on a host every process descends from PID 1, while a
 * tool entered into a container (docker exec, nsenter) has a parent outside its namespace. */
static int is_ancestor(const char *procfs, pid_t pid, pid_t self)
{
	char path[PATH_MAX], line[1024];
	unsigned int flags;
	char st;

	for (int depth = 0; self > 0 && depth < 4096; depth++) {
		if (self == pid)
			return 1;
		snprintf(path, sizeof(path), "%s/%d/stat", procfs, self);
		if (read_first_line(path, line, sizeof(line)) ||
		    target_parse_stat(line, &st, &self, &flags))
			return 0;
	}
	return 0;
}

int target_inspect(const char *procfs, pid_t pid, pid_t self, struct target_info *info)
{
	char path[PATH_MAX], line[1024];
	unsigned int flags;
	int err;
	char st;

	memset(info, 0, sizeof(*info));
	info->pid = info->tgid = pid;
	err = read_tgid(procfs, pid, &info->tgid);
	if (err == -ESRCH || err == -ENOENT) {
		info->kind = TARGET_GONE;
		return 0;
	}
	if (err)
		return err;

	snprintf(path, sizeof(path), "%s/%d/task/%d/stat", procfs, info->tgid, pid);
	err = read_first_line(path, line, sizeof(line));
	if (err == -ENOENT || err == -ESRCH) {
		info->kind = TARGET_GONE;
		return 0;
	}
	if (err)
		return err;
	if (target_parse_stat(line, &st, &info->ppid, &flags))
		return -EINVAL;
	proc_comm(procfs, info->tgid, pid, info->comm, sizeof(info->comm));
	proc_comm(procfs, info->tgid, info->tgid, info->process_comm, sizeof(info->process_comm));

	if (flags & PF_KTHREAD)
		info->kind = TARGET_KERNEL_THREAD;
	else if (info->tgid != pid)
		info->kind = TARGET_THREAD;
	else if ((st == 'Z' || st == 'X') && !any_thread_alive(procfs, pid))
		info->kind = TARGET_ZOMBIE;
	else if (pid == 1 && (target_is_init_system(info->comm) || is_ancestor(procfs, 1, self)))
		info->kind = TARGET_INIT;
	else
		info->kind = TARGET_PROCESS;
	return 0;
}

char *target_describe(const struct target_info *info, char *buf, size_t size)
{
	/* Names come from the target: a terminal must not act on them. */
	char comm[SAN_TEXT_SIZE(sizeof(info->comm))], pcomm[SAN_TEXT_SIZE(sizeof(info->comm))];

	san_text(comm, sizeof(comm), info->comm, sizeof(info->comm));
	san_text(pcomm, sizeof(pcomm), info->process_comm, sizeof(info->process_comm));
	switch (info->kind) {
	case TARGET_PROCESS:
		snprintf(buf, size, "process %d (%s)", info->pid, comm);
		break;
	case TARGET_THREAD:
		snprintf(buf, size, "%d is a thread (%s) of process %d (%s): tracing process %d",
			 info->pid, comm, info->tgid, pcomm, info->tgid);
		break;
	case TARGET_GONE:
		snprintf(buf, size, "no such process: %d", info->pid);
		break;
	case TARGET_ZOMBIE:
		snprintf(buf, size, "process %d (%s) has exited (a zombie its parent %d has not "
			 "reaped): there is nothing left to trace", info->pid, comm, info->ppid);
		break;
	case TARGET_KERNEL_THREAD:
		snprintf(buf, size, "%d (%s) is a kernel thread: pipeprof traces user-space jobs; "
			 "give the PID of the training process", info->pid, comm);
		break;
	case TARGET_INIT:
		snprintf(buf, size, "PID 1 (%s) is this PID namespace's init: every process in it "
			 "descends from it, so -p 1 would count them all as one job's DataLoader "
			 "workers; give the training process's PID (pgrep -f train.py), or watch every "
			 "job with 'pipeprof daemon'", comm);
		break;
	}
	return buf;
}

int target_resolve(const char *procfs, pid_t *pid, pid_t *tid)
{
	struct target_info info;
	char line[512];
	int err;

	err = target_inspect(procfs, *pid, getpid(), &info);
	if (err) {
		fprintf(stderr, "pipeprof: cannot read %s/%d: %s\n", procfs, *pid, strerror(-err));
		return err;
	}
	target_describe(&info, line, sizeof(line));
	switch (info.kind) {
	case TARGET_PROCESS:
		return 0;
	case TARGET_THREAD:
		fprintf(stderr, "pipeprof: %s%s\n", line, *tid ? "" : ", with that thread as the trainer");
		*pid = info.tgid;
		if (!*tid)
			*tid = info.pid;
		return 0;
	case TARGET_GONE:
		fprintf(stderr, "pipeprof: %s\n", line);
		return -ESRCH;
	default:
		fprintf(stderr, "pipeprof: %s\n", line);
		return -EINVAL;
	}
}
