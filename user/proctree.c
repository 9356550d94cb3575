// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <ctype.h>
#include <limits.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include "proctree.h"
#include "grow.h"

int proc_parse_stat(const char *line, pid_t *ppid, char *state)
{
	/* comm is free text in parentheses: the last ')' ends it. */
	const char *p = strrchr(line, ')');
	char st;
	int pp;

	if (!p || sscanf(p + 1, " %c %d", &st, &pp) != 2)
		return -EINVAL;
	if (ppid)
		*ppid = pp;
	if (state)
		*state = st;
	return 0;
}

int proc_parse_stat_start(const char *line, pid_t *ppid, unsigned long long *start_ticks)
{
	const char *p = strrchr(line, ')');
	unsigned long long start;
	int pp;

	/* state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt utime stime
	 * cutime cstime priority nice num_threads itrealvalue starttime */
	if (!p || sscanf(p + 1, " %*c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d "
			 "%*d %*d %*d %*d %llu", &pp, &start) != 2)
		return -EINVAL;
	if (ppid)
		*ppid = pp;
	if (start_ticks)
		*start_ticks = start;
	return 0;
}

int proc_read_line(const char *path, char *buf, size_t size)
{
	FILE *f = fopen(path, "re");
	int err = 0;

	if (!f)
		return -errno;
	if (!fgets(buf, size, f))
		err = -EIO;
	fclose(f);
	return err;
}

void proc_comm(const char *procfs, pid_t tgid, pid_t tid, char *buf, size_t size)
{
	char path[PATH_MAX];
	size_t len = 0;
	FILE *f;

	if (!size)
		return;
	snprintf(path, sizeof(path), "%s/%d/task/%d/comm", procfs, tgid, tid);
	/* The kernel prints the name raw and then '\n'; a name may hold a '\n' of its own,
	 * which the outputs escape, so only the last one goes. */
	f = fopen(path, "re");
	if (f) {
		len = fread(buf, 1, size - 1, f);
		fclose(f);
	}
	buf[len] = '\0';
	if (len && buf[len - 1] == '\n')
		buf[len - 1] = '\0';
}

static bool is_pid_name(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!isdigit((unsigned char)*s))
			return false;
	return true;
}

struct pid_ppid {
	pid_t pid, ppid;
};

int proc_descendants(const char *procfs, pid_t root, pid_t *out, pid_t *out_ppid, int max)
{
	struct pid_ppid *all = NULL;
	int nr_all = 0, cap = 0;
	char path[PATH_MAX], line[1024];
	struct dirent *de;
	int n = 0, err = 0;
	DIR *dir;

	dir = opendir(procfs);
	if (!dir)
		return -errno;
	while ((de = readdir(dir))) {
		pid_t ppid;

		if (!is_pid_name(de->d_name))
			continue;
		snprintf(path, sizeof(path), "%s/%s/stat", procfs, de->d_name);
		/* Processes vanish while we walk: skip, do not fail. */
		if (proc_read_line(path, line, sizeof(line)) || proc_parse_stat(line, &ppid, NULL))
			continue;
		if (grow_array(&all, &cap, nr_all, sizeof(*all), 256)) {
			err = -ENOMEM;
			goto cleanup;
		}
		all[nr_all].pid = atoi(de->d_name);
		all[nr_all].ppid = ppid;
		nr_all++;
	}

	/* Breadth-first over the parent links; out doubles as the queue. */
	for (int head = -1; head < n; head++) {
		pid_t parent = head < 0 ? root : out[head];

		for (int i = 0; i < nr_all && n < max; i++)
			if (all[i].ppid == parent && all[i].pid != root) {
				if (out_ppid)
					out_ppid[n] = parent;
				out[n++] = all[i].pid;
			}
	}
	err = n;
cleanup:
	free(all);
	closedir(dir);
	return err;
}

int proc_threads(const char *procfs, pid_t pid, pid_t *out, int max)
{
	struct dirent *de;
	char path[PATH_MAX];
	int n = 0;
	DIR *dir;

	snprintf(path, sizeof(path), "%s/%d/task", procfs, pid);
	dir = opendir(path);
	if (!dir)
		return errno == ENOENT ? -ESRCH : -errno;
	while ((de = readdir(dir)) && n < max)
		if (is_pid_name(de->d_name))
			out[n++] = atoi(de->d_name);
	closedir(dir);
	return n;
}

pid_t proc_ppid(const char *procfs, pid_t pid)
{
	char path[PATH_MAX], line[1024];
	pid_t ppid;

	snprintf(path, sizeof(path), "%s/%d/stat", procfs, pid);
	if (proc_read_line(path, line, sizeof(line)) || proc_parse_stat(line, &ppid, NULL))
		return 0;
	return ppid;
}

int proc_parse_stat_comm(const char *text, size_t len, char *comm, size_t size, char *state)
{
	const char *open = memchr(text, '(', len), *close = NULL;
	size_t n;

	/* The name is raw between the first '(' and the last ')': it may hold either, and '\n'. */
	for (const char *p = text + len; p > text; p--)
		if (p[-1] == ')') {
			close = p - 1;
			break;
		}
	if (!open || !close || close < open || close + 3 > text + len || close[1] != ' ')
		return -EINVAL;
	if (comm && size) {
		n = (size_t)(close - open - 1);
		n = n < size - 1 ? n : size - 1;
		memcpy(comm, open + 1, n);
		comm[n] = '\0';
	}
	if (state)
		*state = close[2];
	return 0;
}

int proc_thread_stat(const char *procfs, pid_t tgid, pid_t tid, char *comm, size_t size,
		     char *state)
{
	char path[PATH_MAX], text[1024];
	size_t len;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%d/task/%d/stat", procfs, tgid, tid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	len = fread(text, 1, sizeof(text), f);
	fclose(f);
	return proc_parse_stat_comm(text, len, comm, size, state);
}

/* Through proc_thread_stat(): a first line alone ends inside a name that holds a newline. */
char proc_thread_state(const char *procfs, pid_t tgid, pid_t tid)
{
	char state;

	return proc_thread_stat(procfs, tgid, tid, NULL, 0, &state) ? 0 : state;
}

unsigned long long proc_thread_exec_ns(const char *procfs, pid_t tgid, pid_t tid)
{
	char path[PATH_MAX], line[128];
	unsigned long long ns;

	snprintf(path, sizeof(path), "%s/%d/task/%d/schedstat", procfs, tgid, tid);
	if (proc_read_line(path, line, sizeof(line)) || sscanf(line, "%llu", &ns) != 1)
		return 0;
	return ns;
}

int proc_parse_syscall(const char *text, long *nr, unsigned long args[6])
{
	/* "running", or "-1 sp pc" outside any system call. */
	if (!strncmp(text, "running", 7) || !strncmp(text, "-1 ", 3))
		return -EAGAIN;
	if (sscanf(text, "%ld %lx %lx %lx %lx %lx %lx", nr, &args[0], &args[1], &args[2], &args[3],
		   &args[4], &args[5]) != 7 || *nr < 0)
		return -EINVAL;
	return 0;
}

int proc_thread_syscall(const char *procfs, pid_t tgid, pid_t tid, long *nr,
			unsigned long args[6])
{
	char path[PATH_MAX], line[256];
	int err;

	snprintf(path, sizeof(path), "%s/%d/task/%d/syscall", procfs, tgid, tid);
	err = proc_read_line(path, line, sizeof(line));
	if (err)
		return err;
	return proc_parse_syscall(line, nr, args);
}

void proc_cmdline(const char *procfs, pid_t pid, char *buf, size_t size)
{
	char path[PATH_MAX];
	size_t len;
	FILE *f;

	buf[0] = 0;
	snprintf(path, sizeof(path), "%s/%d/cmdline", procfs, pid);
	f = fopen(path, "re");
	if (!f)
		return;
	len = fread(buf, 1, size - 1, f);
	fclose(f);
	buf[len] = 0;
	while (len && (unsigned char)buf[len - 1] <= ' ')
		buf[--len] = 0;
	/* One line in reports: argument separators and control characters become spaces. */
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)buf[i] < ' ')
			buf[i] = ' ';
}

int proc_cpu_times(const char *procfs, unsigned long long *busy, unsigned long long *total,
		   int *procs_running)
{
	unsigned long long v[10] = {};
	char path[PATH_MAX], line[512];
	int err = -EINVAL, n;
	FILE *f;

	snprintf(path, sizeof(path), "%s/stat", procfs);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	*procs_running = -1;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "cpu ", 4)) {
			n = sscanf(line + 4, "%llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0],
				   &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9]);
			if (n < 4)
				break;
			*total = 0;
			/* guest and guest_nice are already inside user and nice. */
			for (int i = 0; i < 8 && i < n; i++)
				*total += v[i];
			*busy = *total - v[3] - v[4];
			err = 0;
		} else if (!strncmp(line, "procs_running ", 14)) {
			*procs_running = atoi(line + 14);
		}
	}
	fclose(f);
	return err;
}

void cpu_window_start(struct cpu_window *w, bool ok, unsigned long long busy,
		      unsigned long long total)
{
	*w = (struct cpu_window){ .busy0 = busy, .total0 = total, .ok = ok };
}

void cpu_window_open(struct cpu_window *w, const char *procfs)
{
	unsigned long long busy = 0, total = 0;
	int running;
	bool ok = !proc_cpu_times(procfs, &busy, &total, &running);

	cpu_window_start(w, ok, busy, total);
}

void cpu_window_sample(struct cpu_window *w, int procs_running)
{
	if (procs_running > 0) {
		w->runnable_sum += procs_running - 1;
		w->samples++;
	}
}

void cpu_window_result(const struct cpu_window *w, bool ok, unsigned long long busy,
		       unsigned long long total, double *busy_fraction, double *runnable_avg)
{
	*busy_fraction = w->ok && ok && total > w->total0 && busy >= w->busy0 ?
			 (double)(busy - w->busy0) / (total - w->total0) : -1;
	*runnable_avg = w->samples ? w->runnable_sum / w->samples : -1;
}

int proc_env_rank_text(const char *env, size_t len)
{
	int rank = -1, local = -1;

	for (const char *p = env, *end = env + len; p < end; p += strnlen(p, end - p) + 1) {
		if (!strncmp(p, "RANK=", 5) && p + 5 < end && p[5] >= '0' && p[5] <= '9')
			rank = atoi(p + 5);
		else if (!strncmp(p, "LOCAL_RANK=", 11) && p + 11 < end && p[11] >= '0' && p[11] <= '9')
			local = atoi(p + 11);
	}
	return rank >= 0 ? rank : local;
}

/* The first 64 KB of a process's environment, NUL-terminated; its length, or -1. */
static ssize_t read_environ(const char *procfs, pid_t pid, char *buf, size_t size)
{
	char path[PATH_MAX];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/%d/environ", procfs, (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, size - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	return n;
}

int proc_env_rank(const char *procfs, pid_t pid)
{
	char buf[65536];
	ssize_t n = read_environ(procfs, pid, buf, sizeof(buf));

	return n < 0 ? -1 : proc_env_rank_text(buf, n);
}

int proc_env_value(const char *procfs, pid_t pid, const char *name, char *out, size_t size)
{
	char buf[65536];
	ssize_t n = read_environ(procfs, pid, buf, sizeof(buf));
	size_t len = strlen(name);

	if (n < 0 || !size)
		return -ENOENT;
	for (const char *p = buf, *end = buf + n; p < end; p += strnlen(p, end - p) + 1)
		if (!strncmp(p, name, len) && p[len] == '=') {
			snprintf(out, size, "%s", p + len + 1);
			return 0;
		}
	return -ENOENT;
}
