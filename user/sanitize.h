/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Names that come from a traced process (comm, thread names, cmdline, library paths) are
 * whatever bytes its owner chose: any local user can prctl(PR_SET_NAME) an ESC sequence or
 * bytes that are not UTF-8. Nothing of theirs may leave pipeprof raw:
 *
 *  - text for a terminal (reports, histograms, logs): san_text() shows control characters,
 *    bidirectional overrides and bytes that are not UTF-8 as \xNN escapes, and '\' as "\\",
 *    as systemd does, so the text stays one inert line and can be read back unambiguously;
 *  - JSON and Prometheus must be valid UTF-8: san_utf8_repair() replaces each ill-formed
 *    sequence with U+FFFD, one per maximal subpart as Unicode recommends (and as Python's
 *    bytes.decode("utf-8", "replace") does), leaving well-formed text exactly as it was.
 *
 * Pure: no allocation except in san_utf8_dup(), no locale.
 */
#ifndef PIPEPROF_SANITIZE_H
#define PIPEPROF_SANITIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* U+FFFD REPLACEMENT CHARACTER, UTF-8 encoded. */
#define SAN_REPLACEMENT "\xef\xbf\xbd"

/* san_text() turns an input byte into at most 4 ("\xNN"): a buffer this big never truncates. */
#define SAN_TEXT_SIZE(in_bytes) ((in_bytes) * 4 + 1)

/* Decodes the character at s (len bytes available). Returns its length (1 to 4) and sets *cp
 * when it is well-formed; otherwise returns minus the length of the maximal ill-formed subpart
 * (1 to 3 bytes), which is to be replaced as one. len must be at least 1. */
int san_utf8_next(const char *s, size_t len, uint32_t *cp);

bool san_utf8_valid(const char *s, size_t len);

/* Copies len bytes of s to dst, each maximal ill-formed subpart replaced by U+FFFD, and ends
 * dst with a NUL. dst needs room for 3 * len + 1 bytes. Returns the length written. */
size_t san_utf8_repair(char *dst, const char *s, size_t len);

/* A repaired copy of the string s, from malloc(); NULL when out of memory. */
char *san_utf8_dup(const char *s);

/* Writes the string s repaired; returns 0 or -EIO. */
int san_fputs_utf8(FILE *out, const char *s);

/* C0 controls, DEL and C1 controls: what a terminal may act on rather than show. */
bool san_is_control(uint32_t cp);

/*
 * The terminal-safe form of s: at most max bytes of it are read (a NUL ends it sooner, so a
 * comm[16] that lacks one is safe), into buf of size bytes, always NUL-terminated. Control
 * characters, bidirectional formatting and line separators and bytes that are not UTF-8 become
 * "\xNN" per byte, '\' becomes "\\"; printable UTF-8 is kept. When buf is short the text ends
 * before a character or escape that does not fit, never inside one. Returns buf.
 */
const char *san_text(char *buf, size_t size, const char *s, size_t max);

#endif
