// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The append-with-doubling that the tracer's and the report's arrays share. */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "grow.h"

int grow_array(void *items, int *cap, int nr, size_t size, int first_cap)
{
	void *array, *grown;
	int want;

	if (nr < 0 || first_cap < 1 || size == 0)
		return -EINVAL;
	if (nr < *cap)
		return 0;
	want = *cap ? *cap : first_cap;
	while (want <= nr) {
		if (want > INT_MAX / 2)
			return -ENOMEM;
		want *= 2;
	}
	if ((size_t)want > SIZE_MAX / size)
		return -ENOMEM;
	/* The pointer is read and written as bytes: items points to an array pointer of any type. */
	memcpy(&array, items, sizeof(array));
	grown = realloc(array, (size_t)want * size);
	if (!grown)
		return -ENOMEM;
	memcpy(items, &grown, sizeof(grown));
	*cap = want;
	return 0;
}
