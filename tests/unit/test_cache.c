// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The attach cache: which directories and entries are trusted, and the kernel-features entry.
 * Entries steer where uprobes go, so everything another user could have written is refused. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include "cache.h"
#include "kfeatures.h"
#include "unit.h"

static struct stat st_of(mode_t mode, uid_t uid, nlink_t nlink)
{
	struct stat st = { .st_mode = mode, .st_uid = uid, .st_nlink = nlink };

	return st;
}

TEST(test_dir_rules)
{
	struct stat st;

	st = st_of(S_IFDIR | 0755, 0, 2);
	CHECK(cache_dir_safe(&st, 0));
	CHECK(cache_dir_safe(&st, 1000));
	st = st_of(S_IFDIR | 0700, 1000, 2);
	CHECK(cache_dir_safe(&st, 1000));
	CHECK(!cache_dir_safe(&st, 0));		/* another user's directory, even for root */
	st = st_of(S_IFDIR | 0775, 0, 2);
	CHECK(!cache_dir_safe(&st, 0));		/* a group could swap what it holds */
	st = st_of(S_IFDIR | 01777, 0, 2);
	CHECK(cache_dir_safe(&st, 0));		/* /tmp: others cannot replace root's entries */
	st = st_of(S_IFDIR | 0777, 0, 2);
	CHECK(!cache_dir_safe(&st, 0));		/* world-writable without the sticky bit */
	st = st_of(S_IFDIR | 01777, 1000, 2);
	CHECK(!cache_dir_safe(&st, 1000));	/* sticky, but not root's */
	st = st_of(S_IFLNK | 0777, 0, 1);
	CHECK(!cache_dir_safe(&st, 0));
}

TEST(test_file_rules)
{
	struct stat st;

	st = st_of(S_IFREG | 0600, 0, 1);
	CHECK(cache_file_safe(&st, 0));
	st = st_of(S_IFREG | 0644, 0, 1);
	CHECK(cache_file_safe(&st, 0));
	st = st_of(S_IFREG | 0620, 0, 1);
	CHECK(!cache_file_safe(&st, 0));
	st = st_of(S_IFREG | 0602, 0, 1);
	CHECK(!cache_file_safe(&st, 0));
	st = st_of(S_IFREG | 0600, 1000, 1);
	CHECK(!cache_file_safe(&st, 0));	/* planted by another user */
	st = st_of(S_IFREG | 0600, 0, 2);
	CHECK(!cache_file_safe(&st, 0));	/* a hard link made from elsewhere */
	st = st_of(S_IFIFO | 0600, 0, 1);
	CHECK(!cache_file_safe(&st, 0));
}

TEST(test_names)
{
	CHECK(cache_name_ok("kernel-d54065d9-d8ae-4680-adb0-4dd16716ba42"));
	CHECK(cache_name_ok("elf-0123abcd.v1"));
	CHECK(!cache_name_ok(""));
	CHECK(!cache_name_ok(".hidden"));
	CHECK(!cache_name_ok("../etc/passwd"));
	CHECK(!cache_name_ok("a/b"));
	CHECK(!cache_name_ok("a b"));
	CHECK(!cache_name_ok("a\nb"));
}

/* The real files under a private directory: round trip, atomic replacement, and refusals. */
TEST(test_round_trip)
{
	char dir[] = "/tmp/pipeprof-cache-test-XXXXXX", path[256], buf[64];
	int dirfd, fd;

	CHECK(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/cache", dir);
	setenv("PIPEPROF_CACHE_DIR", path, 1);
	dirfd = cache_open();
	CHECK(dirfd >= 0);
	if (dirfd < 0)
		return;
	CHECK_EQ_INT(cache_get(dirfd, "entry", buf, sizeof(buf)), -ENOENT);
	CHECK_EQ_INT(cache_put(dirfd, "entry", "one\n", 4), 0);
	CHECK_EQ_INT(cache_get(dirfd, "entry", buf, sizeof(buf)), 4);
	CHECK_STR(buf, "one\n");
	CHECK_EQ_INT(cache_put(dirfd, "entry", "two!\n", 5), 0);
	CHECK_EQ_INT(cache_get(dirfd, "entry", buf, sizeof(buf)), 5);
	CHECK_STR(buf, "two!\n");
	CHECK_EQ_INT(cache_get(dirfd, "entry", buf, 4), -EFBIG);
	CHECK_EQ_INT(cache_put(dirfd, "../escape", "x", 1), -EINVAL);

	/* A writable-by-others entry, and a symlink, are refused. */
	snprintf(path, sizeof(path), "%s/cache/loose", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
	CHECK(fd >= 0);
	if (fd >= 0) {
		CHECK_EQ_INT((int)write(fd, "x\n", 2), 2);
		fchmod(fd, 0666);
		close(fd);
	}
	CHECK_EQ_INT(cache_get(dirfd, "loose", buf, sizeof(buf)), -EPERM);
	snprintf(path, sizeof(path), "%s/cache/link", dir);
	CHECK_EQ_INT(symlink("entry", path), 0);
	CHECK_EQ_INT(cache_get(dirfd, "link", buf, sizeof(buf)), -EPERM);

	cache_prune(dirfd, "l", "link");
	snprintf(path, sizeof(path), "%s/cache/loose", dir);
	CHECK(access(path, F_OK) != 0);
	snprintf(path, sizeof(path), "%s/cache/link", dir);
	CHECK(faccessat(AT_FDCWD, path, F_OK, AT_SYMLINK_NOFOLLOW) == 0);
	unlink(path);
	snprintf(path, sizeof(path), "%s/cache/entry", dir);
	unlink(path);
	close(dirfd);

	/* A cache directory others may write is not used. */
	snprintf(path, sizeof(path), "%s/cache", dir);
	chmod(path, 0777);
	CHECK_EQ_INT(cache_open(), -EPERM);
	/* Nor one reached through a symlink. */
	chmod(path, 0700);
	snprintf(buf, sizeof(buf), "%s/alias", dir);
	CHECK_EQ_INT(symlink("cache", buf), 0);
	setenv("PIPEPROF_CACHE_DIR", buf, 1);
	CHECK_EQ_INT(cache_open(), -EPERM);
	unlink(buf);
	rmdir(path);
	rmdir(dir);

	setenv("PIPEPROF_CACHE_DIR", "off", 1);
	CHECK_EQ_INT(cache_open(), -ENOENT);
	setenv("PIPEPROF_CACHE_DIR", "relative/dir", 1);
	CHECK_EQ_INT(cache_open(), -EINVAL);
	unsetenv("PIPEPROF_CACHE_DIR");
}

TEST(test_kfeatures_entry)
{
	struct kfeatures kf = {
		.sched_switch_has_prev_state = true, .has_block_io_start = false,
		.preempt_count_rq_delta = -93328, .uprobe_multi = true,
		.preempt_count_proven = false,
	}, back;
	const char *boot = "d54065d9-d8ae-4680-adb0-4dd16716ba42", *rel = "6.18.44";
	char text[1024], edit[1024], *at;
	int len = kfeatures_format(&kf, boot, rel, text, sizeof(text));

	CHECK(len > 0);
	CHECK_EQ_INT(kfeatures_format(&kf, boot, rel, text, 10), -ENOSPC);
	len = kfeatures_format(&kf, boot, rel, text, sizeof(text));
	CHECK_EQ_INT(kfeatures_parse(text, boot, rel, &back), 0);
	CHECK(back.from_cache);
	CHECK(back.sched_switch_has_prev_state && !back.has_block_io_start);
	CHECK_EQ_INT(back.preempt_count_rq_delta, -93328);
	CHECK(back.uprobe_multi && !back.preempt_count_proven);

	/* Another boot or kernel: not this machine's answers. */
	CHECK_EQ_INT(kfeatures_parse(text, "00000000-0000-0000-0000-000000000000", rel, &back),
		     -EINVAL);
	CHECK_EQ_INT(kfeatures_parse(text, boot, "6.1.0", &back), -EINVAL);
	/* Torn at every length: only the whole entry counts. */
	for (int cut = 0; cut < len; cut++) {
		snprintf(edit, sizeof(edit), "%.*s", cut, text);
		CHECK_EQ_INT(kfeatures_parse(edit, boot, rel, &back), -EINVAL);
	}
	/* Values outside what was written. */
	snprintf(edit, sizeof(edit), "%s", text);
	at = strstr(edit, "uprobe_multi 1");
	at[13] = '2';
	CHECK_EQ_INT(kfeatures_parse(edit, boot, rel, &back), -EINVAL);
	at = strstr(text, "-93328");
	snprintf(edit, sizeof(edit), "%.*s%s%s", (int)(at - text), text, "99999999999", at + 6);
	CHECK_EQ_INT(kfeatures_parse(edit, boot, rel, &back), -EINVAL);
	snprintf(edit, sizeof(edit), "%.*s%s%s", (int)(at - text), text, "-9332x", at + 6);
	CHECK_EQ_INT(kfeatures_parse(edit, boot, rel, &back), -EINVAL);
	/* Anything after the end, or a key pipeprof never writes. */
	snprintf(edit, sizeof(edit), "%sextra 1\n", text);
	CHECK_EQ_INT(kfeatures_parse(edit, boot, rel, &back), -EINVAL);
	snprintf(edit, sizeof(edit), "%s", text);
	at = strstr(edit, "has_block_io_start");
	at[0] = 'H';
	CHECK_EQ_INT(kfeatures_parse(edit, boot, rel, &back), -EINVAL);
}

/* With "tp_btf_ids" replaced by ids (the rest of the entry as written): its parse. */
static int parse_with_ids(const char *text, const char *ids, const char *boot, const char *rel)
{
	const char *at = strstr(text, "tp_btf_ids "), *nl = strchr(at, '\n');
	char edit[1024];
	struct kfeatures back;

	snprintf(edit, sizeof(edit), "%.*stp_btf_ids %s%s", (int)(at - text), text, ids, nl);
	return kfeatures_parse(edit, boot, rel, &back);
}

/* The tracepoints' BTF ids name which tracepoint each tp_btf program attaches to: an entry
 * gives exactly one plain number per tracepoint, or none is believed. */
TEST(test_kfeatures_tp_btf_ids)
{
	struct kfeatures kf = { .uprobe_multi = true }, back;
	const char *boot = "d54065d9-d8ae-4680-adb0-4dd16716ba42", *rel = "6.18.44";
	char text[1024], ids[256] = "";
	size_t n = 0;

	for (int i = 0; i < KF_TRACEPOINTS; i++)
		kf.tp_btf_ids[i] = i == 6 ? 0 : 10300 + 7 * i;	/* block_io_start: a kernel without */
	CHECK(kfeatures_format(&kf, boot, rel, text, sizeof(text)) > 0);
	CHECK_EQ_INT(kfeatures_parse(text, boot, rel, &back), 0);
	for (int i = 0; i < KF_TRACEPOINTS; i++)
		CHECK_EQ_INT(back.tp_btf_ids[i], kf.tp_btf_ids[i]);
	CHECK_EQ_INT(kfeatures_tp_btf_id(&back, "sched_switch"), 10300);
	CHECK_EQ_INT(kfeatures_tp_btf_id(&back, "tcp_rcv_space_adjust"), 10300 + 7 * 15);
	CHECK_EQ_INT(kfeatures_tp_btf_id(&back, "block_io_start"), 0);
	CHECK_EQ_INT(kfeatures_tp_btf_id(&back, "no_such_tracepoint"), 0);
	/* The names are distinct, so each finds its own id (test_attach_cache.py checks that
	 * every tp_btf section of the sources is in the list). */
	for (int i = 0; i < KF_TRACEPOINTS; i++)
		for (int j = i + 1; j < KF_TRACEPOINTS; j++)
			CHECK(strcmp(kfeatures_tracepoints[i], kfeatures_tracepoints[j]));

	for (int i = 0; i < KF_TRACEPOINTS; i++)
		n += snprintf(ids + n, sizeof(ids) - n, "%s%d", i ? " " : "", 100 + i);
	CHECK_EQ_INT(parse_with_ids(text, ids, boot, rel), 0);
	ids[strlen(ids) - 4] = '\0';				/* one id short */
	CHECK_EQ_INT(parse_with_ids(text, ids, boot, rel), -EINVAL);
	strcat(ids, " 115 116");				/* one too many */
	CHECK_EQ_INT(parse_with_ids(text, ids, boot, rel), -EINVAL);
	ids[strlen(ids) - 4] = '\0';
	CHECK_EQ_INT(parse_with_ids(text, ids, boot, rel), 0);
	const char *bad[] = { "0100", "-1", "16777217", "1e3", "+5", "", " 100" };

	for (size_t b = 0; b < sizeof(bad) / sizeof(bad[0]); b++) {
		char edit[256];

		snprintf(edit, sizeof(edit), "%s%s", bad[b], strchr(ids, ' '));
		CHECK_EQ_INT(parse_with_ids(text, edit, boot, rel), -EINVAL);
	}
	snprintf(ids + strlen(ids), sizeof(ids) - strlen(ids), " ");	/* trailing space */
	CHECK_EQ_INT(parse_with_ids(text, ids, boot, rel), -EINVAL);
}

int main(void)
{
	RUN_TEST(test_dir_rules);
	RUN_TEST(test_file_rules);
	RUN_TEST(test_names);
	RUN_TEST(test_round_trip);
	RUN_TEST(test_kfeatures_entry);
	RUN_TEST(test_kfeatures_tp_btf_ids);
	return unit_summary();
}
