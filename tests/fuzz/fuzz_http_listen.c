// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The daemon's --listen address (http_parse_listen()): from the command line or the config
 * file. An address that parses must print back to one that parses the same.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include "fuzz.h"
#include "http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = fuzz_strndup(data, size), host[INET6_ADDRSTRLEN], again[INET6_ADDRSTRLEN + 16];
	struct sockaddr_storage ss, ss2;
	socklen_t len, len2;
	int port;

	if (http_parse_listen(s, &ss, &len)) {
		free(s);
		return 0;
	}
	if (ss.ss_family == AF_INET) {
		struct sockaddr_in *sin = (struct sockaddr_in *)&ss;

		FUZZ_CHECK(len == sizeof(*sin));
		FUZZ_CHECK(inet_ntop(AF_INET, &sin->sin_addr, host, sizeof(host)));
		port = ntohs(sin->sin_port);
		snprintf(again, sizeof(again), "%s:%d", host, port);
	} else {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;

		FUZZ_CHECK(ss.ss_family == AF_INET6 && len == sizeof(*sin6));
		FUZZ_CHECK(inet_ntop(AF_INET6, &sin6->sin6_addr, host, sizeof(host)));
		port = ntohs(sin6->sin6_port);
		snprintf(again, sizeof(again), "[%s]:%d", host, port);
	}
	FUZZ_CHECK(!http_parse_listen(again, &ss2, &len2));
	FUZZ_CHECK(len2 == len && !memcmp(&ss, &ss2, len));
	free(s);
	return 0;
}
