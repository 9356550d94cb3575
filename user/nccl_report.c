// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The report's NCCL section: per collective, point-to-point and group call of the mapped
 * libnccl files, the calls, bytes and time inside them (nccl.bpf.c), and the functions that
 * could not be probed. A rank's time inside these calls reads COMM_WAIT in its states.
 */
#include <string.h>
#include <json-c/json.h>
#include "gpu_apis.h"
#include "hist.h"
#include "report.h"
#include "sanitize.h"

bool nccl_called(const struct report *r)
{
	for (int op = 0; op < PP_NR_NCCL_CALLS; op++)
		if (r->nccl[op].calls)
			return true;
	return false;
}

void nccl_print_text(FILE *out, const struct report *r)
{
	double secs = (r->end_ns - r->start_ns) / 1e9;
	char shown[SAN_TEXT_SIZE(PATH_MAX)], b[32];

	if (!r->nr_nccl_libs)
		return;
	fprintf(out, "\nNCCL (%d librar%s probed", r->nr_nccl_libs, r->nr_nccl_libs == 1 ? "y" : "ies");
	if (r->nr_nccl_libs == 1)
		fprintf(out, ": %s", san_text(shown, sizeof(shown), r->nccl_libs[0].path,
					      sizeof(r->nccl_libs[0].path)));
	fprintf(out, "):\n");
	if (!r->nccl_traced) {
		fprintf(out, "  no collective could be probed (see Not traced / lost)\n");
		return;
	}
	if (!nccl_called(r)) {
		fprintf(out, "  no collective was called in the window\n");
		return;
	}
	for (int op = 0; op < PP_NR_NCCL_CALLS; op++) {
		const struct nccl_result *n = &r->nccl[op];

		if (!n->calls)
			continue;
		fprintf(out, "  %s: %llu calls (%.1f/s)", n->name, (unsigned long long)n->calls,
			secs > 0 ? n->calls / secs : 0);
		if (op != PP_NCCL_GROUP_START && op != PP_NCCL_GROUP_END)
			fprintf(out, ", %s%s", report_fmt_bytes(b, sizeof(b), n->bytes),
				op == PP_NCCL_ALL_GATHER ? " received" : "");
		fprintf(out, ", %.3f s inside, mean %.1f us, p50 %.0f us, p99 %.0f us, max %.0f us\n",
			n->total_ns / 1e9, n->total_ns / 1e3 / n->calls,
			report_percentile_us(n->slots, n->max_ns, 50),
			report_percentile_us(n->slots, n->max_ns, 99), n->max_ns / 1e3);
		if (n->unsized)
			fprintf(out, "    %llu of them not in the bytes: a communicator whose size was "
				"not seen (made before the attach) or an unknown data type\n",
				(unsigned long long)n->unsized);
	}
	fprintf(out, "  (time inside them reads COMM_WAIT; inside ncclGroupStart/End the "
		"collectives return at once and ncclGroupEnd holds the wait)\n");
}

json_object *nccl_json(const struct report *r)
{
	json_object *o = json_object_new_object(), *libs = json_object_new_array();
	json_object *calls = json_object_new_array();

	json_object_object_add(o, "traced", json_object_new_boolean(r->nccl_traced));
	for (int i = 0; i < r->nr_nccl_libs; i++)
		json_object_array_add(libs, lib_result_json(&r->nccl_libs[i]));
	json_object_object_add(o, "libraries", libs);
	for (int op = 0; op < PP_NR_NCCL_CALLS; op++) {
		const struct nccl_result *n = &r->nccl[op];
		json_object *c;

		if (!n->calls)
			continue;
		c = json_object_new_object();
		json_object_object_add(c, "name", json_object_new_string(n->name));
		json_object_object_add(c, "calls", json_object_new_int64(n->calls));
		json_object_object_add(c, "bytes", json_object_new_int64(n->bytes));
		json_object_object_add(c, "unsized_calls", json_object_new_int64(n->unsized));
		json_object_object_add(c, "total_ns", json_object_new_int64(n->total_ns));
		json_object_object_add(c, "mean_ns", json_object_new_int64(n->total_ns / n->calls));
		json_object_object_add(c, "max_ns", json_object_new_int64(n->max_ns));
		json_object_object_add(c, "hist_usecs", report_hist_json(n->slots));
		json_object_array_add(calls, c);
	}
	json_object_object_add(o, "calls", calls);
	return o;
}
