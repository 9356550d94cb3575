// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The advice that rests on the steps and on memory readings rather than on the trainer's
 * states: a probable leak, host or device, and launch-bound steps. Pure logic. */
#include "classify.h"
#include "memory.h"
#include "recommend_text.h"
#include "steps.h"

/* Memory that grew steadily all window (memory.c): a probable leak, per group, with what
 * usually causes it there. step_s: seconds per step, 0 where no step was found. */
void recommend_memory(struct analysis *a, const struct mem_summary *m, double step_s)
{
	for (int g = 0; g < NR_MEM_GROUPS; g++) {
		const struct mem_group_summary *s = &m->group[g];
		double hour_gb = s->growth_bytes_per_s * 3600 / 1e9;
		struct recommendation *r;

		if (!s->leak)
			continue;
		r = rec_add(a, g == MEM_WORKERS ? "worker_memory_leak" : "trainer_memory_leak", 0);
		if (g == MEM_WORKERS)
			rec_say(r, "The DataLoader workers' memory grows %.1f MB a %s, %.1f GB an hour: look "
			        "for a Dataset that keeps what it loads (a cache without a bound, a list "
			        "appended to per item). Python lists and dicts of objects that workers read "
			        "are copied page by page as reference counts touch them: hold such data in "
			        "numpy arrays or tensors.", s->growth_bytes_per_s * (step_s ? step_s : 1) / 1e6,
			        step_s ? "step" : "second", hour_gb);
		else
			rec_say(r, "The training process's memory grows %.1f MB a %s, %.1f GB an hour: look "
			        "for objects kept across steps (losses or outputs appended to a list without "
			        ".item() or .detach(), which keeps their graphs), or a cache without a bound.",
			        s->growth_bytes_per_s * (step_s ? step_s : 1) / 1e6, step_s ? "step" : "second",
			        hour_gb);
		rec_because(r, "%s resident memory rose steadily through the %.1f s window in %d of %d "
			    "process%s (%.1f MB/s; a straight line fits each, R^2 >= %.1f)",
			    g == MEM_WORKERS ? "the workers'" : "the training process's", m->span_s,
			    s->growing, s->processes, s->processes == 1 ? "" : "es",
			    s->growth_bytes_per_s / 1e6, MEM_LEAK_MIN_R2);
	}
}

/* A step spent issuing kernel launches (steps.c, steps_launch_bound()). */
static void recommend_launch_bound(struct analysis *a, const struct step_summary *s)
{
	struct recommendation *r = rec_add(a, "launch_bound", 0);

	rec_say(r, "Launch-bound (CPU-side): the trainer spends its step issuing kernel launches, so "
	        "the GPU waits for work the host has not launched yet. Launch fewer, larger kernels: "
	        "capture the step in CUDA graphs (torch.cuda.CUDAGraph, or torch.compile(mode="
	        "\"reduce-overhead\")), let torch.compile fuse small ops, or batch more work per op "
	        "(a larger batch, fused optimizers such as foreach=True/fused=True).");
	rec_because(r, "%.0f launches a step, one every %.1f us, %.0f%% of the steps' time between "
		    "launches; the trainer is on-CPU %.0f%% of its steps",
		    steps_launches_per_step(s), steps_launch_gap_s(s) * 1e6,
		    100 * steps_launch_share(s), 100 * s->all.share[PP_RUNNING]);
	if (steps_launches_sampled(s))
		rec_because(r, " (launches counted in %d of the %d steps: probed in bursts)",
			    s->gpu.launch_steps, s->count);
}

/* Outstanding device memory that grew step after step and did not level off. */
static void recommend_device_leak(struct analysis *a, const struct step_summary *s)
{
	const struct gpumem_fit *f = &s->gpu.dev_growth;
	struct recommendation *r = rec_add(a, "device_memory_leak", 0);

	rec_say(r, "Device memory grows %.2f MB a step (%.1f GB an hour at %.1f steps/s): a probable "
	        "leak. Look for GPU tensors kept across steps: losses or outputs appended to a list "
	        "without .item() or .detach() (which keeps their graphs too), a cache of tensors "
	        "without a bound. PyTorch's caching allocator keeps freed blocks for reuse, so its "
	        "cudaMalloc total levels off once warm; growth that never levels off is memory still "
	        "referenced (torch.cuda.memory_snapshot() names what holds it).",
	        f->bytes_per_step / 1e6, f->bytes_per_step * s->per_second * 3600 / 1e9, s->per_second);
	rec_because(r, "the trainer's process's outstanding device memory (cudaMalloc*/cuMemAlloc* "
		    "less frees, since the attach) rose %.1f MB over %d steps, along a straight line "
		    "(R^2 %.2f), the later half at %.2f MB a step",
		    f->growth_bytes / 1e6, f->steps, f->r2, f->late_bytes_per_step / 1e6);
}

void recommend_gpu_steps(struct analysis *a, const struct step_summary *s, bool launch_bound)
{
	if (launch_bound)
		recommend_launch_bound(a, s);
	if (s->count && s->gpu.dev_growth.leak)
		recommend_device_leak(a, s);
}
