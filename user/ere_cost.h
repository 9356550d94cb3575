/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* What compiling an extended regular expression will cost, known before compiling it. Pure. */
#ifndef PIPEPROF_ERE_COST_H
#define PIPEPROF_ERE_COST_H

/*
 * An upper bound on the nodes glibc's regcomp() builds for re (REG_EXTENDED): it spells
 * repetitions out, "a+" as "aa*" and "a{2,5}" as five copies, so nested repetitions multiply.
 * Stops counting past limit: returns a value above limit as soon as the bound exceeds it.
 * Malformed expressions get a bound too; regcomp() refuses them cheaply.
 */
unsigned long ere_cost(const char *re, unsigned long limit);

#endif
