#!/usr/bin/env bash
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
# How tests/fuzz/corpus/fuzz_elfsym/ was made: small shared objects with what elfsym looks at
# (default and hidden symbol versions, an IFUNC, endbr64, a C++ name, .dynsym with and without
# .symtab), a 32-bit one, and cut-off copies. Kept for regenerating the seeds; `make fuzz`
# does not run it, the committed files are the corpus.
set -euo pipefail

out=${1:-tests/fuzz/corpus/fuzz_elfsym}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cat >"$tmp/seed.c" <<'SRC'
int cudaStreamSynchronize(void *stream) { return stream != 0; }
int cudaMemcpy_v12(void) { return 12; }
int cudaMemcpy_v13(void) { return 13; }
__asm__(".symver cudaMemcpy_v12, cudaMemcpy@libcudart.so.12");
__asm__(".symver cudaMemcpy_v13, cudaMemcpy@@libcudart.so.13");
int _Z3fooi(int x) { return x + 1; }
static int launch_impl(void) { return 0; }
static void *launch_resolve(void) { return (void *)launch_impl; }
int cuLaunchKernel(void) __attribute__((ifunc("launch_resolve")));
int seed_data = 42;
SRC
cat >"$tmp/seed.map" <<'MAP'
libcudart.so.12 { };
libcudart.so.13 { global: *; } libcudart.so.12;
MAP

cc=${CC:-gcc}
flags=(-O1 -fPIC -shared -nostdlib -fcf-protection=full -Wl,-z,noseparate-code
       -Wl,--build-id=none -Wl,--hash-style=gnu -Wl,--version-script="$tmp/seed.map")
mkdir -p "$out"
$cc "${flags[@]}" "$tmp/seed.c" -o "$out/versions.so"
strip -s -o "$out/versions_stripped.so" "$out/versions.so"
clang -m32 -O1 -fPIC -shared -nostdlib -Wl,-z,noseparate-code -Wl,--build-id=none -Wl,--version-script="$tmp/seed.map" "$tmp/seed.c" -o "$out/elf32.so"
head -c 64 "$out/versions.so" >"$out/header_only"
head -c 1024 "$out/versions.so" >"$out/cut_1k"
# A real one, as a distribution ships it: small, stripped, .dynsym only.
real=/lib/x86_64-linux-gnu/libxshmfence.so.1
[ -e "$real" ] && cp "$real" "$out/libxshmfence.so.1"
