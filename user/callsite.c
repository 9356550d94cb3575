// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "callsite.h"

/* Bytes of an FF /2 call from its opcode through its last displacement byte, given its ModRM
 * byte and the byte after it (a SIB byte when there is one). */
static int indirect_call_length(uint8_t modrm, uint8_t sib)
{
	int mod = modrm >> 6, rm = modrm & 7, len = 2;

	if (mod == 3)
		return len;
	if (rm == 4) {
		len++;
		/* SIB with no base register: a 32-bit displacement stands in for it. */
		if (mod == 0 && (sib & 7) == 5)
			len += 4;
	} else if (mod == 0 && rm == 5) {
		len += 4;	/* RIP-relative */
	}
	if (mod == 1)
		len += 1;
	else if (mod == 2)
		len += 4;
	return len;
}

bool x86_call_ends_at(const uint8_t before[CALLSITE_BYTES])
{
	if (before[CALLSITE_BYTES - 5] == 0xe8)
		return true;
	/* FF /2 is 2 to 7 bytes long (a REX prefix before it changes nothing here). */
	for (int len = 2; len <= 7; len++) {
		int at = CALLSITE_BYTES - len;
		uint8_t modrm = before[at + 1];

		if (before[at] == 0xff && ((modrm >> 3) & 7) == 2 &&
		    indirect_call_length(modrm, at + 2 < CALLSITE_BYTES ? before[at + 2] : 0) == len)
			return true;
	}
	return false;
}
