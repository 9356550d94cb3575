// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <string.h>
#include "gpumem.h"

/* Least squares of y[0..n) against x[0..n) (NULL: the index): slope, and R^2 (0 when y does
 * not vary). */
static void line(const double *x, const double *y, int n, double *slope, double *r2)
{
	double st = 0, sy = 0, stt = 0, sty = 0, syy = 0, var_t, var_y, cov;

	*slope = *r2 = 0;
	if (n < 2)
		return;
	for (int i = 0; i < n; i++) {
		double t = x ? x[i] : i;

		st += t;
		sy += y[i];
		stt += t * t;
		sty += t * y[i];
		syy += y[i] * y[i];
	}
	var_t = stt - st * st / n;
	var_y = syy - sy * sy / n;
	cov = sty - st * sy / n;
	if (var_t <= 0)
		return;
	*slope = cov / var_t;
	/* A relative floor: rounding leaves a constant series a tiny variance of its own. */
	*r2 = var_y > 1e-9 * (syy > 0 ? syy : 1) ? cov * cov / (var_t * var_y) : 0;
}

void gpumem_fit_steps(const double *step, const double *y, int n, struct gpumem_fit *out)
{
	double unused;
	int half = n / 2;

	memset(out, 0, sizeof(*out));
	out->points = n;
	if (n < 2)
		return;
	out->steps = step ? (int)(step[n - 1] - step[0]) : n - 1;
	line(step, y, n, &out->bytes_per_step, &out->r2);
	line(step ? step + half : NULL, y + half, n - half, &out->late_bytes_per_step, &unused);
	out->growth_bytes = out->bytes_per_step * out->steps;
	out->leak = n >= GPUMEM_LEAK_MIN_POINTS && out->bytes_per_step > 0 &&
		    out->r2 >= GPUMEM_LEAK_MIN_R2 && out->growth_bytes >= (double)GPUMEM_LEAK_MIN_BYTES &&
		    out->late_bytes_per_step >= GPUMEM_LEAK_LATE_SHARE * out->bytes_per_step;
}
