/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Finding a cgroup by the path /proc/PID/cgroup gives it. No BPF, no root: unit-tested. */
#ifndef PIPEPROF_CGROUP_H
#define PIPEPROF_CGROUP_H

#include <stddef.h>

#define CGROUP_MOUNTINFO "/proc/self/mountinfo"

/*
 * Look for the cgroup path (absolute, as in /proc/PID/cgroup) under every cgroup and cgroup2
 * file system that mountinfo (a /proc/PID/mountinfo) lists, v1 hierarchies included: a path
 * exists when some hierarchy has it. Returns 1 with the directory found in where, 0 when none
 * has it (where: the directory holding every mount point looked in, "" when no cgroup file
 * system is mounted), or -errno when mountinfo cannot be read.
 */
int cgroup_find(const char *mountinfo, const char *path, char *where, size_t size);

#endif
