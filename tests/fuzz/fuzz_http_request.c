// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * HTTP requests to the daemon's endpoint, as a client on the network would send them: the
 * server is the real one (http_start() on a loopback port), and what reaches http.c is what
 * libmicrohttpd makes of the request: method, path, query arguments, body headers.
 *
 * The input is a request head, a line each: the method, the request target (path and query),
 * then header lines. The target sends it as "METHOD TARGET HTTP/1.x", the headers, and
 * "Connection: close" with the blank line that ends the head, so that every request is
 * complete and the server closes the connection once it has answered: the server's
 * edge-triggered epoll loop does not always see a client's half-close in time, which would
 * make fuzzing wait out its 10 s idle timeout instead. A connection still open after a
 * minute is a finding.
 *
 * A first byte before the lines says how the callbacks answer (status, content type, no body)
 * and which HTTP version the request line says, so that the server's handling of what the
 * callbacks return is fuzzed too. A callback checks its contract: report() only ever gets a
 * pid in 1..INT_MAX.
 */
#include <errno.h>
#include <strings.h>
#include <limits.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>
#include "fuzz.h"
#include "http.h"

enum {
	ANSWER_NULL = 1 << 0,		/* no body: the server answers 500 itself */
	ANSWER_STATUS = 1 << 1,		/* statuses[] by bits 2..4 */
	ANSWER_TYPE = 1 << 5,		/* a content type of the callback's own */
	ANSWER_EMPTY = 1 << 6,		/* "" rather than text */
	HTTP_1_0 = 1 << 7,		/* in the request line, rather than HTTP/1.1 */
};

/* Including those libmicrohttpd would refuse to queue. */
static const int statuses[8] = { 200, 404, 503, 0, 99, 600, -1, INT_MAX };

static struct http_server *server;
static struct sockaddr_in addr;
static unsigned int answer;

static char *callback_body(int *status, const char **content_type)
{
	if (answer & ANSWER_NULL)
		return NULL;
	if (answer & ANSWER_STATUS)
		*status = statuses[(answer >> 2) & 7];
	if (answer & ANSWER_TYPE)
		*content_type = "text/x-fuzz";
	return strdup(answer & ANSWER_EMPTY ? "" : "# a body\nmetric 1\n");
}

static char *metrics(void *ctx, int *status, const char **content_type)
{
	return callback_body(status, content_type);
}

static char *report(void *ctx, long pid, int *status, const char **content_type)
{
	FUZZ_CHECK(pid >= 1 && pid <= INT_MAX);
	return callback_body(status, content_type);
}

static void stop(void)
{
	http_stop(server);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const struct http_handlers h = { .metrics = metrics, .report = report };
	char err[256];

	if (http_start(&server, "127.0.0.1:0", &h, err, sizeof(err))) {
		fprintf(stderr, "fuzz_http_request: %s\n", err);
		abort();
	}
	atexit(stop);
	addr.sin_family = AF_INET;
	addr.sin_port = htons(http_port(server));
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return 0;
}

/* The request the input describes, into *req (malloc'd); returns its length. */
static size_t build_request(const uint8_t *data, size_t size, char **req)
{
	const char *version = answer & HTTP_1_0 ? "HTTP/1.0" : "HTTP/1.1";
	size_t cap = size * 2 + 64, len = 0, n;
	const uint8_t *p = data, *end = data + size, *nl;
	char *out = malloc(cap);
	int line = 0;

	if (!out)
		abort();
	while (p <= end) {
		nl = memchr(p, '\n', end - p);
		n = (nl ? nl : end) - p;
		/* A CR ending the line is the input's own line break, not content. */
		if (n && p[n - 1] == '\r')
			n--;
		if (line == 0) {
			memcpy(out + len, p, n);
			len += n;
			out[len++] = ' ';
		} else if (line == 1) {
			memcpy(out + len, p, n);
			len += n;
			len += sprintf(out + len, " %s\r\n", version);
		} else if (n && !(n >= 11 && !strncasecmp((const char *)p, "connection:", 11))) {
			/* No blank line or Connection header of the input's: the head ends here. */
			memcpy(out + len, p, n);
			len += n;
			out[len++] = '\r';
			out[len++] = '\n';
		}
		line++;
		if (!nl)
			break;
		p = nl + 1;
	}
	if (line == 1)
		len += sprintf(out + len, "/ %s\r\n", version);
	len += sprintf(out + len, "Connection: close\r\n\r\n");
	*req = out;
	return len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* Far past the server's 10 s idle timeout: a stalled machine must not fail the input. */
	const struct timeval limit = { .tv_sec = 60 };
	char reply[4096], *req, *p;
	size_t got = 0, len;
	ssize_t n;
	int fd;

	if (!size)
		return 0;
	answer = data[0];
	len = build_request(data + 1, size - 1, &req);

	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit)) ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof(limit)) ||
	    connect(fd, (struct sockaddr *)&addr, sizeof(addr)))
		abort();
	/* The server may answer and close before it has read everything: that is its right. */
	for (p = req; len; p += n, len -= n) {
		n = send(fd, p, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR) {
			n = 0;
			continue;
		}
		if (n <= 0)
			break;
	}
	free(req);
	for (;;) {
		n = recv(fd, reply + got, sizeof(reply) - 1 - got, 0);
		/* libFuzzer's timeout timer fires every second, without SA_RESTART. */
		if (n < 0 && errno == EINTR)
			continue;
		if (n > 0) {
			got += n;
			if (got == sizeof(reply) - 1)
				got = 0;	/* only the head matters */
			continue;
		}
		if (n < 0 && errno != ECONNRESET) {
			reply[got] = '\0';
			fprintf(stderr, "fuzz_http_request: no close from the server (%s) after: %s\n",
				strerror(errno), reply);
			abort();
		}
		break;
	}
	close(fd);
	return 0;
}
