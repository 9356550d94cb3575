// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include "proctree.h"
#include "unit.h"

static char root[] = "/tmp/pipeprof-proc-XXXXXX";

static void put_bytes(const char *rel, const char *text, size_t len)
{
	char path[512], dir[512], *slash;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	snprintf(dir, sizeof(dir), "%s", path);
	for (slash = strchr(dir + strlen(root) + 1, '/'); slash; slash = strchr(slash + 1, '/')) {
		*slash = 0;
		mkdir(dir, 0755);
		*slash = '/';
	}
	f = fopen(path, "w");
	if (!CHECK_MSG(f, "cannot write %s", path))
		return;
	fwrite(text, 1, len, f);
	fclose(f);
}

static void put(const char *rel, const char *text)
{
	put_bytes(rel, text, strlen(text));
}

static void stat_of(int pid, int ppid, const char *comm, char state)
{
	char rel[64], text[256];

	snprintf(rel, sizeof(rel), "%d/stat", pid);
	snprintf(text, sizeof(text), "%d (%s) %c %d %d %d 0 -1 4194560 1 0 0 0 5 3\n", pid, comm,
		 state, ppid, pid, pid);
	put(rel, text);
}

TEST(test_parse_stat)
{
	pid_t ppid = 0;
	char state = 0;

	CHECK_EQ_INT(proc_parse_stat("42 (python3) S 7 42 42 0", &ppid, &state), 0);
	CHECK_EQ_INT(ppid, 7);
	CHECK_EQ_INT(state, 'S');
	/* comm is free text: spaces and parentheses must not shift the fields. */
	CHECK_EQ_INT(proc_parse_stat("43 (pt data (1) x) R 42 42 42 0", &ppid, &state), 0);
	CHECK_EQ_INT(ppid, 42);
	CHECK_EQ_INT(state, 'R');
	CHECK_EQ_INT(proc_parse_stat("garbage", &ppid, &state), -EINVAL);
	CHECK_EQ_INT(proc_parse_stat("44 (x)", &ppid, &state), -EINVAL);
}

/* The daemon's age test reads the start time, field 22, past a comm that may hold ") ". */
TEST(test_parse_stat_start)
{
	unsigned long long start = 0;
	pid_t ppid = 0;

	CHECK_EQ_INT(proc_parse_stat_start("4242 (pt ) x) S 7 4242 4242 0 -1 4194560 1 0 0 0 5 3 "
					   "0 0 20 0 1 0 123456 1000 20 18446744073709551615",
					   &ppid, &start), 0);
	CHECK_EQ_INT(ppid, 7);
	CHECK_EQ_U64(start, 123456);
	/* Cut before the start time: no parent either, not half a result. */
	ppid = 0;
	CHECK_EQ_INT(proc_parse_stat_start("42 (x) S 7 42 42 0 -1 4194560 1 0 0 0 5 3", &ppid,
					   &start), -EINVAL);
	CHECK_EQ_INT(ppid, 0);
	CHECK_EQ_INT(proc_parse_stat_start("no parenthesis", &ppid, &start), -EINVAL);
}

TEST(test_descendants)
{
	pid_t out[16], ppid[16];
	int n, seen = 0;

	stat_of(1, 0, "init", 'S');
	stat_of(100, 1, "python3", 'S');
	stat_of(101, 100, "python3", 'R');	/* worker */
	stat_of(102, 100, "python3", 'S');	/* worker */
	stat_of(150, 101, "sh", 'S');		/* grandchild */
	stat_of(200, 1, "other job", 'R');
	stat_of(201, 200, "other child", 'R');
	put("self", "not a pid dir\n");

	n = proc_descendants(root, 100, out, ppid, 16);
	CHECK_EQ_INT(n, 3);
	for (int i = 0; i < n; i++) {
		seen |= out[i] == 101 ? 1 : out[i] == 102 ? 2 : out[i] == 150 ? 4 : 8;
		CHECK_EQ_INT(ppid[i], out[i] == 150 ? 101 : 100);
	}
	CHECK_EQ_INT(seen, 7);
	/* max bounds the output. */
	CHECK_EQ_INT(proc_descendants(root, 100, out, NULL, 2), 2);
	CHECK_EQ_INT(proc_descendants(root, 150, out, NULL, 16), 0);
	CHECK_EQ_INT(proc_descendants("/nonexistent-procfs", 100, out, NULL, 16), -ENOENT);
	CHECK_EQ_INT(proc_ppid(root, 150), 101);
	CHECK_EQ_INT(proc_ppid(root, 999), 0);
}

TEST(test_threads_and_state)
{
	pid_t tids[8];
	int n;

	put("100/task/100/stat", "100 (python3) S 1 100 100 0\n");
	put("100/task/103/stat", "103 (pt_autograd_0) R 1 100 100 0\n");
	n = proc_threads(root, 100, tids, 8);
	CHECK_EQ_INT(n, 2);
	CHECK_EQ_INT(proc_thread_state(root, 100, 103), 'R');
	CHECK_EQ_INT(proc_thread_state(root, 100, 100), 'S');
	CHECK_EQ_INT(proc_thread_state(root, 100, 999), 0);
	put("100/task/104/stat", "104 (a\nb) D 1 100 100 0\n");
	CHECK_EQ_INT(proc_thread_state(root, 100, 104), 'D');
	put("100/task/100/schedstat", "2839201078 1172366 5309\n");
	CHECK_EQ_U64(proc_thread_exec_ns(root, 100, 100), 2839201078ULL);
	put("100/task/103/schedstat", "garbage\n");
	CHECK_EQ_U64(proc_thread_exec_ns(root, 100, 103), 0);
	CHECK_EQ_U64(proc_thread_exec_ns(root, 100, 999), 0);
	{
		unsigned long args[6];
		long nr;

		/* poll(fds, 1, 869): the fields as the kernel prints them. */
		put("100/task/100/syscall", "7 0x7f3c2a1b2c30 0x1 0x365 0x0 0x8 0x0 "
		    "0x7ffd5e8f1a20 0x7f3c2b4c1d2f\n");
		CHECK_EQ_INT(proc_thread_syscall(root, 100, 100, &nr, args), 0);
		CHECK_EQ_INT(nr, 7);
		CHECK_EQ_U64(args[1], 1);
		CHECK_EQ_U64(args[2], 869);
		CHECK_EQ_U64(args[4], 8);
		CHECK_EQ_INT(proc_parse_syscall("running\n", &nr, args), -EAGAIN);
		CHECK_EQ_INT(proc_parse_syscall("-1 0x7ffd5e8f1a20 0x7f3c2b4c1d2f\n", &nr, args),
			     -EAGAIN);
		CHECK_EQ_INT(proc_parse_syscall("202 0x1 0x2\n", &nr, args), -EINVAL);
		CHECK_EQ_INT(proc_parse_syscall("", &nr, args), -EINVAL);
		CHECK_EQ_INT(proc_thread_syscall(root, 100, 999, &nr, args), -ENOENT);
	}
	{
		char comm[16] = "stale";

		put("100/task/103/comm", "pt_autograd_0\n");
		proc_comm(root, 100, 103, comm, sizeof(comm));
		CHECK_STR(comm, "pt_autograd_0");
		proc_comm(root, 100, 999, comm, sizeof(comm));
		CHECK_STR(comm, "");
	}
	{
		char comm[16] = "stale", state = 0;

		CHECK_EQ_INT(proc_thread_stat(root, 100, 103, comm, sizeof(comm), &state), 0);
		CHECK_STR(comm, "pt_autograd_0");
		CHECK_EQ_INT(state, 'R');
		CHECK_EQ_INT(proc_thread_stat(root, 100, 999, comm, sizeof(comm), &state), -ENOENT);
	}
	CHECK_EQ_INT(proc_threads(root, 999, tids, 8), -ESRCH);
}

/* A name is any 15 bytes but NUL: parentheses, a ") S " of its own, a newline. */
TEST(test_stat_comm)
{
	static const char odd[] = "7 (a) S (\nb)) D 1 7 7 0\n";
	char comm[16], state = 0;

	CHECK_EQ_INT(proc_parse_stat_comm(odd, strlen(odd), comm, sizeof(comm), &state), 0);
	CHECK_STR(comm, "a) S (\nb)");
	CHECK_EQ_INT(state, 'D');
	/* Truncated to the buffer; either output may be left out. */
	CHECK_EQ_INT(proc_parse_stat_comm(odd, strlen(odd), comm, 3, NULL), 0);
	CHECK_STR(comm, "a)");
	CHECK_EQ_INT(proc_parse_stat_comm(odd, strlen(odd), NULL, 0, &state), 0);
	CHECK_EQ_INT(state, 'D');
	CHECK_EQ_INT(proc_parse_stat_comm("8 () S 1", 8, comm, sizeof(comm), &state), 0);
	CHECK_STR(comm, "");
	CHECK_EQ_INT(state, 'S');
	/* Cut short, or no name at all. */
	CHECK_EQ_INT(proc_parse_stat_comm("9 (x)", 5, comm, sizeof(comm), &state), -EINVAL);
	CHECK_EQ_INT(proc_parse_stat_comm("9 (x) ", 6, comm, sizeof(comm), &state), -EINVAL);
	CHECK_EQ_INT(proc_parse_stat_comm("9 x) S", 6, comm, sizeof(comm), &state), -EINVAL);
	CHECK_EQ_INT(proc_parse_stat_comm(")9 (x S", 7, comm, sizeof(comm), &state), -EINVAL);
	CHECK_EQ_INT(proc_parse_stat_comm("", 0, comm, sizeof(comm), &state), -EINVAL);
}

TEST(test_cmdline_and_cpu)
{
	unsigned long long busy = 0, total = 0;
	int running = 0;
	char buf[64];

	static const char cmdline[] = "python3\0train.py\0--lr\0" "0.1\n";

	put_bytes("100/cmdline", cmdline, sizeof(cmdline));
	proc_cmdline(root, 100, buf, sizeof(buf));
	CHECK_STR(buf, "python3 train.py --lr 0.1");
	proc_cmdline(root, 999, buf, sizeof(buf));
	CHECK_STR(buf, "");

	put("stat", "cpu  100 5 50 800 45 0 0 0 7 0\ncpu0 1 2 3 4 5 6 7 8\nintr 1\nprocs_running 3\n");
	CHECK_EQ_INT(proc_cpu_times(root, &busy, &total, &running), 0);
	CHECK_EQ_U64(total, 1000);
	CHECK_EQ_U64(busy, 155);
	CHECK_EQ_INT(running, 3);
}

TEST(test_cpu_window)
{
	struct cpu_window w;
	double busy, runnable;

	/* 300 of 1000 jiffies busy; the run queue read 3 and 1, each time with the reader itself
	 * among the running, then could not be read (-1, not counted). */
	cpu_window_start(&w, true, 155, 1000);
	cpu_window_sample(&w, 3);
	cpu_window_sample(&w, 1);
	cpu_window_sample(&w, -1);
	cpu_window_result(&w, true, 455, 2000, &busy, &runnable);
	CHECK_MSG(busy == 0.3, "busy %f, want 0.3", busy);
	CHECK_MSG(runnable == 1.0, "runnable %f, want 1.0", runnable);

	/* What is not known is -1, never a made-up number. */
	cpu_window_start(&w, true, 155, 1000);
	cpu_window_result(&w, true, 155, 1000, &busy, &runnable);
	CHECK_MSG(busy == -1 && runnable == -1, "no time, no samples: %f %f", busy, runnable);
	cpu_window_result(&w, false, 0, 0, &busy, &runnable);
	CHECK_MSG(busy == -1, "end unreadable: %f", busy);
	cpu_window_start(&w, false, 0, 0);
	cpu_window_result(&w, true, 455, 2000, &busy, &runnable);
	CHECK_MSG(busy == -1, "start unreadable: %f", busy);

	/* From the file: the start is read now. */
	put("stat", "cpu  100 5 50 800 45 0 0 0 7 0\nprocs_running 2\n");
	cpu_window_open(&w, root);
	put("stat", "cpu  200 5 50 1700 45 0 0 0 7 0\nprocs_running 2\n");
	cpu_window_result(&w, true, 255, 2000, &busy, &runnable);
	CHECK_MSG(busy == 0.1, "busy %f, want 0.1", busy);
}

int main(void)
{
	int status;

	if (!mkdtemp(root)) {
		perror("mkdtemp");
		return 1;
	}
	RUN_TEST(test_parse_stat);
	RUN_TEST(test_parse_stat_start);
	RUN_TEST(test_descendants);
	RUN_TEST(test_threads_and_state);
	RUN_TEST(test_stat_comm);
	RUN_TEST(test_cmdline_and_cpu);
	RUN_TEST(test_cpu_window);
	status = unit_summary();
	if (fork() == 0)
		execlp("rm", "rm", "-rf", root, (char *)NULL);
	return status;
}
