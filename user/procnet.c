// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "procmaps.h"
#include "procnet.h"
#include "grow.h"

#define TCP_ESTABLISHED 1
/* Sockets read per process: a rank holds a few dozen (gloo pairs, the store); a server
 * process with more is no rank of a training job worth the read. */
#define MAX_SOCKETS_PER_PROC 4096

/* "0100007F:9C41": the address's hex digits as bytes in the order written (8 or 32 digits),
 * and the port. Returns the text after it, or NULL. */
static const char *parse_endpoint(const char *s, uint8_t addr[16], uint16_t *port)
{
	int digits = 0;
	unsigned long p;
	char *end;

	while (*s == ' ')
		s++;
	memset(addr, 0, 16);
	for (; hexval(s[digits]) >= 0; digits++)
		if (digits < 32)
			addr[digits / 2] |= hexval(s[digits]) << (digits % 2 ? 0 : 4);
	if ((digits != 8 && digits != 32) || s[digits] != ':')
		return NULL;
	s += digits + 1;
	if (hexval(*s) < 0)
		return NULL;
	p = strtoul(s, &end, 16);
	if (p > 0xffff)
		return NULL;
	*port = p;
	return end;
}

int tcp_parse_line(const char *line, struct tcp_conn *c)
{
	unsigned long inode;
	unsigned int state;
	char *end;

	memset(c, 0, sizeof(*c));
	/* "  12: " */
	while (*line == ' ')
		line++;
	if (hexval(*line) < 0)
		return -EINVAL;
	strtoul(line, &end, 10);
	if (*end != ':')
		return -EINVAL;
	line = parse_endpoint(end + 1, c->local, &c->local_port);
	if (!line)
		return -EINVAL;
	line = parse_endpoint(line, c->remote, &c->remote_port);
	if (!line)
		return -EINVAL;
	/* st tx:rx tr:when retrnsmt uid timeout inode */
	if (sscanf(line, " %x %*x:%*x %*x:%*x %*x %*u %*u %lu", &state, &inode) != 2)
		return -EINVAL;
	c->state = state;
	c->inode = inode;
	return 0;
}

static int by_inode(const void *a, const void *b)
{
	const struct sock_owner *x = a, *y = b;

	return x->inode < y->inode ? -1 : x->inode > y->inode;
}

/* The pid holding inode; 0 for none (owners sorted by inode). */
static pid_t owner_of(const struct sock_owner *owners, int n, unsigned long inode)
{
	const struct sock_owner key = { .inode = inode }, *o;

	o = bsearch(&key, owners, n, sizeof(*owners), by_inode);
	return o ? o->pid : 0;
}

static int index_of(const pid_t *pids, int n, pid_t pid)
{
	for (int i = 0; i < n; i++)
		if (pids[i] == pid)
			return i;
	return -1;
}

int peers_find(const pid_t *pids, int n, const struct sock_owner *owners, int nr_owners,
	       const struct tcp_conn *conns, int nr_conns, bool *joined)
{
	struct sock_owner *sorted;
	const struct tcp_conn **mine;
	int nr_mine = 0, marked = 0;

	memset(joined, 0, n * sizeof(*joined));
	if (!nr_owners || !nr_conns)
		return 0;
	sorted = malloc(nr_owners * sizeof(*sorted));
	mine = malloc(nr_conns * sizeof(*mine));
	if (!sorted || !mine) {
		free(sorted);
		free(mine);
		return -ENOMEM;
	}
	memcpy(sorted, owners, nr_owners * sizeof(*sorted));
	qsort(sorted, nr_owners, sizeof(*sorted), by_inode);
	/* A host may hold thousands of connections; only the pids' own can pair up. */
	for (int i = 0; i < nr_conns; i++)
		if (conns[i].state == TCP_ESTABLISHED && conns[i].inode &&
		    owner_of(sorted, nr_owners, conns[i].inode))
			mine[nr_mine++] = &conns[i];
	for (int i = 0; i < nr_mine; i++) {
		pid_t a = owner_of(sorted, nr_owners, mine[i]->inode);

		for (int j = 0; j < nr_mine; j++) {
			pid_t b = owner_of(sorted, nr_owners, mine[j]->inode);
			int ia, ib;

			if (a == b || mine[i]->local_port != mine[j]->remote_port ||
			    mine[i]->remote_port != mine[j]->local_port ||
			    memcmp(mine[i]->local, mine[j]->remote, 16) ||
			    memcmp(mine[i]->remote, mine[j]->local, 16))
				continue;
			ia = index_of(pids, n, a);
			ib = index_of(pids, n, b);
			if (ia < 0 || ib < 0)
				continue;
			marked += !joined[ia] + !joined[ib];
			joined[ia] = joined[ib] = true;
		}
	}
	free(sorted);
	free(mine);
	return marked;
}


/* Appends pid's sockets to *owners. Returns 0 or -ENOMEM; a process gone or unreadable
 * holds none. */
static int read_sockets(const char *procfs, pid_t pid, struct sock_owner **owners, int *nr,
			int *cap)
{
	char path[PATH_MAX], link[64];
	struct dirent *de;
	int dfd, found = 0;
	DIR *dir;

	snprintf(path, sizeof(path), "%s/%d/fd", procfs, (int)pid);
	dir = opendir(path);
	if (!dir)
		return 0;
	dfd = dirfd(dir);
	while ((de = readdir(dir)) && found < MAX_SOCKETS_PER_PROC) {
		ssize_t len = readlinkat(dfd, de->d_name, link, sizeof(link) - 1);
		unsigned long inode;

		if (len <= 0)
			continue;
		link[len] = '\0';
		if (sscanf(link, "socket:[%lu]", &inode) != 1)
			continue;
		if (grow_array(owners, cap, *nr, sizeof(**owners), 64)) {
			closedir(dir);
			return -ENOMEM;
		}
		(*owners)[(*nr)++] = (struct sock_owner){ .inode = inode, .pid = pid };
		found++;
	}
	closedir(dir);
	return 0;
}

/* Appends the established connections of one table (tcp or tcp6) to *conns. Returns 0 or
 * -errno. */
static int read_conns(const char *path, struct tcp_conn **conns, int *nr, int *cap)
{
	char line[512];
	struct tcp_conn c;
	FILE *f = fopen(path, "re");

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		if (tcp_parse_line(line, &c) || c.state != TCP_ESTABLISHED)
			continue;
		if (grow_array(conns, cap, *nr, sizeof(**conns), 64)) {
			fclose(f);
			return -ENOMEM;
		}
		(*conns)[(*nr)++] = c;
	}
	fclose(f);
	return 0;
}

int proc_joined_peers(const char *procfs, pid_t netns_pid, const pid_t *pids, int n, bool *joined)
{
	struct sock_owner *owners = NULL;
	struct tcp_conn *conns = NULL;
	int nr_owners = 0, owners_cap = 0, nr_conns = 0, conns_cap = 0, err = 0, err6;
	char path[PATH_MAX];

	memset(joined, 0, n * sizeof(*joined));
	if (n < 2)
		return 0;
	for (int i = 0; i < n && !err; i++)
		err = read_sockets(procfs, pids[i], &owners, &nr_owners, &owners_cap);
	if (err || nr_owners < 2)
		goto cleanup;
	snprintf(path, sizeof(path), "%s/%d/net/tcp", procfs, (int)netns_pid);
	err = read_conns(path, &conns, &nr_conns, &conns_cap);
	snprintf(path, sizeof(path), "%s/%d/net/tcp6", procfs, (int)netns_pid);
	/* A kernel without IPv6 has no tcp6: one table read is enough. */
	err6 = read_conns(path, &conns, &nr_conns, &conns_cap);
	if (err == -ENOMEM || err6 == -ENOMEM)
		err = -ENOMEM;
	else if (!err || !err6)
		err = peers_find(pids, n, owners, nr_owners, conns, nr_conns, joined);
cleanup:
	free(owners);
	free(conns);
	return err;
}
