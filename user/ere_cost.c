// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * glibc's regcomp() has no limit of its own on what a pattern may make it build: "a" followed
 * by 21 '+' took 6 s and 1.4 GB, each '+' doubling the last, and a config file or --match
 * holding one would take the daemon down at start or at SIGHUP. The bound here follows
 * regcomp's own expansion (posix/regcomp.c: parse_dup_op duplicates the operand once per
 * spelled-out repetition), so that nesting multiplies and sequence adds.
 */
#include <stdbool.h>
#include "ere_cost.h"

/* Deeper nesting than this is refused outright: no command name needs it. */
#define MAX_DEPTH 32
/* RE_DUP_MAX: regcomp refuses larger bounds. */
#define DUP_MAX 0x7fff

struct frame {
	unsigned long sum;	/* the group so far */
	unsigned long last;	/* its last operand, which a repetition applies to; 0 after '|' */
	bool last_star;		/* that operand holds a '*', '?' or {0,n}: an epsilon loop */
	bool any_star;		/* the group so far holds one */
};

static unsigned long sat_add(unsigned long a, unsigned long b, unsigned long cap)
{
	return a >= cap || b >= cap - a ? cap : a + b;
}

static unsigned long sat_mul(unsigned long a, unsigned long k, unsigned long cap)
{
	return k && a > cap / k ? cap : a * k;
}

static void operand(struct frame *f, unsigned long cost, bool star, unsigned long cap)
{
	f->sum = sat_add(f->sum, cost, cap);
	f->last = cost;
	f->last_star = star;
	f->any_star |= star;
}

/* "[...]": one operand, whatever it holds. A ']' first is a member, as are "[:...:]" names. */
static const char *skip_bracket(const char *p)
{
	char kind;

	p++;
	if (*p == '^')
		p++;
	if (*p == ']')
		p++;
	while (*p && *p != ']') {
		if (*p == '[' && (p[1] == ':' || p[1] == '.' || p[1] == '=')) {
			kind = p[1];
			for (p += 2; *p && !(p[0] == kind && p[1] == ']'); p++)
				;
			if (*p)
				p += 2;
			continue;
		}
		p++;
	}
	return *p ? p + 1 : p;
}

/* "{m}", "{m,}", "{m,n}" or "{,n}" at *pp: how many copies of the operand regcomp makes, how
 * many of them are optional (n - m: each one a '?' nested in the one before), and whether it
 * may match none (an epsilon path, as '*' and '?' make). */
static bool parse_interval(const char **pp, unsigned long *copies, unsigned long *optional,
			   bool *skippable)
{
	const char *p = *pp + 1;
	unsigned long m = 0, n = 0;
	bool have_m = false, have_n = false, comma = false;

	for (; *p >= '0' && *p <= '9'; p++, have_m = true)
		m = m > DUP_MAX ? m : m * 10 + (*p - '0');
	if (*p == ',') {
		comma = true;
		for (p++; *p >= '0' && *p <= '9'; p++, have_n = true)
			n = n > DUP_MAX ? n : n * 10 + (*p - '0');
	}
	if (*p != '}' || (!have_m && !have_n))
		return false;
	*skippable = !m || (comma && !have_n);
	/* An open end is spelled as m copies and a star. */
	*copies = !comma ? m : have_n ? n : m + 1;
	if (*copies > DUP_MAX + 1)
		*copies = DUP_MAX + 1;
	*optional = comma && have_n && *copies > m ? *copies - m : 0;
	if (!*copies)
		*copies = 1;
	*pp = p + 1;
	return true;
}

unsigned long ere_cost(const char *re, unsigned long limit)
{
	unsigned long cap = limit + 1 ? limit + 1 : limit, copies, optional, group, added;
	bool star;
	struct frame st[MAX_DEPTH] = {};
	const char *p = re;
	struct frame *f;
	int depth = 0;

	while (*p) {
		f = &st[depth];
		switch (*p) {
		case '(':
			if (depth + 1 == MAX_DEPTH)
				return cap;
			st[++depth] = (struct frame){};
			p++;
			continue;
		case ')':
			if (depth) {
				group = sat_add(st[depth].sum, 1, cap);
				star = st[depth].any_star;
				f = &st[--depth];
				operand(f, group, star, cap);
			} else {
				operand(f, 1, false, cap);
			}
			p++;
			break;
		case '|':
			f->sum = sat_add(f->sum, 1, cap);
			f->last = 0;
			f->last_star = false;
			p++;
			continue;
		case '*':
		case '?':
		case '+':
			copies = *p == '+' ? 2 : 1;
			optional = 0;
			star = *p != '+';
			p++;
			goto repeat;
		case '{':
			if (parse_interval(&p, &copies, &optional, &star))
				goto repeat;
			operand(f, 1, false, cap);
			p++;
			break;
		case '\\':
			operand(f, 1, false, cap);
			p += p[1] ? 2 : 1;
			break;
		case '[':
			operand(f, 1, false, cap);
			p = skip_bracket(p);
			break;
		default:
			operand(f, 1, false, cap);
			p++;
			break;
		}
		if (f->sum >= cap)
			return cap;
		continue;
repeat:
		/* The operand copied copies times over, and a node for the repetition itself. */
		added = sat_add(sat_mul(f->last, copies - 1, cap), 1, cap);
		/* Optional copies nest, and each one's epsilon closure holds the skips of all those
		 * after it: k of them cost k^2 closure entries per node of the operand. "a{1,1000}"
		 * took 25 ms and 9 MB, "a{1,4000}" 366 ms and 124 MB, "a{1,9900}" 2.2 s and 756 MB;
		 * at a sixteenth of a unit per entry "a{1,400}" (5 ms, 2 MB) costs as much as
		 * "a{10000}" (10 ms, 3 MB). k is at most DUP_MAX + 1, so k^2 cannot overflow. */
		if (optional > 1)
			added = sat_add(added, sat_mul(f->last, optional * optional / 16, cap), cap);
		f->last = sat_add(sat_mul(f->last, copies, cap), 1, cap);
		/* Copies of an epsilon loop: regcomp's epsilon closures (calc_eclosure) then hold
		 * nodes of every copy, quadratic in the result: "a++*" and ten more '+' took 1.4 s
		 * and 110 MB at a linear cost of 9k, where "a" and thirteen '+' (16k) take 25 ms. */
		if (f->last_star && copies > 1)
			added = sat_add(added, sat_mul(f->last, f->last, cap), cap);
		f->sum = sat_add(f->sum, added, cap);
		f->last_star |= star;
		f->any_star |= star;
		if (f->sum >= cap)
			return cap;
	}
	/* Unclosed groups: regcomp refuses them, but the bound still holds. */
	for (; depth; depth--)
		operand(&st[depth - 1], sat_add(st[depth].sum, 1, cap), st[depth].any_star, cap);
	return st[0].sum;
}
