/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The capabilities pipeprof needs, checked before anything loads so that a user is told which
 * one is missing rather than "Permission denied" from deep inside an attach. */
#ifndef PIPEPROF_CAPS_H
#define PIPEPROF_CAPS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The process's effective set (bit n = capability n), or -errno. */
int caps_effective(uint64_t *effective);

/* Name the capabilities missing from effective, ", "-separated, with what each is for. Returns
 * how many are missing (0: buf is ""). */
int caps_missing(uint64_t effective, char *buf, size_t size);

/* Check up front: the capabilities, then that the target's maps and the files it maps can be
 * read. Prints one line on stderr for what fails. Returns 0, -EPERM or -EACCES. */
int caps_check(pid_t target);

#endif
