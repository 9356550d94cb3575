// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The HTML report (html_report.c, html_svg.c): escaping of hostile names, the page's structure
 * and plots, and what it says when a plot has nothing to draw. */
#include <errno.h>
#include <stdlib.h>
#include "html_report.h"
#include "html_svg.h"
#include "report.h"
#include "sanitize.h"
#include "unit.h"

#define MS 1000000ULL

/* What a target may name itself or its code: markup, quotes, an ampersand. */
#define HOSTILE "<script>alert(1)</script>&\"'"
#define HOSTILE_SHOWN "&lt;script&gt;alert(1)&lt;/script&gt;&amp;&quot;&#39;"

static struct thread_result threads[3];
static struct proc_result procs[2];
static struct report report;
static struct pp_step_record recs[400];

static char *render(const struct report *r, int *err)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	*err = report_print_html(f, r);
	fclose(f);
	return buf;
}

static char *escaped(void (*fn)(FILE *, const char *, size_t), const char *s, size_t n)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	fn(f, s, n);
	fclose(f);
	return buf;
}

static void text_fn(FILE *f, const char *s, size_t n)
{
	html_text(f, s, n);
}

static int count(const char *hay, const char *needle)
{
	int n = 0;

	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

/* A data-bound job: the trainer (100) mostly waits for data, a worker (200) computes; names
 * chosen by a hostile target; GPU calls, block I/O and steps recorded. */
static void fill(struct report *r, int nr_steps)
{
	memset(r, 0, sizeof(*r));
	r->root_pid = 100;
	snprintf(r->cmdline, sizeof(r->cmdline), "python3 " HOSTILE "/train.py --tag \x1b[31m");
	r->start_ns = 1000 * MS;
	r->end_ns = 3000 * MS;
	threads[0] = (struct thread_result){ .tid = 100, .tgid = 100, .comm = "<b>&\"'\xff", .wall_ns = 2000 * MS };
	threads[0].ns[PP_RUNNING] = 500 * MS;
	threads[0].ns[PP_DATA_WAIT] = 1500 * MS;
	threads[1] = (struct thread_result){ .tid = 101, .tgid = 100, .comm = "<script>", .wall_ns = 2000 * MS };
	threads[1].ns[PP_OTHER] = 2000 * MS;
	threads[2] = (struct thread_result){ .tid = 200, .tgid = 200, .comm = "python3", .wall_ns = 2000 * MS };
	threads[2].ns[PP_RUNNING] = 1900 * MS;
	threads[2].ns[PP_RUNQ] = 100 * MS;
	r->threads = threads;
	r->nr_threads = 3;
	procs[0] = (struct proc_result){ .pid = 100, .root = true, .comm = "python3" };
	procs[1] = (struct proc_result){ .pid = 200, .parent = 100, .comm = "python3" };
	r->procs = procs;
	r->nr_procs = 2;
	r->gpu_traced = true;
	r->nr_apis = 2;
	r->apis[0] = (struct api_result){ .name = "cudaStreamSynchronize", .calls = 7,
					  .total_ns = 70000, .max_ns = 40000 };
	r->apis[0].slots[2] = 4;
	r->apis[0].slots[5] = 3;
	r->apis[1] = (struct api_result){ .name = "cudaDeviceSynchronize" };	/* no calls */
	r->io.count = 2;
	r->io.total_ns = 600000;
	r->io.slots[8] = 2;
	r->input = (struct analysis_input){ .root_pid = 100, .threshold = 0.2, .ncpus = 2,
					    .cpu_busy = 0.5, .runnable_avg = 1, .window_ns = 2000 * MS };
	analyse(r->threads, r->nr_threads, &r->input, &r->analysis);
	/* A Python function's name, as where_annotate() puts it into advice. */
	text_append(r->analysis.recs[0].text, sizeof(r->analysis.recs[0].text),
		    " The workers' CPU goes 90%% to %s.", HOSTILE);
	report_not_traced(r, "thread %s: %s", HOSTILE, "\x1b]0;owned\x07");

	/* Steps of 20 ms, 5 on-CPU and 15 waiting for data; every 10th 80 ms. */
	r->steps_on = r->steps_probed = true;
	for (int i = 0, ts = 0, run = 0, data = 0; i <= nr_steps && i < (int)(sizeof(recs) / sizeof(recs[0])); i++) {
		recs[i] = (struct pp_step_record){ .tid = 100, .tgid = 100,
						   .ts = 1000 * MS + (uint64_t)ts * MS,
						   .phase = PP_PHASE_OFFCPU, .phase_start_ns = 0 };
		recs[i].ns[PP_RUNNING] = (uint64_t)run * MS;
		recs[i].ns[PP_DATA_WAIT] = (uint64_t)data * MS;
		recs[i].phase_start_ns = recs[i].ts;
		ts += i % 10 == 9 ? 80 : 20;
		run += 5;
		data += i % 10 == 9 ? 75 : 15;
	}
	r->step_recs = recs;
	r->nr_step_recs = nr_steps + 1;
	CHECK_EQ_INT(steps_finish(r), 0);

	/* CPU samples: the worker in a function of a hostile file, the trainer in <module>. As
	 * the tracer leaves them: from malloc, for where_free(). */
	r->sample_hz = 49;
	r->where_samples = calloc(4, sizeof(*r->where_samples));
	if (!r->where_samples)
		return;
	r->nr_where_samples = 4;
	for (int i = 0; i < 4; i++) {
		struct where_sample *ws = &r->where_samples[i];
		uint32_t tid = i < 3 ? 200 : 100;

		*ws = (struct where_sample){ .tid = tid, .tgid = tid, .py_depth = 1,
					     .native = where_name_id(&r->where_names, "sgemm_"),
					     .py = malloc(sizeof(int)) };
		if (ws->py)
			ws->py[0] = where_name_id(&r->where_names, i < 3 ? "__getitem__ (" HOSTILE ".py:12)" :
						  "<module> (train.py:1)");
		else
			ws->py_depth = 0;
	}
	CHECK_EQ_INT(where_finish(r), 0);
}

/* No owner-chosen string reaches the page as markup, and the page is well-formed text. */
static void check_safe(const char *html)
{
	CHECK(san_utf8_valid(html, strlen(html)));
	CHECK_MSG(!strstr(html, "<script") && !strstr(html, "<b>"), "markup from the target");
	CHECK(!strstr(html, "\x1b") && !strstr(html, "\x07"));
	CHECK(!strstr(html, "=\"http") && !strstr(html, "=\"//") && !strstr(html, "url("));
	CHECK_EQ_INT(count(html, "<svg"), count(html, "</svg>"));
	CHECK_EQ_INT(count(html, "<section"), count(html, "</section>"));
	CHECK_EQ_INT(count(html, "<g>"), count(html, "</g>"));
	CHECK(!strncmp(html, "<!DOCTYPE html>\n", 16));
	CHECK(strlen(html) > 8 && !strcmp(html + strlen(html) - 8, "</html>\n"));
}

TEST(test_escape)
{
	char *s = escaped(html_escape, HOSTILE, strlen(HOSTILE));

	CHECK_STR(s, HOSTILE_SHOWN);
	free(s);
	/* html_escape() changes nothing else, bytes that are not UTF-8 included. */
	s = escaped(html_escape, "a\xff\x01z", 4);
	CHECK_STR(s, "a\xff\x01z");
	free(s);
}

TEST(test_text_of_hostile_names)
{
	static const struct {
		const char *in, *shown;
	} cases[] = {
		{ HOSTILE, HOSTILE_SHOWN },
		/* hostile_names.py's: ESC, a byte that is not UTF-8, a tab, a backslash. */
		{ "a\"b\\c}\x1b[31m\xff\tz", "a&quot;b\\\\c}\\x1b[31m\\xff\\x09z" },
		/* A newline does not start a line; an OSC sequence and a C1 control are inert. */
		{ "q\nVerdict: ok", "q\\x0aVerdict: ok" },
		{ "\x1b]0;owned\x07\xc2\x9b", "\\x1b]0;owned\\x07\\xc2\\x9b" },
		/* A right-to-left override cannot reorder the page's text. */
		{ "\xe2\x80\xae<evil>", "\\xe2\\x80\\xae&lt;evil&gt;" },
		/* Well-formed UTF-8 stays as it is. */
		{ "caf\xc3\xa9 \xe2\x9c\x93", "caf\xc3\xa9 \xe2\x9c\x93" },
		{ "", "" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *s = escaped(text_fn, cases[i].in, SIZE_MAX);

		CHECK_STR(s, cases[i].shown);
		CHECK(s && san_utf8_valid(s, strlen(s)));
		free(s);
	}
	/* A comm[16] with no NUL: max ends it. */
	{
		char comm[16];
		char *s;

		memset(comm, '<', sizeof(comm));
		s = escaped(text_fn, comm, sizeof(comm));
		CHECK_EQ_INT(count(s, "&lt;"), 16);
		CHECK_EQ_INT(strlen(s), 16 * 4);
		free(s);
	}
}

TEST(test_page)
{
	int err;
	char *html;

	fill(&report, 30);
	CHECK_EQ_INT(report.steps.count, 30);
	html = render(&report, &err);
	CHECK_EQ_INT(err, 0);
	if (!html)
		return;
	check_safe(html);
	/* To look at the page: UNIT_HTML=page.html .output/tests/test_html_report */
	if (getenv("UNIT_HTML")) {
		FILE *f = fopen(getenv("UNIT_HTML"), "we");

		if (f) {
			fputs(html, f);
			fclose(f);
		}
	}
	/* The plots, each an <svg> with its id. */
	CHECK(strstr(html, "<svg class=\"plot\" id=\"steps-states\""));
	CHECK(strstr(html, "<svg class=\"plot\" id=\"roles\""));
	CHECK(strstr(html, "<svg class=\"plot\" id=\"hist-cudaStreamSynchronize\""));
	CHECK(!strstr(html, "id=\"hist-cudaDeviceSynchronize\""));	/* no calls, no plot */
	CHECK(strstr(html, "<svg class=\"plot\" id=\"hist-io\""));
	CHECK(strstr(html, "<svg id=\"flamegraph\""));
	/* One bar a step, its tooltip with its time and shares; the slow step's time. */
	CHECK_EQ_INT(count(html, "<g><title>step "), 30);
	CHECK(strstr(html, "<title>step 1: 20.0 ms; DATA_WAIT 75%, RUNNING 25%</title>"));
	CHECK(strstr(html, "<title>step 10: 80.0 ms; DATA_WAIT 94%, RUNNING 6%</title>"));
	/* A legend, a swatch per state, in the state's colour. */
	for (int s = 0; s < PP_NR_STATES; s++) {
		char swatch[128];

		snprintf(swatch, sizeof(swatch), "<span class=\"swatch\" style=\"background:%s\"></span>%s</li>",
			 html_state_color(s), state_name(s));
		CHECK_MSG(strstr(html, swatch), "no legend entry for %s", state_name(s));
	}
	/* Roles: one row each, with counts; the histograms' counts in their tooltips. */
	CHECK(strstr(html, ">TRAINER (1t)</text>") && strstr(html, ">WORKER (1p, 1t)</text>") &&
	      strstr(html, ">HELPER (1t)</text>"));
	CHECK(strstr(html, "<title>4\xc2\xb5s to 8\xc2\xb5s: 4 calls (57.1%)</title>"));
	CHECK(strstr(html, "<title>256\xc2\xb5s to 512\xc2\xb5s: 2 requests (100.0%)</title>"));
	/* The verdict and the advice, with its evidence; every hostile string escaped. */
	CHECK(strstr(html, "<p id=\"verdict\">DATA-LOADING BOUND"));
	CHECK(strstr(html, "<code>python3 " HOSTILE_SHOWN "/train.py --tag \\x1b[31m</code>"));
	CHECK(strstr(html, "trainer thread 100 (<code>&lt;b&gt;&amp;&quot;&#39;\\xff</code>"));
	CHECK(strstr(html, "90% to " HOSTILE_SHOWN ". <span class=\"bound\">[at most 4.00x]</span></p>"));
	CHECK(strstr(html, "<p class=\"evidence\">measured: "));
	CHECK(strstr(html, "<li>thread " HOSTILE_SHOWN ": \\x1b]0;owned\\x07</li>"));
	/* The flame graph's frames: the file name escaped as XML text. */
	CHECK(strstr(html, "__getitem__ (&lt;script&gt;alert(1)&lt;/script&gt;&amp;&quot;&apos;.py:12)"));
	CHECK(strstr(html, "&lt;module&gt; (train.py:1)"));
	/* Print and small screens: a print block, a container of bounded width. */
	CHECK(strstr(html, "@media print{") && strstr(html, "max-width:1080px"));
	free(html);
	where_free(&report);
}

TEST(test_many_steps_grouped)
{
	int err, bars;
	char *html;

	fill(&report, 350);
	CHECK_EQ_INT(report.steps.count, 350);
	html = render(&report, &err);
	CHECK_EQ_INT(err, 0);
	if (!html)
		return;
	check_safe(html);
	/* 350 steps in runs of 3: 117 bars, none of one step. */
	bars = count(html, "<g><title>steps ");
	CHECK_MSG(bars == 117, "%d bars", bars);
	CHECK(!strstr(html, "<g><title>step "));
	CHECK(strstr(html, "<title>steps 1 to 3: "));
	CHECK(strstr(html, "<title>steps 349 to 350: "));
	free(html);
	where_free(&report);
}

TEST(test_nothing_to_plot)
{
	int err;
	char *html;

	fill(&report, 30);
	where_free(&report);
	/* No steps, no samples, no GPU, no I/O, no advice, nothing lost. */
	report.steps_on = false;
	memset(&report.steps, 0, sizeof(report.steps));
	report.sample_hz = 0;
	report.gpu_traced = false;
	snprintf(report.gpu_why_not, sizeof(report.gpu_why_not), "no GPU library <mapped>");
	report.io.count = 0;
	memset(report.io.slots, 0, sizeof(report.io.slots));
	report.analysis.nr_recs = 0;
	report.nr_not_traced = 0;
	html = render(&report, &err);
	CHECK_EQ_INT(err, 0);
	if (!html)
		return;
	check_safe(html);
	/* The window as one bar, in place of the steps. */
	CHECK(strstr(html, "<svg class=\"plot\" id=\"steps-states\""));
	CHECK(strstr(html, ">whole window</text>"));
	CHECK(strstr(html, "<g><title>the whole window, 2.00 s: DATA_WAIT 75%, RUNNING 25%</title>"));
	CHECK(strstr(html, "Steps were not looked for. One bar for the whole window instead."));
	CHECK(!strstr(html, "id=\"hist-") && !strstr(html, "id=\"flamegraph\""));
	CHECK(strstr(html, "GPU synchronising calls: not traced: no GPU library &lt;mapped&gt;."));
	CHECK(strstr(html, "Block I/O: the job issued none in the window."));
	CHECK(strstr(html, "No flame graph: sampling was off (-F 0; pipeprof record does not sample)."));
	CHECK(strstr(html, "<p>Nothing: every probe attached, no events lost.</p>"));
	CHECK(strstr(html, "<h2>Recommendations</h2>\n<p>None"));
	free(html);
}

TEST(test_write_error)
{
	FILE *f = fopen("/dev/full", "we");
	int err;

	if (!f) {
		SKIP("no /dev/full");
		return;
	}
	setvbuf(f, NULL, _IONBF, 0);
	fill(&report, 30);
	err = report_print_html(f, &report);
	CHECK_EQ_INT(err, -EIO);
	fclose(f);
	where_free(&report);
}

int main(void)
{
	RUN_TEST(test_escape);
	RUN_TEST(test_text_of_hostile_names);
	RUN_TEST(test_page);
	RUN_TEST(test_many_steps_grouped);
	RUN_TEST(test_nothing_to_plot);
	RUN_TEST(test_write_error);
	return unit_summary();
}
