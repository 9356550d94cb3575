// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The kernel-features cache entry's text (pure: unit-tested apart from the BPF plumbing). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kfeatures.h"

#define KFEATURES_MAGIC "pipeprof-kernel-features 4"
/* Far above any kernel's type count (~130k on 6.18): a larger id is not what was written. */
#define MAX_BTF_ID (1 << 24)

const char *const kfeatures_tracepoints[KF_TRACEPOINTS] = {
	"sched_switch", "sched_waking", "sched_wakeup", "sched_process_fork",
	"sched_process_exec", "sched_process_exit", "block_io_start", "block_rq_issue",
	"block_rq_complete", "softirq_entry", "softirq_exit", "irq_handler_entry",
	"irq_handler_exit", "hrtimer_expire_entry", "hrtimer_expire_exit", "tcp_rcv_space_adjust",
};

int kfeatures_tp_btf_id(const struct kfeatures *kf, const char *tp)
{
	for (int i = 0; i < KF_TRACEPOINTS; i++)
		if (!strcmp(kfeatures_tracepoints[i], tp))
			return kf->tp_btf_ids[i];
	return 0;
}

static int format_ids(const struct kfeatures *kf, char *buf, size_t size)
{
	size_t len = 0;

	for (int i = 0; i < KF_TRACEPOINTS; i++) {
		int n = snprintf(buf + len, size - len, " %d", kf->tp_btf_ids[i]);

		if (n < 0 || (size_t)n >= size - len)
			return -ENOSPC;
		len += n;
	}
	return 0;
}

/* Exactly KF_TRACEPOINTS ids, each one space before it, in 0..MAX_BTF_ID, in canonical
 * decimal: what format_ids() writes. */
static int parse_ids(const char *val, struct kfeatures *kf)
{
	const char *p = val;

	for (int i = 0; i < KF_TRACEPOINTS; i++) {
		long id = 0;
		int digits = 0;

		if (i && *p++ != ' ')
			return -EINVAL;
		for (; *p >= '0' && *p <= '9'; p++, digits++) {
			id = id * 10 + (*p - '0');
			if (id > MAX_BTF_ID)
				return -EINVAL;
		}
		if (!digits || (digits > 1 && val[p - val - digits] == '0'))
			return -EINVAL;
		kf->tp_btf_ids[i] = (int)id;
	}
	return *p ? -EINVAL : 0;
}

int kfeatures_format(const struct kfeatures *kf, const char *boot_id, const char *release,
		     char *buf, size_t size)
{
	char ids[KF_TRACEPOINTS * 12];
	int n;

	if (format_ids(kf, ids, sizeof(ids)))
		return -ENOSPC;
	n = snprintf(buf, size, KFEATURES_MAGIC "\nboot_id %s\nrelease %s\n"
		     "sched_switch_has_prev_state %d\nhas_block_io_start %d\n"
		     "preempt_count_rq_delta %lld\nuprobe_multi %d\npreempt_count_proven %d\n"
		     "tp_btf_ids%s\nend\n",
		     boot_id, release, kf->sched_switch_has_prev_state, kf->has_block_io_start,
		     kf->preempt_count_rq_delta, kf->uprobe_multi, kf->preempt_count_proven, ids);

	return n < 0 || (size_t)n >= size ? -ENOSPC : n;
}

static int parse_flag(const char *s, bool *out)
{
	if (strcmp(s, "0") && strcmp(s, "1"))
		return -EINVAL;
	*out = s[0] == '1';
	return 0;
}

int kfeatures_parse(const char *text, const char *boot_id, const char *release,
		    struct kfeatures *kf)
{
	enum { BOOT = 1, REL = 2, PREV = 4, BLOCK = 8, DELTA = 16, MULTI = 32, PROVEN = 64,
	       IDS = 128, END = 256 };
	char line[256];
	unsigned int seen = 0;
	const char *p = text;
	struct kfeatures out = { .from_cache = true };

	if (strncmp(p, KFEATURES_MAGIC "\n", sizeof(KFEATURES_MAGIC)))
		return -EINVAL;
	p += sizeof(KFEATURES_MAGIC);
	while (*p) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		char *val, *end;
		int err = 0;

		if (!nl || len >= sizeof(line) || seen & END)
			return -EINVAL;	/* a torn write, or something after "end" */
		memcpy(line, p, len);
		line[len] = '\0';
		p = nl + 1;
		if (!strcmp(line, "end")) {
			seen |= END;
			continue;
		}
		val = strchr(line, ' ');
		if (!val)
			return -EINVAL;
		*val++ = '\0';
		if (!strcmp(line, "boot_id") && !strcmp(val, boot_id))
			seen |= BOOT;
		else if (!strcmp(line, "release") && !strcmp(val, release))
			seen |= REL;
		else if (!strcmp(line, "sched_switch_has_prev_state"))
			err = parse_flag(val, &out.sched_switch_has_prev_state), seen |= PREV;
		else if (!strcmp(line, "has_block_io_start"))
			err = parse_flag(val, &out.has_block_io_start), seen |= BLOCK;
		else if (!strcmp(line, "uprobe_multi"))
			err = parse_flag(val, &out.uprobe_multi), seen |= MULTI;
		else if (!strcmp(line, "preempt_count_proven"))
			err = parse_flag(val, &out.preempt_count_proven), seen |= PROVEN;
		else if (!strcmp(line, "tp_btf_ids"))
			err = parse_ids(val, &out), seen |= IDS;
		else if (!strcmp(line, "preempt_count_rq_delta")) {
			errno = 0;
			out.preempt_count_rq_delta = strtoll(val, &end, 10);
			/* per-CPU areas are small: anything else is not what was written */
			if (errno || end == val || *end || out.preempt_count_rq_delta > (1 << 24) ||
			    out.preempt_count_rq_delta < -(1 << 24))
				err = -EINVAL;
			seen |= DELTA;
		} else
			return -EINVAL;	/* another boot, release or an unknown key */
		if (err)
			return err;
	}
	if (seen != (BOOT | REL | PREV | BLOCK | DELTA | MULTI | PROVEN | IDS | END))
		return -EINVAL;
	*kf = out;
	return 0;
}
