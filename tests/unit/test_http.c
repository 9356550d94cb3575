// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include "http.h"
#include "prom.h"
#include "unit.h"

/* ---- http_parse_listen ---- */

static bool parses(const char *listen, int family, const char *addr, int port)
{
	struct sockaddr_storage ss;
	char buf[INET6_ADDRSTRLEN] = "";
	socklen_t len = 0;
	int got_port;

	if (!CHECK_MSG(http_parse_listen(listen, &ss, &len) == 0, "\"%s\" refused", listen))
		return false;
	if (family == AF_INET) {
		const struct sockaddr_in *sin = (const struct sockaddr_in *)&ss;

		inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof(buf));
		got_port = ntohs(sin->sin_port);
		CHECK_EQ_INT(len, sizeof(*sin));
	} else {
		const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)&ss;

		inet_ntop(AF_INET6, &sin6->sin6_addr, buf, sizeof(buf));
		got_port = ntohs(sin6->sin6_port);
		CHECK_EQ_INT(len, sizeof(*sin6));
	}
	CHECK_EQ_INT(ss.ss_family, family);
	CHECK_STR(buf, addr);
	return CHECK_EQ_INT(got_port, port);
}

static bool refuses(const char *listen)
{
	struct sockaddr_storage ss;
	socklen_t len;

	return CHECK_MSG(http_parse_listen(listen, &ss, &len) == -EINVAL, "\"%s\" accepted",
			 listen ? listen : "(null)");
}

TEST(test_parse_listen)
{
	parses("127.0.0.1:9464", AF_INET, "127.0.0.1", 9464);
	parses("[::1]:9464", AF_INET6, "::1", 9464);
	parses("0.0.0.0:1", AF_INET, "0.0.0.0", 1);
	parses("[::]:65535", AF_INET6, "::", 65535);
	parses("[::ffff:127.0.0.1]:80", AF_INET6, "::ffff:127.0.0.1", 80);
	parses("10.1.2.3:09464", AF_INET, "10.1.2.3", 9464);
	/* Port 0 is allowed: the kernel picks one, and http_port() says which. */
	parses("127.0.0.1:0", AF_INET, "127.0.0.1", 0);

	refuses(NULL);
	refuses("");
	refuses("127.0.0.1");		/* missing port */
	refuses("127.0.0.1:");
	refuses(":9464");		/* missing address */
	refuses("[]:9464");
	refuses("127.0.0.1:70000");
	refuses("127.0.0.1:65536");
	refuses("127.0.0.1:99999999999999999999");
	refuses("127.0.0.1:-1");
	refuses("127.0.0.1:+80");
	refuses("127.0.0.1: 80");
	refuses("127.0.0.1:80 ");
	refuses("127.0.0.1:0x50");
	refuses("127.0.0.1:80:80");
	refuses("127.1:80");		/* inet_aton's shorthand */
	refuses("256.0.0.1:80");
	refuses("localhost:9464");	/* numeric only */
	refuses("::1:9464");		/* IPv6 needs brackets */
	refuses("[::1]9464");
	refuses("[::1]:");
	refuses("[::1:9464");
	refuses("[127.0.0.1]:80");
	refuses("[fe80::1%lo]:80");	/* no zones */
	refuses("garbage");
	refuses("[[::1]]:80");
	refuses("1111:2222:3333:4444:5555:6666:7777:8888:9999:1");
}

TEST(test_loopback)
{
	CHECK_EQ_INT(http_listen_is_loopback("127.0.0.1:9464"), 1);
	CHECK_EQ_INT(http_listen_is_loopback("127.255.0.9:1"), 1);
	CHECK_EQ_INT(http_listen_is_loopback("[::1]:9464"), 1);
	CHECK_EQ_INT(http_listen_is_loopback("[::ffff:127.0.0.1]:9464"), 1);
	CHECK_EQ_INT(http_listen_is_loopback("0.0.0.0:9464"), 0);
	CHECK_EQ_INT(http_listen_is_loopback("10.1.2.3:9464"), 0);
	CHECK_EQ_INT(http_listen_is_loopback("128.0.0.1:9464"), 0);
	CHECK_EQ_INT(http_listen_is_loopback("[::]:9464"), 0);
	CHECK_EQ_INT(http_listen_is_loopback("[::ffff:10.0.0.1]:9464"), 0);
	CHECK_EQ_INT(http_listen_is_loopback("garbage"), -EINVAL);
}

/* ---- a live server ---- */

struct stub {
	pthread_mutex_t lock;
	long last_pid;
	int metrics_calls;
	int report_calls;
	bool metrics_fail;		/* return NULL: 500 */
	bool metrics_no_type;		/* leave the content type to the server */
};

static struct stub stub = { .lock = PTHREAD_MUTEX_INITIALIZER };

#define STUB_METRICS "# HELP pipeprof_up Up.\n# TYPE pipeprof_up gauge\npipeprof_up 1\n"

static char *stub_metrics(void *ctx, int *status, const char **content_type)
{
	struct stub *st = ctx;
	bool fail_it, no_type;

	pthread_mutex_lock(&st->lock);
	st->metrics_calls++;
	fail_it = st->metrics_fail;
	no_type = st->metrics_no_type;
	pthread_mutex_unlock(&st->lock);
	if (fail_it)
		return NULL;
	*status = 200;
	if (!no_type)
		*content_type = PROM_CONTENT_TYPE;
	return strdup(STUB_METRICS);
}

static char *stub_report(void *ctx, long pid, int *status, const char **content_type)
{
	struct stub *st = ctx;
	char *body = NULL;

	pthread_mutex_lock(&st->lock);
	st->report_calls++;
	st->last_pid = pid;
	pthread_mutex_unlock(&st->lock);
	if (pid != 42) {
		*status = 404;
		return strdup("{\"error\":\"no such job\"}\n");
	}
	/* No content type: the server's default for reports is JSON. */
	if (asprintf(&body, "{\"pid\":%ld}\n", pid) < 0)
		return NULL;
	return body;
}

static long stub_last_pid(int *calls)
{
	long pid;

	pthread_mutex_lock(&stub.lock);
	pid = stub.last_pid;
	*calls = stub.report_calls;
	stub.last_pid = 0;
	pthread_mutex_unlock(&stub.lock);
	return pid;
}

static const struct http_handlers handlers = {
	.metrics = stub_metrics,
	.report = stub_report,
	.ctx = &stub,
};

static struct http_server *srv;
static int port;

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* The server's fd count once earlier clients' connections are all closed: unchanged for
 * 200 ms (closing trails each client's EOF on the server thread). */
static int stable_fds(void)
{
	int n = count_fds(), same = 0;

	for (int i = 0; i < 300 && same < 20; i++) {
		int m;

		usleep(10 * 1000);
		m = count_fds();
		same = m == n ? same + 1 : 0;
		n = m;
	}
	return n;
}

/* Closing is the server thread's business and trails the client's EOF: wait for it. */
static int settle_fds(int want)
{
	int n = count_fds();

	for (int i = 0; i < 200 && n != want; i++) {
		usleep(10 * 1000);
		n = count_fds();
	}
	return n;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int dial(int family, int to_port)
{
	struct sockaddr_storage ss = {};
	struct timeval tv = { .tv_sec = 5 };
	socklen_t len;
	int fd;

	if (family == AF_INET6) {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;

		sin6->sin6_family = AF_INET6;
		sin6->sin6_addr = in6addr_loopback;
		sin6->sin6_port = htons(to_port);
		len = sizeof(*sin6);
	} else {
		struct sockaddr_in *sin = (struct sockaddr_in *)&ss;

		sin->sin_family = AF_INET;
		sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		sin->sin_port = htons(to_port);
		len = sizeof(*sin);
	}
	fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* A hung server fails the test instead of hanging it. */
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&ss, len)) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
}

struct reply {
	int status;		/* 0: no status line came back */
	char buf[16384];	/* what came back, NUL-terminated */
	size_t len;
	const char *body;	/* in buf, after the blank line; NULL if none came */
};

/* Send all of req (as far as the server takes it), then read until EOF. */
static void exchange(int fd, const char *req, size_t req_len, struct reply *r)
{
	size_t off = 0;
	ssize_t n;

	memset(r, 0, sizeof(*r));
	while (off < req_len) {
		/* A server that has answered may close (and reset) before taking it all. */
		n = send(fd, req + off, req_len - off, MSG_NOSIGNAL);
		if (n <= 0)
			break;
		off += n;
	}
	/* Response bytes that arrived before a reset are still read. */
	while (r->len < sizeof(r->buf) - 1 &&
	       (n = recv(fd, r->buf + r->len, sizeof(r->buf) - 1 - r->len, 0)) > 0)
		r->len += n;
	r->buf[r->len] = '\0';
	if (sscanf(r->buf, "HTTP/1.%*1[01] %3d ", &r->status) != 1)
		r->status = 0;
	r->body = strstr(r->buf, "\r\n\r\n");
	if (r->body)
		r->body += 4;
}

static void request_on(int family, int to_port, const char *req, size_t req_len,
		       struct reply *r)
{
	int fd = dial(family, to_port);

	if (fd < 0) {
		memset(r, 0, sizeof(*r));
		CHECK_MSG(false, "connect to port %d: %s", to_port, strerror(-fd));
		return;
	}
	exchange(fd, req, req_len, r);
	close(fd);
}

static void request(const char *req, struct reply *r)
{
	request_on(AF_INET, port, req, strlen(req), r);
}

static int get(const char *target, struct reply *r)
{
	char req[1024];

	snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
		 target);
	request(req, r);
	return r->status;
}

/* A header's value, or NULL. */
static const char *header(const struct reply *r, const char *name, char *val, size_t size)
{
	size_t nlen = strlen(name);
	const char *p = strstr(r->buf, "\r\n");

	while (p && p + 2 < (r->body ? r->body : r->buf + r->len)) {
		p += 2;
		if (!strncasecmp(p, name, nlen) && p[nlen] == ':') {
			const char *v = p + nlen + 1, *end = strstr(v, "\r\n");

			v += strspn(v, " \t");
			snprintf(val, size, "%.*s", end ? (int)(end - v) : (int)strlen(v), v);
			return val;
		}
		p = strstr(p, "\r\n");
	}
	return NULL;
}

TEST(test_start_errors)
{
	struct http_server *s = (struct http_server *)&s;
	char err[256] = "";
	int blocker, ret;
	char listen_on[64];
	struct sockaddr_in sin = { .sin_family = AF_INET };
	socklen_t len = sizeof(sin);

	ret = http_start(&s, "localhost:9464", &handlers, err, sizeof(err));
	CHECK_EQ_INT(ret, -EINVAL);
	CHECK(s == NULL);
	CHECK_MSG(strstr(err, "localhost:9464") && !strchr(err, '\n'), "message: %s", err);

	ret = http_start(&s, "127.0.0.1:1", NULL, err, sizeof(err));
	CHECK_EQ_INT(ret, -EINVAL);

	/* A port someone else listens on. */
	blocker = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (!CHECK(blocker >= 0 && !bind(blocker, (struct sockaddr *)&sin, sizeof(sin)) &&
		   !listen(blocker, 1) && !getsockname(blocker, (struct sockaddr *)&sin, &len))) {
		close(blocker);
		return;
	}
	snprintf(listen_on, sizeof(listen_on), "127.0.0.1:%d", ntohs(sin.sin_port));
	err[0] = '\0';
	ret = http_start(&s, listen_on, &handlers, err, sizeof(err));
	CHECK_EQ_INT(ret, -EADDRINUSE);
	CHECK(s == NULL);
	CHECK_MSG(strstr(err, listen_on) && strstr(err, "in use"), "message: %s", err);
	close(blocker);

	/* An address this machine does not have. */
	ret = http_start(&s, "192.0.2.1:9464", &handlers, err, sizeof(err));
	CHECK_EQ_INT(ret, -EADDRNOTAVAIL);

	/* No room for the message is not a crash. */
	ret = http_start(&s, "nonsense", &handlers, NULL, 0);
	CHECK_EQ_INT(ret, -EINVAL);
	http_stop(NULL);
}

/* Still open: nothing to read and no end of stream. */
static bool still_open(int fd)
{
	char c;

	return recv(fd, &c, 1, MSG_DONTWAIT) < 0 && errno == EAGAIN;
}

/* Closed by the server: the end of the stream (or a reset) within timeout_ms. */
static bool closed_within(int fd, int timeout_ms)
{
	for (int i = 0; i < timeout_ms / 10; i++) {
		char c;
		ssize_t n = recv(fd, &c, 1, MSG_DONTWAIT);

		if (n == 0 || (n < 0 && errno != EAGAIN))
			return true;
		usleep(10 * 1000);
	}
	return false;
}

static void close_all(int *fds, int n)
{
	for (int i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

TEST(test_listen_then_serve)
{
	static const char req[] = "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
	struct http_server *s, *other;
	char err[256], listen_on[64];
	struct reply r;
	int fd;

	if (!CHECK_MSG(http_listen(&s, "127.0.0.1:0", err, sizeof(err)) == 0, "%s", err))
		return;
	/* Bound: the port is taken, and a client may connect, but waits for an answer. */
	snprintf(listen_on, sizeof(listen_on), "127.0.0.1:%d", http_port(s));
	CHECK_EQ_INT(http_listen(&other, listen_on, err, sizeof(err)), -EADDRINUSE);
	CHECK_MSG(strstr(err, listen_on) && strstr(err, "in use") && !strchr(err, '\n'),
		  "message: %s", err);
	fd = dial(AF_INET, http_port(s));
	if (CHECK(fd >= 0)) {
		CHECK(send(fd, req, strlen(req), MSG_NOSIGNAL) == (ssize_t)strlen(req));
		usleep(100 * 1000);
		CHECK(still_open(fd));
		CHECK_MSG(http_serve(s, &handlers, err, sizeof(err)) == 0, "%s", err);
		/* Served once http_serve() starts: the request waited in the backlog. */
		exchange(fd, "", 0, &r);
		CHECK_EQ_INT(r.status, 200);
		close(fd);
	}
	http_stop(s);

	/* Listening and never served: http_stop() closes the socket. */
	if (CHECK_MSG(http_listen(&s, listen_on, err, sizeof(err)) == 0, "%s", err))
		http_stop(s);
}

TEST(test_routes)
{
	char val[256];
	struct reply r;
	int calls;

	CHECK_EQ_INT(get("/healthz", &r), 200);
	CHECK_STR(r.body, "ok\n");

	CHECK_EQ_INT(get("/metrics", &r), 200);
	CHECK_STR(r.body, STUB_METRICS);
	CHECK_STR(header(&r, "Content-Type", val, sizeof(val)),
		  "text/plain; version=0.0.4; charset=utf-8");
	/* A query string does not change the route. */
	CHECK_EQ_INT(get("/metrics?name[]=x", &r), 200);

	/* The Prometheus type is also the default. */
	pthread_mutex_lock(&stub.lock);
	stub.metrics_no_type = true;
	pthread_mutex_unlock(&stub.lock);
	CHECK_EQ_INT(get("/metrics", &r), 200);
	CHECK_STR(header(&r, "Content-Type", val, sizeof(val)), PROM_CONTENT_TYPE);

	/* A callback with nothing to say is a 500, not a crash or an empty 200. */
	pthread_mutex_lock(&stub.lock);
	stub.metrics_fail = true;
	pthread_mutex_unlock(&stub.lock);
	CHECK_EQ_INT(get("/metrics", &r), 500);
	pthread_mutex_lock(&stub.lock);
	stub.metrics_fail = false;
	stub.metrics_no_type = false;
	pthread_mutex_unlock(&stub.lock);

	CHECK_EQ_INT(get("/api/v1/report?pid=42", &r), 200);
	CHECK_EQ_INT(stub_last_pid(&calls), 42);
	CHECK_STR(r.body, "{\"pid\":42}\n");
	CHECK_STR(header(&r, "Content-Type", val, sizeof(val)), "application/json");
	/* The callback's own 404 for a job it does not have. */
	CHECK_EQ_INT(get("/api/v1/report?pid=2147483647", &r), 404);
	CHECK_EQ_INT(stub_last_pid(&calls), 2147483647);
	/* Percent-encoding is decoded before the pid is parsed. */
	CHECK_EQ_INT(get("/api/v1/report?pid=%34%32", &r), 200);
	CHECK_EQ_INT(stub_last_pid(&calls), 42);

	/* Bad pids are 400 with a JSON body, and never reach the callback. */
	static const char *const bad[] = {
		"/api/v1/report", "/api/v1/report?pid", "/api/v1/report?pid=",
		"/api/v1/report?pid=abc", "/api/v1/report?pid=-1", "/api/v1/report?pid=0",
		"/api/v1/report?pid=+42", "/api/v1/report?pid=%2042", "/api/v1/report?pid=42x",
		"/api/v1/report?pid=42.0", "/api/v1/report?pid=0x2a",
		"/api/v1/report?pid=2147483648", "/api/v1/report?pid=99999999999999999999",
		"/api/v1/report?pid=42&pid=43", "/api/v1/report?pid=%00",
		"/api/v1/report?id=42",
	};
	int before;

	stub_last_pid(&before);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK_MSG(get(bad[i], &r) == 400, "%s: %d", bad[i], r.status);
		CHECK_MSG(r.body && r.body[0] == '{' && strstr(r.body, "\"error\""), "%s: %s",
			  bad[i], r.body ? r.body : "(no body)");
		CHECK_STR(header(&r, "Content-Type", val, sizeof(val)), "application/json");
	}
	stub_last_pid(&calls);
	CHECK_EQ_INT(calls, before);

	static const char *const missing[] = {
		"/nope", "/", "/metrics/", "/METRICS", "/healthz/x", "/api/v1/report/42",
		"/api/v1/reports?pid=42", "/../metrics",
	};

	for (size_t i = 0; i < sizeof(missing) / sizeof(missing[0]); i++)
		CHECK_MSG(get(missing[i], &r) == 404, "%s: %d", missing[i], r.status);

	/* HEAD: the GET's headers, no body. */
	request("HEAD /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", &r);
	CHECK_EQ_INT(r.status, 200);
	CHECK_STR(r.body, "");

	/* HTTP/1.0 works too. */
	request("GET /healthz HTTP/1.0\r\n\r\n", &r);
	CHECK_EQ_INT(r.status, 200);
	CHECK_STR(r.body, "ok\n");
}

TEST(test_methods_and_bodies)
{
	char val[256];
	struct reply r;
	double t0;

	static const char *const methods[] = { "POST", "PUT", "DELETE", "OPTIONS", "PATCH" };

	for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
		char req[256];

		snprintf(req, sizeof(req),
			 "%s /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", methods[i]);
		request(req, &r);
		CHECK_MSG(r.status == 405, "%s: %d", methods[i], r.status);
		CHECK_STR(header(&r, "Allow", val, sizeof(val)), "GET, HEAD");
	}
	/* Whatever the path. */
	request("POST /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", &r);
	CHECK_EQ_INT(r.status, 405);

	/* A POST announcing 1 GiB is answered at once, without waiting for (or storing) it. */
	t0 = now_s();
	request("POST /api/v1/report?pid=42 HTTP/1.1\r\nHost: x\r\n"
		"Content-Type: application/json\r\nContent-Length: 1073741824\r\n\r\n{\"a\":", &r);
	CHECK_EQ_INT(r.status, 405);
	CHECK_MSG(now_s() - t0 < 2, "took %.1f s", now_s() - t0);
	t0 = now_s();
	request("POST /metrics HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
		"10\r\n0123456789abcdef\r\n", &r);
	CHECK_EQ_INT(r.status, 405);
	CHECK_MSG(now_s() - t0 < 2, "took %.1f s", now_s() - t0);

	/* Nor is a GET allowed a body. */
	request("GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello", &r);
	CHECK_EQ_INT(r.status, 413);
	request("GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
		&r);
	CHECK_EQ_INT(r.status, 200);

	CHECK_EQ_INT(get("/healthz", &r), 200);
}

static void oversized(const char *what, const char *prefix, size_t fill, const char *suffix)
{
	size_t plen = strlen(prefix), slen = strlen(suffix);
	char *req = malloc(plen + fill + slen + 1);
	struct reply r;

	if (!CHECK(req))
		return;
	memcpy(req, prefix, plen);
	memset(req + plen, 'a', fill);
	memcpy(req + plen + fill, suffix, slen + 1);
	request_on(AF_INET, port, req, plen + fill + slen, &r);
	CHECK_MSG(r.status >= 400 && r.status <= 499, "%s: status %d", what, r.status);
	free(req);
	CHECK_MSG(get("/healthz", &r) == 200, "/healthz after %s: %d", what, r.status);
}

TEST(test_oversized_requests)
{
	char path[] = "/tmp/pipeprof-http-stderr-XXXXXX";
	int saved = dup(STDERR_FILENO), fd = mkstemp(path);
	off_t logged;

	/* libmicrohttpd keeps quiet unless verbose: catch anything it would print. */
	if (fd >= 0) {
		fflush(stderr);
		dup2(fd, STDERR_FILENO);
	}
	oversized("64 KiB URI", "GET /", 64 * 1024, " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
	oversized("64 KiB query", "GET /api/v1/report?pid=42&x=", 64 * 1024,
		  " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
	oversized("64 KiB header", "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ", 64 * 1024,
		  "\r\nConnection: close\r\n\r\n");
	/* Many small headers add up the same way. */
	{
		size_t n = 4000, len = 0;
		char *req = malloc(n * 16 + 128);
		struct reply r;

		if (CHECK(req)) {
			len += sprintf(req, "GET /healthz HTTP/1.1\r\nHost: x\r\n");
			for (size_t i = 0; i < n; i++)
				len += sprintf(req + len, "X-%05zu: aaaa\r\n", i);
			len += sprintf(req + len, "Connection: close\r\n\r\n");
			request_on(AF_INET, port, req, len, &r);
			CHECK_MSG(r.status >= 400 && r.status <= 499, "4000 headers: %d", r.status);
			free(req);
			CHECK_EQ_INT(get("/healthz", &r), 200);
		}
	}
	/* Not HTTP at all: the start of a TLS ClientHello (NULs included). */
	{
		static const char hello[] = "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03garbage\r\n\r\n";
		struct reply r;

		request_on(AF_INET, port, hello, sizeof(hello) - 1, &r);
		CHECK_MSG(r.status == 0 || (r.status >= 400 && r.status <= 499), "TLS hello: %d",
			  r.status);
		CHECK_EQ_INT(get("/healthz", &r), 200);
	}
	if (fd >= 0) {
		fflush(stderr);
		dup2(saved, STDERR_FILENO);
		logged = lseek(fd, 0, SEEK_END);
		CHECK_MSG(logged == 0, "libmicrohttpd wrote %lld bytes to stderr (see %s)",
			  (long long)logged, path);
		close(fd);
		if (logged == 0)
			unlink(path);
	}
	close(saved);
}

TEST(test_silent_clients)
{
	int idle = dial(AF_INET, port), partial = dial(AF_INET, port);
	struct reply r;
	double t0;

	if (!CHECK(idle >= 0 && partial >= 0))
		goto cleanup;
	/* One says nothing, one stops in the middle of its request line. */
	CHECK(send(partial, "GET /metr", 9, MSG_NOSIGNAL) == 9);
	usleep(50 * 1000);
	t0 = now_s();
	CHECK_EQ_INT(get("/healthz", &r), 200);
	CHECK_EQ_INT(get("/metrics", &r), 200);
	CHECK_MSG(now_s() - t0 < 1, "two requests beside silent clients took %.2f s", now_s() - t0);
	/* The stalled one can still finish. */
	exchange(partial, "ics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 44, &r);
	CHECK_EQ_INT(r.status, 200);
	CHECK_STR(r.body, STUB_METRICS);
cleanup:
	if (idle >= 0)
		close(idle);
	if (partial >= 0)
		close(partial);
}

TEST(test_idle_eviction)
{
	enum { N = HTTP_EVICT_AT + 16, K = 10 };
	unsigned long ev0 = http_evictions(srv);
	int fds[N], kept = 0, closed = 0, base;
	struct reply r;

	base = stable_fds();
	/* Idle connections from one address, as many as a local user cares to open. */
	for (int i = 0; i < N; i++)
		fds[i] = dial(AF_INET, port);
	usleep(100 * 1000);
	for (int i = 0; i < N; i++)
		kept += fds[i] >= 0 && still_open(fds[i]);
	/* None has waited long enough to make room: all are kept, and a request is served. */
	CHECK_MSG(kept == N, "%d of %d idle connections kept", kept, N);
	CHECK_EQ_INT(get("/healthz", &r), 200);
	CHECK_EQ_INT(http_evictions(srv) - ev0, 0);

	/* Once they have waited, each newcomer shuts down the one that has waited longest. */
	usleep((HTTP_EVICT_MIN_WAIT_MS + 100) * 1000);
	for (int i = 0; i < K; i++)
		CHECK_EQ_INT(get("/metrics", &r), 200);
	CHECK_EQ_INT(http_evictions(srv) - ev0, K);
	for (int i = 0; i < N; i++) {
		if (i < K)
			closed += closed_within(fds[i], 1000);
		else
			kept += still_open(fds[i]);
	}
	CHECK_MSG(closed == K, "%d of the %d longest waiting closed", closed, K);
	CHECK_MSG(kept == 2 * N - K, "%d of the %d others kept", kept - N, N - K);
	close_all(fds, N);
	CHECK_EQ_INT(settle_fds(base), base);
}

TEST(test_eviction_when_nearly_full)
{
	enum { N = HTTP_EVICT_ANY_AT };
	unsigned long ev0 = http_evictions(srv);
	int fds[N], base;
	struct reply r;
	double t0;

	base = stable_fds();
	/* As many as the last tier, opened at once: none has waited, yet one must go. */
	t0 = now_s();
	for (int i = 0; i < N; i++)
		fds[i] = dial(AF_INET, port);
	usleep(100 * 1000);
	CHECK_MSG(now_s() - t0 < HTTP_EVICT_MIN_WAIT_MS / 1000.0 / 2, "opening took %.2f s",
		  now_s() - t0);
	CHECK_EQ_INT(get("/healthz", &r), 200);
	CHECK_EQ_INT(http_evictions(srv) - ev0, 1);
	CHECK(closed_within(fds[0], 1000));
	CHECK(still_open(fds[1]) && still_open(fds[N - 1]));
	close_all(fds, N);
	CHECK_EQ_INT(settle_fds(base), base);
}

TEST(test_request_timeout)
{
	int idle = dial(AF_INET, port), partial = dial(AF_INET, port);
	double t0 = now_s();

	if (!CHECK(idle >= 0 && partial >= 0))
		goto cleanup;
	/* Slow to say anything, or to finish: closed after HTTP_TIMEOUT_S, not kept. */
	CHECK(send(partial, "GET /metrics HTTP/1.1\r\n", 23, MSG_NOSIGNAL) == 23);
	CHECK(closed_within(idle, (HTTP_TIMEOUT_S + 2) * 1000));
	CHECK(closed_within(partial, 1000));
	CHECK_MSG(now_s() - t0 >= HTTP_TIMEOUT_S - 0.5, "closed after %.2f s", now_s() - t0);
cleanup:
	if (idle >= 0)
		close(idle);
	if (partial >= 0)
		close(partial);
}

TEST(test_keep_alive)
{
	static const char two[] = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
				  "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
	struct reply r;
	const char *second;

	/* Two pipelined requests on one connection get two answers. */
	request(two, &r);
	CHECK_EQ_INT(r.status, 200);
	second = r.body ? strstr(r.body, "HTTP/1.1 200") : NULL;
	CHECK_MSG(second, "one answer only: %s", r.buf);
}

TEST(test_sequential_no_fd_leak)
{
	struct reply r;
	int base, after, ok = 0;

	/* Earlier tests' connections must be gone from the server first. */
	CHECK_EQ_INT(get("/healthz", &r), 200);
	base = stable_fds();
	for (int i = 0; i < 200; i++) {
		const char *t = i % 3 == 0 ? "/healthz" : i % 3 == 1 ? "/metrics" :
					     "/api/v1/report?pid=42";

		ok += get(t, &r) == 200;
	}
	CHECK_EQ_INT(ok, 200);
	after = settle_fds(base);
	CHECK_MSG(after == base, "fds: %d before, %d after 200 requests", base, after);
}

TEST(test_ipv6)
{
	static const char req[] = "GET /healthz HTTP/1.1\r\nHost: [::1]\r\nConnection: close\r\n\r\n";
	struct http_server *s6;
	char err[256];
	struct reply r;
	int ret;

	ret = http_start(&s6, "[::1]:0", &handlers, err, sizeof(err));
	if (ret == -EADDRNOTAVAIL || ret == -EAFNOSUPPORT) {
		SKIP("no IPv6 loopback: %s", err);
		return;
	}
	if (!CHECK_MSG(ret == 0, "%s", err))
		return;
	CHECK(http_port(s6) > 0);
	request_on(AF_INET6, http_port(s6), req, strlen(req), &r);
	CHECK_EQ_INT(r.status, 200);
	http_stop(s6);
}

int main(void)
{
	char err[256] = "";
	int fds_before;
	int ret;

	RUN_TEST(test_parse_listen);
	RUN_TEST(test_loopback);
	RUN_TEST(test_start_errors);
	RUN_TEST(test_listen_then_serve);

	fds_before = count_fds();
	ret = http_start(&srv, "127.0.0.1:0", &handlers, err, sizeof(err));
	if (!CHECK_MSG(ret == 0, "http_start: %d %s", ret, err))
		return unit_summary();
	port = http_port(srv);
	CHECK_MSG(port > 0 && port < 65536, "port %d", port);

	RUN_TEST(test_routes);
	RUN_TEST(test_methods_and_bodies);
	RUN_TEST(test_oversized_requests);
	RUN_TEST(test_silent_clients);
	RUN_TEST(test_keep_alive);
	RUN_TEST(test_idle_eviction);
	RUN_TEST(test_eviction_when_nearly_full);
	RUN_TEST(test_request_timeout);
	RUN_TEST(test_sequential_no_fd_leak);
	RUN_TEST(test_ipv6);

	http_stop(srv);
	/* The listening socket, epoll, and every connection go with the server. */
	CHECK_EQ_INT(count_fds(), fds_before);
	return unit_summary();
}
