// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <microhttpd.h>
#include "http.h"
#include "prom.h"

/* Per connection, for the request line, headers and response headers: a request that does
 * not fit is answered 414 or 431 by libmicrohttpd instead of growing anything. */
#define HTTP_MEMORY_LIMIT	(32 * 1024)
/* Room for a burst of connects while libmicrohttpd's thread is off the CPU: a connect that
 * finds the backlog full is dropped and retried by the client only a second later. */
#define HTTP_BACKLOG		256

#define JSON_TYPE "application/json"
#define TEXT_TYPE "text/plain; charset=utf-8"

/* A connection as the eviction sees it. */
struct http_conn {
	struct http_conn *prev, *next;
	int fd;
	uint64_t waiting_since_ns;	/* connected, or answered its last request */
	bool busy;		/* a complete request is being answered */
	bool evicted;		/* shut down here; libmicrohttpd has yet to close it */
};

struct http_server {
	struct MHD_Daemon *mhd;
	struct http_handlers h;
	int port;
	int fd;			/* the listening socket, until libmicrohttpd owns it */
	/*
	 * Every connection, the ones waiting for a request in the order they started waiting
	 * (busy ones stay where they were). Only libmicrohttpd's one thread touches these: the
	 * accept policy, the notifications and the handler all run on it.
	 */
	struct http_conn *head, *tail;
	unsigned int nr_live;	/* not evicted */
	unsigned long evictions;
};

__attribute__((format(printf, 4, 5)))
static int fail(char *err, size_t errlen, int ret, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return ret;
}

int http_parse_listen(const char *listen, struct sockaddr_storage *ss, socklen_t *len)
{
	char host[INET6_ADDRSTRLEN];
	const char *start, *end, *p;
	unsigned long port = 0;
	bool v6;

	if (!listen || !ss || !len)
		return -EINVAL;
	if (listen[0] == '[') {
		start = listen + 1;
		end = strchr(start, ']');
		if (!end || end[1] != ':')
			return -EINVAL;
		p = end + 2;
		v6 = true;
	} else {
		/* The first colon: an unbracketed IPv6 address leaves no valid IPv4 before it. */
		start = listen;
		end = strchr(start, ':');
		if (!end)
			return -EINVAL;
		p = end + 1;
		v6 = false;
	}
	if (end == start || end - start >= (long)sizeof(host))
		return -EINVAL;
	memcpy(host, start, end - start);
	host[end - start] = '\0';

	/* Digits only: strtoul would take a sign, blanks and "0x". */
	if (!*p)
		return -EINVAL;
	for (; *p; p++) {
		if (*p < '0' || *p > '9')
			return -EINVAL;
		port = port * 10 + (*p - '0');
		if (port > 65535)
			return -EINVAL;
	}

	memset(ss, 0, sizeof(*ss));
	if (v6) {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;

		if (inet_pton(AF_INET6, host, &sin6->sin6_addr) != 1)
			return -EINVAL;
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons(port);
		*len = sizeof(*sin6);
	} else {
		struct sockaddr_in *sin = (struct sockaddr_in *)ss;

		/* inet_pton, unlike inet_aton, wants all four parts: "127.1" is refused. */
		if (inet_pton(AF_INET, host, &sin->sin_addr) != 1)
			return -EINVAL;
		sin->sin_family = AF_INET;
		sin->sin_port = htons(port);
		*len = sizeof(*sin);
	}
	return 0;
}

static enum MHD_Result queue(struct MHD_Connection *conn, unsigned int status, const char *type,
			     struct MHD_Response *r)
{
	enum MHD_Result ret = MHD_NO;

	if (!r)
		return MHD_NO;
	if (MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type) != MHD_YES)
		goto cleanup;
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED &&
	    MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD") != MHD_YES)
		goto cleanup;
	ret = MHD_queue_response(conn, status, r);
cleanup:
	MHD_destroy_response(r);
	return ret;
}

/* A constant body. */
static enum MHD_Result reply(struct MHD_Connection *conn, unsigned int status, const char *type,
			     const char *text)
{
	return queue(conn, status, type,
		     MHD_create_response_from_buffer(strlen(text), (void *)text,
						     MHD_RESPMEM_PERSISTENT));
}

/* A callback's body, freed here whatever happens. */
static enum MHD_Result reply_owned(struct MHD_Connection *conn, int status, const char *type,
				   char *body, bool json)
{
	struct MHD_Response *r;

	if (!body)
		return json ? reply(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, JSON_TYPE,
				    "{\"error\":\"internal error\"}\n")
			    : reply(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, TEXT_TYPE,
				    "internal error\n");
	/* libmicrohttpd would refuse to queue anything else, and the client would get a reset. */
	if (status < 100 || status > 599)
		status = MHD_HTTP_INTERNAL_SERVER_ERROR;
	r = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(body);
		return MHD_NO;
	}
	return queue(conn, status, type, r);
}

static enum MHD_Result count_key(void *cls, enum MHD_ValueKind kind, const char *key,
				 const char *value)
{
	if (!strcmp(key, "pid"))
		(*(int *)cls)++;
	return MHD_YES;
}

/* One ?pid= that is a positive decimal integer a pid_t can hold, and nothing else. */
static int parse_pid(struct MHD_Connection *conn, long *pid)
{
	const char *s = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "pid");
	int n = 0;
	char *end;
	long v;

	MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, count_key, &n);
	/* Two pids would make the one reported a matter of parser detail. */
	if (n != 1 || !s || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v < 1 || v > INT_MAX)
		return -EINVAL;
	*pid = v;
	return 0;
}

static bool has_body(struct MHD_Connection *conn)
{
	const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
						     MHD_HTTP_HEADER_CONTENT_LENGTH);

	if (MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING))
		return true;
	return cl && strspn(cl, "0") != strlen(cl);
}

static struct http_conn *conn_of(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *info =
		MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	return info ? info->socket_context : NULL;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url,
			      const char *method, const char *version, const char *upload_data,
			      size_t *upload_data_size, void **con_cls)
{
	struct http_server *s = cls;
	const char *type = NULL;
	int status = MHD_HTTP_OK;
	char *body;
	long pid;

	/*
	 * The first call carries the headers only. A request with a body is refused right then,
	 * so the body is never read, let alone buffered: libmicrohttpd closes the connection
	 * after the response instead. Anything else is answered on the second call, once the
	 * request is complete, as answering early would also cost the connection's keep-alive.
	 */
	if (!*con_cls) {
		struct http_conn *c = conn_of(conn);

		*con_cls = s;
		/* A complete request: not to be evicted while it is answered. */
		if (c)
			c->busy = true;
		if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD))
			return reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED, TEXT_TYPE,
				     "method not allowed\n");
		if (has_body(conn))
			return reply(conn, MHD_HTTP_CONTENT_TOO_LARGE, TEXT_TYPE,
				     "request bodies are not accepted\n");
		return MHD_YES;
	}
	/* Not expected after a refusal; should body data come anyway, it is dropped. */
	if (*upload_data_size) {
		*upload_data_size = 0;
		return MHD_YES;
	}

	if (!strcmp(url, "/healthz"))
		return reply(conn, MHD_HTTP_OK, TEXT_TYPE, "ok\n");

	if (!strcmp(url, "/metrics")) {
		body = s->h.metrics(s->h.ctx, &status, &type);
		return reply_owned(conn, status, type ? type : PROM_CONTENT_TYPE, body, false);
	}

	if (!strcmp(url, "/api/v1/report")) {
		if (parse_pid(conn, &pid))
			return reply(conn, MHD_HTTP_BAD_REQUEST, JSON_TYPE,
				     "{\"error\":\"pid must be one positive decimal integer\"}\n");
		body = s->h.report(s->h.ctx, pid, &status, &type);
		return reply_owned(conn, status, type ? type : JSON_TYPE, body, true);
	}

	return reply(conn, MHD_HTTP_NOT_FOUND, TEXT_TYPE, "not found\n");
}

static void log_mhd(void *cls, const char *fmt, va_list ap)
{
	fputs("pipeprof: http: ", stderr);
	vfprintf(stderr, fmt, ap);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static void conn_unlink(struct http_server *s, struct http_conn *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else
		s->head = c->next;
	if (c->next)
		c->next->prev = c->prev;
	else
		s->tail = c->prev;
	c->prev = c->next = NULL;
}

static void conn_append(struct http_server *s, struct http_conn *c)
{
	c->prev = s->tail;
	c->next = NULL;
	if (s->tail)
		s->tail->next = c;
	else
		s->head = c;
	s->tail = c;
}

/* The connection a newcomer displaces, or NULL: see http.h. */
static struct http_conn *eviction_victim(struct http_server *s, uint64_t now)
{
	struct http_conn *c;

	if (s->nr_live < HTTP_EVICT_AT)
		return NULL;
	for (c = s->head; c && (c->busy || c->evicted); c = c->next)
		;
	if (!c)
		return NULL;
	/* The longest waiting: the others have waited less. */
	if (now - c->waiting_since_ns >= HTTP_EVICT_MIN_WAIT_MS * 1000000ULL ||
	    s->nr_live >= HTTP_EVICT_ANY_AT)
		return c;
	return NULL;
}

/*
 * libmicrohttpd's accept policy, run on its thread for each new connection: make room first.
 * shutdown() rather than close(): the socket stays libmicrohttpd's, which sees the end of the
 * stream on its next poll and closes the connection the usual way.
 */
static enum MHD_Result on_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
	struct http_server *s = cls;
	struct http_conn *victim = eviction_victim(s, now_ns());

	if (victim) {
		shutdown(victim->fd, SHUT_RDWR);
		victim->evicted = true;
		s->nr_live--;
		/* Read by other threads (the tests): the only field that is. */
		__atomic_fetch_add(&s->evictions, 1, __ATOMIC_RELAXED);
	}
	return MHD_YES;
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
			  enum MHD_ConnectionNotificationCode toe)
{
	struct http_server *s = cls;
	const union MHD_ConnectionInfo *info;
	struct http_conn *c;

	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		info = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
		/* Without a record it cannot be evicted, only timed out: no worse than before. */
		c = info ? calloc(1, sizeof(*c)) : NULL;
		*socket_context = c;
		if (!c)
			return;
		c->fd = info->connect_fd;
		c->waiting_since_ns = now_ns();
		conn_append(s, c);
		s->nr_live++;
		return;
	}
	c = *socket_context;
	if (!c)
		return;
	conn_unlink(s, c);
	if (!c->evicted)
		s->nr_live--;
	free(c);
	*socket_context = NULL;
}

/* A request answered (or abandoned): the connection waits for its next one, from now. */
static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct http_server *s = cls;
	struct http_conn *c = conn_of(conn);

	if (!c || c->evicted)
		return;
	c->busy = false;
	c->waiting_since_ns = now_ns();
	conn_unlink(s, c);
	conn_append(s, c);
}

int http_listen_is_loopback(const char *listen)
{
	const struct in6_addr *a6;
	struct sockaddr_storage ss;
	socklen_t len;

	if (http_parse_listen(listen, &ss, &len))
		return -EINVAL;
	if (ss.ss_family == AF_INET)
		return (ntohl(((struct sockaddr_in *)&ss)->sin_addr.s_addr) >> 24) == 127;
	a6 = &((struct sockaddr_in6 *)&ss)->sin6_addr;
	/* ::ffff:127.0.0.1 is loopback too; [::] is not, whatever bindv6only says. */
	return IN6_IS_ADDR_LOOPBACK(a6) || (IN6_IS_ADDR_V4MAPPED(a6) && a6->s6_addr[12] == 127);
}

int http_listen(struct http_server **out, const char *addr, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	struct http_server *s = NULL;
	socklen_t len;
	int fd = -1, one = 1, ret;

	if (out)
		*out = NULL;
	if (!out)
		return fail(err, errlen, -EINVAL, "http: nowhere to put the server");
	ret = http_parse_listen(addr, &ss, &len);
	if (ret)
		return fail(err, errlen, ret,
			    "bad listen address \"%s\": expected ADDR:PORT or [IPV6]:PORT, numeric, port 0-65535",
			    addr ? addr : "");

	/*
	 * The socket is made here rather than by libmicrohttpd so that a failure has its errno
	 * (in use, not permitted, no such address) for the message. [::] follows the system's
	 * net.ipv6.bindv6only, as any other server's would.
	 */
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		ret = fail(err, errlen, -errno, "cannot listen on %s: %s", addr, strerror(errno));
		goto cleanup;
	}
	/* A restarted daemon must not wait out its predecessor's connections in TIME_WAIT. */
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(fd, (struct sockaddr *)&ss, len) || listen(fd, HTTP_BACKLOG)) {
		ret = fail(err, errlen, -errno, "cannot listen on %s: %s", addr, strerror(errno));
		goto cleanup;
	}
	len = sizeof(ss);
	if (getsockname(fd, (struct sockaddr *)&ss, &len)) {
		ret = fail(err, errlen, -errno, "cannot listen on %s: %s", addr, strerror(errno));
		goto cleanup;
	}

	s = calloc(1, sizeof(*s));
	if (!s) {
		ret = fail(err, errlen, -ENOMEM, "http: out of memory");
		goto cleanup;
	}
	s->fd = fd;
	s->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
						 : ((struct sockaddr_in *)&ss)->sin_port);
	*out = s;
	return 0;

cleanup:
	if (fd >= 0)
		close(fd);
	return ret;
}

int http_serve(struct http_server *s, const struct http_handlers *h, char *err, size_t errlen)
{
	unsigned int flags = MHD_USE_AUTO_INTERNAL_THREAD;
	struct stat before, now;
	sigset_t all, old;
	int ret;

	if (!s || s->mhd || s->fd < 0 || !h || !h->metrics || !h->report)
		return fail(err, errlen, -EINVAL, "http: no handlers");
	s->h = *h;
	if (fstat(s->fd, &before))
		return fail(err, errlen, -errno, "http: %s", strerror(errno));
	/* Without the flag libmicrohttpd says nothing; with it, it says it through log_mhd. */
	if (h->verbose)
		flags |= MHD_USE_ERROR_LOG;

	/*
	 * Its thread inherits this mask: with every signal blocked there, a SIGTERM meant for the
	 * daemon is delivered to a thread that waits for it, not run on the HTTP thread while the
	 * main loop sleeps on.
	 */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	errno = 0;
	s->mhd = MHD_start_daemon(flags, 0, on_accept, s, handle, s,
				  MHD_OPTION_EXTERNAL_LOGGER, log_mhd, NULL,
				  MHD_OPTION_LISTEN_SOCKET, (MHD_socket)s->fd,
				  MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
				  MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
				  MHD_OPTION_CONNECTION_LIMIT, (unsigned int)HTTP_CONNECTION_LIMIT,
				  MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned int)HTTP_PER_IP_LIMIT,
				  MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)HTTP_TIMEOUT_S,
				  MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HTTP_MEMORY_LIMIT,
				  MHD_OPTION_STRICT_FOR_CLIENT, (int)1,
				  MHD_OPTION_END);
	ret = errno ? -errno : -EIO;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!s->mhd) {
		/* Whether libmicrohttpd closed the socket it was given depends on where it
		 * failed: keep it only if this fd is still that socket. */
		if (fstat(s->fd, &now) || now.st_ino != before.st_ino || now.st_dev != before.st_dev)
			s->fd = -1;
		return fail(err, errlen, ret,
			    "cannot serve HTTP on port %d: libmicrohttpd failed to start (%s)",
			    s->port, strerror(-ret));
	}
	/* libmicrohttpd owns the socket now and closes it in MHD_stop_daemon(). */
	s->fd = -1;
	return 0;
}

int http_start(struct http_server **out, const char *addr, const struct http_handlers *h,
	       char *err, size_t errlen)
{
	int ret;

	if (out)
		*out = NULL;
	if (!out || !h || !h->metrics || !h->report)
		return fail(err, errlen, -EINVAL, "http: no handlers");
	ret = http_listen(out, addr, err, errlen);
	if (ret)
		return ret;
	ret = http_serve(*out, h, err, errlen);
	if (ret) {
		http_stop(*out);
		*out = NULL;
	}
	return ret;
}

void http_stop(struct http_server *s)
{
	if (!s)
		return;
	if (s->mhd)
		MHD_stop_daemon(s->mhd);
	if (s->fd >= 0)
		close(s->fd);
	/* libmicrohttpd said every connection closed; anything left was never its. */
	while (s->head) {
		struct http_conn *c = s->head;

		conn_unlink(s, c);
		free(c);
	}
	free(s);
}

int http_port(const struct http_server *s)
{
	return s ? s->port : -EINVAL;
}

unsigned long http_evictions(const struct http_server *s)
{
	return s ? __atomic_load_n(&s->evictions, __ATOMIC_RELAXED) : 0;
}
