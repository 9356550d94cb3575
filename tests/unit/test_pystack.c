// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The CPU sampler's pure parts: interpreter versions and layouts, str decoding, per-role
 * shares and folded stacks. */
#include <stdlib.h>
#include "classify.h"
#include "callsite.h"
#include "pystack.h"
#include "unit.h"

TEST(test_versions)
{
	static const struct {
		const char *path;
		int rc, major, minor;
	} cases[] = {
		{ "/usr/bin/python3.11", 0, 3, 11 },
		{ "/root/.pyenv/versions/3.12.1/lib/libpython3.12.so.1.0", 0, 3, 12 },
		{ "libpython3.13.so", 0, 3, 13 },
		{ "/opt/lib/libpython3.6m.so.1.0", 0, 3, 6 },
		{ "/usr/lib/libpython3.10d.so", 0, 3, 10 },
		{ "/usr/bin/python3", -22, 0, 0 },
		{ "/usr/bin/python", -22, 0, 0 },
		{ "/usr/lib/libc.so.6", -22, 0, 0 },
		{ "python3.x", -22, 0, 0 },
		{ "libpython.so", -22, 0, 0 },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int major = 0, minor = 0, rc = py_version_of_path(cases[i].path, &major, &minor);

		CHECK_MSG(rc == cases[i].rc, "%s: rc %d", cases[i].path, rc);
		if (!rc)
			CHECK_MSG(major == cases[i].major && minor == cases[i].minor, "%s: %d.%d",
				  cases[i].path, major, minor);
	}
	for (int minor = 10; minor <= 13; minor++) {
		const struct py_layout *l = py_layout_for(3, minor);

		CHECK_MSG(l && l->minor == minor, "3.%d has a layout", minor);
		if (!l)
			continue;
		/* Where the frame is reached through a _PyCFrame, and where shim frames exist. */
		CHECK_EQ_INT(l->walk.cframe_frame != PP_PY_NONE, minor == 11 || minor == 12);
		CHECK_EQ_INT(l->walk.owner_cstack != PP_PY_NONE, minor >= 12);
		CHECK_EQ_INT(l->str_ascii_size, minor >= 12 ? 40 : 48);
		CHECK(l->code_name && l->code_filename && l->code_firstlineno);
		/* The walker reads a frame's fields in one span, or walks nothing. */
		{
			__u32 from, len = pp_py_frame_span(&l->walk, &from);

			CHECK_MSG(len <= PP_PY_SPAN_MAX && from <= l->walk.frame_code &&
				  from <= l->walk.frame_previous,
				  "3.%d: a frame's fields span %u bytes from %u", minor, len, from);
			CHECK_EQ_INT(len, minor == 10 ? 16 : minor == 11 ? 38 : 71);
		}
	}
	CHECK(!py_layout_for(3, 9));
	CHECK(!py_layout_for(3, 14));
	CHECK(!py_layout_for(2, 7));
}

/* state: kind in bits 2-4, compact bit 5, ascii bit 6. */
#define STATE(kind, ascii) ((uint32_t)(kind) << 2 | 1u << 5 | (uint32_t)(ascii) << 6)

TEST(test_str_decoding)
{
	const struct py_layout *l11 = py_layout_for(3, 11), *l12 = py_layout_for(3, 12);
	const uint8_t latin1[] = { 'c', 0xe9, 'u' };			/* "céu" */
	const uint16_t ucs2[] = { 0x4e2d, 0x6587, '_', 'f' };		/* "中文_f" */
	const uint32_t ucs4[] = { 'x', 0x1f600, 0xd800, 'y' };		/* a lone surrogate */
	char out[64], small[5];
	size_t off = 0;

	CHECK_EQ_INT(py_str_to_utf8(STATE(1, 1), "forward", 7, out, sizeof(out)), 0);
	CHECK_STR(out, "forward");
	CHECK_EQ_INT(py_str_to_utf8(STATE(1, 0), latin1, 3, out, sizeof(out)), 0);
	CHECK_STR(out, "c\xc3\xa9u");
	CHECK_EQ_INT(py_str_to_utf8(STATE(2, 0), ucs2, 4, out, sizeof(out)), 0);
	CHECK_STR(out, "\xe4\xb8\xad\xe6\x96\x87_f");
	CHECK_EQ_INT(py_str_to_utf8(STATE(4, 0), ucs4, 4, out, sizeof(out)), 0);
	CHECK_STR(out, "x\xf0\x9f\x98\x80\xef\xbf\xbdy");
	/* Cut to fit, never inside a character. */
	CHECK_EQ_INT(py_str_to_utf8(STATE(2, 0), ucs2, 4, small, sizeof(small)), 0);
	CHECK_STR(small, "\xe4\xb8\xad");
	/* Not a compact str, an unknown kind, an "ASCII" str with a byte above 0x7f. */
	CHECK(py_str_to_utf8(STATE(1, 1) & ~(1u << 5), "a", 1, out, sizeof(out)) < 0);
	CHECK(py_str_to_utf8(STATE(3, 0), "a", 1, out, sizeof(out)) < 0);
	CHECK(py_str_to_utf8(STATE(1, 1), latin1, 3, out, sizeof(out)) < 0);
	CHECK(py_str_data_offset(l11, STATE(1, 1), &off) == 0 && off == 48);
	CHECK(py_str_data_offset(l11, STATE(2, 0), &off) == 0 && off == 72);
	CHECK(py_str_data_offset(l12, STATE(1, 1), &off) == 0 && off == 40);
	CHECK(py_str_data_offset(l12, STATE(4, 0), &off) == 0 && off == 56);
	CHECK(py_str_data_offset(l12, STATE(1, 1) & ~(1u << 5), &off) < 0);
}

TEST(test_aggregate_and_fold)
{
	struct where_names names = {};
	int hot = where_name_id(&names, "hot (a.py:1)"), cool = where_name_id(&names, "cool (a.py:9)");
	int outer = where_name_id(&names, "main (a.py:20)"), sym = where_name_id(&names, "sgemm_ (libblas.so)");
	int semi = where_name_id(&names, "odd;name\n (b.py:2)");
	int s_hot[] = { hot, outer }, s_cool[] = { cool, outer }, s_semi[] = { semi };
	struct where_sample samples[] = {
		{ .tid = 1, .role = ROLE_WORKER, .native = sym, .py_depth = 2, .py = s_hot },
		{ .tid = 1, .role = ROLE_WORKER, .native = sym, .py_depth = 2, .py = s_hot },
		{ .tid = 1, .role = ROLE_WORKER, .native = -1, .py_depth = 2, .py = s_hot, .kernel = true },
		{ .tid = 2, .role = ROLE_WORKER, .native = sym, .py_depth = 2, .py = s_cool },
		{ .tid = 3, .role = ROLE_TRAINER, .native = -1, .py_depth = -1 },
		{ .tid = 3, .role = ROLE_TRAINER, .native = sym, .py_depth = 1, .py = s_semi },
		{ .tid = 9, .role = -1, .native = sym, .py_depth = 2, .py = s_hot },
	};
	struct where_role roles[NR_ROLES];
	char *text = NULL;
	size_t len = 0;
	FILE *f;

	CHECK_EQ_INT(where_name_id(&names, "hot (a.py:1)"), hot);
	CHECK_EQ_INT(where_aggregate(samples, 7, NR_ROLES, roles), 0);
	CHECK_EQ_U64(roles[ROLE_WORKER].samples, 4);
	CHECK_EQ_U64(roles[ROLE_WORKER].kernel, 1);
	CHECK_EQ_U64(roles[ROLE_WORKER].py_samples, 4);
	CHECK_EQ_INT(roles[ROLE_WORKER].nr_py, 2);
	CHECK(roles[ROLE_WORKER].py[0].name == hot && roles[ROLE_WORKER].py[0].samples == 3);
	CHECK(roles[ROLE_WORKER].py[1].name == cool && roles[ROLE_WORKER].py[1].samples == 1);
	CHECK(roles[ROLE_WORKER].nr_native == 1 && roles[ROLE_WORKER].native[0].samples == 3);
	CHECK_EQ_U64(roles[ROLE_TRAINER].samples, 2);
	CHECK_EQ_U64(roles[ROLE_TRAINER].py_samples, 1);
	CHECK_EQ_U64(roles[ROLE_HELPER].samples, 0);

	f = open_memstream(&text, &len);
	CHECK_EQ_INT(where_write_folded(f, samples, 7, -1, &names), 0);
	fclose(f);
	CHECK_STR(text,
		  "TRAINER;[unknown] 1\n"
		  "TRAINER;odd:name  (b.py:2);[sgemm_ (libblas.so)] 1\n"
		  "WORKER;main (a.py:20);cool (a.py:9);[sgemm_ (libblas.so)] 1\n"
		  "WORKER;main (a.py:20);hot (a.py:1);[sgemm_ (libblas.so)] 2\n"
		  "WORKER;main (a.py:20);hot (a.py:1);[unknown];[kernel] 1\n");
	free(text);
	f = open_memstream(&text, &len);
	CHECK_EQ_INT(where_write_folded(f, samples, 7, ROLE_TRAINER, &names), 0);
	fclose(f);
	CHECK(text && !strstr(text, "WORKER") && strstr(text, "TRAINER;[unknown] 1\n"));
	free(text);
	where_names_free(&names);
}

TEST(test_folded_native_callers)
{
	struct where_names names = {};
	int step = where_name_id(&names, "step (a.py:3)"), leaf = where_name_id(&names, "spin (lib.so)");
	int outer = where_name_id(&names, "outer (lib.so)"), mid = where_name_id(&names, "mid (lib.so)");
	int py[] = { step }, callers[] = { mid, outer, -1 };
	struct where_sample s = { .tid = 1, .role = ROLE_TRAINER, .native = leaf, .py_depth = 1,
				  .py = py, .nr_callers = 3, .callers = callers };
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	CHECK_EQ_INT(where_write_folded(f, &s, 1, -1, &names), 0);
	fclose(f);
	/* Outermost first: the unnamed caller, then outer, mid, and the leaf last. */
	CHECK_STR(text, "TRAINER;step (a.py:3);[unknown];[outer (lib.so)];[mid (lib.so)];"
			"[spin (lib.so)] 1\n");
	free(text);
	where_names_free(&names);
}

TEST(test_folded_waits_of_a_role)
{
	struct where_names names = {};
	int loop = where_name_id(&names, "_worker_loop (worker.py:202)");
	int get = where_name_id(&names, "Queue.get (queues.py:98)");
	int step = where_name_id(&names, "step (train.py:9)");
	int worker_py[] = { get, loop }, trainer_py[] = { step };
	struct where_wait waits[] = {
		{ .cause = PP_THREAD_WAIT, .ns = 2500000, .count = 1, .us = 2500, .tid = 11,
		  .role = ROLE_WORKER, .depth = 2, .py = worker_py },
		/* Three waits of 500.9 us each, summed at capture: each weighs its own whole
		 * microseconds (1,500), not the sum's (1,502). */
		{ .cause = PP_THREAD_WAIT, .ns = 1502700, .count = 3, .us = 1500, .tid = 12,
		  .role = ROLE_WORKER, .depth = 2, .py = worker_py },
		{ .cause = PP_DATA_WAIT, .ns = 4000000, .count = 1, .us = 4000, .tid = 1,
		  .role = ROLE_TRAINER, .depth = 1, .py = trainer_py },
		/* Two waits of 999 ns: no weight, though they sum to more than a microsecond. */
		{ .cause = PP_OTHER, .ns = 1998, .count = 2, .us = 0, .tid = 11, .role = ROLE_WORKER,
		  .depth = 2, .py = worker_py },
	};
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	/* A role's waits, outermost frame first, weighted in microseconds, merged by stack;
	 * under a microsecond has no weight. */
	CHECK_EQ_INT(where_write_folded_waits(f, waits, 4, ROLE_WORKER, &names), 0);
	fclose(f);
	CHECK_STR(text, "WORKER;_worker_loop (worker.py:202);Queue.get (queues.py:98);"
			"[THREAD_WAIT] 4000\n");
	free(text);
	/* No role: the trainer's waits, labelled so whatever thread sent them. */
	f = open_memstream(&text, &len);
	CHECK_EQ_INT(where_write_folded_waits(f, &waits[2], 1, -1, &names), 0);
	fclose(f);
	CHECK_STR(text, "TRAINER;step (train.py:9);[DATA_WAIT] 4000\n");
	free(text);
	where_names_free(&names);
}

TEST(test_serial_code_counts)
{
	struct where_names names = {};
	int blas = where_name_id(&names, "sgemm_ (libblas.so.3)");
	int eval = where_name_id(&names, "_PyEval_EvalFrameDefault (python3.11)");
	int dnnl = where_name_id(&names, "JIT code (anonymous memory)");
	struct where_sample samples[] = {
		{ .role = ROLE_TRAINER, .native = blas, .serial = CODE_SERIAL_LIBRARY, .py_depth = -1 },
		{ .role = ROLE_TRAINER, .native = blas, .serial = CODE_SERIAL_LIBRARY, .py_depth = -1,
		  .kernel = true },
		{ .role = ROLE_TRAINER, .native = eval, .serial = CODE_INTERPRETER, .py_depth = -1 },
		{ .role = ROLE_TRAINER, .native = eval, .serial = CODE_INTERPRETER, .py_depth = -1 },
		{ .role = ROLE_TRAINER, .native = eval, .serial = CODE_INTERPRETER, .py_depth = -1 },
		{ .role = ROLE_TRAINER, .native = dnnl, .py_depth = -1 },
		{ .role = ROLE_WORKER, .native = blas, .serial = CODE_SERIAL_LIBRARY, .py_depth = -1 },
	};
	struct where_role roles[NR_ROLES];

	CHECK_EQ_INT(where_aggregate(samples, 7, NR_ROLES, roles), 0);
	CHECK_EQ_U64(roles[ROLE_TRAINER].serial_interpreter, 3);
	CHECK_EQ_U64(roles[ROLE_TRAINER].serial_library, 2);
	/* The library leaf, though the interpreter has more samples. */
	CHECK(roles[ROLE_TRAINER].serial_top.name == blas && roles[ROLE_TRAINER].serial_top.samples == 2);
	CHECK_EQ_U64(roles[ROLE_WORKER].serial_library, 1);
	CHECK(roles[ROLE_HELPER].serial_top.name == -1);
	where_names_free(&names);
}

/* The 8 bytes before a return address: filler, then the call of the given bytes. */
static bool call_of(const uint8_t *insn, int len)
{
	uint8_t before[CALLSITE_BYTES];

	memset(before, 0x90, sizeof(before));
	memcpy(before + CALLSITE_BYTES - len, insn, len);
	return x86_call_ends_at(before);
}

TEST(test_call_sites)
{
	/* Each form a compiler emits for a call, with the bytes gcc and clang produce. */
	CHECK(call_of((const uint8_t[]){ 0xe8, 0x10, 0x20, 0x30, 0x40 }, 5));	/* call rel32 */
	CHECK(call_of((const uint8_t[]){ 0xff, 0xd0 }, 2));			/* call *%rax */
	CHECK(call_of((const uint8_t[]){ 0x41, 0xff, 0xd3 }, 3));		/* call *%r11 */
	CHECK(call_of((const uint8_t[]){ 0xff, 0x10 }, 2));			/* call *(%rax) */
	CHECK(call_of((const uint8_t[]){ 0xff, 0x50, 0x18 }, 3));		/* call *0x18(%rax) */
	CHECK(call_of((const uint8_t[]){ 0xff, 0x90, 0x00, 0x01, 0, 0 }, 6));	/* call *0x100(%rax) */
	CHECK(call_of((const uint8_t[]){ 0xff, 0x15, 1, 2, 3, 4 }, 6));		/* call *x(%rip) */
	CHECK(call_of((const uint8_t[]){ 0xff, 0x14, 0xc5, 1, 2, 3, 4 }, 7));	/* call *x(,%rax,8) */
	CHECK(call_of((const uint8_t[]){ 0xff, 0x54, 0x24, 0x08 }, 4));		/* call *8(%rsp) */
	CHECK(call_of((const uint8_t[]){ 0xff, 0x14, 0x24 }, 3));		/* call *(%rsp) */
	/* Not calls: what a frame pointer walk reads from a frame with no frame pointer. */
	CHECK(!call_of((const uint8_t[]){ 0x90 }, 1));
	CHECK(!call_of((const uint8_t[]){ 0xff, 0xe0 }, 2));			/* jmp *%rax */
	CHECK(!call_of((const uint8_t[]){ 0xe9, 1, 2, 3, 4 }, 5));		/* jmp rel32 */
	CHECK(!call_of((const uint8_t[]){ 0xff, 0x50 }, 2));	/* ModRM wants a displacement */
	CHECK(!call_of((const uint8_t[]){ 0xff, 0x15, 1, 2 }, 4));	/* RIP-relative cut short */
	CHECK(!call_of((const uint8_t[]){ 0, 0, 0, 0, 0, 0, 0, 0 }, 8));
}

TEST(test_wait_sites)
{
	struct where_names names = {};
	int step = where_name_id_in(&names, "step (train.py:88)", "/home/u/train.py");
	int sel = where_name_id_in(&names, "select (selectors.py:402)", "/usr/lib/python3.11/selectors.py");
	int recv = where_name_id_in(&names, "recv (connection.py:373)",
				    "/usr/lib/python3.11/multiprocessing/connection.py");
	int tv = where_name_id_in(&names, "get (queue.py:1)", "/x/venv/lib/python3.12/site-packages/q.py");
	int feed = where_name_id_in(&names, "_feed (queues.py:211)", "/usr/lib/python3/dist-packages/q.py");
	int prod = where_name_id_in(&names, "producer (t.py:35)", "/srv/t.py");
	int s1[] = { sel, step }, s2[] = { recv, step }, s3[] = { tv }, w1[] = { feed }, w2[] = { prod };
	struct where_wait waits[] = {
		/* Four waits, summed at capture. */
		{ .cause = PP_DATA_WAIT, .ns = 60, .count = 4, .depth = 2, .py = s1, .waker_tid = 7,
		  .waker_role = ROLE_WORKER, .waker_depth = 1, .waker_py = w1 },
		{ .cause = PP_DATA_WAIT, .ns = 30, .count = 1, .depth = 2, .py = s2, .waker_tid = 7,
		  .waker_role = ROLE_WORKER, .waker_depth = 1, .waker_py = w1 },
		{ .cause = PP_DATA_WAIT, .ns = 10, .count = 1, .depth = 1, .py = s3, .waker_tid = 0 },
		{ .cause = PP_THREAD_WAIT, .ns = 5, .count = 1, .depth = 2, .py = s1, .waker_tid = 9,
		  .waker_role = ROLE_HELPER, .waker_depth = 1, .waker_py = w2 },
	};
	struct where_wait_state st[PP_NR_STATES];
	const struct where_wait_state *d = &st[PP_DATA_WAIT];

	CHECK(where_is_library_file("/usr/lib/python3.11/threading.py"));
	CHECK(where_is_library_file("/opt/conda/lib/python3.10/site-packages/torch/nn/modules/linear.py"));
	CHECK(where_is_library_file("/usr/lib/python3/dist-packages/torch/utils/data/dataloader.py"));
	CHECK(where_is_library_file("<frozen importlib._bootstrap>"));
	CHECK(!where_is_library_file("/home/u/python/train.py"));
	CHECK(!where_is_library_file("/srv/lib/pythonic/train.py"));
	CHECK(!where_is_library_file("train.py"));
	/* The job's own frame, else the innermost one; none for an empty stack. */
	CHECK_EQ_INT(where_site(s1, 2, &names), step);
	CHECK_EQ_INT(where_site(s3, 1, &names), tv);
	CHECK_EQ_INT(where_site(s3, 0, &names), -1);

	CHECK_EQ_INT(where_aggregate_waits(waits, 4, &names, st), 0);
	CHECK_EQ_U64(d->ns, 100);
	CHECK_EQ_U64(d->count, 6);
	CHECK_EQ_INT(d->nr_sites, 3);
	CHECK(d->sites[0].site == step && d->sites[0].inner == sel && d->sites[0].ns == 60 &&
	      d->sites[0].count == 4);
	CHECK(d->sites[1].site == step && d->sites[1].inner == recv && d->sites[1].ns == 30);
	CHECK(d->sites[2].site == tv && d->sites[2].ns == 10);
	CHECK_EQ_INT(d->nr_wakers, 2);
	CHECK(d->wakers[0].tid == 7 && d->wakers[0].role == ROLE_WORKER && d->wakers[0].site == feed &&
	      d->wakers[0].ns == 90 && d->wakers[0].count == 5);
	CHECK(d->wakers[1].tid == 0 && d->wakers[1].site == -1 && d->wakers[1].ns == 10);
	CHECK(st[PP_THREAD_WAIT].ns == 5 && st[PP_THREAD_WAIT].wakers[0].site == prod);
	CHECK(st[PP_IO_WAIT].count == 0 && st[PP_IO_WAIT].nr_sites == 0);
	where_names_free(&names);
}

int main(void)
{
	RUN_TEST(test_versions);
	RUN_TEST(test_str_decoding);
	RUN_TEST(test_aggregate_and_fold);
	RUN_TEST(test_wait_sites);
	RUN_TEST(test_folded_native_callers);
	RUN_TEST(test_folded_waits_of_a_role);
	RUN_TEST(test_call_sites);
	RUN_TEST(test_serial_code_counts);
	return unit_summary();
}
