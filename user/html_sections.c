// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The HTML page's sections that the text report has beside its plots: the job's ranks, who the
 * trainer waited on, the GPU API per step, GPU memory, host memory and where the trainer waits. Each reads the figures
 * the text report's sections read, through the same functions (report.h, steps.h), and says
 * "not traced" where the report has no data rather than leaving a section out.
 */
#include <inttypes.h>
#include <stdint.h>
#include <string.h>
#include "gpu_apis.h"
#include "html_sections.h"
#include "html_svg.h"
#include "ranks.h"
#include "report.h"

/* State shares in words, as the text report gives a step's. */
static void put_shares(FILE *out, const double share[PP_NR_STATES])
{
	char buf[160];

	steps_shares_text(buf, sizeof(buf), share);
	html_escape(out, buf, strlen(buf));
}

void html_put_job(FILE *out, const struct report *r)
{
	const struct job_ranks *job = r->job;

	if (!job || !job->nr)
		return;
	fputs("<section id=\"job\">\n<h2>Job: ranks</h2>\n<p>", out);
	html_text(out, job->summary, sizeof(job->summary));
	fputs(".</p>\n<div class=\"tw\"><table>\n<thead><tr><th>rank</th><th>pid</th><th class=\"l\">verdict"
	      "</th><th class=\"l\">its trainer's time</th><th>workers</th></tr></thead>\n<tbody>\n", out);
	for (int i = 0; i < job->nr; i++) {
		const struct rank_result *rk = &job->ranks[i];

		fprintf(out, "<tr%s><td>%d%s</td><td>%d</td><td class=\"l\">%s</td><td class=\"l\">",
			i == job->straggler ? " class=\"straggler\"" : "", rk->rank,
			i == job->straggler ? " (the straggler)" : "", (int)rk->pid,
			verdict_name(rk->verdict));
		put_shares(out, rk->share);
		fprintf(out, "</td><td>%d</td></tr>\n", rk->workers);
	}
	fputs("</tbody>\n</table></div>\n</section>\n", out);
}

void html_put_waited_on(FILE *out, const struct report *r)
{
	const struct analysis *a = &r->analysis;
	char who[64];

	fputs("<section id=\"waited-on\">\n<h2>Waited on</h2>\n", out);
	if (!a->nr_waited_on) {
		fputs("<p>No wakeup of another thread or an interrupt ended a wait of the trainer in "
		      "the window.</p>\n</section>\n", out);
		return;
	}
	fprintf(out, "<p class=\"note\">What ended the trainer's waits: each waker's share of the "
		"%.3f s the trainer spent off-CPU until woken, what the trainer was waiting in, and "
		"the waker's own time.</p>\n<div class=\"tw\"><table>\n<thead><tr><th>waker</th>"
		"<th class=\"l\">role</th><th>pid</th><th>share</th><th>wakeups</th><th class=\"l\">the trainer waited in"
		"</th><th class=\"l\">its own time</th></tr></thead>\n<tbody>\n", a->waited_total_ns / 1e9);
	for (int i = 0; i < a->nr_waited_on && i < 5; i++) {
		const struct waited_on *w = &a->waited_on[i];
		const struct thread_result *t = report_waker_thread(r, w);
		int shown = 0;

		format_waker_name(who, sizeof(who), w);
		fputs("<tr><td><code>", out);
		html_text(out, who, sizeof(who));
		fprintf(out, "</code></td><td class=\"l\">%s</td><td>", report_waker_role(r, w));
		if (w->ctx == PP_WAKE_TASK)
			fprintf(out, "%u", w->tgid);
		fprintf(out, "</td><td>%.1f%%</td><td>%llu</td><td class=\"l\">",
			a->waited_total_ns ? 100.0 * w->ns / a->waited_total_ns : 0,
			(unsigned long long)w->wakeups);
		for (int s = 0; s < PP_NR_STATES; s++)
			if (w->cause_ns[s])
				fprintf(out, "%s%s %.3f s", shown++ ? ", " : "", state_name(s),
					w->cause_ns[s] / 1e9);
		fputs("</td><td class=\"l\">", out);
		if (t && t->wall_ns) {
			double share[PP_NR_STATES];

			for (int s = 0; s < PP_NR_STATES; s++)
				share[s] = (double)t->ns[s] / t->wall_ns;
			put_shares(out, share);
		} else {
			fputs("not traced", out);
		}
		fputs("</td></tr>\n", out);
	}
	fputs("</tbody>\n</table></div>\n</section>\n", out);
}

/* A row of per-step figures: what, per step, the range over the steps where known, total. */
/* A row of calls: per_step a step, lo to hi in one (when range), total in all. */
static void gpu_row_of(FILE *out, const char *what, double per_step, uint64_t total, uint64_t lo,
		       uint64_t hi, bool range)
{
	char buf[32];

	fprintf(out, "<tr><td>%s</td><td>%s</td><td>", what,
		report_fmt_count(buf, sizeof(buf), per_step));
	if (range)
		fprintf(out, "%llu to %llu", (unsigned long long)lo, (unsigned long long)hi);
	fprintf(out, "</td><td>%llu</td></tr>\n", (unsigned long long)total);
}

static void gpu_row(FILE *out, const char *what, const struct step_summary *s, uint64_t total,
		    uint64_t lo, uint64_t hi, bool range)
{
	gpu_row_of(out, what, steps_per_step(s, total), total, lo, hi, range);
}

static void put_copies(FILE *out, const struct report *r)
{
	const struct step_summary *s = &r->steps;
	const struct pp_copy_counts *c = &s->gpu.copies;
	char calls[32], bytes[32];
	bool any = false;

	for (int d = 0; d < PP_NR_COPY_DIRS; d++) {
		double share = steps_pageable_share(c, d);

		if (!c->calls[d])
			continue;
		if (!any)
			fputs("<div class=\"tw\"><table>\n<thead><tr><th>copies</th><th>a step</th>"
			      "<th>bytes a step</th><th>pageable</th></tr></thead>\n<tbody>\n", out);
		any = true;
		fprintf(out, "<tr><td>%s</td><td>%s</td><td>%s</td><td>", copy_dir_label(d),
			report_fmt_count(calls, sizeof(calls), steps_per_step(s, c->calls[d])),
			report_fmt_bytes(bytes, sizeof(bytes), steps_per_step(s, c->bytes[d])));
		if ((d == PP_COPY_HTOD || d == PP_COPY_DTOH) && share >= 0)
			fprintf(out, "%.0f%%", 100 * share);
		fputs("</td></tr>\n", out);
	}
	if (any)
		fputs("</tbody>\n</table></div>\n", out);
	else
		fputs("<p>No host/device copy in the trainer's steps.</p>\n", out);
}

void html_put_gpu_steps(FILE *out, const struct report *r)
{
	const struct step_summary *s = &r->steps;
	const struct step_gpu *g = &s->gpu;
	char a[32], b[32];

	fputs("<section id=\"gpu-steps\">\n<h2>GPU API per step</h2>\n", out);
	if (!r->gpu_traced) {
		fputs("<p>Not traced", out);
		if (r->gpu_why_not[0]) {
			fputs(": ", out);
			html_text(out, r->gpu_why_not, sizeof(r->gpu_why_not));
		}
		fputs(".</p>\n</section>\n", out);
		return;
	}
	if (!s->count) {
		fputs("<p>No whole step of the trainer in the window: its GPU calls are not divided "
		      "into steps (the histograms below count them all).</p>\n</section>\n", out);
		return;
	}
	fprintf(out, "<p class=\"note\">The trainer's calls over its %d whole steps: kernel "
		"launches %s/s", s->count, report_fmt_rate(a, sizeof(a), steps_launch_rate(s)));
	if (g->launch_gaps)
		fprintf(out, ", %.1f \xc2\xb5s apart where no sync came between",
			steps_launch_gap_s(s) * 1e6);
	if (!g->launch_steps)
		fputs("; kernel launches not counted: probed in bursts, none spanning a whole step",
		      out);
	else if (steps_launches_sampled(s))
		fprintf(out, "; launches counted in %d of the steps, as they were probed in bursts",
			g->launch_steps);
	fputs(".</p>\n<div class=\"tw\"><table>\n<thead><tr><th>calls</th><th>a step</th>"
	      "<th>fewest to most in a step</th><th>in all</th></tr></thead>\n<tbody>\n", out);
	/* Over the steps whose launches were all counted, which bursts may make fewer. */
	if (g->launch_steps)
		gpu_row_of(out, "kernel launches", steps_launches_per_step(s), g->launches,
			   g->launches_min, g->launches_max, g->launch_timed > 0);
	/* The fewest and most come from the steps timed one by one: none, no range. */
	gpu_row(out, "synchronising calls", s, g->syncs, g->syncs_min, g->syncs_max, s->timed > 0);
	for (int api = 0; api < PP_MAX_SYNC_APIS && api < gpu_sync_api_count; api++) {
		char what[96];

		if (!g->sync_calls[api])
			continue;
		/* API names are the project's own table's, never the target's. */
		snprintf(what, sizeof(what), "&nbsp;&nbsp;<code>%s</code>", gpu_apis[api].name);
		gpu_row(out, what, s, g->sync_calls[api], 0, 0, false);
	}
	/* As the text report: device figures where the steps allocated or freed. */
	if (r->devmem_traced && (g->dev.allocs || g->dev.frees)) {
		gpu_row(out, "device allocations", s, g->dev.allocs, g->dev_allocs_min,
			g->dev_allocs_max, s->timed > 0);
		gpu_row(out, "device frees", s, g->dev.frees, g->dev_frees_min, g->dev_frees_max,
			s->timed > 0);
	}
	fputs("</tbody>\n</table></div>\n", out);
	put_copies(out, r);
	if (r->launch_bound)
		fprintf(out, "<p><strong>Launch-bound (CPU-side)</strong>: %.0f launches a step, one "
			"every %.1f \xc2\xb5s, %.0f%% of the steps' time between launches: the host "
			"spends its step issuing launches, and the GPU waits for them.</p>\n",
			steps_launches_per_step(s), steps_launch_gap_s(s) * 1e6,
			100 * steps_launch_share(s));
	if (steps_many_syncs(s))
		fprintf(out, "<p><strong>%s syncs a step</strong>: each makes the host wait until the "
			"GPU has caught up.</p>\n", report_fmt_count(b, sizeof(b), steps_per_step(s, g->syncs)));
	fputs("</section>\n", out);
}

void html_put_nccl(FILE *out, const struct report *r)
{
	double secs = (r->end_ns - r->start_ns) / 1e9;
	char bytes[32];

	if (!r->nr_nccl_libs)
		return;
	fputs("<section id=\"nccl\">\n<h2>NCCL</h2>\n<p class=\"note\">", out);
	for (int i = 0; i < r->nr_nccl_libs; i++) {
		fputs(i ? ", <code>" : "Probed: <code>", out);
		html_text(out, r->nccl_libs[i].path, sizeof(r->nccl_libs[i].path));
		fputs("</code>", out);
	}
	fputs(". Time inside these calls reads COMM_WAIT; inside ncclGroupStart/End the "
	      "collectives return at once and ncclGroupEnd holds the wait.</p>\n", out);
	if (!r->nccl_traced) {
		fputs("<p>No collective could be probed (see Not traced).</p>\n</section>\n", out);
		return;
	}
	if (!nccl_called(r)) {
		fputs("<p>No collective was called in the window.</p>\n</section>\n", out);
		return;
	}
	fputs("<div class=\"tw\"><table>\n<thead><tr><th>call</th><th>calls</th><th>a second</th>"
	      "<th>bytes</th><th>s inside</th><th>mean \xc2\xb5s</th><th>p50 \xc2\xb5s</th>"
	      "<th>p99 \xc2\xb5s</th><th>max \xc2\xb5s</th></tr></thead>\n<tbody>\n", out);
	for (int op = 0; op < PP_NR_NCCL_CALLS; op++) {
		const struct nccl_result *n = &r->nccl[op];

		if (!n->calls)
			continue;
		/* API names are the project's own table's, never the target's. */
		fprintf(out, "<tr><td><code>%s</code></td><td>%llu</td><td>%.1f</td><td>", n->name,
			(unsigned long long)n->calls, secs > 0 ? n->calls / secs : 0);
		if (op != PP_NCCL_GROUP_START && op != PP_NCCL_GROUP_END)
			fprintf(out, "%s%s", report_fmt_bytes(bytes, sizeof(bytes), n->bytes),
				op == PP_NCCL_ALL_GATHER ? " received" : "");
		if (n->unsized)
			fprintf(out, " (%llu calls of unknown size not in it)",
				(unsigned long long)n->unsized);
		fprintf(out, "</td><td>%.3f</td><td>%.1f</td><td>%.0f</td><td>%.0f</td><td>%.0f</td>"
			"</tr>\n", n->total_ns / 1e9, n->total_ns / 1e3 / n->calls,
			report_percentile_us(n->slots, n->max_ns, 50),
			report_percentile_us(n->slots, n->max_ns, 99), n->max_ns / 1e3);
	}
	fputs("</tbody>\n</table></div>\n</section>\n", out);
}

void html_put_gpumem(FILE *out, const struct report *r)
{
	const struct gpumem_fit *f = gpumem_growth(r);
	char v[5][32];

	fputs("<section id=\"gpu-memory\">\n<h2>GPU memory</h2>\n", out);
	if (!r->devmem_traced) {
		fputs("<p>Not traced: no device-memory allocation call (cudaMalloc*, cuMemAlloc*) "
		      "was probed.</p>\n</section>\n", out);
		return;
	}
	if (!r->nr_devmem) {
		fputs("<p>No device memory allocated or freed in the window.</p>\n</section>\n", out);
		return;
	}
	fputs("<p class=\"note\">Bytes outstanding: cudaMalloc*/cuMemAlloc* less frees, since the "
	      "attach (memory allocated before it is not seen).</p>\n<div class=\"tw\"><table>\n"
	      "<thead><tr><th>process</th><th>at the start</th><th>at the end</th><th>peak</th>"
	      "<th>allocations</th><th>frees</th></tr></thead>\n<tbody>\n", out);
	for (int i = 0; i < r->nr_devmem; i++) {
		const struct gpumem_proc *p = &r->devmem[i];

		fprintf(out, "<tr><td>%s pid %u</td><td>%s</td><td>%s</td><td>%s</td>"
			"<td>%" PRIu64 " (%s)</td><td>%" PRIu64 " (%s%s)</td></tr>\n",
			p->root ? "TRAINER" : "WORKERS", p->pid,
			report_fmt_bytes(v[0], sizeof(v[0]), (double)p->start_bytes),
			report_fmt_bytes(v[1], sizeof(v[1]), (double)p->end_bytes),
			report_fmt_bytes(v[2], sizeof(v[2]), (double)p->peak_bytes), p->allocs,
			report_fmt_bytes(v[3], sizeof(v[3]), (double)p->alloc_bytes),
			p->frees + p->frees_unseen,
			report_fmt_bytes(v[4], sizeof(v[4]), (double)p->free_bytes),
			p->frees_unseen ? " of those seen allocated" : "");
	}
	fputs("</tbody>\n</table></div>\n", out);
	if (f && f->leak)
		fprintf(out, "<p class=\"alert\">The trainer's process grows %s a step (%s/s) over %d "
			"steps, steadily (R\xc2\xb2 %.2f): a probable device-memory leak.</p>\n",
			report_fmt_bytes(v[0], sizeof(v[0]), f->bytes_per_step),
			report_fmt_bytes(v[1], sizeof(v[1]), f->bytes_per_step * r->steps.per_second),
			f->steps, f->r2);
	if (r->devmem_lost)
		fprintf(out, "<p class=\"note\">%" PRIu64 " allocations not followed (map full, %d "
			"entries): the figures miss them.</p>\n", r->devmem_lost, PP_MAX_DEV_ALLOCS);
	fputs("</section>\n", out);
}

void html_put_memory(FILE *out, const struct report *r)
{
	const struct mem_summary *m = &r->mem;
	double per_step = memory_step_s(r);
	char v[4][32];

	fputs("<section id=\"memory\">\n<h2>Memory</h2>\n", out);
	if (!r->memory_on) {
		fputs("<p>Host memory: not read in this trace.</p>\n</section>\n", out);
		return;
	}
	if (!m->readings) {
		fputs("<p>Host memory: no reading, the window was too short.</p>\n</section>\n", out);
		return;
	}
	fprintf(out, "<p class=\"note\">Resident memory (RSS) summed over each role's processes, "
		"read from /proc every %.2f s (%d readings). Growth is a leak when it held all "
		"window.</p>\n<div class=\"tw\"><table>\n<thead><tr><th>role</th><th>processes</th>"
		"<th>now</th><th>peak</th><th class=\"l\">growth</th><th>major faults</th></tr></thead>\n"
		"<tbody>\n", m->interval_s, m->readings);
	for (int g = 0; g < NR_MEM_GROUPS; g++) {
		const struct mem_group_summary *s = &m->group[g];

		if (!s->processes)
			continue;
		fprintf(out, "<tr%s><td>%s</td><td>%d</td><td>%s</td><td>%s</td><td class=\"l\">",
			s->leak ? " class=\"leak\"" : "", mem_group_name(g), s->processes,
			report_fmt_bytes(v[0], sizeof(v[0]), (double)s->rss_bytes),
			report_fmt_bytes(v[1], sizeof(v[1]), (double)s->peak_bytes));
		if (s->leak && per_step)
			fprintf(out, "%s a step (%s/s) in %d of %d: a probable leak",
				report_fmt_bytes(v[2], sizeof(v[2]), s->growth_bytes_per_s * per_step),
				report_fmt_bytes(v[3], sizeof(v[3]), s->growth_bytes_per_s), s->growing,
				s->processes);
		else if (s->leak)
			fprintf(out, "%s/s in %d of %d: a probable leak",
				report_fmt_bytes(v[2], sizeof(v[2]), s->growth_bytes_per_s), s->growing,
				s->processes);
		else
			fputs("no steady growth", out);
		fprintf(out, "</td><td>%llu", (unsigned long long)s->major_faults);
		if (per_step && m->span_s > 0)
			fprintf(out, " (%.2f a step)", s->major_faults * per_step / m->span_s);
		fputs("</td></tr>\n", out);
	}
	fputs("</tbody>\n</table></div>\n", out);
	if (r->mem_readings_lost)
		fprintf(out, "<p class=\"note\">%llu readings left out (over the cap).</p>\n",
			(unsigned long long)r->mem_readings_lost);
	fputs("</section>\n", out);
}

/* One state's sites and wakers: where the trainer's Python stack stood as its waits began,
 * and what the threads that ended them were running. */
static void put_wait_state(FILE *out, const struct report *r, int s)
{
	const struct where_wait_state *st = &r->wait_states[s];

	fprintf(out, "<h3><span class=\"swatch\" style=\"background:%s\"></span>%s: %.2f s in "
		"%llu waits</h3>\n<div class=\"tw\"><table>\n<thead><tr><th>share</th>"
		"<th class=\"l\">where the trainer waited</th></tr></thead>\n<tbody>\n",
		html_state_color(s), state_name(s), st->ns / 1e9, (unsigned long long)st->count);
	for (int k = 0; k < st->nr_sites; k++) {
		const struct wait_site *w = &st->sites[k];

		fprintf(out, "<tr><td>%.1f%%</td><td class=\"l\"><code>",
			st->ns ? 100.0 * w->ns / st->ns : 0);
		html_text(out, where_name_of(r, w->site), SIZE_MAX);
		fputs("</code>", out);
		if (w->inner != w->site && w->inner >= 0) {
			fputs(", in <code>", out);
			html_text(out, where_name_of(r, w->inner), SIZE_MAX);
			fputs("</code>", out);
		}
		fputs("</td></tr>\n", out);
	}
	if (st->nr_wakers)
		fputs("</tbody>\n<thead><tr><th>share</th><th class=\"l\">what ended the waits</th>"
		      "</tr></thead>\n<tbody>\n", out);
	for (int k = 0; k < st->nr_wakers; k++) {
		const struct waker_site *w = &st->wakers[k];

		fprintf(out, "<tr><td>%.1f%%</td><td class=\"l\">",
			st->ns ? 100.0 * w->ns / st->ns : 0);
		if (!w->tid) {
			fputs("an interrupt or a task outside the job", out);
		} else {
			fprintf(out, "%s thread %u, in <code>", w->role >= 0 ? role_name(w->role) :
				"untraced", w->tid);
			html_text(out, where_name_of(r, w->site), SIZE_MAX);
			fputs("</code>", out);
		}
		fputs("</td></tr>\n", out);
	}
	fputs("</tbody>\n</table></div>\n", out);
}

void html_put_waits(FILE *out, const struct report *r)
{
	uint64_t total = 0, count = 0;

	for (int s = 0; s < PP_NR_STATES; s++) {
		total += r->wait_states[s].ns;
		count += r->wait_states[s].count;
	}
	fputs("<section id=\"waits\">\n<h2>Where the trainer waits</h2>\n", out);
	if (!count) {
		fprintf(out, "<p>No wait of the trainer with its Python stack in the window%s.</p>\n",
			r->sample_hz ? "" : " (stacks are read with the CPU samples: sampling was off)");
	} else {
		fprintf(out, "<p class=\"note\">The trainer's %llu waits (%.2f s) by state: its Python "
			"stack as each began, by wait time, and what the thread that ended them was "
			"running.</p>\n", (unsigned long long)count, total / 1e9);
		for (int s = 0; s < PP_NR_STATES; s++)
			if (r->wait_states[s].count &&
			    r->wait_states[s].ns >= WHERE_WAIT_STATE_MIN_SHARE * total)
				put_wait_state(out, r, s);
	}
	if (r->wait_records_lost)
		fprintf(out, "<p class=\"note\">%llu waits lost (ring buffer full).</p>\n",
			(unsigned long long)r->wait_records_lost);
	fputs("</section>\n", out);
}
