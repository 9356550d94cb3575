// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include "procnet.h"
#include "unit.h"

static char root[] = "/tmp/pipeprof-procnet-XXXXXX";

#define LISTEN_LINE "   0: 0100007F:7332 00000000:0000 0A 00000000:00000000 00:00000000 " \
	"00000000     0        0 1000 1 0000000000000000 100 0 0 10 0\n"
/* 127.0.0.1:40000 <-> 127.0.0.1:29490, both ends. */
#define CONN_A "   1: 0100007F:9C40 0100007F:7332 01 00000000:00000000 00:00000000 " \
	"00000000     0        0 1001 1 0000000000000000 20 4 30 10 -1\n"
#define CONN_B "   2: 0100007F:7332 0100007F:9C40 01 00000000:00000000 00:00000000 " \
	"00000000     0        0 1002 1 0000000000000000 20 4 30 10 -1\n"
/* A worker's download: 127.0.0.1:40001 -> :8080, the server another process's. */
#define CONN_W "   3: 0100007F:9C41 0100007F:1F90 01 00000000:00000000 00:00000000 " \
	"00000000     0        0 1003 1 0000000000000000 20 4 30 10 -1\n"
#define CONN_S "   4: 0100007F:1F90 0100007F:9C41 01 00000000:00000000 00:00000000 " \
	"00000000     0        0 2000 1 0000000000000000 20 4 30 10 -1\n"
#define HEADER "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt" \
	"   uid  timeout inode\n"
#define V6_HEADER "  sl  local_address                         remote_address                " \
	"        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
/* [::1]:5000 <-> [::1]:41000, both ends. */
#define V6_A "   0: 00000000000000000000000001000000:1388 00000000000000000000000001000000:A028 " \
	"01 00000000:00000000 00:00000000 00000000     0        0 3001 1 0000000000000000 20 4 30 10 -1\n"
#define V6_B "   1: 00000000000000000000000001000000:A028 00000000000000000000000001000000:1388 " \
	"01 00000000:00000000 00:00000000 00000000     0        0 3002 1 0000000000000000 20 4 30 10 -1\n"

static void put(const char *rel, const char *text)
{
	char path[PATH_MAX];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	f = fopen(path, "w");
	if (!CHECK_MSG(f != NULL, "cannot write %s", path))
		return;
	fputs(text, f);
	fclose(f);
}

static void dir(const char *rel)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	mkdir(path, 0755);
}

static void fd_link(pid_t pid, int fd, const char *target)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%d/fd/%d", root, (int)pid, fd);
	CHECK_MSG(!symlink(target, path), "symlink %s", path);
}

TEST(test_parse_lines)
{
	struct tcp_conn c;

	CHECK_EQ_INT(tcp_parse_line(HEADER, &c), -EINVAL);
	CHECK_EQ_INT(tcp_parse_line(V6_HEADER, &c), -EINVAL);
	CHECK_EQ_INT(tcp_parse_line(LISTEN_LINE, &c), 0);
	CHECK_EQ_INT(c.state, 0xA);
	CHECK_EQ_INT(c.local_port, 0x7332);
	CHECK_EQ_INT(c.remote_port, 0);
	CHECK_EQ_INT(c.inode, 1000);
	CHECK_EQ_INT(c.local[0], 0x01);
	CHECK_EQ_INT(c.local[3], 0x7F);
	CHECK_EQ_INT(tcp_parse_line(CONN_A, &c), 0);
	CHECK_EQ_INT(c.state, 1);
	CHECK_EQ_INT(c.local_port, 40000);
	CHECK_EQ_INT(c.inode, 1001);
	CHECK_EQ_INT(tcp_parse_line(V6_B, &c), 0);
	CHECK_EQ_INT(c.local_port, 41000);
	CHECK_EQ_INT(c.remote_port, 5000);
	CHECK_EQ_INT(c.local[12], 0x01);
	CHECK_EQ_INT(c.inode, 3002);
	/* Truncated, an address of another length, a port too large, junk. */
	CHECK_EQ_INT(tcp_parse_line("   1: 0100007F:9C40 0100007F:7332 01", &c), -EINVAL);
	CHECK_EQ_INT(tcp_parse_line("   1: 0100007:9C40 0100007F:7332 01 0:0 0:0 0 0 0 5", &c),
		     -EINVAL);
	CHECK_EQ_INT(tcp_parse_line("   1: 0100007F:19C40 0100007F:7332 01 0:0 0:0 0 0 0 5", &c),
		     -EINVAL);
	CHECK_EQ_INT(tcp_parse_line("", &c), -EINVAL);
	CHECK_EQ_INT(tcp_parse_line("   1: ", &c), -EINVAL);
	CHECK_EQ_INT(tcp_parse_line("   1: 0100007F:9C40 0100007F:7332 01 00000000:00000000 "
				    "00:00000000 00000000 0 0 77", &c), 0);
	CHECK_EQ_INT(c.inode, 77);
}

TEST(test_pairs_from_procfs)
{
	/* 100 the launcher, 200 and 300 ranks, 301 300's worker downloading from a server. */
	pid_t pids[] = { 200, 300, 301 };
	bool joined[3];

	dir("100");
	dir("100/net");
	put("100/net/tcp", HEADER LISTEN_LINE CONN_A CONN_B CONN_W CONN_S);
	put("100/net/tcp6", V6_HEADER);
	dir("200");
	dir("200/fd");
	dir("300");
	dir("300/fd");
	dir("301");
	dir("301/fd");
	fd_link(200, 0, "/dev/null");
	fd_link(200, 7, "socket:[1001]");
	fd_link(300, 3, "pipe:[88]");
	fd_link(300, 9, "socket:[1002]");
	fd_link(300, 10, "socket:[1000]");
	fd_link(301, 4, "socket:[1003]");
	CHECK_EQ_INT(proc_joined_peers(root, 100, pids, 3, joined), 2);
	CHECK(joined[0] && joined[1] && !joined[2]);
	/* One process alone cannot have joined another. */
	CHECK_EQ_INT(proc_joined_peers(root, 100, pids, 1, joined), 0);
	CHECK(!joined[0]);
	/* Over IPv6 only. */
	put("100/net/tcp", HEADER);
	put("100/net/tcp6", V6_HEADER V6_A V6_B);
	fd_link(301, 5, "socket:[3001]");
	fd_link(200, 8, "socket:[3002]");
	CHECK_EQ_INT(proc_joined_peers(root, 100, pids, 3, joined), 2);
	CHECK(joined[0] && !joined[1] && joined[2]);
	/* No tables to read: an error, nothing marked. */
	CHECK_EQ_INT(proc_joined_peers(root, 999, pids, 3, joined), -ENOENT);
	CHECK(!joined[0] && !joined[1] && !joined[2]);
}

TEST(test_pairs_need_both_ends_in_the_set)
{
	pid_t pids[] = { 1, 2, 3 };
	struct sock_owner owners[] = { { 1001, 1 }, { 1002, 1 }, { 1003, 3 } };
	struct tcp_conn conns[4];
	bool joined[3];

	tcp_parse_line(CONN_A, &conns[0]);
	tcp_parse_line(CONN_B, &conns[1]);
	tcp_parse_line(CONN_W, &conns[2]);
	tcp_parse_line(CONN_S, &conns[3]);
	/* Both ends in one process (a loopback connection to itself) join nothing. */
	CHECK_EQ_INT(peers_find(pids, 3, owners, 3, conns, 4, joined), 0);
	CHECK(!joined[0] && !joined[1] && !joined[2]);
	owners[1].pid = 2;
	CHECK_EQ_INT(peers_find(pids, 3, owners, 3, conns, 4, joined), 2);
	CHECK(joined[0] && joined[1] && !joined[2]);
	/* A connection that is not established pairs with nothing. */
	conns[1].state = 0xA;
	CHECK_EQ_INT(peers_find(pids, 3, owners, 3, conns, 4, joined), 0);
	CHECK_EQ_INT(peers_find(pids, 3, owners, 0, conns, 4, joined), 0);
}

int main(void)
{
	int status;

	if (!mkdtemp(root)) {
		perror("mkdtemp");
		return 1;
	}
	RUN_TEST(test_parse_lines);
	RUN_TEST(test_pairs_from_procfs);
	RUN_TEST(test_pairs_need_both_ends_in_the_set);
	status = unit_summary();
	if (fork() == 0)
		execlp("rm", "rm", "-rf", root, (char *)NULL);
	return status;
}
