// SPDX-License-Identifier: GPL-2.0
/*
 * Dynamic (demand-paged) kernel stacks: growth from one page to the full
 * stack, the counters in /proc/vmstat and /proc/PID/status, many
 * threads growing at once, and the memory coming back when they exit.
 * The overflow test (a task killed with a report) boots its own VM,
 * because it leaves a report on the console: tests/guest/test_guest.py.
 *
 * Every test also runs when the boot did not ask for dynamic stacks
 * (dynamic_kstacks=on): then each stack must stay fully mapped; and
 * with dynamic_kstacks=reclaim, where a running task's stack is always
 * whole, sleepers give back pages they did not use and get them back
 * before they run.
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
#include <linux/io_uring.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
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

static int reclaim_on(void)
{
	char v[16];

	return !kml_cmdline_param("dynamic_kstacks", v, sizeof(v)) &&
	       !strcmp(v, "reclaim");
}

/* KernelStack: of the calling thread, in kB; -1 if absent */
static long stack_kb(void)
{
	return kml_task_stack_kb(getpid(), gettid());
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
	ASSERT_LE(0, vmstat("dynamic_kstack_faults"));
	ASSERT_LE(0, vmstat("dynamic_kstack_pages"));
	ASSERT_LE(0, vmstat("dynamic_kstack_refills"));
	ASSERT_LE(0, vmstat("dynamic_kstack_kills"));
	ASSERT_LE(0, vmstat("dynamic_kstack_entry_faults"));
	ASSERT_LE(0, vmstat("dynamic_kstack_reserve_used"));
	ASSERT_LE(0, vmstat("dynamic_kstack_reclaimed"));
	ASSERT_LE(0, vmstat("dynamic_kstack_wake_refills"));
	ASSERT_LE(0, vmstat("dynamic_kstack_wake_deferred"));
	ASSERT_LT(0, stack_kb());
	ASSERT_EQ(0, access(CONSUME, W_OK));
	if (!dynamic_on()) {
		/* A running task's stack is whole: nothing is faulted in */
		EXPECT_EQ(STACK_KB, stack_kb());
		EXPECT_EQ(0, vmstat("dynamic_kstack_faults"));
	}
	if (!dynamic_on() && !reclaim_on()) {
		EXPECT_EQ(0, vmstat("dynamic_kstack_pages"));
		EXPECT_EQ(0, vmstat("dynamic_kstack_reclaimed"));
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

/*
 * Run fn(arg) in a child that has a new kernel stack; its wait status,
 * or -1.  Exited tasks leave up to two stacks per CPU in a cache, with
 * the pages they grew.  Fork on one CPU only, and let tasks that stay
 * alive take that CPU's cached stacks first: the child then gets a new
 * stack.
 */
static int in_fresh_child(int (*fn)(void *), void *arg)
{
	pid_t pid, holders[4];
	cpu_set_t cpu0, old;
	int status = -1, i, n;

	if (sched_getaffinity(0, sizeof(old), &old))
		return -1;
	CPU_ZERO(&cpu0);
	CPU_SET(0, &cpu0);
	if (sched_setaffinity(0, sizeof(cpu0), &cpu0))
		return -1;
	for (n = 0; n < 4; n++) {
		holders[n] = fork();
		if (holders[n] < 0)
			break;
		if (!holders[n]) {
			pause();
			_exit(0);
		}
	}
	pid = n == 4 ? fork() : -1;
	if (!pid)
		_exit(fn(arg));
	if (pid > 0 && waitpid(pid, &status, 0) != pid)
		status = -1;
	for (i = 0; i < n; i++) {
		kill(holders[i], SIGKILL);
		waitpid(holders[i], NULL, 0);
	}
	sched_setaffinity(0, sizeof(old), &old);
	return status;
}

static int grow_child_fn(void *arg)
{
	return grow_child();
}

TEST(grows_from_one_page_to_full)
{
	long faults = vmstat("dynamic_kstack_faults");
	int status = in_fresh_child(grow_child_fn, NULL);

	ASSERT_TRUE(status >= 0 && WIFEXITED(status));
	ASSERT_EQ(0, WEXITSTATUS(status));
	if (dynamic_on()) {
		EXPECT_LT(faults, vmstat("dynamic_kstack_faults"));
	} else {
		EXPECT_EQ(0, vmstat("dynamic_kstack_faults"));
	}
}

#define EDGE_READ "/sys/kernel/debug/dynamic_kstacks/edge_read"
#define EDGE_VALUE 0x6b6d6c2d63723221ULL

/* The driver's edge_read; 0 or -errno */
static int edge_read(const void *addr, unsigned long long value, int above)
{
	char text[64];
	int fd = open(EDGE_READ, O_WRONLY), n, ret = 0;

	if (fd < 0)
		return -errno;
	n = snprintf(text, sizeof(text), "%lx %llx %d",
		     (unsigned long)addr, value, above);
	if (write(fd, text, n) != n)
		ret = -errno;
	close(fd);
	return ret;
}

/*
 * In a fresh child: a page of a file that this process has not touched
 * yet, read by the kernel with the stack pointer "above" bytes above
 * the unmapped part of the stack.  Exit status: 0, or what went wrong.
 */
static int edge_read_child(void *arg)
{
	unsigned long long value = EDGE_VALUE;
	int above = *(int *)arg, fd, err;
	long kb = stack_kb();
	void *page;

	/* A cached stack that grew before may leave no unmapped page */
	if (kb >= STACK_KB)
		return 5;
	fd = memfd_create("kml-edge", 0);
	if (fd < 0 || pwrite(fd, &value, sizeof(value), 0) != sizeof(value))
		return 2;
	page = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
	if (page == MAP_FAILED)
		return 3;
	err = edge_read(page, value, above);
	if (err) {
		printf("# %d bytes above the edge: %s\n", above, strerror(-err));
		return 4;
	}
	return 0;
}

/*
 * A page fault taken just above the unmapped part of a dynamic stack:
 * its frame and the page fault handler's entry code land at the edge.
 * If the entry code took a stack fault before the handler read CR2,
 * the handler would see the stack address instead of the file page's,
 * and the read would fail with EFAULT (issue 15's CR2 finding).  The
 * fault entry maps room for the entry code first, so no stack fault
 * ever hits entry text (dynamic_kstack_entry_faults).
 */
TEST(page_fault_at_the_stack_edge_sees_its_own_address)
{
	static int above[] = { 64, 96, 128, 160, 192, 224, 256, 288, 320, 384 };
	long entry_faults = vmstat("dynamic_kstack_entry_faults");
	unsigned int i;

	ASSERT_LE(0, entry_faults);
	if (!dynamic_on()) {
		EXPECT_EQ(-EOPNOTSUPP, edge_read(&above, 0, 64));
		return;
	}
	EXPECT_EQ(-EINVAL, edge_read(&above, 0, 8));
	for (i = 0; i < sizeof(above) / sizeof(above[0]); i++) {
		int status, tries = 0;

		do
			status = in_fresh_child(edge_read_child, &above[i]);
		while (status >= 0 && WIFEXITED(status) &&
		       WEXITSTATUS(status) == 5 && ++tries < 8);
		ASSERT_TRUE(status >= 0 && WIFEXITED(status));
		EXPECT_EQ(0, WEXITSTATUS(status)) {
			TH_LOG("%d bytes above the edge", above[i]);
		}
	}
	EXPECT_EQ(entry_faults, vmstat("dynamic_kstack_entry_faults"));
}

#define STARVE "/sys/kernel/debug/dynamic_kstacks/starve"

/* Write text to path in one write(); 0 or -errno */
static int write_text(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY), n = strlen(text), ret = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, text, n) != n)
		ret = -errno;
	close(fd);
	return ret;
}

/* The driver's starve: "MODE KIB"; 0 or -errno */
static int starve(const char *request)
{
	return write_text(STARVE, request);
}

static int starve_atomic_child(void *arg)
{
	int err = starve("atomic 12");

	if (err == -EAGAIN)		/* a cached stack that grew before */
		return 5;
	if (err)
		printf("# atomic 12: %s\n", strerror(-err));
	return !!err;
}

/*
 * With every pool looking empty to one stack, code that must not be
 * killed grows it from the per-CPU reserve: a task with preemption
 * disabled (as under a spinlock) and a kernel thread.  The user task in
 * process context that is killed instead boots its own VM
 * (tests/guest/test_guest.py), since it leaves a report on the console.
 */
TEST(contexts_that_must_not_die_grow_from_the_reserve)
{
	long used = vmstat("dynamic_kstack_reserve_used");
	int status, err = -EAGAIN, tries;

	ASSERT_LE(0, used);
	if (!dynamic_on()) {
		EXPECT_EQ(-EOPNOTSUPP, starve("atomic 4"));
		return;
	}
	EXPECT_EQ(-EINVAL, starve("sideways 4"));
	EXPECT_EQ(-EINVAL, starve("atomic 0"));
	EXPECT_EQ(-EINVAL, starve("atomic 13"));
	EXPECT_EQ(-EINVAL, starve("atomic"));
	for (tries = 0; tries < 8; tries++) {
		status = in_fresh_child(starve_atomic_child, NULL);
		if (status < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 5)
			break;
	}
	ASSERT_TRUE(status >= 0 && WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
	EXPECT_LT(used, vmstat("dynamic_kstack_reserve_used"));
	used = vmstat("dynamic_kstack_reserve_used");
	/* Time for a tick to refill the reserve the child used */
	usleep(100 * 1000);
	/* A new kernel thread may get a cached stack that grew before */
	for (tries = 0; tries < 8 && err == -EAGAIN; tries++)
		err = starve("kthread 12");
	EXPECT_EQ(0, err);
	EXPECT_LT(used, vmstat("dynamic_kstack_reserve_used"));
}

/*
 * Write @text to @path through io_uring, forced to an io-wq worker
 * (IOSQE_ASYNC): the write runs in a PF_IO_WORKER thread of this
 * process.  Its result (bytes or -errno), or -errno of the ring's setup.
 */
static int uring_worker_write(const char *path, const char *text)
{
	struct io_uring_params p = { 0 };
	struct io_uring_sqe *sqes;
	struct io_uring_cqe *cqe;
	char *sq, *cq;
	int fd, ring, ret;

	fd = open(path, O_WRONLY);
	if (fd < 0)
		return -errno;
	ring = syscall(__NR_io_uring_setup, 1, &p);
	if (ring < 0) {
		ret = -errno;
		close(fd);
		return ret;
	}
	sq = mmap(NULL, p.sq_off.array + p.sq_entries * sizeof(unsigned int),
		  PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring,
		  IORING_OFF_SQ_RING);
	cq = mmap(NULL, p.cq_off.cqes + p.cq_entries * sizeof(*cqe),
		  PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring,
		  IORING_OFF_CQ_RING);
	sqes = mmap(NULL, p.sq_entries * sizeof(*sqes), PROT_READ | PROT_WRITE,
		    MAP_SHARED | MAP_POPULATE, ring, IORING_OFF_SQES);
	if (sq == MAP_FAILED || cq == MAP_FAILED || sqes == MAP_FAILED) {
		ret = -errno;
		goto out;
	}
	memset(&sqes[0], 0, sizeof(sqes[0]));
	sqes[0].opcode = IORING_OP_WRITE;
	sqes[0].flags = IOSQE_ASYNC;
	sqes[0].fd = fd;
	sqes[0].addr = (unsigned long)text;
	sqes[0].len = strlen(text);
	((unsigned int *)(sq + p.sq_off.array))[0] = 0;
	__atomic_store_n((unsigned int *)(sq + p.sq_off.tail), 1, __ATOMIC_RELEASE);
	if (syscall(__NR_io_uring_enter, ring, 1, 1, IORING_ENTER_GETEVENTS,
		    NULL, 0) < 0) {
		ret = -errno;
		goto out;
	}
	cqe = (struct io_uring_cqe *)(cq + p.cq_off.cqes) +
	      (*(unsigned int *)(cq + p.cq_off.head) &
	       *(unsigned int *)(cq + p.cq_off.ring_mask));
	ret = cqe->res;
out:
	close(ring);
	close(fd);
	return ret;
}

static int starve_worker_child(void *arg)
{
	int ret = uring_worker_write(STARVE, "task 12");

	if (ret == -EAGAIN)		/* a cached stack that grew before */
		return 5;
	if (ret != 7)
		printf("# task 12 from an io-wq worker: %s\n",
		       ret < 0 ? strerror(-ret) : "short write");
	return ret == 7 ? 0 : 1;
}

/*
 * An io_uring worker (PF_IO_WORKER) never returns to user mode, where a
 * deferred kill is taken: with every pool looking empty it grows its
 * stack from the reserve as a context that cannot be killed.  The driver
 * fails the write with EDEADLK if the worker was marked for a deferred
 * kill; the process must not be killed, and no kill is counted.
 */
TEST(io_uring_worker_grows_from_the_reserve_without_a_kill)
{
	long used = vmstat("dynamic_kstack_reserve_used");
	long kills = vmstat("dynamic_kstack_kills");
	int status, tries;

	if (!dynamic_on())
		SKIP(return, "dynamic_kstacks=on only");
	for (tries = 0; tries < 8; tries++) {
		status = in_fresh_child(starve_worker_child, NULL);
		if (status < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 5)
			break;
	}
	ASSERT_TRUE(status >= 0 && WIFEXITED(status)) {
		TH_LOG("the process was killed: status %#x", status);
	}
	EXPECT_EQ(0, WEXITSTATUS(status));
	EXPECT_LT(used, vmstat("dynamic_kstack_reserve_used"));
	EXPECT_EQ(kills, vmstat("dynamic_kstack_kills"));
}

#define POOLS "/sys/kernel/debug/dynamic_kstacks/pools"
#define CPU1_ONLINE "/sys/devices/system/cpu/cpu1/online"

/* Pages in CPU 1's pool and reserve, from the driver's pools file */
static int cpu1_pool(int *pool, int *reserve)
{
	char buf[1024], *p;

	if (kml_read_file(POOLS, buf, sizeof(buf)) < 0)
		return -1;
	p = strstr(buf, "cpu1 ");
	if (!p || sscanf(p, "cpu1 %*s pool %d reserve %d", pool, reserve) != 2)
		return -1;
	return 0;
}

/*
 * An offline CPU keeps no pool pages: they are freed once the CPU is
 * dead, and the pool and reserve are filled again before it comes back.
 */
TEST(offline_cpu_gives_its_pool_back)
{
	int before[2] = { -1, -1 }, off[2] = { -1, -1 }, on[2] = { -1, -1 };
	int err_off, err_on, tries;

	if (!dynamic_on() && !reclaim_on()) {
		/* No pools to show */
		EXPECT_NE(0, cpu1_pool(&before[0], &before[1]));
		return;
	}
	if (access(CPU1_ONLINE, W_OK))
		SKIP(return, "no second CPU that can go offline");
	ASSERT_EQ(0, cpu1_pool(&before[0], &before[1]));
	err_off = write_text(CPU1_ONLINE, "0");
	cpu1_pool(&off[0], &off[1]);
	err_on = write_text(CPU1_ONLINE, "1");
	/* The CPU may grow a stack at once: the reserve refills from its tick */
	for (tries = 0; tries < 20; tries++) {
		cpu1_pool(&on[0], &on[1]);
		if (on[1] == before[1])
			break;
		usleep(10 * 1000);
	}
	printf("# cpu1 pool/reserve: %d/%d online, %d/%d offline, %d/%d back online\n",
	       before[0], before[1], off[0], off[1], on[0], on[1]);
	ASSERT_EQ(0, err_off);
	ASSERT_EQ(0, err_on);
	EXPECT_LT(0, before[0]);
	EXPECT_LT(0, before[1]);
	EXPECT_EQ(0, off[0]);
	EXPECT_EQ(0, off[1]);
	EXPECT_LT(0, on[0]);
	EXPECT_EQ(before[1], on[1]);
}

#define CHARGED "/sys/kernel/debug/dynamic_kstacks/charged"
#define CGROUP_NAME "kstack-charge"

/* The driver's charged: pages of this task's stack mapped and charged */
static int stack_charged(int *mapped, int *charged)
{
	char buf[64];

	if (kml_read_file(CHARGED, buf, sizeof(buf)) < 0)
		return -1;
	return sscanf(buf, "%d %d", mapped, charged) == 2 ? 0 : -1;
}

static int charge_child(void *arg)
{
	int before[2] = { -1, -1 }, after[2] = { -1, -1 };

	/* 11 KiB: a whole stack also where it cannot grow (reclaim, off) */
	if (stack_charged(&before[0], &before[1]) || consume(11) ||
	    stack_charged(&after[0], &after[1]))
		return 2;
	printf("# %s: %d/%d pages charged at fork, %d/%d after growing\n",
	       (const char *)arg, before[1], before[0], after[1], after[0]);
	if (after[0] < 3)
		return 3;
	/* A task of the root cgroup is never charged */
	if (!strcmp(arg, "root"))
		return before[1] || after[1] ? 4 : 0;
	/*
	 * Every page, including those consume() grew (the read of the
	 * driver's file itself is shallower, so it adds none)
	 */
	return after[1] != after[0] ? 5 : 0;
}

/*
 * The pages a stack grows are charged to the task's memory cgroup, as
 * the whole stack is charged at fork without dynamic stacks: read back
 * through the driver, in a new child of a fresh cgroup (and, as a
 * control, of the root cgroup, which is never charged).
 */
TEST(grown_pages_are_charged_to_the_memory_cgroup)
{
	char root[] = "/tmp/kstack-cg-XXXXXX", path[128], pid[16];
	int status, mapped, charged, err;

	if (!dynamic_on() && !reclaim_on()) {
		EXPECT_NE(0, stack_charged(&mapped, &charged));
		return;
	}
	ASSERT_NE(NULL, mkdtemp(root));
	ASSERT_EQ(0, mount("none", root, "cgroup2", 0, NULL)) {
		TH_LOG("cgroup2: %s", strerror(errno));
	}
	snprintf(path, sizeof(path), "%s/cgroup.subtree_control", root);
	err = write_text(path, "+memory");
	snprintf(path, sizeof(path), "%s/" CGROUP_NAME, root);
	rmdir(path);
	EXPECT_EQ(0, err);
	EXPECT_EQ(0, mkdir(path, 0755));
	snprintf(path, sizeof(path), "%s/cgroup.procs", root);
	status = in_fresh_child(charge_child, "root");
	EXPECT_TRUE(status >= 0 && WIFEXITED(status) && !WEXITSTATUS(status)) {
		TH_LOG("root cgroup child: status %#x", status);
	}
	snprintf(path, sizeof(path), "%s/" CGROUP_NAME "/cgroup.procs", root);
	snprintf(pid, sizeof(pid), "%d", getpid());
	EXPECT_EQ(0, write_text(path, pid));
	status = in_fresh_child(charge_child, CGROUP_NAME);
	EXPECT_TRUE(status >= 0 && WIFEXITED(status) && !WEXITSTATUS(status)) {
		TH_LOG("child in " CGROUP_NAME ": status %#x", status);
	}
	snprintf(path, sizeof(path), "%s/cgroup.procs", root);
	EXPECT_EQ(0, write_text(path, pid));
	snprintf(path, sizeof(path), "%s/" CGROUP_NAME, root);
	EXPECT_EQ(0, rmdir(path));
	EXPECT_EQ(0, umount(root));
	rmdir(root);
}

#define RECLAIM "/sys/kernel/debug/dynamic_kstacks/reclaim"
#define SLEEPERS 8

struct sleeper {
	pthread_t thread;
	int pipe[2];
	pid_t tid;
	long kb_awake, kb_again;
	int err;
};

/* Use the whole stack, sleep in read(), use it whole again */
static void *sleeper_fn(void *arg)
{
	struct sleeper *s = arg;
	char c;

	/* 11 KiB below the driver: into the lowest page of the stack */
	s->tid = gettid();
	s->err = consume(11);
	s->kb_awake = stack_kb();
	if (read(s->pipe[0], &c, 1) != 1)
		s->err = -EIO;
	if (!s->err)
		s->err = consume(11);
	s->kb_again = stack_kb();
	return NULL;
}

/*
 * dynamic_kstacks=reclaim: threads that used their whole stack and then
 * sleep give back the pages below their stack pointer after two passes
 * (the first only marks them unused); woken, each gets them back before
 * it runs, which it shows by using the whole stack again (a missing page
 * would be a double fault).  One wake-up finds the pools empty and is
 * done by the worker.
 */
TEST(sleepers_give_pages_back_and_get_them_before_running)
{
	static struct sleeper s[SLEEPERS];
	long reclaimed, refills, deferred, kb;
	char tid[32];
	int i, tries;

	if (!reclaim_on()) {
		EXPECT_EQ(-EOPNOTSUPP, write_text(RECLAIM, "scan"));
		return;
	}
	EXPECT_EQ(-EINVAL, write_text(RECLAIM, "sweep"));
	EXPECT_EQ(-ESRCH, write_text(RECLAIM, "starve 999999"));
	reclaimed = vmstat("dynamic_kstack_reclaimed");
	refills = vmstat("dynamic_kstack_wake_refills");
	deferred = vmstat("dynamic_kstack_wake_deferred");
	for (i = 0; i < SLEEPERS; i++) {
		ASSERT_EQ(0, pipe(s[i].pipe));
		ASSERT_EQ(0, pthread_create(&s[i].thread, NULL, sleeper_fn, &s[i]));
	}
	/* All asleep in read() */
	for (tries = 0; tries < 100; tries++) {
		char path[64], state[256];

		for (i = 0; i < SLEEPERS; i++) {
			snprintf(path, sizeof(path), "/proc/self/task/%d/stat",
				 s[i].tid);
			if (!s[i].tid || kml_read_file(path, state, sizeof(state)) < 0 ||
			    !strstr(state, ") S "))
				break;
		}
		if (i == SLEEPERS)
			break;
		usleep(10 * 1000);
	}
	ASSERT_EQ(SLEEPERS, i);
	ASSERT_EQ(0, write_text(RECLAIM, "scan"));
	ASSERT_EQ(0, write_text(RECLAIM, "scan"));
	for (i = 0; i < SLEEPERS; i++) {
		kb = kml_task_stack_kb(getpid(), s[i].tid);
		EXPECT_EQ(STACK_KB, s[i].kb_awake);
		EXPECT_LE(4, kb);
		EXPECT_GE(8, kb) {
			TH_LOG("sleeper %d kept %ld kB", i, kb);
		}
	}
	EXPECT_LE(reclaimed + SLEEPERS * 2, vmstat("dynamic_kstack_reclaimed"));
	snprintf(tid, sizeof(tid), "starve %d", s[0].tid);
	ASSERT_EQ(0, write_text(RECLAIM, tid));
	for (i = 0; i < SLEEPERS; i++) {
		ASSERT_EQ(1, write(s[i].pipe[1], "x", 1));
		ASSERT_EQ(0, pthread_join(s[i].thread, NULL));
		EXPECT_EQ(0, s[i].err);
		EXPECT_EQ(STACK_KB, s[i].kb_again);
		close(s[i].pipe[0]);
		close(s[i].pipe[1]);
	}
	printf("# reclaimed %ld pages, %ld wake-ups refilled, %ld deferred\n",
	       vmstat("dynamic_kstack_reclaimed") - reclaimed,
	       vmstat("dynamic_kstack_wake_refills") - refills,
	       vmstat("dynamic_kstack_wake_deferred") - deferred);
	EXPECT_LE(refills + SLEEPERS - 1, vmstat("dynamic_kstack_wake_refills"));
	EXPECT_LE(deferred + 1, vmstat("dynamic_kstack_wake_deferred"));
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
	long pages_before = vmstat("dynamic_kstack_pages"), pages_after;
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
	if (!dynamic_on() && !reclaim_on())
		return;
	/*
	 * Stacks are freed after an RCU grace period; up to two per CPU
	 * stay cached with their pages.
	 */
	slack = 2 * sysconf(_SC_NPROCESSORS_ONLN) * (STACK_KB / 4);
	for (tries = 0; tries < 50; tries++) {
		pages_after = vmstat("dynamic_kstack_pages");
		if (pages_after <= pages_before + slack)
			break;
		usleep(100 * 1000);
	}
	printf("# stack pages: %ld before, %ld after %d threads\n",
	       pages_before, pages_after, THREADS);
	EXPECT_GE(pages_before + slack, pages_after);
}

TEST_HARNESS_MAIN
