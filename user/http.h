/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The daemon's HTTP endpoint, on libmicrohttpd: Prometheus scrapes /metrics, tools fetch one
 * job's report from /api/v1/report?pid=N, supervisors probe /healthz. Read-only: only GET and
 * HEAD are served, request bodies are refused unread, and one polling thread with small
 * per-connection memory, connection counts, a short timeout and the eviction below keeps a
 * hostile or broken client from growing the daemon or starving the scraper. */
#ifndef PIPEPROF_HTTP_H
#define PIPEPROF_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

/* Defaults the daemon is expected to use. */
#define HTTP_DEFAULT_LISTEN "127.0.0.1:9464"

/*
 * Connections. All share libmicrohttpd's one polling thread (epoll), so one that says nothing
 * costs a socket and a little memory, not a thread. Idle ones must not lock a scraper out, and
 * on loopback the scraper and any local user share one address, so per-address limits alone
 * cannot tell them apart; what tells them apart is that a scraper sends its request at once:
 * - A connection has HTTP_TIMEOUT_S to send a request, and as long between requests.
 * - Once HTTP_EVICT_AT connections are open, each new one shuts down the connection that has
 *   waited longest for a request (since it connected or was last answered), provided that is
 *   HTTP_EVICT_MIN_WAIT_MS or more; from HTTP_EVICT_ANY_AT, whatever its wait. A connection
 *   whose complete request is being answered is never chosen. The wait keeps clients that
 *   reconnect at once from evicting each other in a loop; the newcomer, having waited least,
 *   goes last, so its request, sent at once, is read first.
 * - Per address, HTTP_PER_IP_LIMIT, so that one remote host cannot take every slot; past the
 *   total, HTTP_CONNECTION_LIMIT, new connections wait in the listen backlog.
 */
#define HTTP_TIMEOUT_S		3
#define HTTP_EVICT_AT		64
#define HTTP_EVICT_ANY_AT	96
#define HTTP_EVICT_MIN_WAIT_MS	1000
#define HTTP_PER_IP_LIMIT	120
#define HTTP_CONNECTION_LIMIT	128

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
 * Listen on listen ("ADDR:PORT" or "[V6ADDR]:PORT", as http_parse_listen()), answering nothing
 * yet: clients wait in the backlog until http_serve(). Binding first finds a bad or busy
 * address before the caller does anything slow. Returns 0 or -errno (-EINVAL bad address,
 * -EADDRINUSE, -EACCES, -EADDRNOTAVAIL, ...) with a one-line message in err (size errlen).
 */
int http_listen(struct http_server **out, const char *listen, char *err, size_t errlen);

/*
 * Answer with h on a server from http_listen(), from a thread of libmicrohttpd's that has every
 * signal blocked. h is copied. Returns 0 or -errno with a one-line message in err; s is then
 * still for http_stop() to free.
 */
int http_serve(struct http_server *s, const struct http_handlers *h, char *err, size_t errlen);

/*
 * http_listen() and http_serve() in one; loopback addresses are the expected default. Port 0
 * takes a free port, see http_port(). Returns 0 or -errno with a one-line message in err.
 */
int http_start(struct http_server **out, const char *listen, const struct http_handlers *h,
	       char *err, size_t errlen);

/* Stop serving, wait for the thread, close every socket. Safe on NULL. */
void http_stop(struct http_server *s);

/* The port s listens on: the one the kernel chose when started with port 0. */
int http_port(const struct http_server *s);

/* Connections shut down to make room for new ones so far (any thread). */
unsigned long http_evictions(const struct http_server *s);

/* 1 when listen is a loopback address (127.0.0.0/8, ::1, ::ffff:127.x.x.x), 0 when not, -EINVAL
 * when it does not parse. Pure. */
int http_listen_is_loopback(const char *listen);

/*
 * Parse "A.B.C.D:PORT" or "[IPV6]:PORT" into *ss and *len. Numeric addresses only: no
 * resolver (a listening address that depends on DNS or /etc/hosts is a surprise), no IPv6 zone
 * ("%eth0"), no unbracketed IPv6. PORT is 0..65535 in decimal digits only; 0 is allowed and
 * means a port the kernel picks. Pure. Returns 0 or -EINVAL.
 */
int http_parse_listen(const char *listen, struct sockaddr_storage *ss, socklen_t *len);

#endif
