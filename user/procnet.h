/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Which processes of a job talk to each other over TCP: the ranks of a distributed job join a
 * process group (gloo's pairs, the rendezvous store, NCCL's bootstrap) by connecting to one
 * another, which DataLoader workers never do. Read from procfs (the root is a parameter, as in
 * proctree.h, so unit tests point it at a fixture tree). */
#ifndef PIPEPROF_PROCNET_H
#define PIPEPROF_PROCNET_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* One TCP socket of /proc/PID/net/tcp or tcp6; addresses as the file spells them (IPv4 in
 * the first 4 bytes, the rest 0), so that one end's local matches the other's remote. */
struct tcp_conn {
	uint8_t local[16], remote[16];
	uint16_t local_port, remote_port;
	unsigned int state;		/* TCP_ESTABLISHED is 1 */
	unsigned long inode;
};

/* A socket a process holds open. */
struct sock_owner {
	unsigned long inode;
	pid_t pid;
};

/* Parses one data line of /proc/net/tcp or tcp6. Returns 0, or -EINVAL for a header or a
 * malformed line. */
int tcp_parse_line(const char *line, struct tcp_conn *c);

/* Marks joined[i] for each pids[i] that holds an established connection whose other end is
 * held by another of pids. owners: every socket the pids hold. Returns how many were marked. */
int peers_find(const pid_t *pids, int n, const struct sock_owner *owners, int nr_owners,
	       const struct tcp_conn *conns, int nr_conns, bool *joined);

/* peers_find() over what procfs says now: each pid's sockets from its fd directory, the
 * connections from netns_pid's view of its network namespace (tcp and tcp6). Returns how many
 * were marked, or -errno when the connections cannot be read. */
int proc_joined_peers(const char *procfs, pid_t netns_pid, const pid_t *pids, int n, bool *joined);

#endif
