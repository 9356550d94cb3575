// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The dynamic loader's debugger hook: glibc and musl call _dl_debug_state() before and after
 * every change to the link map (dlopen, dlclose), which is how gdb learns of new libraries.
 * Probed once per loader file for every process that maps it, it lets userspace probe a GPU
 * library as soon as it is mapped, instead of finding it by re-reading every tracked
 * process's maps on a timer (each read takes the target's mmap_lock). */
#include "pipeprof.bpf.h"

SEC("uprobe")
int BPF_KPROBE(on_loader_change)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;

	/* Every dlopen on the host lands here: untracked processes leave at once. */
	if (pid_tracked(tgid))
		send_note(tgid, PP_NOTE_LOADER);
	return 0;
}
