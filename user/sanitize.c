// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "sanitize.h"

int san_utf8_next(const char *str, size_t len, uint32_t *cp)
{
	const unsigned char *s = (const unsigned char *)str;
	unsigned char lo = 0x80, hi = 0xbf;
	uint32_t c = s[0];
	int need;

	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	/* Unicode's table 3-7: the second byte's range rules out overlong forms, surrogates
	 * and code points past U+10FFFF, so those end the subpart at their lead byte. */
	if (c >= 0xc2 && c <= 0xdf) {
		need = 1;
		c &= 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		need = 2;
		if (c == 0xe0)
			lo = 0xa0;
		else if (c == 0xed)
			hi = 0x9f;
		c &= 0x0f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		need = 3;
		if (c == 0xf0)
			lo = 0x90;
		else if (c == 0xf4)
			hi = 0x8f;
		c &= 0x07;
	} else {
		return -1;
	}
	for (int i = 1; i <= need; i++) {
		if ((size_t)i >= len || s[i] < lo || s[i] > hi)
			return -i;
		c = c << 6 | (s[i] & 0x3f);
		lo = 0x80;
		hi = 0xbf;
	}
	*cp = c;
	return need + 1;
}

bool san_utf8_valid(const char *s, size_t len)
{
	uint32_t cp;
	int n;

	while (len) {
		/* ASCII runs are nearly all of what is checked: skip them without decoding. */
		if (!((unsigned char)*s & 0x80)) {
			s++;
			len--;
			continue;
		}
		n = san_utf8_next(s, len, &cp);
		if (n < 0)
			return false;
		s += n;
		len -= n;
	}
	return true;
}

size_t san_utf8_repair(char *dst, const char *s, size_t len)
{
	size_t out = 0;
	uint32_t cp;
	int n;

	while (len) {
		n = san_utf8_next(s, len, &cp);
		if (n < 0) {
			memcpy(dst + out, SAN_REPLACEMENT, 3);
			out += 3;
			n = -n;
		} else {
			memcpy(dst + out, s, n);
			out += n;
		}
		s += n;
		len -= n;
	}
	dst[out] = '\0';
	return out;
}

char *san_utf8_dup(const char *s)
{
	size_t len = strlen(s);
	char *dst;

	if (san_utf8_valid(s, len))
		return strdup(s);
	dst = malloc(3 * len + 1);
	if (dst)
		san_utf8_repair(dst, s, len);
	return dst;
}

int san_fputs_utf8(FILE *out, const char *s)
{
	size_t len = strlen(s), run;
	uint32_t cp;
	int n;

	while (len) {
		/* Write well-formed runs whole: a report is long and almost never needs a repair. */
		for (run = 0; run < len; run += n) {
			n = san_utf8_next(s + run, len - run, &cp);
			if (n < 0)
				break;
		}
		if (run && fwrite(s, 1, run, out) != run)
			return -EIO;
		s += run;
		len -= run;
		if (!len)
			break;
		n = -san_utf8_next(s, len, &cp);
		if (fputs(SAN_REPLACEMENT, out) == EOF)
			return -EIO;
		s += n;
		len -= n;
	}
	return 0;
}

bool san_is_control(uint32_t cp)
{
	return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f);
}

/* Invisible characters that reorder or break the rest of the line as displayed ("Trojan
 * Source"): a name could make a report line read differently from what it says. */
static bool is_layout_control(uint32_t cp)
{
	return cp == 0x061c || cp == 0x200e || cp == 0x200f || (cp >= 0x2028 && cp <= 0x202e) ||
	       (cp >= 0x2066 && cp <= 0x2069);
}

const char *san_text(char *buf, size_t size, const char *s, size_t max)
{
	static const char hex[] = "0123456789abcdef";
	size_t len = strnlen(s, max), out = 0;
	uint32_t cp;
	int n;

	if (!size)
		return buf;
	while (len) {
		bool escape;
		size_t need;

		n = san_utf8_next(s, len, &cp);
		escape = n < 0 || san_is_control(cp) || is_layout_control(cp);
		if (n < 0)
			n = -n;
		if (escape)
			need = 4 * (size_t)n;
		else
			need = cp == '\\' ? 2 : (size_t)n;
		if (out + need >= size)
			break;
		if (escape) {
			for (int i = 0; i < n; i++) {
				unsigned char b = s[i];

				buf[out++] = '\\';
				buf[out++] = 'x';
				buf[out++] = hex[b >> 4];
				buf[out++] = hex[b & 0xf];
			}
		} else if (cp == '\\') {
			buf[out++] = '\\';
			buf[out++] = '\\';
		} else {
			memcpy(buf + out, s, n);
			out += n;
		}
		s += n;
		len -= n;
	}
	buf[out] = '\0';
	return buf;
}
