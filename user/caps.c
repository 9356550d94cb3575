// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <linux/capability.h>
#include "caps.h"

#ifndef CAP_PERFMON
#define CAP_PERFMON 38
#endif
#ifndef CAP_BPF
#define CAP_BPF 39
#endif

int caps_effective(uint64_t *effective)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[2] = {};

	if (syscall(SYS_capget, &hdr, data))
		return -errno;
	*effective = (uint64_t)data[1].effective << 32 | data[0].effective;
	return 0;
}

static int has(uint64_t effective, int cap)
{
	return !!(effective & 1ULL << cap);
}

int caps_missing(uint64_t effective, char *buf, size_t size)
{
	/* CAP_SYS_ADMIN stands in for CAP_BPF and CAP_PERFMON (kernels before 5.8 know only it);
	 * uprobes need it whatever else is held since kernel commit ba677dbe77af ("perf: Require
	 * CAP_SYS_ADMIN for uprobes", 6.13 and stable). */
	static const struct {
		int cap, or_cap;
		const char *name, *why;
	} needs[] = {
		{ CAP_BPF, CAP_SYS_ADMIN, "CAP_BPF", "needed to load BPF programs" },
		{ CAP_PERFMON, CAP_SYS_ADMIN, "CAP_PERFMON", "needed to attach to tracepoints" },
		{ CAP_SYS_ADMIN, -1, "CAP_SYS_ADMIN", "uprobes need it: the GPU, step and self-check probes" },
	};
	size_t len = 0;
	int missing = 0;

	if (size)
		buf[0] = '\0';
	for (size_t i = 0; i < sizeof(needs) / sizeof(needs[0]); i++) {
		if (has(effective, needs[i].cap) ||
		    (needs[i].or_cap >= 0 && has(effective, needs[i].or_cap)))
			continue;
		if (len < size)
			len += snprintf(buf + len, size - len, "%s%s (%s)", missing ? ", " : "",
					needs[i].name, needs[i].why);
		missing++;
	}
	return missing;
}

int caps_check(pid_t target)
{
	char missing[512], path[64];
	uint64_t effective;
	int err, fd;

	err = caps_effective(&effective);
	if (err) {
		fprintf(stderr, "pipeprof: cannot read this process's capabilities: %s\n", strerror(-err));
		return err;
	}
	if (caps_missing(effective, missing, sizeof(missing))) {
		fprintf(stderr, "pipeprof: missing %s: run as root, or grant CAP_BPF, CAP_PERFMON, "
			"CAP_SYS_ADMIN and CAP_SYS_PTRACE\n", missing);
		return -EPERM;
	}
	if (target <= 0)
		return 0;
	/* Libraries are opened through the target's root, which needs ptrace access: denied
	 * without CAP_SYS_PTRACE when the target runs as another user or holds capabilities
	 * pipeprof does not. Seen here first, it is one clear line rather than a report that
	 * silently cannot probe the GPU. */
	snprintf(path, sizeof(path), "/proc/%d/root/", target);
	/* open(), not access(): access() checks with the real uid and drops capabilities. */
	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0)
		close(fd);
	else if (errno == EACCES || errno == EPERM) {
		err = -errno;
		fprintf(stderr, "pipeprof: cannot read the files PID %d maps (%s: %s): CAP_SYS_PTRACE "
			"is missing, needed for a target of another user or with capabilities "
			"pipeprof lacks\n", target, path, strerror(-err));
		return err;
	}
	return 0;
}
