/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Shared between discover.bpf.c and userspace: the daemon's exec notifications. */
#ifndef PIPEPROF_DISCOVER_H
#define PIPEPROF_DISCOVER_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define DISCOVER_RINGBUF_BYTES (64 * 1024)

/* One exec anywhere on the machine: a process that may go on to load an ML library. */
struct discover_exec {
	__u32 pid;
	__u32 pad;
};

/* Index into the dropped array map: execs the ring buffer had no room for. */
#define DISCOVER_DROPPED 0

#endif
