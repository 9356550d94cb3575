// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Context-switch load for pipeprof's unrelated-event benchmark and scale test: PAIRS processes,
 * each two threads ping-ponging one byte over two pipes for SECS seconds. Both threads of a pair
 * are pinned to one CPU, so every hand-off is a wakeup and a context switch on that CPU: what
 * pipeprof's scheduler programs see most of on a busy machine. Threads of one process switch
 * without a page-table switch, which makes twice the switches a process pair does under PTI.
 *
 *   ctxload [-n] [-c CPU] PAIRS SECS
 *
 * Pair i runs on CPU i mod the CPUs online, or every pair on CPU with -c. With -n the pairs run
 * at nice 19. Not SCHED_IDLE: on this project's 2-CPU VMs, pairs busy on every CPU kept
 * timer-woken tasks off the CPUs for seconds, whatever their policy; -c leaves CPUs to them.
 *
 * Prints `READY pid=<pid>` once every pair runs, and at the end one line
 * `ctxload: <round trips> round trips in <secs> s`.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>

struct side {
	int rd, wr, first, cpu, nice19;
	double end;
	unsigned long long n;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* One side of a pair: answer every byte read until the deadline or the peer's close. */
static void *pong(void *arg)
{
	struct side *s = arg;
	cpu_set_t set;
	char c = 'x';

	CPU_ZERO(&set);
	CPU_SET(s->cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);
	/* Per thread: setpriority() on a tid sets that thread's nice value on Linux. */
	if (s->nice19)
		setpriority(PRIO_PROCESS, syscall(SYS_gettid), 19);
	if (s->first && write(s->wr, &c, 1) != 1)
		return NULL;
	while (read(s->rd, &c, 1) == 1) {
		if (write(s->wr, &c, 1) != 1)
			break;
		if (++s->n % 4096 == 0 && now_s() > s->end)
			break;
	}
	/* The peer may be blocked on a read that this side will never answer. */
	close(s->wr);
	return NULL;
}

/* A pair's process: two threads, the count of round trips written to report. */
static void run_pair(int cpu, int nice19, double end, int report)
{
	int a[2], b[2];
	struct side s[2];
	pthread_t t;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (pipe(a) || pipe(b))
		_exit(1);
	s[0] = (struct side){ .rd = a[0], .wr = b[1], .first = 1, .cpu = cpu, .nice19 = nice19,
			      .end = end };
	s[1] = (struct side){ .rd = b[0], .wr = a[1], .cpu = cpu, .nice19 = nice19, .end = end };
	if (pthread_create(&t, NULL, pong, &s[1]))
		_exit(1);
	pong(&s[0]);
	pthread_join(t, NULL);
	if (write(report, &s[0].n, sizeof(s[0].n)) != sizeof(s[0].n))
		_exit(1);
	_exit(0);
}

int main(int argc, char **argv)
{
	int nice19 = 0, cpu = -1, pairs, ncpus = sysconf(_SC_NPROCESSORS_ONLN), rep[2], opt;
	unsigned long long total = 0, n;
	double secs, start;

	while ((opt = getopt(argc, argv, "nc:")) != -1) {
		switch (opt) {
		case 'n':
			nice19 = 1;
			break;
		case 'c':
			cpu = atoi(optarg);
			break;
		default:
			goto usage;
		}
	}
	if (argc - optind != 2 || (pairs = atoi(argv[optind])) < 1 ||
	    (secs = atof(argv[optind + 1])) <= 0 || cpu >= ncpus)
		goto usage;
	if (pipe(rep))
		return 1;
	signal(SIGPIPE, SIG_IGN);
	start = now_s();
	for (int i = 0; i < pairs; i++) {
		pid_t pid = fork();

		if (pid < 0)
			return 1;
		if (!pid) {
			close(rep[0]);
			run_pair(cpu >= 0 ? cpu : i % (ncpus > 0 ? ncpus : 1), nice19, start + secs,
				 rep[1]);
		}
	}
	close(rep[1]);
	printf("READY pid=%d\n", getpid());
	fflush(stdout);
	while (read(rep[0], &n, sizeof(n)) == sizeof(n))
		total += n;
	while (wait(NULL) > 0)
		;
	printf("ctxload: %llu round trips in %.2f s\n", total, now_s() - start);
	return 0;
usage:
	fprintf(stderr, "usage: ctxload [-n] [-c CPU] PAIRS SECS\n");
	return 2;
}
