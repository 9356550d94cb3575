// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The report's "GPU memory" section and its JSON key gpu_memory: device memory each process
 * allocated and freed in the window (tracer_gpumem.c), and the trainer's growth across
 * steps (steps.c) with the leak verdict. */
#include <inttypes.h>
#include <json-c/json.h>
#include "report.h"

static void print_signed_bytes(FILE *out, double b)
{
	double a = b < 0 ? -b : b;

	fprintf(out, "%s", b < 0 ? "-" : "");
	if (a >= 1e9)
		fprintf(out, "%.2f GB", a / 1e9);
	else if (a >= 1e6)
		fprintf(out, "%.1f MB", a / 1e6);
	else if (a >= 1e3)
		fprintf(out, "%.1f kB", a / 1e3);
	else
		fprintf(out, "%.0f B", a);
}

const struct gpumem_fit *gpumem_growth(const struct report *r)
{
	return r->gpu_traced && r->steps.count ? &r->steps.gpu.dev_growth : NULL;
}

void gpumem_print_text(FILE *out, const struct report *r)
{
	const struct gpumem_fit *f = gpumem_growth(r);

	if (!r->devmem_traced || !r->nr_devmem)
		return;
	fprintf(out, "\nGPU memory (cudaMalloc*/cuMemAlloc* less frees, since the attach; memory "
		"allocated before it is not seen):\n");
	for (int i = 0; i < r->nr_devmem; i++) {
		const struct gpumem_proc *p = &r->devmem[i];

		fprintf(out, "  %-8s pid %u: outstanding ", p->root ? "TRAINER" : "WORKERS", p->pid);
		print_signed_bytes(out, (double)p->start_bytes);
		fprintf(out, " at the window's start, ");
		print_signed_bytes(out, (double)p->end_bytes);
		fprintf(out, " at its end, peak ");
		print_signed_bytes(out, (double)p->peak_bytes);
		fprintf(out, "; %" PRIu64 " allocations (", p->allocs);
		print_signed_bytes(out, (double)p->alloc_bytes);
		fprintf(out, "), %" PRIu64 " frees (", p->frees + p->frees_unseen);
		print_signed_bytes(out, (double)p->free_bytes);
		fprintf(out, "%s)\n", p->frees_unseen ? " of those seen allocated" : "");
	}
	if (f && f->leak) {
		fprintf(out, "  the trainer's process grows ");
		print_signed_bytes(out, f->bytes_per_step);
		fprintf(out, "/step (");
		print_signed_bytes(out, f->bytes_per_step * r->steps.per_second);
		fprintf(out, "/s) over %d steps, steadily (R^2 %.2f): a probable device-memory leak\n",
			f->steps, f->r2);
	}
	if (r->devmem_lost)
		fprintf(out, "  %" PRIu64 " allocations not followed (map full, %d entries): the "
			"figures miss them\n", r->devmem_lost, PP_MAX_DEV_ALLOCS);
}

static json_object *proc_json(const struct gpumem_proc *p)
{
	json_object *o = json_object_new_object();

	json_object_object_add(o, "pid", json_object_new_int64(p->pid));
	json_object_object_add(o, "root", json_object_new_boolean(p->root));
	json_object_object_add(o, "start_bytes", json_object_new_int64(p->start_bytes));
	json_object_object_add(o, "end_bytes", json_object_new_int64(p->end_bytes));
	json_object_object_add(o, "peak_bytes", json_object_new_int64(p->peak_bytes));
	json_object_object_add(o, "allocations", json_object_new_int64(p->allocs));
	json_object_object_add(o, "frees", json_object_new_int64(p->frees));
	json_object_object_add(o, "allocated_bytes", json_object_new_int64(p->alloc_bytes));
	json_object_object_add(o, "freed_bytes", json_object_new_int64(p->free_bytes));
	json_object_object_add(o, "frees_unseen", json_object_new_int64(p->frees_unseen));
	return o;
}

/*
 * gpu_memory, in every report: traced (allocation probes attached), the root process's
 * outstanding bytes at the window's start and end and its peak (null when not traced), every
 * process's figures, and the trainer's growth across steps with the leak flag.
 */
json_object *gpumem_json(const struct report *r)
{
	const struct gpumem_fit *f = gpumem_growth(r);
	const struct gpumem_proc *root = NULL;
	json_object *o = json_object_new_object(), *arr = json_object_new_array();

	for (int i = 0; i < r->nr_devmem; i++) {
		if (r->devmem[i].root && !root)
			root = &r->devmem[i];
		json_object_array_add(arr, proc_json(&r->devmem[i]));
	}
	json_object_object_add(o, "traced", json_object_new_boolean(r->devmem_traced));
	json_object_object_add(o, "since_attach", json_object_new_boolean(true));
	json_object_object_add(o, "start_bytes", r->devmem_traced ?
			       json_object_new_int64(root ? root->start_bytes : 0) : NULL);
	json_object_object_add(o, "end_bytes", r->devmem_traced ?
			       json_object_new_int64(root ? root->end_bytes : 0) : NULL);
	json_object_object_add(o, "peak_bytes", r->devmem_traced ?
			       json_object_new_int64(root ? root->peak_bytes : 0) : NULL);
	json_object_object_add(o, "processes", arr);
	json_object_object_add(o, "growth_bytes_per_step", f ?
			       json_object_new_double(f->bytes_per_step) : NULL);
	json_object_object_add(o, "growth_bytes_per_s", f ?
			       json_object_new_double(f->bytes_per_step * r->steps.per_second) : NULL);
	json_object_object_add(o, "growth_r2", f ? json_object_new_double(f->r2) : NULL);
	json_object_object_add(o, "steps_fitted", json_object_new_int(f ? f->steps : 0));
	json_object_object_add(o, "leak", json_object_new_boolean(f && f->leak));
	json_object_object_add(o, "lost", json_object_new_int64(r->devmem_lost));
	json_object_object_add(o, "max_allocations", json_object_new_int(PP_MAX_DEV_ALLOCS));
	return o;
}
