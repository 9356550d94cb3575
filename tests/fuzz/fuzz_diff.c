// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * `pipeprof diff` over any two documents: the input is BEFORE, a NUL, then AFTER (without a
 * NUL, both are the input). Whatever they hold, reading them either succeeds or says why,
 * every rule is checked, a rule fires exactly when its line says FAIL, the text is one inert
 * line per '\n' (no control character of the reports' reaches a terminal) and the JSON
 * serializes.
 */
#include <errno.h>
#include <json-c/json.h>
#include "diff.h"
#include "fuzz.h"
#include "sanitize.h"

static const char *const rules[] = {
	"step_p50>+10%", "step_p90>+10%", "steps_per_s<-10%", "data_wait>+5pt", "running<-3pt",
	"gpu_wait>+10%", "other>+0pt", "verdict!=SAME",
};

#define NR_RULES (sizeof(rules) / sizeof(rules[0]))

static bool read_side(const char *text, size_t len, const char *label, json_object **doc,
		      struct diff_side *side)
{
	char err[512] = "";
	int ret;

	ret = diff_parse_json(text, len, doc, err, sizeof(err));
	FUZZ_CHECK(ret == 0 || ret == -EINVAL || ret == -ENOMEM);
	FUZZ_CHECK(!ret == !!*doc);
	FUZZ_CHECK(ret == 0 || (err[0] && memchr(err, '\0', sizeof(err))));
	if (ret)
		return false;
	ret = diff_side_read(*doc, label, label, side, err, sizeof(err));
	FUZZ_CHECK(ret == 0 || (ret == -EPROTO && err[0]));
	return ret == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nul = memchr(data, '\0', size);
	size_t before_len = nul ? (size_t)(nul - data) : size;
	char *before_text = fuzz_strndup(data, before_len);
	size_t after_len = nul ? size - before_len - 1 : size;
	char *after_text = fuzz_strndup(nul ? nul + 1 : data, after_len);
	json_object *docs[2] = {}, *out;
	struct diff_rule parsed[NR_RULES];
	struct diff_check checks[NR_RULES];
	struct diff_side before, after;
	char *text = NULL, err[256];
	size_t len = 0;
	FILE *f;

	if (!read_side(before_text, before_len, "BEFORE", &docs[0], &before) ||
	    !read_side(after_text, after_len, "AFTER", &docs[1], &after))
		goto cleanup;
	for (size_t i = 0; i < NR_RULES; i++) {
		FUZZ_CHECK(!diff_rule_parse(rules[i], &parsed[i], err, sizeof(err)));
		diff_rule_check(&parsed[i], &before, &after, &checks[i]);
		FUZZ_CHECK(checks[i].fired == !strncmp(checks[i].line, "FAIL: ", 6));
		FUZZ_CHECK(checks[i].fired || checks[i].measured);
		FUZZ_CHECK(memchr(checks[i].line, '\0', sizeof(checks[i].line)));
	}

	f = open_memstream(&text, &len);
	FUZZ_CHECK(f);
	diff_print_text(f, &before, &after, parsed, checks, NR_RULES, true);
	fclose(f);
	FUZZ_CHECK(text && strlen(text) == len);
	for (size_t i = 0; i < len; i++)
		FUZZ_CHECK(text[i] == '\n' || (unsigned char)text[i] >= 0x20);
	FUZZ_CHECK(san_utf8_valid(text, len));

	out = diff_json(&before, &after, parsed, checks, NR_RULES);
	FUZZ_CHECK(out);
	FUZZ_CHECK(json_object_to_json_string_ext(out, JSON_C_TO_STRING_PRETTY));
	json_object_put(out);
cleanup:
	free(text);
	json_object_put(docs[0]);
	json_object_put(docs[1]);
	free(before_text);
	free(after_text);
	return 0;
}
