// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * /proc/PID/net/tcp and tcp6: the input is one line for tcp_parse_line(), and the lines of a
 * whole table paired up by peers_find() with each socket owned by a pid drawn from its inode,
 * as the rank finder reads them.
 */
#include <errno.h>
#include "fuzz.h"
#include "procnet.h"

#define MAX_CONNS 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct tcp_conn conns[MAX_CONNS];
	static struct sock_owner owners[MAX_CONNS];
	static const pid_t pids[] = { 1, 2, 3 };
	char *text = fuzz_strndup(data, size), *save = NULL;
	bool joined[3];
	int n = 0, marked;

	for (char *line = strtok_r(text, "\n", &save); line && n < MAX_CONNS;
	     line = strtok_r(NULL, "\n", &save)) {
		struct tcp_conn *c = &conns[n];

		if (tcp_parse_line(line, c))
			continue;
		owners[n] = (struct sock_owner){ .inode = c->inode, .pid = 1 + c->inode % 4 };
		n++;
	}
	marked = peers_find(pids, 3, owners, n, conns, n, joined);
	FUZZ_CHECK(marked >= 0 && marked <= 3);
	FUZZ_CHECK(marked == joined[0] + joined[1] + joined[2]);
	free(text);
	return 0;
}
