// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <string.h>
#include "step_baseline.h"

static double median_of(const double *v, int n)
{
	double s[STEP_BASELINE_WINDOWS];

	memcpy(s, v, n * sizeof(*v));
	for (int i = 1; i < n; i++)
		for (int k = i; k > 0 && s[k] < s[k - 1]; k--) {
			double t = s[k];

			s[k] = s[k - 1];
			s[k - 1] = t;
		}
	return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

bool step_baseline_feed(struct step_baseline *b, double median, double threshold, double *baseline)
{
	bool regressed = false;

	if (b->n == STEP_BASELINE_WINDOWS) {
		*baseline = median_of(b->medians, b->n);
		regressed = median > *baseline * (1 + threshold);
		memmove(b->medians, b->medians + 1, (STEP_BASELINE_WINDOWS - 1) * sizeof(double));
		b->n--;
	}
	b->medians[b->n++] = median;
	return regressed;
}
