// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "flamegraph.h"
#include "hist.h"
#include "html_report.h"
#include "html_sections.h"
#include "html_svg.h"
#include "report.h"

/* More steps than this are drawn as bars of consecutive steps: a bar stays wide enough to
 * see and to point at. */
#define MAX_STEP_BARS 120
/* The flame graph's width, about the page's: its 12 px labels stay 12 px on a laptop. */
#define FLAME_W 1000

/* System font stacks only: a report read offline must not fetch a font, and the reader's own
 * UI font reads best on their screen. */
static const char page_style[] =
	":root{color-scheme:light}"
	"*{-webkit-print-color-adjust:exact;print-color-adjust:exact}"
	"body{margin:0;background:#eef0f3;color:#1d2330;"
	"font:16px/1.5 system-ui,-apple-system,\"Segoe UI\",Roboto,\"Noto Sans\",\"Liberation Sans\","
	"\"DejaVu Sans\",Arial,sans-serif}"
	"main{box-sizing:border-box;max-width:1080px;margin:0 auto;padding:28px 36px 40px;"
	"background:#fff;min-height:100vh}"
	"h1{font-size:1.6rem;margin:0 0 .2rem}"
	"h2{font-size:1.2rem;margin:2.2rem 0 .6rem;padding-bottom:.3rem;border-bottom:1px solid #dde1e7}"
	"h3{font-size:1rem;margin:1.4rem 0 .3rem}"
	"p{margin:.4rem 0}"
	"code,.mono{font-family:ui-monospace,\"SF Mono\",Menlo,Consolas,\"DejaVu Sans Mono\","
	"\"Liberation Mono\",monospace;font-size:.88em;overflow-wrap:anywhere}"
	".target{font-size:1.05rem}"
	".muted,.note{color:#5b6472}"
	".note{font-size:.92rem}"
	".verdict{margin:1.2rem 0 .4rem;padding:.8rem 1.1rem;border-left:8px solid #888;"
	"background:#f4f6f9;border-radius:4px}"
	".verdict .name{font-size:.8rem;font-weight:700;letter-spacing:.06em;color:#5b6472}"
	".verdict p{font-size:1.2rem;font-weight:600;margin:.1rem 0 0}"
	".legend{display:flex;flex-wrap:wrap;gap:.2rem 1.1rem;list-style:none;padding:0;"
	"margin:.6rem 0;font-size:.86rem}"
	".swatch{display:inline-block;width:.85em;height:.85em;border-radius:2px;"
	"vertical-align:-.08em;margin-right:.4em;border:1px solid rgba(0,0,0,.15)}"
	"svg.plot,svg.flamegraph{display:block;width:100%;height:auto;margin:.4rem 0}"
	"svg.plot text{font-family:inherit;font-size:13px;fill:#3a4250}"
	"svg.plot text.muted{fill:#6b7380}"
	"svg.plot text.in{font-size:12px;font-weight:600}"
	"svg.plot text.label{font-size:14px;fill:#1d2330}"
	"table{border-collapse:collapse;font-size:.88rem;font-variant-numeric:tabular-nums;margin:.6rem 0}"
	"th,td{padding:.2rem .8rem;text-align:right;border-bottom:1px solid #e6e9ee}"
	"th:first-child,td:first-child,th.l,td.l{text-align:left}"
	"th{font-weight:600;color:#3a4250;vertical-align:bottom}"
	/* Figures stay whole on a narrow screen (the table scrolls); sentences wrap. */
	".tw{overflow-x:auto}td{white-space:nowrap}td.l{white-space:normal;min-width:10em}"
	"td code{overflow-wrap:normal}"
	"tr.straggler td,tr.leak td{background:#fff4e0;font-weight:600}"
	".alert{padding:.4rem .8rem;border-left:4px solid #d9822b;background:#fff4e0}"
	"ol.recs{padding-left:1.4rem}ol.recs li{margin:0 0 .9rem}"
	".bound{white-space:nowrap;font-weight:600;color:#2b5d8a}"
	".evidence{color:#4a5260;font-size:.92rem}"
	"ul.lost li{margin:.2rem 0}"
	"footer{margin-top:2.5rem;font-size:.82rem;color:#6b7380}"
	"@media (max-width:640px){main{padding:16px}}"
	"@media print{body{background:#fff;font-size:10.5pt}main{max-width:none;padding:0;"
	"min-height:0}section{break-inside:avoid}h2,h3{break-after:avoid}"
	"svg.plot,svg.flamegraph{max-height:24cm}a{color:inherit}}";

static double pct(uint64_t part, uint64_t whole)
{
	return whole ? 100.0 * part / whole : 0;
}

static void html_legend(FILE *out)
{
	fputs("<ul class=\"legend\">", out);
	for (int s = 0; s < PP_NR_STATES; s++)
		fprintf(out, "<li><span class=\"swatch\" style=\"background:%s\"></span>%s</li>",
			html_state_color(s), state_name(s));
	fputs("</ul>\n", out);
}

static void put_head(FILE *out, const struct report *r)
{
	fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
	      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
	      "<meta name=\"generator\" content=\"pipeprof\">\n", out);
	fprintf(out, "<title>pipeprof: PID %d, %s</title>\n<style>%s</style>\n</head>\n<body>\n<main>\n",
		r->root_pid, verdict_name(r->analysis.verdict), page_style);
}

static void put_header(FILE *out, const struct report *r)
{
	const struct analysis *a = &r->analysis;
	const struct thread_result *tr = report_trainer(r);
	double secs = (r->end_ns - r->start_ns) / 1e9;

	fputs("<header>\n<h1>pipeprof report</h1>\n<p class=\"target\">PID ", out);
	fprintf(out, "%d <code>", r->root_pid);
	html_text(out, r->cmdline[0] ? r->cmdline : "?", sizeof(r->cmdline));
	fprintf(out, "</code></p>\n<p class=\"muted\">traced %.2f s%s: %d process%s, %d thread%s",
		secs, r->launched ? " from its start" : "", r->nr_procs, r->nr_procs == 1 ? "" : "es",
		r->nr_threads, r->nr_threads == 1 ? "" : "s");
	if (tr) {
		fprintf(out, "; trainer thread %u (<code>", tr->tid);
		html_text(out, tr->comm, sizeof(tr->comm));
		fprintf(out, "</code>, chosen by %s)", trainer_choice_text(a->trainer_choice));
	}
	fputs("</p>\n", out);
	if (r->target_exited)
		fprintf(out, "<p class=\"note\">The target exited %.2f s into the trace; the report "
			"covers what was seen until then.</p>\n", (r->target_exit_ns - r->start_ns) / 1e9);
	if (r->interrupted)
		fputs("<p class=\"note\">The trace was ended by a signal.</p>\n", out);
	if (r->partial) {
		fputs("<p class=\"note\">The figures are partial: ", out);
		html_text(out, r->partial_why, sizeof(r->partial_why));
		fputs(" (see <a href=\"#not-traced\">Not traced / lost</a>).</p>\n", out);
	}
	/* The stall's colour, as in the plots below, ties the verdict to its bars. */
	fprintf(out, "<div class=\"verdict\" style=\"border-left-color:%s\">"
		"<div class=\"name\">VERDICT</div><p id=\"verdict\">",
		a->verdict == VERDICT_UNDETERMINED ? "#888" : html_state_color(a->verdict_state));
	html_text(out, a->verdict_line, sizeof(a->verdict_line));
	fputs("</p></div>\n</header>\n", out);
}

static void step_bar(struct svg_bar *b, const struct step_breakdown *steps, int from, int to)
{
	char shares[160];
	double secs = 0;
	int n = 0, last;

	memset(b, 0, sizeof(*b));
	/* A bar of several steps: their shares weighted by their time. */
	for (int i = from; i < to; i++) {
		secs += steps[i].seconds;
		n += steps[i].spanned;
		for (int s = 0; s < PP_NR_STATES; s++)
			b->share[s] += steps[i].share[s] * steps[i].seconds;
	}
	for (int s = 0; s < PP_NR_STATES; s++)
		b->share[s] = secs > 0 ? b->share[s] / secs : 0;
	b->seconds = n ? secs / n : 0;
	last = steps[to - 1].index + steps[to - 1].spanned - 1;
	steps_shares_text(shares, sizeof(shares), b->share);
	if (n == 1) {
		snprintf(b->label, sizeof(b->label), "%d", steps[from].index);
		snprintf(b->title, sizeof(b->title), "step %d: %.1f ms; %s", steps[from].index,
			 b->seconds * 1e3, shares);
	} else {
		snprintf(b->label, sizeof(b->label), "%d\xe2\x80\x93%d", steps[from].index, last);
		snprintf(b->title, sizeof(b->title), "steps %d to %d: %.1f ms each on average; %.100s",
			 steps[from].index, last, b->seconds * 1e3, shares);
	}
}

static int put_step_plot(FILE *out, const struct report *r)
{
	const struct step_summary *s = &r->steps;
	struct step_breakdown *steps = NULL;
	struct svg_bar *bars = NULL;
	int n, per_bar, nr_bars, err = 0;
	char unkept[160];

	n = steps_each(&r->step_points, r->steps_tid, &steps);
	if (n < 0)
		return n;
	per_bar = (n + MAX_STEP_BARS - 1) / MAX_STEP_BARS;
	nr_bars = per_bar ? (n + per_bar - 1) / per_bar : 0;
	bars = calloc(nr_bars ? nr_bars : 1, sizeof(*bars));
	if (!bars) {
		err = -ENOMEM;
		goto cleanup;
	}
	for (int k = 0; k < nr_bars; k++)
		step_bar(&bars[k], steps, k * per_bar, (k + 1) * per_bar < n ? (k + 1) * per_bar : n);
	if (s->times)
		fprintf(out, "<p>%d step%s, %.2f steps/s; step time p50 %.1f ms, p90 %.1f ms, max "
			"%.1f ms.", s->count, s->count == 1 ? "" : "s", s->per_second, s->p50_s * 1e3,
			s->p90_s * 1e3, s->max_s * 1e3);
	else
		fprintf(out, "<p>%d step%s, %.2f steps/s, %.2f ms each on average; no step time: %s.",
			s->count, s->count == 1 ? "" : "s", s->per_second, s->mean_s * 1e3,
			steps_untimed_why(s));
	if (s->times && s->timed < s->count)
		fprintf(out, " Step times are over the %d steps timed one by one: the records of the "
			"others' boundaries were lost (ring buffer full).", s->timed);
	if (s->slow_count)
		fprintf(out, " %d slow step%s (%.1fx the median or more), %.0f%% of the steps' time.",
			s->slow_count, s->slow_count == 1 ? "" : "s", STEPS_SLOW_RATIO,
			s->all.seconds > 0 ? 100 * s->slow.seconds / s->all.seconds : 0);
	fputs("</p>\n", out);
	if (per_bar > 1)
		fprintf(out, "<p class=\"note\">One bar for each run of %d consecutive steps (there are "
			"too many for a bar each): their time in each state, the first at the bottom; above, "
			"in grey, their mean step time. Point at a bar for its figures.</p>\n", per_bar);
	else
		fputs("<p class=\"note\">One bar a step: its time in each state, the first at the "
		      "bottom; above, in grey, the step's time. Point at a bar for its figures.</p>\n", out);
	if (s->timed < s->count)
		fputs("<p class=\"note\">Where records were lost, the steps between two that were kept "
		      "share a place: such a bar holds more steps, and its title says which.</p>\n", out);
	html_legend(out);
	svg_state_columns(out, "steps-states", "The trainer's state shares, step by step", bars, nr_bars);
	if (r->step_recs_lost)
		fprintf(out, "<p class=\"note\">%llu step boundaries lost (ring buffer full): %s.</p>\n",
			(unsigned long long)r->step_recs_lost, steps_lost_effect(s));
	steps_unkept_text(unkept, sizeof(unkept), r);
	if (unkept[0])
		fprintf(out, "<p class=\"note\">%s.</p>\n", unkept);
cleanup:
	free(steps);
	free(bars);
	return err;
}

static int put_steps(FILE *out, const struct report *r)
{
	const struct thread_result *tr = report_trainer(r);
	const char *source = steps_source_name(r);
	struct svg_bar whole = { .label = "whole window" };
	char shares[160];

	fputs("<section id=\"steps\">\n<h2>The trainer's time, step by step</h2>\n", out);
	if (!tr) {
		fputs("<p>No trainer thread was seen in the window: there is nothing to plot.</p>\n"
		      "</section>\n", out);
		return 0;
	}
	if (source && !strcmp(source, "data_waits"))
		fputs("<p class=\"note\">Steps: one a batch, from the ends of the trainer's waits for "
		      "data (no backward pass marked two boundaries).</p>\n", out);
	else if (source && !strcmp(source, "symbol")) {
		fputs("<p class=\"note\">Steps: the trainer's outermost calls of <code>", out);
		html_text(out, r->step_symbol, sizeof(r->step_symbol));
		fputs("</code> (--step-symbol).</p>\n", out);
	} else if (source)
		fputs("<p class=\"note\">Steps: the trainer's backward passes, from libtorch's "
		      "autograd engine (with gradient accumulation, micro-steps).</p>\n", out);
	if (r->steps.count) {
		int err = put_step_plot(out, r);

		if (!err)
			fputs("</section>\n", out);
		return err;
	}

	/* No whole step: the window as one bar, so the page still shows where the time went. */
	if (!r->steps_on)
		fputs("<p>Steps were not looked for", out);
	else if (!source) {
		fputs("<p>No step found: ", out);
		html_text(out, r->steps_why_not, sizeof(r->steps_why_not));
		fputs(", and the trainer waited for no batch", out);
	} else {
		fprintf(out, "<p>No whole step in the window: fewer than two %s of the trainer",
			r->step_symbol[0] ? "calls" : "backward passes");
	}
	fputs(". One bar for the whole window instead.</p>\n", out);
	for (int s = 0; s < PP_NR_STATES; s++)
		whole.share[s] = pct(tr->ns[s], tr->wall_ns) / 100;
	whole.seconds = tr->wall_ns / 1e9;
	steps_shares_text(shares, sizeof(shares), whole.share);
	snprintf(whole.title, sizeof(whole.title), "the whole window, %.2f s: %s", whole.seconds,
		 shares);
	html_legend(out);
	svg_state_rows(out, "steps-states", "The trainer's state shares over the window", &whole, 1);
	fputs("</section>\n", out);
	return 0;
}

static void role_label(char *buf, size_t size, const struct analysis *a, int role)
{
	const struct role_result *rr = &a->roles[role];

	if (role == ROLE_WORKER)
		snprintf(buf, size, "%s (%dp, %dt)", role_name(role), rr->processes, rr->threads);
	else
		snprintf(buf, size, "%s (%dt)", role_name(role), rr->threads);
}

static void put_roles(FILE *out, const struct report *r)
{
	const struct analysis *a = &r->analysis;
	struct svg_bar bars[NR_ROLES] = {};
	int n = 0;
	char label[64];

	fputs("<section id=\"per-role\">\n<h2>Per role</h2>\n<p class=\"note\">Each role's summed "
	      "thread time by state. TRAINER: the training thread; WORKER: the DataLoader worker "
	      "processes (p) and their threads (t); HELPER: the trainer process's other threads."
	      "</p>\n", out);
	for (int role = 0; role < NR_ROLES; role++) {
		const struct role_result *rr = &a->roles[role];

		if (!rr->threads)
			continue;
		role_label(bars[n].label, sizeof(bars[n].label), a, role);
		for (int s = 0; s < PP_NR_STATES; s++)
			bars[n].share[s] = pct(rr->ns[s], rr->wall_ns) / 100;
		bars[n].seconds = rr->wall_ns / 1e9;
		n++;
	}
	if (!n) {
		fputs("<p>No thread of the job was seen in the window.</p>\n</section>\n", out);
		return;
	}
	html_legend(out);
	svg_state_rows(out, "roles", "Each role's state shares", bars, n);
	/* The figures themselves, for a reader who wants the number behind a bar, and for print. */
	fputs("<table>\n<thead><tr><th>state</th>", out);
	for (int role = 0; role < NR_ROLES; role++)
		if (a->roles[role].threads) {
			role_label(label, sizeof(label), a, role);
			fprintf(out, "<th>%s</th>", label);
		}
	fputs("</tr></thead>\n<tbody>\n", out);
	for (int s = 0; s < PP_NR_STATES; s++) {
		bool any = false;

		/* A state no role was in is a row of zeros: left out. */
		for (int role = 0; role < NR_ROLES; role++)
			any |= a->roles[role].threads && pct(a->roles[role].ns[s], a->roles[role].wall_ns) >= 0.05;
		if (!any)
			continue;
		fprintf(out, "<tr><td><span class=\"swatch\" style=\"background:%s\"></span>%s</td>",
			html_state_color(s), state_name(s));
		for (int role = 0; role < NR_ROLES; role++)
			if (a->roles[role].threads)
				fprintf(out, "<td>%.1f%%</td>", pct(a->roles[role].ns[s], a->roles[role].wall_ns));
		fputs("</tr>\n", out);
	}
	fputs("</tbody>\n</table>\n</section>\n", out);
}

/* A percentile of a call's log2 slots, bounded by the longest call (as report.c gives it). */
static double api_percentile_us(const struct api_result *api, double p)
{
	double v = hist_percentile(api->slots, PP_HIST_SLOTS, p);

	return api->max_ns && v > api->max_ns / 1e3 ? api->max_ns / 1e3 : v;
}

/* An element id from a name: letters, digits, '_' and '-' kept, anything else '-'. */
static void id_of(char *buf, size_t size, const char *prefix, const char *name)
{
	size_t n = snprintf(buf, size, "%s", prefix);

	for (const char *c = name; *c && n + 1 < size; c++, n++)
		buf[n] = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
			 (*c >= '0' && *c <= '9') || *c == '_' || *c == '-' ? *c : '-';
	if (n < size)
		buf[n] = '\0';
}

static void put_histograms(FILE *out, const struct report *r)
{
	double secs = (r->end_ns - r->start_ns) / 1e9;
	int shown = 0;
	char id[96];

	fputs("<section id=\"histograms\">\n<h2>Latency histograms</h2>\n<p class=\"note\">Log2 "
	      "buckets of microseconds: each bar counts the calls from its label to the next one's. "
	      "Point at a bar for its range and count.</p>\n", out);
	for (int i = 0; r->gpu_traced && i < r->nr_apis; i++) {
		const struct api_result *api = &r->apis[i];

		if (!api->calls)
			continue;
		fputs("<h3>GPU sync: <code>", out);
		html_text(out, api->name, SIZE_MAX);
		fprintf(out, "</code></h3>\n<p>%llu calls (%.1f/s), mean %.1f \xc2\xb5s, p50 %.0f "
			"\xc2\xb5s, p99 %.0f \xc2\xb5s, max %.0f \xc2\xb5s</p>\n",
			(unsigned long long)api->calls, secs > 0 ? api->calls / secs : 0,
			api->total_ns / 1e3 / api->calls, api_percentile_us(api, 50),
			api_percentile_us(api, 99), api->max_ns / 1e3);
		id_of(id, sizeof(id), "hist-", api->name);
		svg_log2_hist(out, id, api->name, api->slots, PP_HIST_SLOTS,
			      html_state_color(PP_GPU_WAIT), "calls");
		shown++;
	}
	if (!r->gpu_traced) {
		fputs("<p>GPU synchronising calls: not traced", out);
		if (r->gpu_why_not[0]) {
			fputs(": ", out);
			html_text(out, r->gpu_why_not, sizeof(r->gpu_why_not));
		}
		fputs(".</p>\n", out);
	} else if (!shown) {
		fputs("<p>GPU synchronising calls: none in the window.</p>\n", out);
	}
	if (r->io.count) {
		fprintf(out, "<h3>Block I/O issued by the job</h3>\n<p>%llu requests, mean %.0f "
			"\xc2\xb5s, p50 %.0f \xc2\xb5s, p99 %.0f \xc2\xb5s</p>\n",
			(unsigned long long)r->io.count, r->io.total_ns / 1e3 / r->io.count,
			hist_percentile(r->io.slots, PP_HIST_SLOTS, 50),
			hist_percentile(r->io.slots, PP_HIST_SLOTS, 99));
		svg_log2_hist(out, "hist-io", "block I/O latency", r->io.slots, PP_HIST_SLOTS,
			      html_state_color(PP_IO_WAIT), "requests");
	} else {
		fputs("<p>Block I/O: the job issued none in the window.</p>\n", out);
	}
	fputs("</section>\n", out);
}

static int put_flamegraph(FILE *out, const struct report *r)
{
	struct flamegraph_counts counts = {};
	char *folded = NULL, title[96], draw[160];
	size_t len = 0;
	FILE *stacks;
	int err;

	fputs("<section id=\"where\">\n<h2>Where the CPU goes</h2>\n", out);
	if (!r->sample_hz || r->sample_err[0] || !r->nr_where_samples) {
		fputs("<p>No flame graph: ", out);
		if (!r->sample_hz) {
			fputs("sampling was off (-F 0; pipeprof record does not sample)", out);
		} else if (r->sample_err[0]) {
			fputs("the job was not sampled (", out);
			html_text(out, r->sample_err, sizeof(r->sample_err));
			fputs(")", out);
		} else {
			fputs("no CPU sample of the job's threads in the window (they slept, or ran too "
			      "briefly for the sampling rate)", out);
		}
		fputs(".</p>\n</section>\n", out);
		return 0;
	}
	stacks = open_memstream(&folded, &len);
	if (!stacks)
		return -ENOMEM;
	err = where_write_folded(stacks, r->where_samples, r->nr_where_samples, -1, &r->where_names);
	if (fclose(stacks) && !err)
		err = -ENOMEM;
	if (err)
		goto cleanup;
	fprintf(out, "<p class=\"note\">%d CPU samples of the job's threads at %u Hz on each CPU. "
		"Each frame is as wide as the samples it was on the stack for: the role at the bottom, "
		"then Python functions (warm colours), native code in brackets (aqua), the kernel "
		"(orange-grey). Point at a frame for its name and count.</p>\n",
		r->nr_where_samples, r->sample_hz);
	snprintf(title, sizeof(title), "CPU samples of PID %d, every role", r->root_pid);
	err = flamegraph_svg(out, folded, len, &(struct flamegraph_opts){ .title = title,
				.unit = "samples", .id = "flamegraph", .width = FLAME_W }, &counts);
	if (err)
		goto cleanup;
	if (r->samples_lost)
		fprintf(out, "<p class=\"note\">%llu samples lost (ring buffer full).</p>\n",
			(unsigned long long)r->samples_lost);
	where_draw_text(draw, sizeof(draw), r);
	if (draw[0])
		fprintf(out, "<p class=\"note\">%c%s.</p>\n", toupper((unsigned char)draw[0]), draw + 1);
	if (r->samples_truncated)
		fprintf(out, "<p class=\"note\">%llu samples with Python stacks deeper than %d frames: "
			"their outermost frames are left out.</p>\n",
			(unsigned long long)r->samples_truncated, PP_PY_MAX_DEPTH);
	fputs("</section>\n", out);
cleanup:
	free(folded);
	return err;
}

static void put_recommendations(FILE *out, const struct report *r)
{
	const struct analysis *a = &r->analysis;

	fputs("<section id=\"recommendations\">\n<h2>Recommendations</h2>\n", out);
	if (!a->nr_recs)
		fputs("<p>None: no stall large enough to act on.</p>\n", out);
	else
		fputs("<ol class=\"recs\">\n", out);
	for (int i = 0; i < a->nr_recs; i++) {
		const struct recommendation *rec = &a->recs[i];

		fputs("<li><p>", out);
		html_text(out, rec->text, sizeof(rec->text));
		/* The stall's bound, as the text report gives it; a prediction is in the text. */
		if (rec->speedup_bound > 1.0)
			fprintf(out, " <span class=\"bound\">[at most %.2fx]</span>", rec->speedup_bound);
		fputs("</p>", out);
		if (rec->evidence[0]) {
			fputs("<p class=\"evidence\">measured: ", out);
			html_text(out, rec->evidence, sizeof(rec->evidence));
			fputs("</p>", out);
		}
		fputs("</li>\n", out);
	}
	if (a->nr_recs)
		fputs("</ol>\n", out);
	fputs("</section>\n", out);
}

static void put_not_traced(FILE *out, const struct report *r)
{
	fputs("<section id=\"not-traced\">\n<h2>Not traced / lost</h2>\n", out);
	if (!r->nr_not_traced)
		fputs("<p>Nothing: every probe attached, no events lost.</p>\n", out);
	else
		fputs("<ul class=\"lost\">\n", out);
	for (int i = 0; i < r->nr_not_traced; i++) {
		fputs("<li>", out);
		html_text(out, r->not_traced[i], sizeof(r->not_traced[i]));
		fputs("</li>\n", out);
	}
	if (r->nr_not_traced)
		fputs("</ul>\n", out);
	fputs("</section>\n", out);
}

int report_print_html(FILE *out, const struct report *r)
{
	int err;

	put_head(out, r);
	put_header(out, r);
	html_put_job(out, r);
	err = put_steps(out, r);
	if (err)
		return err;
	html_put_gpu_steps(out, r);
	put_roles(out, r);
	html_put_waited_on(out, r);
	put_histograms(out, r);
	html_put_nccl(out, r);
	html_put_gpumem(out, r);
	html_put_memory(out, r);
	err = put_flamegraph(out, r);
	if (err)
		return err;
	html_put_waits(out, r);
	put_recommendations(out, r);
	put_not_traced(out, r);
	fprintf(out, "<footer>pipeprof, schema %s: the same figures as the text report "
		"(<code>pipeprof -p %d</code>) and its JSON (<code>-j</code>).</footer>\n"
		"</main>\n</body>\n</html>\n", REPORT_SCHEMA, r->root_pid);
	return ferror(out) ? -EIO : 0;
}
