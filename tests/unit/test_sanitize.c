// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdlib.h>
#include <sys/stat.h>
#include <json-c/json.h>
#include "hist_fmt.h"
#include "jsonl.h"
#include "prom.h"
#include "report.h"
#include "sanitize.h"
#include "unit.h"

/* The name any local user can give a process: quote, backslash, brace, an ESC sequence that
 * turns a terminal red, a byte that is not UTF-8 and a tab; 14 bytes, fits a comm. */
#define HOSTILE "a\"b\\c}\x1b[31m\xff\tz"
/* As a terminal-safe text shows it, and as JSON and Prometheus carry it (U+FFFD for \xff). */
#define HOSTILE_TEXT "a\"b\\\\c}\\x1b[31m\\xff\\x09z"
#define HOSTILE_UTF8 "a\"b\\c}\x1b[31m" SAN_REPLACEMENT "\tz"

/* An independent statement of well-formed UTF-8: decode by the lead byte's length, then rule
 * out overlong forms, surrogates and code points past U+10FFFF. */
static bool ref_valid(const unsigned char *s, size_t len)
{
	static const uint32_t min_of_len[] = { 0, 0, 0x80, 0x800, 0x10000 };

	while (len) {
		size_t n = s[0] < 0x80 ? 1 : (s[0] & 0xe0) == 0xc0 ? 2 : (s[0] & 0xf0) == 0xe0 ? 3 :
			   (s[0] & 0xf8) == 0xf0 ? 4 : 0;
		uint32_t cp;

		if (!n || n > len)
			return false;
		cp = n == 1 ? s[0] : s[0] & (0x7f >> n);
		for (size_t i = 1; i < n; i++) {
			if ((s[i] & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (s[i] & 0x3f);
		}
		if (cp < min_of_len[n] || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
			return false;
		s += n;
		len -= n;
	}
	return true;
}

static bool has_byte(const char *s, unsigned char b)
{
	return memchr(s, b, strlen(s)) != NULL;
}

/* What a terminal could act on in text meant to be shown: ESC, BEL, C1 controls. */
static bool terminal_safe(const char *s)
{
	return !has_byte(s, 0x1b) && !has_byte(s, 0x07) && !strstr(s, "\xc2\x9b") &&
	       ref_valid((const unsigned char *)s, strlen(s));
}

TEST(test_utf8_next)
{
	static const struct {
		const char *in;
		int n;
		uint32_t cp;
	} cases[] = {
		{ "A", 1, 'A' },
		{ "\xc3\xa9", 2, 0xe9 },
		{ "\xe6\x97\xa5", 3, 0x65e5 },
		{ "\xf0\x9f\x98\x80", 4, 0x1f600 },
		{ "\xf4\x8f\xbf\xbf", 4, 0x10ffff },
		{ "\xc2\x9b", 2, 0x9b },
		/* ill-formed: minus the maximal subpart */
		{ "\xff", -1 }, { "\x80", -1 }, { "\xc0\x80", -1 }, { "\xc1\xbf", -1 },
		{ "\xe0\x9f\x80", -1 }, { "\xed\xa0\x80", -1 }, { "\xf0\x8f\x80\x80", -1 },
		{ "\xf4\x90\x80\x80", -1 }, { "\xf5\x80", -1 },
		{ "\xe2\x82", -2 }, { "\xe2\x82" "A", -2 }, { "\xf0\x9f\x98", -3 },
		{ "\xf0\x9f\x98" "A", -3 }, { "\xc2", -1 }, { "\xc2" "A", -1 },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint32_t cp = 0;
		int n = san_utf8_next(cases[i].in, strlen(cases[i].in), &cp);

		CHECK_MSG(n == cases[i].n, "case %zu: %d, not %d", i, n, cases[i].n);
		if (cases[i].n > 0)
			CHECK_MSG(cp == cases[i].cp, "case %zu: U+%04X, not U+%04X", i, cp, cases[i].cp);
	}
	/* A length that ends inside a character ends the subpart there. */
	CHECK_EQ_INT(san_utf8_next("\xc3\xa9", 1, &(uint32_t){ 0 }), -1);
}

/* Expected values from Python 3: bytes.decode("utf-8", "replace").encode(). */
TEST(test_repair_as_python)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
		{ HOSTILE, HOSTILE_UTF8 },
		{ "\xe2\x82", "\xef\xbf\xbd" },
		{ "\xe2\x82" "A", "\xef\xbf\xbd" "A" },
		{ "\xc0\x80", "\xef\xbf\xbd\xef\xbf\xbd" },
		{ "\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" },
		{ "\xf0\x80\x80\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" },
		{ "\xf4\x90\x80\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" },
		{ "\xf0\x9f\x98", "\xef\xbf\xbd" },
		{ "\xf0\x9f\x98\x80", "\xf0\x9f\x98\x80" },
		{ "\xe0\x9f\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" },
		{ "\x80\xbf", "\xef\xbf\xbd\xef\xbf\xbd" },
		{ "\xf5x", "\xef\xbf\xbdx" },
		{ "\xc2", "\xef\xbf\xbd" },
		{ "\xef\xbf\xbd", "\xef\xbf\xbd" },
		{ "\xf1\x80\x80\xc2\x9b", "\xef\xbf\xbd\xc2\x9b" },
		{ "", "" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t len = strlen(cases[i].in);
		char dst[64], *dup, *mem = NULL;
		size_t n, memlen = 0;
		FILE *f;

		n = san_utf8_repair(dst, cases[i].in, len);
		CHECK_MSG(n == strlen(cases[i].out) && !strcmp(dst, cases[i].out), "case %zu", i);
		dup = san_utf8_dup(cases[i].in);
		CHECK_MSG(dup && !strcmp(dup, cases[i].out), "case %zu: dup", i);
		free(dup);
		f = open_memstream(&mem, &memlen);
		CHECK_EQ_INT(san_fputs_utf8(f, cases[i].in), 0);
		fclose(f);
		CHECK_MSG(!strcmp(mem, cases[i].out), "case %zu: fputs", i);
		free(mem);
		CHECK_MSG(san_utf8_valid(cases[i].in, len) == !strcmp(cases[i].in, cases[i].out),
			  "case %zu: valid", i);
	}
}

static void check_exhaustive(const unsigned char *s, size_t len, unsigned int *bad)
{
	char out[16];
	bool valid = san_utf8_valid((const char *)s, len);
	size_t n;

	if (valid != ref_valid(s, len) && (*bad)++ < 5)
		CHECK_MSG(false, "%02x %02x %02x %02x (len %zu): valid %d", s[0], s[1], s[2], s[3],
			  len, valid);
	n = san_utf8_repair(out, (const char *)s, len);
	if (!ref_valid((unsigned char *)out, n) || (valid && (n != len || memcmp(out, s, len))))
		if ((*bad)++ < 5)
			CHECK_MSG(false, "%02x %02x %02x %02x (len %zu): bad repair", s[0], s[1], s[2],
				  s[3], len);
}

/* Every 1- and 2-byte string, every 3-byte one that starts past ASCII, and 4-byte ones with
 * each lead and second byte: the decoder agrees with ref_valid(), and a repair is always valid
 * and leaves valid input alone. */
TEST(test_exhaustive_agreement)
{
	static const unsigned char tails[] = { 0x00, 0x41, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf,
					       0xc0, 0xc2, 0xe0, 0xf0, 0xff };
	unsigned char s[4] = {};
	unsigned int bad = 0;

	for (unsigned int a = 0; a < 256; a++) {
		s[0] = a;
		check_exhaustive(s, 1, &bad);
		for (unsigned int b = 0; b < 256; b++) {
			s[1] = b;
			check_exhaustive(s, 2, &bad);
			for (unsigned int c = 0; a >= 0x80 && c < 256; c++) {
				s[2] = c;
				check_exhaustive(s, 3, &bad);
			}
			for (size_t c = 0; a >= 0xf0 && c < sizeof(tails); c++)
				for (size_t d = 0; d < sizeof(tails); d++) {
					s[2] = tails[c];
					s[3] = tails[d];
					check_exhaustive(s, 4, &bad);
				}
			s[2] = s[3] = 0;
		}
	}
	CHECK_EQ_INT(bad, 0);
}

TEST(test_text)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
		{ HOSTILE, HOSTILE_TEXT },
		{ "python3", "python3" },
		/* printable UTF-8 stays: accents, CJK, emoji */
		{ "caf\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x98\x80", "caf\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x98\x80" },
		{ "a\nVerdict: ok", "a\\x0aVerdict: ok" },
		{ "\x1b]0;owned\x07", "\\x1b]0;owned\\x07" },
		{ "del\x7f", "del\\x7f" },
		{ "c1\xc2\x9b" "2J", "c1\\xc2\\x9b2J" },		/* U+009B, CSI of 8-bit terminals */
		{ "\xe2\x80\xae" "evil", "\\xe2\\x80\\xaeevil" },	/* right-to-left override */
		{ "ls\xe2\x80\xa8x", "ls\\xe2\\x80\\xa8x" },		/* line separator */
		{ "\xed\xa0\x80", "\\xed\\xa0\\x80" },
		{ "\xf0\x9f\x98", "\\xf0\\x9f\\x98" },
		{ "C:\\dir", "C:\\\\dir" },
		{ "\\x1b", "\\\\x1b" },	/* a name that spells an escape cannot pass for one */
	};
	char buf[256];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		san_text(buf, sizeof(buf), cases[i].in, SIZE_MAX);
		CHECK_MSG(!strcmp(buf, cases[i].out), "case %zu: \"%s\"", i, buf);
		CHECK_MSG(terminal_safe(buf), "case %zu: not terminal-safe", i);
	}
}

TEST(test_text_bounds)
{
	/* A comm as the kernel's 16 bytes, with no NUL: only max bytes are read. */
	char comm[16], buf[SAN_TEXT_SIZE(sizeof(comm))], guard[8] = "GUARD!!";
	char tiny[8];

	memcpy(comm, "0123456789abcde\xff", 16);
	san_text(buf, sizeof(buf), comm, sizeof(comm));
	CHECK_STR(buf, "0123456789abcde\\xff");
	CHECK_STR(guard, "GUARD!!");

	/* The worst case fits SAN_TEXT_SIZE whole. */
	memset(comm, 0x1b, sizeof(comm));
	san_text(buf, sizeof(buf), comm, sizeof(comm));
	CHECK_EQ_INT(strlen(buf), 64);

	/* A short buffer ends before an escape or character that does not fit, never inside. */
	san_text(tiny, 6, "ab\x1b" "cd", SIZE_MAX);
	CHECK_STR(tiny, "ab");
	san_text(tiny, 7, "ab\x1b" "cd", SIZE_MAX);
	CHECK_STR(tiny, "ab\\x1b");
	san_text(tiny, 7, "abcd\xe6\x97\xa5", SIZE_MAX);
	CHECK_STR(tiny, "abcd");
	san_text(tiny, 8, "abcd\xe6\x97\xa5", SIZE_MAX);
	CHECK_STR(tiny, "abcd\xe6\x97\xa5");
	san_text(tiny, 7, "abcde\\", SIZE_MAX);
	CHECK_STR(tiny, "abcde");
	san_text(tiny, 1, "abc", SIZE_MAX);
	CHECK_STR(tiny, "");
	tiny[0] = 'x';
	san_text(tiny, 0, "abc", SIZE_MAX);
	CHECK(tiny[0] == 'x');
}

struct capture {
	FILE *f;
	char *buf;
	size_t len;
};

static FILE *cap_open(struct capture *c)
{
	c->buf = NULL;
	c->f = open_memstream(&c->buf, &c->len);
	return c->f;
}

/* The text written, from malloc(); open_memstream() fills in the buffer only on close. */
static char *cap_close(struct capture *c)
{
	fclose(c->f);
	return c->buf;
}

/* The trainer's waits, all ended by its helper thread. */
static const struct wake_record wake = { .wakee = 100, .waker = 101, .waker_tgid = 100,
					 .ctx = PP_WAKE_TASK, .cause = PP_THREAD_WAIT,
					 .ns = 1800000000ULL, .count = 90 };

/* The text and JSON reports of a job whose names, command line and library path are hostile. */
static void hostile_report(struct report *r, struct thread_result *t, struct proc_result *p,
			   struct lib_result *lib)
{
	memset(r, 0, sizeof(*r));
	r->root_pid = 100;
	snprintf(r->cmdline, sizeof(r->cmdline), "python3 train.py --tag " HOSTILE);
	r->start_ns = 0;
	r->end_ns = 2000000000ULL;
	t[0] = (struct thread_result){ .tid = 100, .tgid = 100, .comm = HOSTILE,
				       .wall_ns = 2000000000ULL };
	t[0].ns[PP_THREAD_WAIT] = 1800000000ULL;
	t[0].ns[PP_RUNNING] = 200000000ULL;
	/* the thread it waits on, named to forge a report line */
	t[1] = (struct thread_result){ .tid = 101, .tgid = 100, .comm = "x\nVerdict: ok\xc2\x9b",
				       .wall_ns = 2000000000ULL };
	t[1].ns[PP_RUNNING] = 1900000000ULL;
	t[1].ns[PP_OTHER] = 100000000ULL;
	r->threads = t;
	r->nr_threads = 2;
	p[0] = (struct proc_result){ .pid = 100, .root = true, .comm = HOSTILE };
	r->procs = p;
	r->nr_procs = 1;
	*lib = (struct lib_result){ .pid = 100, .kind = LIB_CUDART,
				    .path = "/tmp/\x1b[2J\xff/libcudart.so.13" };
	r->libs = lib;
	r->nr_libs = 1;
	report_not_traced(r, "cannot read the GPU library %s", lib->path);
	r->input = (struct analysis_input){ .root_pid = 100, .threshold = 0.2, .ncpus = 2,
					    .cpu_busy = -1, .runnable_avg = -1,
					    .window_ns = 2000000000ULL };
	r->input.wakes = &wake;
	r->input.nr_wakes = 1;
	analyse(r->threads, r->nr_threads, &r->input, &r->analysis);
}

static json_object *parse_strict(const char *text)
{
	json_tokener *tok = json_tokener_new();
	json_object *o;

	json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
	o = json_tokener_parse_ex(tok, text, strlen(text));
	if (json_tokener_get_error(tok) != json_tokener_success) {
		json_object_put(o);
		o = NULL;
	}
	json_tokener_free(tok);
	return o;
}

static const char *str_at(json_object *o, const char *key)
{
	json_object *v;

	return json_object_object_get_ex(o, key, &v) ? json_object_get_string(v) : NULL;
}

TEST(test_report_outputs)
{
	struct thread_result t[2];
	struct proc_result p[1];
	struct lib_result lib;
	struct report r;
	struct capture c;
	json_object *o, *v;
	char *buf;

	hostile_report(&r, t, p, &lib);
	/* the verdict names the hostile waker, so the names reach the verdict line too */
	CHECK(strstr(r.analysis.verdict_line, "Verdict: ok") != NULL);

	report_print_text(cap_open(&c), &r);
	buf = cap_close(&c);
	CHECK_MSG(terminal_safe(buf), "text report not terminal-safe:\n%.600s", buf);
	CHECK_MSG(strstr(buf, "(" HOSTILE_TEXT ", chosen by"), "trainer line:\n%.600s", buf);
	CHECK_MSG(strstr(buf, "--tag " HOSTILE_TEXT ")"), "command line:\n%.600s", buf);
	CHECK_MSG(strstr(buf, "x\\x0aVerdict: ok\\xc2\\x9b"), "waker:\n%.600s", buf);
	CHECK_MSG(strstr(buf, "/tmp/\\x1b[2J\\xff/libcudart.so.13"), "library path:\n%.600s", buf);
	/* the forged line did not become one */
	CHECK_MSG(!strstr(buf, "\nVerdict: ok"), "forged line:\n%.600s", buf);
	free(buf);

	CHECK_EQ_INT(report_print_json(cap_open(&c), &r), 0);
	buf = cap_close(&c);
	o = parse_strict(buf);
	CHECK_MSG(o, "JSON report is not strict UTF-8 JSON:\n%.600s", buf);
	if (o) {
		CHECK_STR(str_at(o, "command"), "python3 train.py --tag " HOSTILE_UTF8);
		CHECK(json_object_object_get_ex(o, "trainer", &v));
		CHECK_STR(str_at(v, "comm"), HOSTILE_UTF8);
		v = json_object_array_get_idx(json_object_object_get(o, "threads"), 1);
		CHECK_STR(str_at(v, "comm"), "x\nVerdict: ok\xc2\x9b");
		v = json_object_array_get_idx(json_object_object_get(
			json_object_object_get(o, "gpu"), "libraries"), 0);
		CHECK_STR(str_at(v, "path"), "/tmp/\x1b[2J" SAN_REPLACEMENT "/libcudart.so.13");
		json_object_put(o);
	}
	free(buf);
}

TEST(test_hist_outputs)
{
	struct hist_entry e = { .kind = PP_HK_OFFCPU, .id = 100, .pid = 100, .count = 1,
				.label = "OTHER", .comm = HOSTILE };
	struct hist_interval iv = { .root = 100, .interval_s = 1, .timestamp = "12:00:00",
				    .keying = PP_HKEY_THREAD, .kinds = 1u << PP_HK_OFFCPU,
				    .entries = &e, .nr_entries = 1 };
	struct capture c;
	json_object *o, *h;
	char *buf;

	e.slots[3] = 1;
	hist_print_interval_text(cap_open(&c), &iv);
	buf = cap_close(&c);
	CHECK_MSG(terminal_safe(buf), "hist text not terminal-safe:\n%.600s", buf);
	CHECK_MSG(strstr(buf, "tid = 100 " HOSTILE_TEXT " (pid 100)"), "hist header:\n%.600s", buf);
	free(buf);

	/* comm[16] full, no NUL: the copy stays inside it */
	memcpy(e.comm, "0123456789abcde\xff", 16);
	hist_print_interval_text(cap_open(&c), &iv);
	buf = cap_close(&c);
	CHECK_MSG(strstr(buf, "tid = 100 0123456789abcde\\xff (pid 100)"), "bounded:\n%.600s", buf);
	free(buf);

	memcpy(e.comm, HOSTILE, sizeof(HOSTILE));
	CHECK_EQ_INT(hist_print_interval_json(cap_open(&c), &iv), 0);
	buf = cap_close(&c);
	o = parse_strict(buf);
	CHECK_MSG(o, "hist JSON is not strict UTF-8 JSON:\n%.600s", buf);
	h = o ? json_object_array_get_idx(json_object_object_get(o, "histograms"), 0) : NULL;
	CHECK_STR(h ? str_at(h, "comm") : NULL, HOSTILE_UTF8);
	json_object_put(o);
	free(buf);
}

TEST(test_prom_label)
{
	struct capture c;
	char *buf;

	CHECK_EQ_INT(prom_sample(cap_open(&c), "pipeprof_job_info", (const struct prom_label[]){
		{ "pid", "100" }, { "comm", HOSTILE "\n\x7f\xc2\x9b" }, { NULL, NULL } }, 1), 0);
	buf = cap_close(&c);
	/* \\, \" and \n escaped; \xff, ESC, DEL and U+009B replaced; the tab kept */
	CHECK_STR(buf, "pipeprof_job_info{pid=\"100\",comm=\"a\\\"b\\\\c}" SAN_REPLACEMENT "[31m"
		  SAN_REPLACEMENT "\tz\\n" SAN_REPLACEMENT SAN_REPLACEMENT "\"} 1\n");
	CHECK(ref_valid((unsigned char *)buf, strlen(buf)));
	free(buf);
}

TEST(test_jsonl_line)
{
	char dir[] = "/tmp/pp-sanitize-XXXXXX", path[64], line[256];
	json_object *o;
	struct jsonl j;
	FILE *f;

	if (!CHECK(mkdtemp(dir)))
		return;
	snprintf(path, sizeof(path), "%s/events.jsonl", dir);
	CHECK_EQ_INT(jsonl_open(&j, path, 0, 0), 0);
	o = json_object_new_object();
	json_object_object_add(o, "comm", json_object_new_string(HOSTILE));
	CHECK_EQ_INT(jsonl_write(&j, o), 0);
	json_object_put(o);
	jsonl_close(&j);

	f = fopen(path, "r");
	CHECK(f && fgets(line, sizeof(line), f));
	if (f)
		fclose(f);
	CHECK_STR(line, "{\"comm\":\"a\\\"b\\\\c}\\u001b[31m" SAN_REPLACEMENT "\\tz\"}\n");
	o = parse_strict(line);
	CHECK(o != NULL);
	CHECK_STR(o ? str_at(o, "comm") : NULL, HOSTILE_UTF8);
	json_object_put(o);
	unlink(path);
	rmdir(dir);
}

int main(void)
{
	RUN_TEST(test_utf8_next);
	RUN_TEST(test_repair_as_python);
	RUN_TEST(test_exhaustive_agreement);
	RUN_TEST(test_text);
	RUN_TEST(test_text_bounds);
	RUN_TEST(test_report_outputs);
	RUN_TEST(test_hist_outputs);
	RUN_TEST(test_prom_label);
	RUN_TEST(test_jsonl_line);
	return unit_summary();
}
