// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include "step_store.h"
#include "grow.h"

/* The GPU counts: every field from launches to source, as whole words. */
#define GPU_FROM offsetof(struct pp_step_record, launches)
#define GPU_WORDS ((offsetof(struct pp_step_record, source) - GPU_FROM) / sizeof(uint64_t))
_Static_assert(GPU_FROM % sizeof(uint64_t) == 0, "GPU counts start on a word");
_Static_assert((offsetof(struct pp_step_record, source) - GPU_FROM) % sizeof(uint64_t) == 0,
	       "GPU counts are whole words");
_Static_assert(GPU_WORDS <= 64, "one mask word covers the GPU counts");

int step_store_add(struct step_store *s, const struct pp_step_record *r)
{
	uint64_t gpu[GPU_WORDS], mask = 0;
	size_t nonzero = 0;
	struct step_point *p;

	memcpy(gpu, (const char *)r + GPU_FROM, sizeof(gpu));
	for (size_t w = 0; w < GPU_WORDS; w++)
		if (gpu[w]) {
			mask |= 1ULL << w;
			nonzero++;
		}
	if (grow_array(&s->points, &s->cap, s->nr, sizeof(*s->points), 256))
		return -ENOMEM;
	/* The mask and its non-zero words: room up to element nr_words + nonzero. */
	if (mask && grow_array(&s->words, &s->cap_words, s->nr_words + (int)nonzero,
			       sizeof(*s->words), 256))
		return -ENOMEM;
	p = &s->points[s->nr++];
	*p = (struct step_point){ .tid = r->tid, .tgid = r->tgid, .ts = r->ts, .phase = r->phase,
				  .gpu_depth = r->gpu_depth, .phase_start_ns = r->phase_start_ns,
				  .source = (uint16_t)r->source, .seq = (uint16_t)r->seq,
				  .call_state = r->call_state, .launch_epoch = r->launch_epoch,
				  .gpu_at = STEP_NO_GPU };
	memcpy(p->ns, r->ns, sizeof(p->ns));
	if (!mask)
		return 0;
	p->gpu_at = s->nr_words;
	s->words[s->nr_words++] = mask;
	for (size_t w = 0; w < GPU_WORDS; w++)
		if (gpu[w])
			s->words[s->nr_words++] = gpu[w];
	return 0;
}

void step_store_record(const struct step_store *s, const struct step_point *p,
		       struct pp_step_record *out)
{
	uint64_t gpu[GPU_WORDS] = { 0 };

	*out = (struct pp_step_record){ .tid = p->tid, .tgid = p->tgid, .ts = p->ts,
					.phase = p->phase, .gpu_depth = p->gpu_depth,
					.phase_start_ns = p->phase_start_ns, .source = p->source,
					.call_state = p->call_state, .seq = p->seq,
					.launch_epoch = p->launch_epoch };
	memcpy(out->ns, p->ns, sizeof(out->ns));
	if (p->gpu_at == STEP_NO_GPU || p->gpu_at >= (uint32_t)s->nr_words)
		return;
	const uint64_t *word = &s->words[p->gpu_at + 1];
	uint64_t mask = s->words[p->gpu_at];

	for (size_t w = 0; w < GPU_WORDS; w++)
		if (mask & 1ULL << w)
			gpu[w] = *word++;
	memcpy((char *)out + GPU_FROM, gpu, sizeof(gpu));
}

void step_store_filter(struct step_store *s, bool (*keep)(const struct step_point *p))
{
	int kept = 0;

	for (int i = 0; i < s->nr; i++)
		if (keep(&s->points[i]))
			s->points[kept++] = s->points[i];
	s->nr = kept;
}

void step_store_free(struct step_store *s)
{
	free(s->points);
	free(s->words);
	*s = (struct step_store){ 0 };
}
