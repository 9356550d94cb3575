/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Whether an address found by walking frame pointers is a return address. A library built
 * without frame pointers leaves anything in the frame pointer register, and the walk then
 * reads words that are not return addresses; a true one follows a call instruction.
 */
#ifndef PIPEPROF_CALLSITE_H
#define PIPEPROF_CALLSITE_H

#include <stdbool.h>
#include <stdint.h>

#define CALLSITE_BYTES 8

/* before[] holds the CALLSITE_BYTES bytes that end just before the address: true when one of
 * x86-64's call forms (E8 rel32, or FF /2 with any ModRM/SIB/displacement) ends there. */
bool x86_call_ends_at(const uint8_t before[CALLSITE_BYTES]);

#endif
