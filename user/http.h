/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The daemon's HTTP endpoint, on libmicrohttpd: Prometheus scrapes /metrics, tools fetch one
 * job's report from /api/v1/report?pid=N, supervisors probe /healthz. Read-only: only GET and
 * HEAD are served, request bodies are refused unread, and one polling thread with small
 * per-connection memory, connection counts and an idle timeout keeps a hostile or broken client
 * from growing the daemon or starving the scraper. */
#ifndef PIPEPROF_HTTP_H
#define PIPEPROF_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

/* Defaults the daemon is expected to use. */
#define HTTP_DEFAULT_LISTEN "127.0.0.1:9464"

struct http_handlers {
	/* Each returns a malloc'd body (caller of the callback frees it) and sets *status and
	 * *content_type; NULL body means 500. ctx is passed through. Called from libmicrohttpd's
	 * thread: the daemon's callbacks lock their own state. *status starts at 200 and
	 * *content_type at NULL, which means PROM_CONTENT_TYPE for metrics and application/json
	 * for report. The body is sent as a string: up to its first NUL. */
	char *(*metrics)(void *ctx, int *status, const char **content_type);
	/* pid: the parsed ?pid=N, 1..INT_MAX; the callback answers 404 itself when no such job. */
	char *(*report)(void *ctx, long pid, int *status, const char **content_type);
	void *ctx;
	/* Let libmicrohttpd log its errors (bad requests, accept failures) to stderr. */
	bool verbose;
};

struct http_server;

/*
 * Serve h on listen, "ADDR:PORT" or "[V6ADDR]:PORT" (numeric only, as http_parse_listen());
 * loopback addresses are the expected default. Port 0 takes a free port, see http_port().
 * Requests are answered from a thread of libmicrohttpd's, which has every signal blocked so that
 * the caller's signals still reach the caller's threads. h is copied. Returns 0 or -errno
 * (-EINVAL bad address, -EADDRINUSE, -EACCES, -EADDRNOTAVAIL, ...) with a one-line message in
 * err (size errlen).
 */
int http_start(struct http_server **out, const char *listen, const struct http_handlers *h,
	       char *err, size_t errlen);

/* Stop serving, wait for the thread, close every socket. Safe on NULL. */
void http_stop(struct http_server *s);

/* The port s listens on: the one the kernel chose when started with port 0. */
int http_port(const struct http_server *s);

/*
 * Parse "A.B.C.D:PORT" or "[IPV6]:PORT" into *ss and *len. Numeric addresses only: no
 * resolver (a listening address that depends on DNS or /etc/hosts is a surprise), no IPv6 zone
 * ("%eth0"), no unbracketed IPv6. PORT is 0..65535 in decimal digits only; 0 is allowed and
 * means a port the kernel picks. Pure. Returns 0 or -EINVAL.
 */
int http_parse_listen(const char *listen, struct sockaddr_storage *ss, socklen_t *len);

#endif
