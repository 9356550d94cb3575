// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * What loading each program cost the kernel's verifier (-v): its statistics log (level 4,
 * a few lines, no instruction trace) gives the verification time and the instructions it
 * went through. Verification is most of an attach's CPU; this says which program to make
 * cheaper.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/libbpf.h>
#include "pipeprof.h"
#include "pipeprof.skel.h"
#include "tracer.h"

#define STATS_LOG_SIZE 1024

void tracer_verifier_stats_arm(struct tracer *t)
{
	struct bpf_program *prog;
	int n = 0;

	bpf_object__for_each_program(prog, t->skel->obj)
		n++;
	t->verifier_logs = calloc(n ? n : 1, STATS_LOG_SIZE);
	if (!t->verifier_logs)
		return;
	n = 0;
	bpf_object__for_each_program(prog, t->skel->obj) {
		if (!bpf_program__autoload(prog))
			continue;
		bpf_program__set_log_buf(prog, t->verifier_logs + n++ * STATS_LOG_SIZE, STATS_LOG_SIZE);
		bpf_program__set_log_level(prog, 4);
	}
}

void tracer_verifier_stats_print(struct tracer *t)
{
	unsigned long long total_us = 0, total_insns = 0;
	struct bpf_program *prog;
	int n = 0;

	if (!t->verifier_logs)
		return;
	bpf_object__for_each_program(prog, t->skel->obj) {
		const char *log = t->verifier_logs + n * STATS_LOG_SIZE, *p;
		unsigned long long us = 0, insns = 0;

		if (!bpf_program__autoload(prog))
			continue;
		n++;
		if ((p = strstr(log, "verification time ")))
			us = strtoull(p + 18, NULL, 10);
		if ((p = strstr(log, "processed ")))
			insns = strtoull(p + 10, NULL, 10);
		total_us += us;
		total_insns += insns;
		fprintf(stderr, "pipeprof: verified %-28s %6llu us, %5llu insns\n",
			bpf_program__name(prog), us, insns);
	}
	fprintf(stderr, "pipeprof: verified %d programs in %llu us, %llu insns\n", n, total_us,
		total_insns);
	free(t->verifier_logs);
	t->verifier_logs = NULL;
}
