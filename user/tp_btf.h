/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * tp_btf programs loaded without libbpf reading the kernel's BTF. libbpf names each one's
 * target by its type id in vmlinux BTF, and to find it reads the whole BTF (6 MB, 126k types on
 * 6.18) at every load, even where the CO-RE types come from the cache: 3-8 ms of CPU, and the
 * heap it reads into had to be faulted in first (2 ms, and 14-30 ms when the kernel compacts
 * memory for its huge pages). The ids are cached per boot with the kernel's features
 * (kfeatures.h), so a handler of libbpf's for "tp_btf" sections hands them to the kernel. An
 * id the cache lacks is looked up in the kernel's BTF, read once for the load.
 */
#ifndef PIPEPROF_TP_BTF_H
#define PIPEPROF_TP_BTF_H

struct kfeatures;

/* Takes over libbpf's "tp_btf" sections for every object opened after it; once a process.
 * -errno when libbpf refuses (then libbpf's own handling stays, and nothing is lost but time). */
int tp_btf_register(void);
/* The ids the next loads use (a copy is kept); NULL: none known, each looked up. */
void tp_btf_use_ids(const struct kfeatures *kf);
/* Frees the BTF read for an id the cache lacked, if any: after each object's load. */
void tp_btf_release(void);

#endif
