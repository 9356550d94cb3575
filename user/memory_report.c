// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The report's "Memory" section, text and JSON, from the memory summary (memory.c) and, where
 * steps were found, per step. */
#include <json-c/json.h>
#include "report.h"

static void print_bytes(FILE *out, double b)
{
	if (b >= 1e9)
		fprintf(out, "%.2f GB", b / 1e9);
	else if (b >= 1e6)
		fprintf(out, "%.1f MB", b / 1e6);
	else if (b >= 1e3)
		fprintf(out, "%.0f kB", b / 1e3);
	else	/* a fast loop's growth per step: 344 B read "0 kB/step" */
		fprintf(out, "%.0f B", b);
}

double memory_step_s(const struct report *r)
{
	return r->steps.count ? r->steps.mean_s : 0;
}

void memory_print_text(FILE *out, const struct report *r)
{
	const struct mem_summary *m = &r->mem;
	double per_step = memory_step_s(r);

	if (!r->memory_on)
		return;
	fprintf(out, "\nMemory (resident, read from /proc every %.2f s; %d readings):\n",
		m->interval_s, m->readings);
	if (!m->readings) {
		fprintf(out, "  no reading: the window was too short\n");
		return;
	}
	for (int g = 0; g < NR_MEM_GROUPS; g++) {
		const struct mem_group_summary *s = &m->group[g];

		if (!s->processes)
			continue;
		fprintf(out, "  %-8s ", mem_group_name(g));
		if (g == MEM_WORKERS)
			fprintf(out, "%d process%s, ", s->processes, s->processes == 1 ? "" : "es");
		print_bytes(out, (double)s->rss_bytes);
		fprintf(out, " now, peak ");
		print_bytes(out, (double)s->peak_bytes);
		if (s->leak) {
			fprintf(out, "; growing ");
			print_bytes(out, s->growth_bytes_per_s * (per_step ? per_step : 1));
			fprintf(out, per_step ? "/step (" : "/s");
			if (per_step) {
				print_bytes(out, s->growth_bytes_per_s);
				fprintf(out, "/s)");
			}
			fprintf(out, " in %d of %d process%s, steadily all window: a probable leak",
				s->growing, s->processes, s->processes == 1 ? "" : "es");
		} else {
			fprintf(out, "; no steady growth");
		}
		fprintf(out, "; %llu major faults", (unsigned long long)s->major_faults);
		if (per_step && m->span_s > 0)
			fprintf(out, " (%.2f/step)", s->major_faults * per_step / m->span_s);
		fputc('\n', out);
	}
	if (r->mem_readings_lost)
		fprintf(out, "  %llu readings left out (over the cap)\n",
			(unsigned long long)r->mem_readings_lost);
}

json_object *memory_json(const struct report *r)
{
	const struct mem_summary *m = &r->mem;
	double per_step = memory_step_s(r);
	json_object *o = json_object_new_object(), *groups = json_object_new_object();

	json_object_object_add(o, "readings", json_object_new_int(m->readings));
	json_object_object_add(o, "interval_s", json_object_new_double(m->interval_s));
	json_object_object_add(o, "span_s", json_object_new_double(m->span_s));
	json_object_object_add(o, "readings_lost", json_object_new_int64(r->mem_readings_lost));
	for (int g = 0; g < NR_MEM_GROUPS; g++) {
		const struct mem_group_summary *s = &m->group[g];
		json_object *go = json_object_new_object();

		json_object_object_add(go, "processes", json_object_new_int(s->processes));
		json_object_object_add(go, "rss_bytes", json_object_new_int64(s->rss_bytes));
		json_object_object_add(go, "peak_bytes", json_object_new_int64(s->peak_bytes));
		json_object_object_add(go, "growth_bytes_per_s",
				       json_object_new_double(s->growth_bytes_per_s));
		json_object_object_add(go, "growth_bytes_per_step", per_step ?
				       json_object_new_double(s->growth_bytes_per_s * per_step) : NULL);
		json_object_object_add(go, "growing_processes", json_object_new_int(s->growing));
		json_object_object_add(go, "leak", json_object_new_boolean(s->leak));
		json_object_object_add(go, "major_faults", json_object_new_int64(s->major_faults));
		json_object_object_add(go, "major_faults_per_step", per_step && m->span_s > 0 ?
				       json_object_new_double(s->major_faults * per_step / m->span_s) :
				       NULL);
		json_object_object_add(groups, mem_group_name(g), go);
	}
	json_object_object_add(o, "groups", groups);
	return o;
}
