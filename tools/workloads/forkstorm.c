// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A fork storm for pipeprof's fault tests: forks N children back to back; every EVERY-th
 * child forks one grandchild (EVERY 0: none). Each lives 10 to 300 ms (spread over the storm)
 * and exits; children reap their grandchildren, the storm reaps its children. Python forks a
 * few dozen processes a second on a busy 2-CPU VM; this does a hundred in well under a second.
 *
 *   forkstorm N EVERY
 *
 * Prints one JSON line once all are gone: {"children": [pids], "grandchildren": [pids],
 * "parent": {"grandchild pid": its parent's}, "fork_ns": {"pid": CLOCK_MONOTONIC ns just
 * before its fork()}, "start_ns", "end_ns"}.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#define MAX_STORM 4096

static unsigned long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

struct born {
	pid_t pid, parent;
	unsigned long long fork_ns;
};

int main(int argc, char **argv)
{
	static struct born kids[MAX_STORM], grand[MAX_STORM];
	int n, every, nr_grand = 0, p[2];
	unsigned long long start, end;
	struct born g;

	if (argc != 3 || (n = atoi(argv[1])) < 1 || n > MAX_STORM || (every = atoi(argv[2])) < 0) {
		fprintf(stderr, "usage: forkstorm N EVERY (N 1..%d)\n", MAX_STORM);
		return 2;
	}
	if (pipe(p))
		return 1;
	start = now_ns();
	for (int i = 0; i < n; i++) {
		/* Lives end spread over the storm, not all at once. */
		useconds_t life = 10000 + 290000ULL * i / (n > 1 ? n - 1 : 1);

		kids[i].fork_ns = now_ns();
		kids[i].pid = fork();
		if (kids[i].pid < 0) {
			perror("forkstorm: fork");
			return 1;
		}
		if (kids[i].pid)
			continue;
		close(p[0]);
		prctl(PR_SET_NAME, "storm");
		if (every && i % every == 0) {
			g.fork_ns = now_ns();
			g.parent = getpid();
			g.pid = fork();
			if (!g.pid) {
				prctl(PR_SET_NAME, "stormg");
				usleep(life);
				_exit(0);
			}
			if (g.pid > 0 && write(p[1], &g, sizeof(g)) != sizeof(g))
				_exit(1);
			usleep(life);
			if (g.pid > 0)
				waitpid(g.pid, NULL, 0);
		} else {
			usleep(life);
		}
		_exit(0);
	}
	close(p[1]);
	while (nr_grand < MAX_STORM && read(p[0], &grand[nr_grand], sizeof(g)) == sizeof(g))
		nr_grand++;
	for (int i = 0; i < n; i++)
		waitpid(kids[i].pid, NULL, 0);
	end = now_ns();

	printf("{\"children\": [");
	for (int i = 0; i < n; i++)
		printf("%s%d", i ? ", " : "", kids[i].pid);
	printf("], \"grandchildren\": [");
	for (int i = 0; i < nr_grand; i++)
		printf("%s%d", i ? ", " : "", grand[i].pid);
	printf("], \"parent\": {");
	for (int i = 0; i < nr_grand; i++)
		printf("%s\"%d\": %d", i ? ", " : "", grand[i].pid, grand[i].parent);
	printf("}, \"fork_ns\": {");
	for (int i = 0; i < n; i++)
		printf("%s\"%d\": %llu", i ? ", " : "", kids[i].pid, kids[i].fork_ns);
	for (int i = 0; i < nr_grand; i++)
		printf(", \"%d\": %llu", grand[i].pid, grand[i].fork_ns);
	printf("}, \"start_ns\": %llu, \"end_ns\": %llu}\n", start, end);
	return 0;
}
