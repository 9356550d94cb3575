// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <json-c/json.h>
#include "jsonl.h"
#include "unit.h"

static char dir[64];

static const char *in_dir(char *buf, size_t size, const char *name)
{
	snprintf(buf, size, "%s/%s", dir, name);
	return buf;
}

static bool exists(const char *path)
{
	return access(path, F_OK) == 0;
}

static off_t file_size(const char *path)
{
	struct stat st;

	return stat(path, &st) ? -1 : st.st_size;
}

/*
 * Reads a JSON-lines file: every line must parse and the file must end in '\n'. The "seq"
 * of each line goes to seqs (when not NULL). Returns the line count, or -1 when the file is
 * missing or any line is broken.
 */
static int read_lines(const char *path, int *seqs, int max)
{
	char *buf = NULL;
	size_t cap = 0;
	ssize_t len;
	int n = 0;
	FILE *f;

	f = fopen(path, "r");
	if (!f)
		return -1;
	while ((len = getline(&buf, &cap, f)) > 0) {
		json_object *o, *seq;

		if (!CHECK_MSG(buf[len - 1] == '\n', "%s: line %d has no end", path, n + 1)) {
			n = -1;
			break;
		}
		buf[len - 1] = '\0';
		o = json_tokener_parse(buf);
		if (!CHECK_MSG(o, "%s: line %d does not parse: %s", path, n + 1, buf)) {
			n = -1;
			break;
		}
		if (seqs && n < max && json_object_object_get_ex(o, "seq", &seq))
			seqs[n] = json_object_get_int(seq);
		json_object_put(o);
		n++;
	}
	free(buf);
	fclose(f);
	return n;
}

/* {"seq":NN,"pad":"..."}: 40 bytes with its newline for a two-digit seq. */
static json_object *seq_line(int seq)
{
	json_object *o = json_object_new_object();

	json_object_object_add(o, "seq", json_object_new_int(seq));
	json_object_object_add(o, "pad", json_object_new_string("abcdefghijklmnopqrst"));
	return o;
}

static int write_seq(struct jsonl *j, int seq)
{
	json_object *o = seq_line(seq);
	int err = jsonl_write(j, o);

	json_object_put(o);
	return err;
}

TEST(test_lines_are_plain_and_whole)
{
	char path[128], *text = NULL;
	struct jsonl j;
	json_object *o;
	size_t cap = 0;
	FILE *f;

	CHECK_EQ_INT(jsonl_open(&j, in_dir(path, sizeof(path), "plain.jsonl"), 0, 0), 0);
	o = json_object_new_object();
	json_object_object_add(o, "path", json_object_new_string("/usr/lib/x86_64-linux-gnu/libcuda.so.1"));
	json_object_object_add(o, "comm", json_object_new_string("pt_main\nthread \"x\""));
	CHECK_EQ_INT(jsonl_write(&j, o), 0);
	json_object_put(o);
	CHECK_EQ_INT(write_seq(&j, 1), 0);
	jsonl_close(&j);
	jsonl_close(&j);	/* twice is harmless */

	CHECK_EQ_INT(read_lines(path, NULL, 0), 2);
	f = fopen(path, "r");
	if (CHECK(f) && CHECK(getline(&text, &cap, f) > 0))
		CHECK_STR(text, "{\"path\":\"/usr/lib/x86_64-linux-gnu/libcuda.so.1\","
			  "\"comm\":\"pt_main\\nthread \\\"x\\\"\"}\n");
	if (f)
		fclose(f);
	free(text);

	/* Opening again appends. */
	CHECK_EQ_INT(jsonl_open(&j, path, 0, 0), 0);
	CHECK_EQ_INT(j.size, file_size(path));
	CHECK_EQ_INT(write_seq(&j, 2), 0);
	jsonl_close(&j);
	CHECK_EQ_INT(read_lines(path, NULL, 0), 3);
}

TEST(test_rotation_numbering_and_keep)
{
	char path[128], old[160];
	int seqs[8], expect = 10, n;
	struct jsonl j;

	/* 40-byte lines, 100-byte files: two lines a file, the third starts the next file. */
	CHECK_EQ_INT(jsonl_open(&j, in_dir(path, sizeof(path), "rot.jsonl"), 100, 3), 0);
	for (int seq = 10; seq < 30; seq++)
		CHECK_EQ_INT(write_seq(&j, seq), 0);
	jsonl_close(&j);

	/* 20 lines: 10 files written, the live one and the 3 newest old ones kept. */
	CHECK(!exists(in_dir(old, sizeof(old), "rot.jsonl.4")));
	CHECK(!exists(in_dir(old, sizeof(old), "rot.jsonl.0")));
	/* Oldest first, the kept lines run on without a gap and end at the last one written. */
	expect = 30 - 2 * 4;
	for (int i = 3; i >= 0; i--) {
		if (i)
			snprintf(old, sizeof(old), "%s.%d", path, i);
		else
			snprintf(old, sizeof(old), "%s", path);
		n = read_lines(old, seqs, 8);
		CHECK_MSG(n == 2, "%s: %d lines", old, n);
		CHECK_MSG(file_size(old) <= 100, "%s: %lld bytes", old, (long long)file_size(old));
		for (int k = 0; k < n; k++, expect++)
			CHECK_MSG(seqs[k] == expect, "%s line %d: seq %d, want %d", old, k + 1,
				  seqs[k], expect);
	}
	CHECK_EQ_INT(expect, 30);
}

TEST(test_keep_zero_starts_afresh)
{
	char path[128], old[160];
	int seqs[4];
	struct jsonl j;

	CHECK_EQ_INT(jsonl_open(&j, in_dir(path, sizeof(path), "zero.jsonl"), 100, 0), 0);
	for (int seq = 10; seq < 15; seq++)
		CHECK_EQ_INT(write_seq(&j, seq), 0);
	jsonl_close(&j);
	CHECK(!exists(in_dir(old, sizeof(old), "zero.jsonl.1")));
	CHECK_EQ_INT(read_lines(path, seqs, 4), 1);
	CHECK_EQ_INT(seqs[0], 14);
}

TEST(test_existing_and_oversized)
{
	char path[128], old[160];
	struct jsonl j;
	json_object *o;
	int seqs[4];
	FILE *f;

	/* A file left by a previous run counts towards the limit. */
	f = fopen(in_dir(path, sizeof(path), "prev.jsonl"), "w");
	if (!CHECK(f))
		return;
	fputs("{\"seq\":1,\"pad\":\"from the previous run....\"}\n", f);
	fclose(f);
	CHECK_EQ_INT(jsonl_open(&j, path, 80, 2), 0);
	CHECK_EQ_INT(write_seq(&j, 2), 0);
	CHECK_EQ_INT(read_lines(in_dir(old, sizeof(old), "prev.jsonl.1"), seqs, 4), 1);
	CHECK_EQ_INT(seqs[0], 1);
	CHECK_EQ_INT(read_lines(path, seqs, 4), 1);
	CHECK_EQ_INT(seqs[0], 2);

	/* A line longer than the limit is not split: it gets a file to itself. */
	o = json_object_new_object();
	json_object_object_add(o, "seq", json_object_new_int(3));
	json_object_object_add(o, "pad", json_object_new_string(
		"a line that is longer than the eighty bytes this file may hold, all of it"));
	CHECK_EQ_INT(jsonl_write(&j, o), 0);
	json_object_put(o);
	CHECK_EQ_INT(write_seq(&j, 4), 0);
	jsonl_close(&j);
	CHECK_EQ_INT(read_lines(in_dir(old, sizeof(old), "prev.jsonl.2"), seqs, 4), 1);
	CHECK_EQ_INT(seqs[0], 2);
	CHECK_EQ_INT(read_lines(in_dir(old, sizeof(old), "prev.jsonl.1"), seqs, 4), 1);
	CHECK_EQ_INT(seqs[0], 3);
	CHECK(file_size(old) > 80);
	CHECK_EQ_INT(read_lines(path, seqs, 4), 1);
	CHECK_EQ_INT(seqs[0], 4);

	/* Into an empty file it goes straight in: rotating would only keep an empty file. */
	CHECK_EQ_INT(jsonl_open(&j, in_dir(path, sizeof(path), "tiny.jsonl"), 20, 1), 0);
	CHECK_EQ_INT(write_seq(&j, 10), 0);
	CHECK(!exists(in_dir(old, sizeof(old), "tiny.jsonl.1")));
	CHECK_EQ_INT(write_seq(&j, 11), 0);
	jsonl_close(&j);
	CHECK_EQ_INT(read_lines(old, seqs, 4), 1);
	CHECK_EQ_INT(seqs[0], 10);
	CHECK_EQ_INT(read_lines(path, seqs, 4), 1);
	CHECK_EQ_INT(seqs[0], 11);
}

TEST(test_reopen_after_move)
{
	char path[128], moved[160];
	struct jsonl j;
	int seqs[4];

	CHECK_EQ_INT(jsonl_open(&j, in_dir(path, sizeof(path), "hup.jsonl"), 0, 0), 0);
	CHECK_EQ_INT(write_seq(&j, 1), 0);
	/* logrotate's default: move the file away, then SIGHUP the writer. */
	CHECK_EQ_INT(rename(path, in_dir(moved, sizeof(moved), "hup.jsonl.moved")), 0);
	CHECK_EQ_INT(write_seq(&j, 2), 0);	/* before the HUP: still the moved file */
	CHECK(!exists(path));
	CHECK_EQ_INT(jsonl_reopen(&j), 0);
	CHECK_EQ_INT(j.size, 0);
	CHECK_EQ_INT(write_seq(&j, 3), 0);
	jsonl_close(&j);
	CHECK_EQ_INT(read_lines(moved, seqs, 4), 2);
	CHECK_EQ_INT(seqs[1], 2);
	CHECK_EQ_INT(read_lines(path, seqs, 4), 1);
	CHECK_EQ_INT(seqs[0], 3);

	/* Moved away with no HUP, a rotation still starts a new file where it belongs. */
	CHECK_EQ_INT(jsonl_open(&j, in_dir(path, sizeof(path), "gone.jsonl"), 50, 1), 0);
	CHECK_EQ_INT(write_seq(&j, 1), 0);
	CHECK_EQ_INT(rename(path, in_dir(moved, sizeof(moved), "gone.jsonl.moved")), 0);
	CHECK_EQ_INT(write_seq(&j, 2), 0);
	jsonl_close(&j);
	CHECK(!exists(in_dir(moved, sizeof(moved), "gone.jsonl.1")));
	CHECK_EQ_INT(read_lines(path, seqs, 4), 1);
	CHECK_EQ_INT(seqs[0], 2);
}

TEST(test_errors)
{
	char path[128], file[128];
	struct jsonl j;
	FILE *f;

	CHECK_EQ_INT(jsonl_open(&j, in_dir(path, sizeof(path), "missing/sub/x.jsonl"), 0, 0), -ENOENT);
	CHECK_EQ_INT(j.fd, -1);
	CHECK_MSG(strstr(j.error, "missing/sub") && strstr(j.error, "does not exist"),
		  "error \"%s\"", j.error);
	CHECK(!exists(in_dir(path, sizeof(path), "missing")));
	jsonl_close(&j);	/* harmless after a failed open */

	CHECK_EQ_INT(jsonl_open(&j, "", 0, 0), -EINVAL);
	CHECK_EQ_INT(jsonl_open(&j, NULL, 0, 0), -EINVAL);
	CHECK_EQ_INT(jsonl_open(&j, in_dir(path, sizeof(path), "x.jsonl"), -1, 0), -EINVAL);
	CHECK_EQ_INT(jsonl_open(&j, in_dir(path, sizeof(path), "x.jsonl"), 0, -1), -EINVAL);

	/* A path through a plain file. */
	f = fopen(in_dir(file, sizeof(file), "plainfile"), "w");
	if (CHECK(f))
		fclose(f);
	CHECK_EQ_INT(jsonl_open(&j, in_dir(path, sizeof(path), "plainfile/x.jsonl"), 0, 0), -ENOTDIR);

	/* A device is written to but never rotated (renaming /dev/full away would be a disaster),
	 * and a failed write comes back as its errno. */
	if (exists("/dev/full")) {
		CHECK_EQ_INT(jsonl_open(&j, "/dev/full", 0, 0), 0);
		CHECK(!j.regular);
		CHECK_EQ_INT(write_seq(&j, 1), -ENOSPC);
		CHECK(strstr(j.error, "/dev/full"));
		jsonl_close(&j);
	} else {
		SKIP("no /dev/full");
	}
}

/* A write that stops half way (here: at RLIMIT_FSIZE) leaves no half line behind. */
TEST(test_failed_write_leaves_whole_lines)
{
	char path[128];
	int status, seqs[4];
	pid_t pid;

	in_dir(path, sizeof(path), "fsize.jsonl");
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		struct rlimit rl = { .rlim_cur = 100, .rlim_max = RLIM_INFINITY };
		struct jsonl j;

		signal(SIGXFSZ, SIG_IGN);
		if (setrlimit(RLIMIT_FSIZE, &rl) || jsonl_open(&j, path, 0, 0))
			_exit(10);
		/* 40 + 40 bytes fit; the third line gets 20 of its 40 in, then EFBIG. */
		if (write_seq(&j, 11) || write_seq(&j, 12))
			_exit(11);
		if (write_seq(&j, 13) != -EFBIG)
			_exit(12);
		jsonl_close(&j);
		_exit(0);
	}
	if (!CHECK_MSG(pid > 0, "fork: %s", strerror(errno)))
		return;
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status 0x%x", status);
	CHECK_EQ_INT(file_size(path), 80);
	CHECK_EQ_INT(read_lines(path, seqs, 4), 2);
}

static void remove_dir(void)
{
	char cmd[128];

	/* mkdtemp's name: nothing in it the shell would read. */
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd))
		printf("could not remove %s\n", dir);
}

int main(void)
{
	snprintf(dir, sizeof(dir), "%s/pipeprof-jsonl-XXXXXX", "/tmp");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	RUN_TEST(test_lines_are_plain_and_whole);
	RUN_TEST(test_rotation_numbering_and_keep);
	RUN_TEST(test_keep_zero_starts_afresh);
	RUN_TEST(test_existing_and_oversized);
	RUN_TEST(test_reopen_after_move);
	RUN_TEST(test_errors);
	RUN_TEST(test_failed_write_leaves_whole_lines);
	remove_dir();
	return unit_summary();
}
