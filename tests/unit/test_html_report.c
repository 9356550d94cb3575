// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The HTML report (html_report.c, html_svg.c): escaping of hostile names, the page's structure
 * and plots, and what it says when a plot has nothing to draw. */
#include <errno.h>
#include <stdlib.h>
#include "html_report.h"
#include "html_svg.h"
#include "ranks.h"
#include "report.h"
#include "sanitize.h"
#include "step_recs.h"
#include "unit.h"

#define MS 1000000ULL

/* What a target may name itself or its code: markup, quotes, an ampersand. */
#define HOSTILE "<script>alert(1)</script>&\"'"
#define HOSTILE_SHOWN "&lt;script&gt;alert(1)&lt;/script&gt;&amp;&quot;&#39;"

static struct thread_result threads[3];
static struct proc_result procs[2];
static struct report report;
static struct pp_step_record recs[400];

/* Not inlined: GCC 12 then takes open_memstream()'s hold on buf for a dangling pointer in
 * every caller. */
static __attribute__((noinline)) char *render(const struct report *r, int *err)
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
	CHECK_EQ_INT(store_recs(&r->step_points, recs, nr_steps + 1), 0);
	CHECK_EQ_INT(steps_finish(r), 0);

	/* CPU samples: the worker in a function of a hostile file, the trainer in <module>. As
	 * the tracer leaves them: in the report's set of stacks, for where_free(). */
	r->sample_hz = 49;
	r->where_samples = calloc(4, sizeof(*r->where_samples));
	if (!r->where_samples)
		return;
	r->nr_where_samples = 4;
	for (int i = 0; i < 4; i++) {
		struct where_sample *ws = &r->where_samples[i];
		uint32_t tid = i < 3 ? 200 : 100;
		int py = where_name_id(&r->where_names, i < 3 ? "__getitem__ (" HOSTILE ".py:12)" :
				       "<module> (train.py:1)");

		*ws = (struct where_sample){ .tid = tid, .tgid = tid, .py_depth = 1,
					     .native = where_name_id(&r->where_names, "sgemm_"),
					     .py = intern(&r->name_stacks, &py, sizeof(py)) };
		if (!ws->py)
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
	step_store_free(&report.step_points);
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
	step_store_free(&report.step_points);
}

TEST(test_nothing_to_plot)
{
	int err;
	char *html;

	fill(&report, 30);
	where_free(&report);
	step_store_free(&report.step_points);
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
	/* The text report's sections say what is missing rather than vanish. */
	CHECK(!strstr(html, "id=\"job\""));
	CHECK(strstr(html, "<h2>GPU API per step</h2>\n<p>Not traced: no GPU library &lt;mapped&gt;.</p>"));
	CHECK(strstr(html, "<h2>Waited on</h2>\n<p>No wakeup"));
	CHECK(strstr(html, "<h2>GPU memory</h2>\n<p>Not traced: "));
	CHECK(strstr(html, "<h2>Memory</h2>\n<p>Host memory: not read in this trace.</p>"));
	CHECK(strstr(html, "<h2>Where the trainer waits</h2>\n<p>No wait of the trainer with its "
		      "Python stack in the window (stacks are read with the CPU samples: sampling "
		      "was off).</p>"));
	free(html);
}

/* The text report's sections on the page, from figures a test can hold to: a job of two
 * ranks, a waker with a hostile name, GPU API figures over the steps, device and host memory
 * each with a leak. */
TEST(test_text_report_sections)
{
	static struct job_ranks job;
	struct waited_on *w;
	struct step_gpu *g;
	int err;
	char *html;

	fill(&report, 30);
	memset(&job, 0, sizeof(job));
	job.nr = 2;
	job.ranks[0] = (struct rank_result){ .pid = 300, .rank = 0, .verdict = VERDICT_COMM };
	job.ranks[0].share[PP_COMM_WAIT] = 0.6;
	job.ranks[0].share[PP_RUNNING] = 0.4;
	job.ranks[1] = (struct rank_result){ .pid = 100, .rank = 1, .verdict = VERDICT_DATA_LOADING,
					     .workers = 1 };
	job.ranks[1].share[PP_DATA_WAIT] = 0.75;
	job.ranks[1].share[PP_RUNNING] = 0.25;
	job.straggler = job.focus = 1;
	snprintf(job.summary, sizeof(job.summary), "2 ranks; rank 0 waits 60%% in collectives");
	report.job = &job;

	report.analysis.nr_waited_on = 1;
	report.analysis.waited_total_ns = 1500 * MS;
	w = &report.analysis.waited_on[0];
	*w = (struct waited_on){ .tid = 101, .tgid = 100, .ctx = PP_WAKE_TASK, .thread_index = 1,
				 .ns = 1200 * MS, .wakeups = 30 };
	memcpy(w->comm, threads[1].comm, sizeof(w->comm));
	w->cause_ns[PP_DATA_WAIT] = 1200 * MS;

	g = &report.steps.gpu;
	g->launches = 600;
	g->launches_min = g->launches_max = 20;
	g->syncs = g->sync_calls[0] = 30;
	g->syncs_min = g->syncs_max = 1;
	g->copies.calls[PP_COPY_HTOD] = 30;
	g->copies.bytes[PP_COPY_HTOD] = 30 * 4000000ULL;
	g->dev.allocs = 30;
	g->dev_allocs_min = g->dev_allocs_max = 1;
	g->dev.alloc_bytes = 30 * 2000000ULL;
	g->dev_growth = (struct gpumem_fit){ .leak = true, .bytes_per_step = 2e6, .r2 = 0.99,
					     .points = 31 };
	report.devmem_traced = true;
	report.nr_devmem = 1;
	report.devmem[0] = (struct gpumem_proc){ .pid = 100, .root = true, .end_bytes = 60000000,
						 .peak_bytes = 60000000, .allocs = 30,
						 .alloc_bytes = 60000000 };

	report.memory_on = true;
	report.mem = (struct mem_summary){ .readings = 10, .interval_s = 0.2, .span_s = 1.8 };
	report.mem.group[MEM_TRAINER] = (struct mem_group_summary){ .processes = 1,
		.rss_bytes = 200000000, .peak_bytes = 210000000 };
	report.mem.group[MEM_WORKERS] = (struct mem_group_summary){ .processes = 2,
		.rss_bytes = 300000000, .peak_bytes = 300000000, .growth_bytes_per_s = 1e6,
		.growing = 2, .leak = true, .major_faults = 9 };

	/* The trainer's data waits, begun in a function of a hostile file, ended by the worker. */
	report.wait_states[PP_DATA_WAIT] = (struct where_wait_state){ .ns = 1400 * MS, .count = 70,
								      .nr_sites = 1, .nr_wakers = 2 };
	report.wait_states[PP_DATA_WAIT].sites[0] = (struct wait_site){
		.site = where_name_id(&report.where_names, "step (" HOSTILE ".py:3)"),
		.inner = where_name_id(&report.where_names, "select (selectors.py:402)"),
		.ns = 1400 * MS, .count = 70 };
	report.wait_states[PP_DATA_WAIT].wakers[0] = (struct waker_site){
		.tid = 200, .role = ROLE_WORKER, .site = -1, .ns = 1050 * MS, .count = 50 };
	report.wait_states[PP_DATA_WAIT].wakers[1] = (struct waker_site){ .ns = 350 * MS, .count = 20 };

	html = render(&report, &err);
	CHECK_EQ_INT(err, 0);
	report.job = NULL;
	memset(report.wait_states, 0, sizeof(report.wait_states));
	if (!html)
		return;
	check_safe(html);
	/* Ranks: the summary, a row a rank, the straggler marked, before the steps. */
	CHECK(strstr(html, "<section id=\"job\">\n<h2>Job: ranks</h2>\n<p>2 ranks; rank 0 waits "
		      "60% in collectives.</p>"));
	CHECK(strstr(html, "<tr class=\"straggler\"><td>1 (the straggler)</td><td>100</td>"
		      "<td class=\"l\">DATA-LOADING BOUND</td><td class=\"l\">DATA_WAIT 75%, RUNNING "
		      "25%</td><td>1</td></tr>"));
	CHECK(strstr(html, "<td>0</td><td>300</td>"));
	CHECK(strstr(html, "id=\"job\"") < strstr(html, "id=\"steps\""));
	/* Waited on: the waker's name escaped, its share, its cause, its own time. */
	CHECK(strstr(html, "<tr><td><code>thread 101 (&lt;script&gt;)</code></td><td class=\"l\">"
		      "HELPER</td><td>100</td><td>80.0%</td><td>30</td><td class=\"l\">DATA_WAIT "
		      "1.200 s</td><td class=\"l\">OTHER 100%</td></tr>"));
	/* GPU API per step: launches, syncs by API, device allocations, copies. */
	CHECK(strstr(html, "<tr><td>kernel launches</td><td>20</td><td>20 to 20</td><td>600</td></tr>"));
	CHECK(strstr(html, "<tr><td>&nbsp;&nbsp;<code>cudaStreamSynchronize</code></td><td>1</td>"
		      "<td></td><td>30</td></tr>"));
	CHECK(strstr(html, "<tr><td>device allocations</td><td>1</td><td>1 to 1</td><td>30</td></tr>"));
	CHECK(strstr(html, "<tr><td>H2D</td><td>1</td><td>4.0 MB</td><td>"));
	/* GPU memory: the process's figures and the leak. */
	CHECK(strstr(html, "<tr><td>TRAINER pid 100</td><td>0 B</td><td>60.0 MB</td><td>60.0 MB</td>"
		      "<td>30 (60.0 MB)</td><td>0 (0 B)</td></tr>"));
	CHECK(strstr(html, "grows 2.0 MB a step (") && strstr(html, "a probable device-memory leak"));
	/* Memory: per role, the workers' growth a step (the steps' mean time) and the leak. */
	CHECK(strstr(html, "<tr><td>TRAINER</td><td>1</td><td>200.0 MB</td><td>210.0 MB</td>"
		      "<td class=\"l\">no steady growth</td>"));
	CHECK(strstr(html, "<tr class=\"leak\"><td>WORKERS</td><td>2</td><td>300.0 MB</td>"));
	CHECK(strstr(html, "/s) in 2 of 2: a probable leak</td><td>9 ("));
	/* Where the trainer waits: the site escaped, the wakers with their shares. */
	CHECK(strstr(html, "DATA_WAIT: 1.40 s in 70 waits</h3>"));
	CHECK(strstr(html, "<tr><td>100.0%</td><td class=\"l\"><code>step (" HOSTILE_SHOWN
		      ".py:3)</code>, in <code>select (selectors.py:402)</code></td></tr>"));
	CHECK(strstr(html, "<th class=\"l\">what ended the waits</th></tr></thead>\n<tbody>\n"
		      "<tr><td>75.0%</td><td class=\"l\">WORKER thread 200, in "
		      "<code>no Python frame</code></td></tr>"));
	CHECK(strstr(html, "<tr><td>25.0%</td><td class=\"l\">an interrupt or a task "
		      "outside the job</td></tr>"));
	free(html);
	where_free(&report);
	step_store_free(&report.step_points);
}

/* NCCL's calls as the text report has them; nothing where no libnccl is mapped. */
TEST(test_nccl_section)
{
	static struct lib_result lib;
	struct nccl_result *ar = &report.nccl[PP_NCCL_ALL_REDUCE];
	struct nccl_result *ag = &report.nccl[PP_NCCL_ALL_GATHER];
	int err;
	char *html;

	fill(&report, 30);
	html = render(&report, &err);
	CHECK_EQ_INT(err, 0);
	CHECK(html && !strstr(html, "id=\"nccl\""));
	free(html);

	memset(&lib, 0, sizeof(lib));
	snprintf(lib.path, sizeof(lib.path), "/opt/" HOSTILE "/libnccl.so.2");
	report.nccl_libs = &lib;
	report.nr_nccl_libs = 1;
	report.nccl_traced = true;
	html = render(&report, &err);
	CHECK(html && strstr(html, "<p>No collective was called in the window.</p>"));
	free(html);

	*ar = (struct nccl_result){ .name = "ncclAllReduce", .calls = 30, .bytes = 30 * 4000000ULL,
				    .total_ns = 900 * MS, .max_ns = 40 * MS };
	ar->slots[15] = 30;	/* 32-65 ms */
	*ag = (struct nccl_result){ .name = "ncclAllGather", .calls = 10, .bytes = 10 * 1000000ULL,
				    .unsized = 2, .total_ns = 100 * MS, .max_ns = 10 * MS };
	ag->slots[13] = 10;
	html = render(&report, &err);
	report.nr_nccl_libs = 0;
	report.nccl_libs = NULL;
	report.nccl_traced = false;
	memset(report.nccl, 0, sizeof(report.nccl));
	if (!CHECK(html != NULL)) {
		where_free(&report);
	step_store_free(&report.step_points);
		return;
	}
	check_safe(html);
	CHECK(strstr(html, "<section id=\"nccl\">\n<h2>NCCL</h2>\n<p class=\"note\">Probed: "
		      "<code>/opt/" HOSTILE_SHOWN "/libnccl.so.2</code>."));
	CHECK(strstr(html, "<tr><td><code>ncclAllReduce</code></td><td>30</td><td>"));
	CHECK(strstr(html, "<td>120.0 MB</td><td>0.900</td><td>30000.0</td>"));
	/* Percentiles bounded by the longest call, as the text report's. */
	CHECK(strstr(html, "<td>40000</td></tr>"));
	CHECK(strstr(html, "<td>10.0 MB received (2 calls of unknown size not in it)</td>"));
	CHECK(strstr(html, "id=\"nccl\"") > strstr(html, "id=\"steps\""));
	free(html);
	where_free(&report);
	step_store_free(&report.step_points);
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
	step_store_free(&report.step_points);
}

int main(void)
{
	RUN_TEST(test_escape);
	RUN_TEST(test_text_of_hostile_names);
	RUN_TEST(test_page);
	RUN_TEST(test_many_steps_grouped);
	RUN_TEST(test_nothing_to_plot);
	RUN_TEST(test_text_report_sections);
	RUN_TEST(test_nccl_section);
	RUN_TEST(test_write_error);
	return unit_summary();
}
