// SPDX-License-Identifier: GPL-2.0
/*
 * Dynamic (demand-paged) kernel stacks: growth from one page to the full
 * stack, the counters in /proc/vmstat and /proc/PID/status, many
 * threads growing at once, and the memory coming back when they exit.
 * The overflow test (a task killed with a report) boots its own VM,
 * because it leaves a report on the console: tests/guest/test_guest.py.
 *
 * Every test also runs when the boot did not ask for dynamic stacks
 * (dynamic_kstacks=on): then each stack must stay fully mapped.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "kml_util.h"

#define CONSUME "/sys/kernel/debug/dynamic_kstacks/consume"
#define STACK_KB 16		/* THREAD_SIZE of x86-64 without KASAN */

static int dynamic_on(void)
{
	char v[16];

	return !kml_cmdline_param("dynamic_kstacks", v, sizeof(v)) &&
	       (!strcmp(v, "on") || !strcmp(v, "1") || !strcmp(v, "y"));
}

/* KernelStack: of /proc/self/task/TID/status, in kB; -1 if absent */
static long stack_kb(void)
{
	char path[64], buf[4096], *p;

	snprintf(path, sizeof(path), "/proc/self/task/%d/status", gettid());
	if (kml_read_file(path, buf, sizeof(buf)) < 0)
		return -1;
	p = strstr(buf, "\nKernelStack:");
	return p ? strtol(p + 13, NULL, 10) : -1;
}

/* A counter from /proc/vmstat; -1 if absent */
static long vmstat(const char *name)
{
	static char buf[1 << 15];
	size_t len = strlen(name);
	char *p = buf;

	if (kml_read_file("/proc/vmstat", buf, sizeof(buf)) < 0)
		return -1;
	while (p && *p) {
		if (!strncmp(p, name, len) && p[len] == ' ')
			return strtol(p + len + 1, NULL, 10);
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	return -1;
}

/* Make this task use kib KiB of kernel stack; 0 or -errno */
static int consume(int kib)
{
	char text[16];
	int fd = open(CONSUME, O_WRONLY), n, ret = 0;

	if (fd < 0)
		return -errno;
	n = snprintf(text, sizeof(text), "%d", kib);
	if (write(fd, text, n) != n)
		ret = -errno;
	close(fd);
	return ret;
}

TEST(counters_and_status_present)
{
	ASSERT_LE(0, vmstat("nr_dynamic_stack_faults"));
	ASSERT_LE(0, vmstat("nr_dynamic_stack_pages"));
	ASSERT_LE(0, vmstat("nr_dynamic_stack_refills"));
	ASSERT_LE(0, vmstat("nr_dynamic_stack_kills"));
	ASSERT_LT(0, stack_kb());
	ASSERT_EQ(0, access(CONSUME, W_OK));
	if (!dynamic_on()) {
		/* Stacks are allocated whole: nothing is ever faulted in */
		EXPECT_EQ(STACK_KB, stack_kb());
		EXPECT_EQ(0, vmstat("nr_dynamic_stack_faults"));
		EXPECT_EQ(0, vmstat("nr_dynamic_stack_pages"));
	}
}

TEST(bad_requests_are_refused)
{
	int fd = open(CONSUME, O_WRONLY);

	ASSERT_LE(0, fd);
	EXPECT_EQ(-1, write(fd, "many", 4));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(-1, write(fd, "100000", 6));
	EXPECT_EQ(EINVAL, errno);
	close(fd);
	if (!dynamic_on()) {
		EXPECT_EQ(-EOPNOTSUPP, consume(STACK_KB));
	}
}

/* In a fresh child: the stack grows page by page up to the full size */
static int grow_child(void)
{
	static const int steps[] = { 0, 2, 5, 9, 12 };
	long kb, prev;
	unsigned int i;

	prev = stack_kb();
	if (dynamic_on() && prev > 8) {
		printf("# fresh task has %ld kB mapped\n", prev);
		return 1;
	}
	for (i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		int err = consume(steps[i]);

		/* whole stacks: the driver refuses what could overflow one */
		if (!dynamic_on() && steps[i] >= STACK_KB - 4) {
			if (err != -EOPNOTSUPP)
				return 6;
			continue;
		}
		if (err)
			return 2;
		kb = stack_kb();
		printf("# after using %2d KiB: KernelStack %ld kB\n", steps[i], kb);
		if (kb < prev || kb > STACK_KB || (!dynamic_on() && kb != STACK_KB))
			return 3;
		/* the stack holds at least what was asked for */
		if (kb < steps[i])
			return 4;
		prev = kb;
	}
	return prev == STACK_KB ? 0 : 5;
}

TEST(grows_from_one_page_to_full)
{
	long faults = vmstat("nr_dynamic_stack_faults");
	pid_t pid, holders[4];
	cpu_set_t cpu0;
	int status, i;

	/*
	 * Exited tasks leave up to two stacks per CPU in a cache, with the
	 * pages they grew.  Fork on one CPU only, and let tasks that stay
	 * alive take that CPU's cached stacks first: the child then gets a
	 * new stack.
	 */
	CPU_ZERO(&cpu0);
	CPU_SET(0, &cpu0);
	ASSERT_EQ(0, sched_setaffinity(0, sizeof(cpu0), &cpu0));
	for (i = 0; i < 4; i++) {
		holders[i] = fork();
		ASSERT_LE(0, holders[i]);
		if (!holders[i]) {
			pause();
			_exit(0);
		}
	}
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid)
		_exit(grow_child());
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	for (i = 0; i < 4; i++) {
		kill(holders[i], SIGKILL);
		waitpid(holders[i], NULL, 0);
	}
	ASSERT_TRUE(WIFEXITED(status));
	ASSERT_EQ(0, WEXITSTATUS(status));
	if (dynamic_on()) {
		EXPECT_LT(faults, vmstat("nr_dynamic_stack_faults"));
	} else {
		EXPECT_EQ(0, vmstat("nr_dynamic_stack_faults"));
	}
}

#define THREADS 64
#define ROUNDS 20

struct worker {
	pthread_t thread;
	unsigned int seed;
	long max_kb;
	int err;
};

static void *worker_fn(void *arg)
{
	struct worker *w = arg;
	int r;

	for (r = 0; r < ROUNDS && !w->err; r++) {
		int kib = rand_r(&w->seed) % 12;

		w->err = consume(kib);
		if (stack_kb() > w->max_kb)
			w->max_kb = stack_kb();
		if (stack_kb() < kib)
			w->err = -ERANGE;
		if (r % 4 == 0)
			usleep(100);	/* switch while grown */
	}
	return NULL;
}

TEST(many_threads_grow_at_once_and_give_memory_back)
{
	static struct worker w[THREADS];
	long pages_before = vmstat("nr_dynamic_stack_pages"), pages_after;
	long slack;
	int i, tries;

	for (i = 0; i < THREADS; i++) {
		w[i].seed = 1000 + i;
		ASSERT_EQ(0, pthread_create(&w[i].thread, NULL, worker_fn, &w[i]));
	}
	for (i = 0; i < THREADS; i++) {
		ASSERT_EQ(0, pthread_join(w[i].thread, NULL));
		EXPECT_EQ(0, w[i].err);
		EXPECT_GE(STACK_KB, w[i].max_kb);
	}
	if (!dynamic_on())
		return;
	/*
	 * Stacks are freed after an RCU grace period; up to two per CPU
	 * stay cached with their pages.
	 */
	slack = 2 * sysconf(_SC_NPROCESSORS_ONLN) * (STACK_KB / 4);
	for (tries = 0; tries < 50; tries++) {
		pages_after = vmstat("nr_dynamic_stack_pages");
		if (pages_after <= pages_before + slack)
			break;
		usleep(100 * 1000);
	}
	printf("# stack pages: %ld before, %ld after %d threads\n",
	       pages_before, pages_after, THREADS);
	EXPECT_GE(pages_before + slack, pages_after);
}

TEST_HARNESS_MAIN
