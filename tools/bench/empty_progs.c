// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Loader of tools/bench/empty_progs.bpf.c for tools/bench/prog_cost.py. Either attaches the
 * empty uprobe and uretprobe programs to the offsets given, as multi-uprobe links (as pipeprof
 * does on 6.6+ kernels, through the same user/uprobe_multi.c), one link per group:
 *
 *   empty_progs PID {enter|return} PATH OFFSET[,OFFSET...] [{enter|return} PATH OFFSETS]...
 *
 * (file offsets, hex with 0x or decimal), or, with --sched, the empty programs on the
 * scheduler tracepoints pipeprof uses (sched_switch, sched_waking, sched_wakeup,
 * sched_process_fork, sched_process_exec, sched_process_exit) and the programs that only read
 * the clock on the first three:
 *
 *   empty_progs --sched
 *
 * Prints `READY NAME=ID ...` (the attached programs' ids, for their run-time statistics) once
 * every link is in, then holds them until it is sent SIGTERM or SIGINT. Exit status 1 when a
 * link cannot be made.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "uprobe_multi.h"
#include "empty_progs.skel.h"

#define MAX_OFFSETS 256
#define NR_TPS 9
#define MAX_LINKS 256

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	stop = 1;
}

static void print_id(const struct bpf_program *prog)
{
	struct bpf_prog_info info = {};
	__u32 len = sizeof(info);

	if (!bpf_obj_get_info_by_fd(bpf_program__fd(prog), &info, &len))
		printf(" %s=%u", bpf_program__name(prog), info.id);
}

/* The uprobe groups of argv[2..]: appends link fds to links; -1 on a failure (said). */
static int attach_uprobes(struct empty_progs_bpf *skel, int argc, char **argv, int *links,
			  int *nlinks)
{
	pid_t pid = atoi(argv[1]);

	for (int a = 2; a + 2 < argc; a += 3) {
		bool ret = !strcmp(argv[a], "return");
		uint64_t offsets[MAX_OFFSETS], cookies[MAX_OFFSETS] = {};
		unsigned int cnt = 0;
		char *s = argv[a + 2], *end;
		int fd;

		if (!ret && strcmp(argv[a], "enter")) {
			fprintf(stderr, "empty_progs: %s: not enter or return\n", argv[a]);
			return -1;
		}
		while (*s && cnt < MAX_OFFSETS) {
			offsets[cnt++] = strtoull(s, &end, 0);
			if (end == s || (*end && *end != ',')) {
				fprintf(stderr, "empty_progs: bad offset list %s\n", argv[a + 2]);
				return -1;
			}
			s = *end ? end + 1 : end;
		}
		fd = uprobe_multi_attach(ret ? skel->progs.empty_uretprobe : skel->progs.empty_uprobe,
					 pid, argv[a + 1], offsets, cookies, cnt, ret);
		if (fd < 0) {
			fprintf(stderr, "empty_progs: attach %s %s: %s\n", argv[a], argv[a + 1],
				strerror(-fd));
			return -1;
		}
		if (*nlinks < MAX_LINKS)
			links[(*nlinks)++] = fd;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct bpf_link *tp_links[NR_TPS] = {};
	struct bpf_program *prog, *tps[NR_TPS];
	struct sigaction sa = { .sa_handler = on_signal };
	struct empty_progs_bpf *skel;
	int links[MAX_LINKS], nlinks = 0, err = 1;
	bool sched = argc == 2 && !strcmp(argv[1], "--sched");
	sigset_t mask, old;

	if (!sched && (argc < 5 || (argc - 2) % 3)) {
		fprintf(stderr, "usage: %s PID {enter|return} PATH OFFSET[,OFFSET...] ...\n"
			"       %s --sched\n", argv[0], argv[0]);
		return 2;
	}
	/* Held until the wait below: a signal at any point ends with the links closed. */
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigprocmask(SIG_BLOCK, &mask, &old);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);

	skel = empty_progs_bpf__open();
	if (!skel) {
		fprintf(stderr, "empty_progs: open: %s\n", strerror(errno));
		return 1;
	}
	bpf_object__for_each_program(prog, skel->obj) {
		const char *sec = bpf_program__section_name(prog);

		if (!strncmp(sec, "uprobe", 6) || !strncmp(sec, "uretprobe", 9))
			bpf_program__set_expected_attach_type(prog,
				(enum bpf_attach_type)PP_BPF_TRACE_UPROBE_MULTI);
	}
	if (empty_progs_bpf__load(skel)) {
		fprintf(stderr, "empty_progs: load: %s\n", strerror(errno));
		goto out;
	}
	tps[0] = skel->progs.empty_switch;
	tps[1] = skel->progs.empty_waking;
	tps[2] = skel->progs.empty_wakeup;
	tps[3] = skel->progs.empty_fork;
	tps[4] = skel->progs.empty_exec;
	tps[5] = skel->progs.empty_exit;
	tps[6] = skel->progs.clock_switch;
	tps[7] = skel->progs.clock_waking;
	tps[8] = skel->progs.clock_wakeup;
	if (sched) {
		for (int i = 0; i < NR_TPS; i++) {
			tp_links[i] = bpf_program__attach(tps[i]);
			if (!tp_links[i]) {
				fprintf(stderr, "empty_progs: attach %s: %s\n", bpf_program__name(tps[i]),
					strerror(errno));
				goto out;
			}
		}
	} else if (attach_uprobes(skel, argc, argv, links, &nlinks)) {
		goto out;
	}
	printf("READY");
	if (sched) {
		for (int i = 0; i < NR_TPS; i++)
			print_id(tps[i]);
	} else {
		print_id(skel->progs.empty_uprobe);
		print_id(skel->progs.empty_uretprobe);
	}
	printf("\n");
	fflush(stdout);
	while (!stop)
		sigsuspend(&old);
	err = 0;
out:
	for (int i = 0; i < nlinks; i++)
		close(links[i]);
	for (int i = 0; i < NR_TPS; i++)
		bpf_link__destroy(tp_links[i]);
	empty_progs_bpf__destroy(skel);
	return err;
}
