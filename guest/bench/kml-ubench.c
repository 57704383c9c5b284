// SPDX-License-Identifier: GPL-2.0
/*
 * kml-ubench: UnixBench-style system tests and the kernel-stack memory of
 * idle threads, run inside the guest (./kml kstack-bench runs it in a boot
 * without and in a boot with dynamic_kstacks=on).
 *
 * The throughput tests follow BYTE UnixBench's system tests (this is an
 * independent implementation).  Each runs for a fixed time (--duration-ms,
 * default 2000; --quick 300) and is repeated --runs times (default 5;
 * --quick 3); the result is the median, min and max of the runs' ops/s:
 *
 *   syscall    "System Call Overhead": close(dup(0)), getpid(), getuid(),
 *              umask(022) per loop; the clock is read every 16 loops
 *   pipe       "Pipe Throughput": write() 512 bytes to a pipe and read()
 *              them back, one process; ops = loops
 *   context1   "Pipe-based Context Switching": two processes pass an
 *              incrementing integer back and forth over two pipes; both
 *              check every value; ops = round trips
 *   spawn      "Process Creation": fork(), the child _exit(0)s, the parent
 *              waitpid()s and checks the status; ops = processes
 *   execl      "Execl Throughput": a child runs this program (the file of
 *              /proc/self/exe, else argv[0]) with the hidden
 *              --execl-child N, which execs itself with N-1 until 0: a
 *              chain of execs; ops = execs (each chain is timed from fork
 *              to waitpid, its size calibrated to about a tenth of the
 *              duration)
 *
 * idle-threads (not timed): --threads N (default 1000) threads with 64 KiB
 * pthread stacks block in read() on a pipe.  /proc/meminfo KernelStack
 * and /proc/vmstat dynamic_kstack_pages (the demand-paged kernel stacks'
 * counter; absent: null) are read before the threads are created, when
 * all of them sleep (state S in /proc/self/task), and after they have been
 * released (the write end closed: end of file) and joined and the task
 * list is down to this thread again.  Reported: each reading, the growth
 * (blocked - before) in total and per thread, and what came back
 * (blocked - after).  With dynamic_kstacks=reclaim the "blocked" reading
 * waits until the sleepers' stacks have given their unused pages back
 * (KernelStack has stopped falling: reclaim_ms), and release_ms (every
 * mode) is the time from closing the pipe to the last join: the wake-ups
 * of threads whose stacks must first be made whole again.
 *
 * wake-up latency (with idle-threads): a thread makes its kernel stack
 * WAKE_KIB deep (the test driver's consume file, where it exists), then
 * blocks in read() on a pipe.  One wake-up is the time from writing a
 * byte to that pipe until the thread's answer on a second pipe has been
 * read; WAKE_TRIALS of them per kind, median and maximum in ns, and the
 * sleeper's KernelStack (/proc/self/task/TID/status) just before:
 *   warm       the thread slept only briefly (every mode)
 *   reclaimed  dynamic_kstacks=reclaim: two passes of the driver's
 *              reclaim scan took the pages it did not need asleep, and
 *              try_to_wake_up() maps them back from the per-CPU pool
 *              before it runs
 *   deferred   the same, with the driver's "starve TID": the refill finds
 *              the pools empty and kstackd does it (the slow path)
 * Each reclaimed (deferred) wake-up must raise /proc/vmstat's
 * dynamic_kstack_wake_refills (_deferred), or the run fails.
 * The last two are left out, with the reason, in the other modes and
 * without the driver.
 *
 * The kernel command line (/proc/cmdline) and its dynamic_kstacks=
 * parameter are reported with the results.
 *
 * Output: a Markdown table on stdout (stderr when the JSON goes to stdout)
 * and optionally JSON (schema kml-ubench/1) for ./kml kstack-bench.  When
 * the command line says kml.accel=tcg, the results are marked EMULATED.
 *
 * Exit status: 0 ok; 1 a test failed (a system call error, a wrong
 * context1 sequence, a child that did not exit 0; the message names the
 * test); 2 a usage error.
 *
 * Build: gcc -O2 -static -Wall -Wextra -Werror -I../libkml -o kml-ubench
 *        kml-ubench.c -lpthread
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_util.h"

#define SCHEMA		"kml-ubench/1"
#define REASON_MAX	256
#define PIPE_BYTES	512		/* UnixBench's pipe test */
#define SYSCALL_BATCH	16		/* syscall loops per clock read */
#define THREAD_STACK	(64 * 1024)
#define MAX_THREADS	100000
#define SETTLE_NS	60e9		/* the longest wait for threads */
#define RETURN_QUIET_NS	1e9		/* KernelStack settled after a join */
#define RETURN_MAX_NS	10e9
#define EXECL_OPT	"--execl-child"
#define EXIT_CHILD_IO	120		/* context1's child: a pipe error */
#define EXIT_CHILD_SEQ	121		/* context1's child: a wrong value */
#define EXIT_EXEC	122		/* execl: an exec failed */

#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))

#define DKS_DEBUGFS	"/sys/kernel/debug/dynamic_kstacks/"
#define WAKE_TRIALS	15		/* wake-ups per kind */
#define WAKE_KIB	12		/* kernel stack the sleeper uses */
#define WAKE_SETTLE_NS	5e9		/* the longest wait for it to sleep */

/* One timed run: ops operations in ns nanoseconds, or why it failed. */
struct sample {
	unsigned long ops;
	double ns;
	char why[REASON_MAX];
};

struct test {
	const char *name;
	const char *label;	/* UnixBench's name */
	const char *unit;	/* what one op is */
	int (*run)(struct sample *s, double dur_ns);
};

struct result {
	const struct test *t;
	int selected, ok;
	char reason[REASON_MAX + 32];
	double *ops_s;		/* per run, in run order; then room for a copy */
	double median, min, max;
};

/* The idle-threads readings: -1 where absent or not read. */
struct mem {
	long long kstack_kib;	/* /proc/meminfo KernelStack */
	long long dyn_pages;	/* /proc/vmstat dynamic_kstack_pages */
};

static struct {
	int runs;
	int duration_ms;
	int threads;
	int verbose;
	int inject_context1;	/* tests: the child's first reply is wrong */
	int idle;		/* idle-threads selected */
	const char *json;
	const char *label;
} opt = {
	.runs = 5,
	.duration_ms = 2000,
	.threads = 1000,
};

static struct bench_sysinfo sys;
static char dyn_param[64];	/* the value of dynamic_kstacks= */
static int have_dyn_param;
static char self_exe[PATH_MAX];	/* what execl runs */

static struct {
	int ok;
	char reason[REASON_MAX];
	int created;
	double settle_ms;	/* until every thread slept */
	double return_ms;	/* from the join to the "after" reading */
	double reclaim_ms;	/* reclaim: until KernelStack stopped falling */
	double release_ms;	/* from closing the pipe to the last join */
	struct mem before, blocked, after;
} idle;

/* The wake-up latency kinds (see the top of the file) */
enum { WAKE_WARM, WAKE_RECLAIMED, WAKE_DEFERRED, NWAKE };
static const char *const wake_names[NWAKE] = { "warm", "reclaimed", "deferred" };

static struct {
	int ok[NWAKE];			/* measured */
	char skip[NWAKE][REASON_MAX];	/* why not, if not measured */
	double median_ns[NWAKE], max_ns[NWAKE];
	long long asleep_kib[NWAKE];	/* the sleeper's KernelStack */
} wake;

/* idle-threads: where a failure's reason goes (the first one counts). */
static char *idle_why(void)
{
	static char later[REASON_MAX];

	return idle.reason[0] ? later : idle.reason;
}

static int __attribute__((format(printf, 2, 3)))
fail(char *why, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, REASON_MAX, fmt, ap);
	va_end(ap);
	return -1;
}

/* errno's text, or a short read or write's byte count. */
static int io_fail(char *why, const char *what, ssize_t got, size_t want)
{
	if (got < 0)
		return fail(why, "%s: %s", what, strerror(errno));
	return fail(why, "%s: %zd of %zu bytes", what, got, want);
}

/* A child's wait status, as a reason. */
static int status_fail(char *why, const char *who, int st)
{
	if (WIFSIGNALED(st))
		return fail(why, "%s was killed by signal %d", who,
			    WTERMSIG(st));
	return fail(why, "%s exited with status %d", who, WEXITSTATUS(st));
}

static int reap(char *why, const char *who, pid_t pid)
{
	int st;

	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return fail(why, "waitpid (%s): %s", who,
				    strerror(errno));
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		return status_fail(why, who, st);
	return 0;
}

/* ---- the throughput tests ----------------------------------------- */

static int t_syscall(struct sample *s, double dur)
{
	double t0 = bench_now_ns(), end = t0 + dur, t;
	unsigned long n = 0;
	int i, fd;

	do {
		for (i = 0; i < SYSCALL_BATCH; i++) {
			fd = dup(0);
			if (fd < 0)
				return fail(s->why, "dup(0): %s",
					    strerror(errno));
			close(fd);
			getpid();
			getuid();
			umask(022);
		}
		n += SYSCALL_BATCH;
	} while ((t = bench_now_ns()) < end);
	s->ops = n;
	s->ns = t - t0;
	return 0;
}

static int t_pipe(struct sample *s, double dur)
{
	char buf[PIPE_BYTES];
	unsigned long n = 0;
	double t0, end, t;
	ssize_t r;
	int p[2], err = 0;

	memset(buf, 'k', sizeof(buf));
	if (pipe(p))
		return fail(s->why, "pipe: %s", strerror(errno));
	t = t0 = bench_now_ns();
	end = t0 + dur;
	do {
		r = write(p[1], buf, sizeof(buf));
		if (r != sizeof(buf)) {
			err = io_fail(s->why, "write", r, sizeof(buf));
			break;
		}
		r = read(p[0], buf, sizeof(buf));
		if (r != sizeof(buf)) {
			err = io_fail(s->why, "read", r, sizeof(buf));
			break;
		}
		n++;
	} while ((t = bench_now_ns()) < end);
	close(p[0]);
	close(p[1]);
	s->ops = n;
	s->ns = t - t0;
	return err;
}

/* context1's child: echo each value while it is the one expected; end of
 * file ends it. */
static void __attribute__((noreturn)) context1_child(int in, int out)
{
	uint64_t want = 0, v;
	ssize_t r;

	for (;; want++) {
		r = read(in, &v, sizeof(v));
		if (r == 0)
			_exit(0);
		if (r != sizeof(v)) {
			fprintf(stderr, "%s: context1: child: read: %s\n", bench_prog,
				r < 0 ? strerror(errno) : "short read");
			_exit(EXIT_CHILD_IO);
		}
		if (v != want) {
			fprintf(stderr, "%s: context1: child: got %llu, "
				"expected %llu\n", bench_prog, (unsigned long long)v,
				(unsigned long long)want);
			_exit(EXIT_CHILD_SEQ);
		}
		/* the first reply: a run of any length sees it */
		if (opt.inject_context1 && want == 0)
			v += 7;
		if (write(out, &v, sizeof(v)) != sizeof(v)) {
			fprintf(stderr, "%s: context1: child: write: %s\n",
				bench_prog, strerror(errno));
			_exit(EXIT_CHILD_IO);
		}
	}
}

static int t_context1(struct sample *s, double dur)
{
	uint64_t seq = 0, got;
	char why[REASON_MAX];
	double t0, end, t;
	int to[2], from[2], err = 0;
	ssize_t r;
	pid_t pid;

	if (pipe(to))
		return fail(s->why, "pipe: %s", strerror(errno));
	if (pipe(from)) {
		close(to[0]);
		close(to[1]);
		return fail(s->why, "pipe: %s", strerror(errno));
	}
	pid = fork();
	if (pid == 0) {
		close(to[1]);
		close(from[0]);
		context1_child(to[0], from[1]);
	}
	close(to[0]);
	close(from[1]);
	if (pid < 0) {
		close(to[1]);
		close(from[0]);
		return fail(s->why, "fork: %s", strerror(errno));
	}
	t = t0 = bench_now_ns();
	end = t0 + dur;
	do {
		r = write(to[1], &seq, sizeof(seq));
		if (r != sizeof(seq)) {
			err = io_fail(s->why, "write", r, sizeof(seq));
			break;
		}
		r = read(from[0], &got, sizeof(got));
		if (r != sizeof(got)) {
			err = io_fail(s->why, "read", r, sizeof(got));
			break;
		}
		if (got != seq) {
			err = fail(s->why, "wrong sequence: sent %llu, got "
				   "%llu back", (unsigned long long)seq,
				   (unsigned long long)got);
			break;
		}
		seq++;
	} while ((t = bench_now_ns()) < end);
	/* the child's end of file (or EPIPE, if it is writing) */
	close(to[1]);
	close(from[0]);
	if (err) {
		/* and if the child failed, why */
		if (reap(why, "the child", pid) && strlen(s->why) < 120)
			snprintf(s->why + strlen(s->why), REASON_MAX -
				 strlen(s->why), "; %.120s", why);
		return err;
	}
	if (reap(s->why, "the child", pid))
		return -1;
	s->ops = seq;
	s->ns = t - t0;
	return 0;
}

static int t_spawn(struct sample *s, double dur)
{
	double t0 = bench_now_ns(), end = t0 + dur, t;
	unsigned long n = 0;
	pid_t pid;

	do {
		pid = fork();
		if (pid < 0)
			return fail(s->why, "fork: %s", strerror(errno));
		if (pid == 0)
			_exit(0);
		if (reap(s->why, "a child", pid))
			return -1;
		n++;
	} while ((t = bench_now_ns()) < end);
	s->ops = n;
	s->ns = t - t0;
	return 0;
}

/* Exec this program with --execl-child left; on failure exit EXIT_EXEC. */
static void __attribute__((noreturn)) execl_next(const char *exe,
						 unsigned long left)
{
	char arg[32];

	snprintf(arg, sizeof(arg), "%lu", left);
	execl(exe, exe, EXECL_OPT, arg, (char *)NULL);
	fprintf(stderr, "%s: execl: exec %s: %s\n", bench_prog, exe, strerror(errno));
	_exit(EXIT_EXEC);
}

/* A chain of n execs in a child; its time from fork to waitpid in *ns. */
static int execl_chain(struct sample *s, unsigned long n, double *ns)
{
	double t0 = bench_now_ns();
	pid_t pid;

	pid = fork();
	if (pid < 0)
		return fail(s->why, "fork: %s", strerror(errno));
	if (pid == 0)
		execl_next(self_exe, n - 1);
	if (reap(s->why, "the exec chain", pid))
		return -1;
	*ns = bench_now_ns() - t0;
	return 0;
}

static int t_execl(struct sample *s, double dur)
{
	double t0 = bench_now_ns(), end = t0 + dur, ns = 0, t, want;
	unsigned long n = 4, total = 0;

	do {
		if (execl_chain(s, n, &ns))
			return -1;
		total += n;
		/* the next chains: about a tenth of the duration each */
		want = ns > 0 ? n * (dur / 10) / ns : 1;
		n = want < 1 ? 1 : want > 100000 ? 100000 : (unsigned long)want;
	} while ((t = bench_now_ns()) < end);
	s->ops = total;
	s->ns = t - t0;
	return 0;
}

static const struct test tests[] = {
	{ "syscall", "System Call Overhead", "loops", t_syscall },
	{ "pipe", "Pipe Throughput", "loops", t_pipe },
	{ "context1", "Pipe-based Context Switching", "round trips",
	  t_context1 },
	{ "spawn", "Process Creation", "processes", t_spawn },
	{ "execl", "Execl Throughput", "execs", t_execl },
};
#define NTESTS	ARRAY_SIZE(tests)
#define IDLE_NAME	"idle-threads"

static void run_test(struct result *r)
{
	struct sample s;
	double *v;
	int i;

	r->ok = 1;
	for (i = 0; i < opt.runs; i++) {
		memset(&s, 0, sizeof(s));
		if (r->t->run(&s, opt.duration_ms * 1e6)) {
			r->ok = 0;
			snprintf(r->reason, sizeof(r->reason), "run %d: %s",
				 i + 1, s.why);
			return;
		}
		r->ops_s[i] = s.ns > 0 ? s.ops * 1e9 / s.ns : 0;
		if (opt.verbose)
			fprintf(stderr, " %.0f", r->ops_s[i]);
	}
	v = r->ops_s + opt.runs;
	memcpy(v, r->ops_s, opt.runs * sizeof(*v));
	r->median = bench_median(v, opt.runs);	/* sorts v */
	r->min = v[0];
	r->max = v[opt.runs - 1];
}

/* ---- idle-threads --------------------------------------------------- */

/* The number after key (a line "key value ..."), or -1. */
static long long proc_value(const char *file, const char *key)
{
	size_t n = strlen(key);
	long long v = -1;
	char line[256];
	FILE *f;

	f = fopen(file, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, n) &&
		    (line[n] == ' ' || line[n] == '\t')) {
			v = strtoll(line + n, NULL, 10);
			break;
		}
	fclose(f);
	return v;
}

static void read_mem(struct mem *m)
{
	m->kstack_kib = proc_value("/proc/meminfo", "KernelStack:");
	m->dyn_pages = proc_value("/proc/vmstat", "dynamic_kstack_pages");
}

/* The threads of this process other than this one, and how many of them
 * sleep (state S); -1 if /proc/self/task cannot be read. */
static int count_tasks(int *sleeping)
{
	char path[320], buf[256], *p;
	struct dirent *d;
	int n = 0, fd;
	ssize_t len;
	DIR *dir;

	*sleeping = 0;
	dir = opendir("/proc/self/task");
	if (!dir)
		return -1;
	while ((d = readdir(dir))) {
		if (d->d_name[0] == '.' || atoi(d->d_name) == gettid())
			continue;
		n++;
		snprintf(path, sizeof(path), "/proc/self/task/%s/stat",
			 d->d_name);
		fd = open(path, O_RDONLY);
		if (fd < 0)
			continue;	/* it has just gone */
		len = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (len <= 0)
			continue;
		buf[len] = 0;
		p = strrchr(buf, ')');	/* after "pid (comm)" */
		if (p && p[1] == ' ' && p[2] == 'S')
			(*sleeping)++;
	}
	closedir(dir);
	return n;
}

static int idle_pipe[2];
static atomic_int idle_started;	/* threads that have begun to run */


/*
 * Wait until the other threads number want, all of them started and
 * asleep (asleep: 1) or in any state (asleep: 0); 0, or -1 with a reason
 * after SETTLE_NS.
 */
static int wait_tasks(int want, int asleep, const char *what)
{
	double t0 = bench_now_ns();
	int n, sl, started;

	for (;;) {
		n = count_tasks(&sl);
		if (n < 0)
			return fail(idle_why(), "/proc/self/task: %s",
				    strerror(errno));
		started = atomic_load(&idle_started);
		if (n == want && (!asleep || (sl == want && started == want)))
			return 0;
		if (bench_now_ns() - t0 > SETTLE_NS)
			return fail(idle_why(), "%s: after %.0f s, %d threads "
				    "(%d wanted), %d started, %d asleep", what,
				    SETTLE_NS / 1e9, n, want, started, sl);
		usleep(10000);
	}
}

static void *idle_thread(void *arg)
{
	char c;

	(void)arg;
	atomic_fetch_add(&idle_started, 1);
	return (void *)(intptr_t)read(idle_pipe[0], &c, 1);
}

/*
 * The "after" reading.  A dead thread's kernel stack is freed (and
 * KernelStack goes down) when the last reference to it goes, after an RCU
 * grace period: read until KernelStack is back at the "before" level or
 * has not changed for RETURN_QUIET_NS (at most RETURN_MAX_NS).
 */
static void wait_returned(void)
{
	double t0 = bench_now_ns(), changed = t0, t;
	long long last;

	read_mem(&idle.after);
	do {
		if (idle.after.kstack_kib <= idle.before.kstack_kib)
			return;
		usleep(20000);
		last = idle.after.kstack_kib;
		read_mem(&idle.after);
		t = bench_now_ns();
		if (idle.after.kstack_kib != last)
			changed = t;
	} while (t - changed < RETURN_QUIET_NS && t - t0 < RETURN_MAX_NS);
}

/*
 * dynamic_kstacks=reclaim: a sleeper's unused stack pages go after two
 * passes a second apart.  Read until KernelStack has not fallen for
 * RECLAIM_QUIET_NS, at least RECLAIM_MIN_NS and at most RECLAIM_MAX_NS.
 */
#define RECLAIM_MIN_NS		2.5e9
#define RECLAIM_QUIET_NS	1.5e9
#define RECLAIM_MAX_NS		10e9

static int reclaim_mode(void)
{
	return have_dyn_param && !strcmp(dyn_param, "reclaim");
}

static void wait_reclaimed(void)
{
	double t0 = bench_now_ns(), changed = t0, t;
	struct mem m;

	read_mem(&idle.blocked);
	do {
		usleep(200000);
		read_mem(&m);
		t = bench_now_ns();
		if (m.kstack_kib < idle.blocked.kstack_kib)
			changed = t;
		idle.blocked = m;
	} while ((t - t0 < RECLAIM_MIN_NS || t - changed < RECLAIM_QUIET_NS) &&
		 t - t0 < RECLAIM_MAX_NS);
	idle.reclaim_ms = (t - t0) / 1e6;
}

/* Release the threads (end of file on the pipe) and join them. */
static int release_threads(pthread_t *th, int n)
{
	void *ret;
	int i, bad = 0, e;

	close(idle_pipe[1]);
	for (i = 0; i < n; i++) {
		e = pthread_join(th[i], &ret);
		if (e && !bad++)
			fail(idle_why(), "pthread_join: %s", strerror(e));
		else if (!e && ret != NULL && !bad++)
			fail(idle_why(), "a thread's read() returned %ld, "
			     "not end of file", (long)(intptr_t)ret);
	}
	close(idle_pipe[0]);
	return bad ? -1 : 0;
}

static void run_idle(void)
{
	pthread_attr_t attr;
	pthread_t *th;
	double t0;
	int i, e;

	idle.ok = 0;
	memset(&idle.before, -1, sizeof(idle.before));
	idle.blocked = idle.after = idle.before;
	th = calloc(opt.threads, sizeof(*th));
	if (!th) {
		fail(idle_why(), "out of memory");
		return;
	}
	if (pipe(idle_pipe)) {
		fail(idle_why(), "pipe: %s", strerror(errno));
		free(th);
		return;
	}
	if (wait_tasks(0, 0, "before: other threads")) {
		release_threads(th, 0);
		free(th);
		return;
	}
	read_mem(&idle.before);
	if (idle.before.kstack_kib < 0)
		fail(idle_why(), "no KernelStack in /proc/meminfo");
	pthread_attr_init(&attr);
	e = pthread_attr_setstacksize(&attr, THREAD_STACK);
	if (e)
		fail(idle_why(), "pthread_attr_setstacksize: %s", strerror(e));
	t0 = bench_now_ns();
	for (i = 0; !e && i < opt.threads; i++) {
		e = pthread_create(&th[i], &attr, idle_thread, NULL);
		if (e)
			fail(idle_why(), "pthread_create (thread %d of %d): "
			     "%s", i + 1, opt.threads, strerror(e));
		else
			idle.created++;
	}
	pthread_attr_destroy(&attr);
	if (!e && !wait_tasks(opt.threads, 1, "blocking")) {
		idle.settle_ms = (bench_now_ns() - t0) / 1e6;
		if (reclaim_mode())
			wait_reclaimed();
		else
			read_mem(&idle.blocked);
		idle.ok = idle.before.kstack_kib >= 0;
	}
	t0 = bench_now_ns();
	e = release_threads(th, idle.created);
	idle.release_ms = (bench_now_ns() - t0) / 1e6;
	if (e ||
	    wait_tasks(0, 0, "after the join: threads left"))
		idle.ok = 0;
	t0 = bench_now_ns();
	wait_returned();
	idle.return_ms = (bench_now_ns() - t0) / 1e6;
	free(th);
}

/* ---- wake-up latency --------------------------------------------------- */

/* Write text to a file; 0 or -errno. */
static int write_text(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY), ret = 0;
	ssize_t n = (ssize_t)strlen(text);

	if (fd < 0)
		return -errno;
	if (write(fd, text, n) != n)
		ret = -errno;
	close(fd);
	return ret;
}

/* KernelStack of thread tid of this process, in KiB; -1 if absent. */
static long long task_kstack_kib(pid_t tid)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/self/task/%d/status", tid);
	return proc_value(path, "KernelStack:");
}

/* Is thread tid asleep (state S)? */
static int task_asleep(pid_t tid)
{
	char path[64], buf[512];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", tid);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	return strstr(buf, ") S ") != NULL;
}

struct waker {
	int ping[2], pong[2];
	atomic_int tid;
};

/* Make the stack WAKE_KIB deep, sleep, answer; until end of file. */
static void *wake_thread(void *arg)
{
	struct waker *w = arg;
	char c, kib[16];

	snprintf(kib, sizeof(kib), "%d", WAKE_KIB);
	atomic_store(&w->tid, gettid());
	for (;;) {
		write_text(DKS_DEBUGFS "consume", kib);	/* absent: no matter */
		if (read(w->ping[0], &c, 1) != 1)
			return NULL;
		if (write(w->pong[1], &c, 1) != 1)
			return (void *)1;
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Why kind k cannot be measured here, or NULL. */
static const char *wake_unavailable(int k)
{
	if (k == WAKE_WARM)
		return NULL;
	if (!reclaim_mode())
		return "only with dynamic_kstacks=reclaim";
	if (access(DKS_DEBUGFS "reclaim", W_OK))
		return "no " DKS_DEBUGFS "reclaim (CONFIG_TEST_DYNAMIC_KSTACKS, debugfs)";
	return NULL;
}

/* Wait until the sleeper sleeps, prepare kind k; 0, or -1 with a reason. */
static int wake_prepare(struct waker *w, int k)
{
	double t0 = bench_now_ns();
	char text[32];
	int e;

	while (!task_asleep(w->tid)) {
		if (bench_now_ns() - t0 > WAKE_SETTLE_NS)
			return fail(idle_why(), "wake-up %s: the thread did not "
				    "sleep within %.0f s", wake_names[k],
				    WAKE_SETTLE_NS / 1e9);
		usleep(1000);
	}
	if (k != WAKE_WARM) {
		/* The first pass marks the pages unused, the second takes them */
		if ((e = write_text(DKS_DEBUGFS "reclaim", "scan")) ||
		    (e = write_text(DKS_DEBUGFS "reclaim", "scan")))
			return fail(idle_why(), "wake-up %s: reclaim scan: %s",
				    wake_names[k], strerror(-e));
	}
	if (k == WAKE_DEFERRED) {
		snprintf(text, sizeof(text), "starve %d", (int)w->tid);
		e = write_text(DKS_DEBUGFS "reclaim", text);
		if (e)
			return fail(idle_why(), "wake-up deferred: %s: %s", text,
				    strerror(-e));
	}
	wake.asleep_kib[k] = task_kstack_kib(w->tid);
	return 0;
}

/*
 * The /proc/vmstat counter a wake-up of kind k must raise: each reclaimed
 * sleeper is refilled in try_to_wake_up(), each starved one by kstackd.
 */
static const char *const wake_counter[NWAKE] = {
	[WAKE_RECLAIMED] = "dynamic_kstack_wake_refills",
	[WAKE_DEFERRED] = "dynamic_kstack_wake_deferred",
};

/* WAKE_TRIALS wake-ups of kind k; 0, or -1 with a reason. */
static int wake_trials(struct waker *w, int k)
{
	const char *counter = wake_counter[k];
	double t[WAKE_TRIALS], t0;
	long long before, now;
	char c = 'w';
	int i;

	for (i = 0; i < WAKE_TRIALS; i++) {
		if (wake_prepare(w, k))
			return -1;
		before = counter ? proc_value("/proc/vmstat", counter) : 0;
		t0 = bench_now_ns();
		if (write(w->ping[1], &c, 1) != 1 || read(w->pong[0], &c, 1) != 1)
			return fail(idle_why(), "wake-up %s: pipe: %s",
				    wake_names[k], strerror(errno));
		t[i] = bench_now_ns() - t0;
		/* Not the path it is named after: its time would mislead */
		now = counter ? proc_value("/proc/vmstat", counter) : 0;
		if (counter && (before < 0 || now <= before))
			return fail(idle_why(), "wake-up %s: %s did not grow "
				    "(%lld -> %lld)", wake_names[k], counter,
				    before, now);
	}
	qsort(t, WAKE_TRIALS, sizeof(t[0]), cmp_double);
	wake.median_ns[k] = t[WAKE_TRIALS / 2];
	wake.max_ns[k] = t[WAKE_TRIALS - 1];
	wake.ok[k] = 1;
	return 0;
}

static void run_wake(void)
{
	struct waker w = { .tid = 0 };
	const char *why;
	pthread_t th;
	void *ret;
	int k, e;

	if (pipe(w.ping) || pipe(w.pong)) {
		fail(idle_why(), "wake-up: pipe: %s", strerror(errno));
		idle.ok = 0;
		return;
	}
	e = pthread_create(&th, NULL, wake_thread, &w);
	if (e) {
		fail(idle_why(), "wake-up: pthread_create: %s", strerror(e));
		idle.ok = 0;
		return;
	}
	while (!atomic_load(&w.tid))
		usleep(1000);
	for (k = 0; k < NWAKE; k++) {
		why = wake_unavailable(k);
		if (why) {
			snprintf(wake.skip[k], sizeof(wake.skip[k]), "%s", why);
			continue;
		}
		if (wake_trials(&w, k)) {
			idle.ok = 0;
			break;
		}
	}
	if (reclaim_mode() && !wake_unavailable(WAKE_DEFERRED))
		write_text(DKS_DEBUGFS "reclaim", "starve 0");
	close(w.ping[1]);
	e = pthread_join(th, &ret);
	if (e || ret) {
		fail(idle_why(), "wake-up: the thread %s", e ? strerror(e) :
		     "could not answer");
		idle.ok = 0;
	}
	close(w.ping[0]);
	close(w.pong[0]);
	close(w.pong[1]);
}

/* ---- output ----------------------------------------------------------- */

static const char *dyn_text(void)
{
	if (!have_dyn_param)
		return "off (no dynamic_kstacks= on the command line)";
	if (reclaim_mode())
		return "reclaim (dynamic_kstacks=reclaim on the command line)";
	return strcmp(dyn_param, "on") ?
		"off (dynamic_kstacks= is neither 'on' nor 'reclaim')" :
		"on (dynamic_kstacks=on on the command line)";
}

/* A Markdown cell: v x scale, or "absent". */
static void md_kib(FILE *f, long long v, double scale, const char *fmt)
{
	if (v < 0)
		fputs(" absent |", f);
	else
		fprintf(f, fmt, v * scale);
}

/* A row of readings (before, blocked, after) and their differences. */
static void md_mem_row(FILE *f, const char *what, const struct mem *m0,
		       const struct mem *m1, const struct mem *m2, int dyn,
		       double scale)
{
	long long v[3];
	int i;

	v[0] = dyn ? m0->dyn_pages : m0->kstack_kib;
	v[1] = dyn ? m1->dyn_pages : m1->kstack_kib;
	v[2] = dyn ? m2->dyn_pages : m2->kstack_kib;
	fprintf(f, "| %s |", what);
	for (i = 0; i < 3; i++)
		md_kib(f, v[i], scale, " %.0f |");
	if (v[0] < 0 || v[1] < 0) {
		fputs(" – | – |", f);
	} else {
		md_kib(f, v[1] - v[0], scale, " %.0f |");
		md_kib(f, v[1] - v[0], scale / opt.threads, " %.2f |");
	}
	if (v[1] < 0 || v[2] < 0)
		fputs(" – |\n", f);
	else
		fprintf(f, " %.0f |\n", (v[1] - v[2]) * scale);
}

static void print_md(FILE *f, const struct result *res)
{
	size_t i;

	bench_md_header(f, &sys, "kml-ubench: UnixBench-style system tests, "
			"kernel stack memory", opt.label);
	fprintf(f, "- dynamic kernel stacks: %s\n", dyn_text());
	fprintf(f, "- method: each test runs for %d ms, %d times; median, "
		"min and max of the runs' ops/s\n\n", opt.duration_ms,
		opt.runs);
	fprintf(f, "| Test | UnixBench | op | ops/s (median) | min | max |\n"
		"|---|---|---|---:|---:|---:|\n");
	for (i = 0; i < NTESTS; i++) {
		const struct result *r = &res[i];

		if (!r->selected)
			continue;
		fprintf(f, "| %s | %s | %s |", r->t->name, r->t->label,
			r->t->unit);
		if (r->ok)
			fprintf(f, " %.0f | %.0f | %.0f |\n", r->median, r->min,
				r->max);
		else
			fprintf(f, " FAILED | | |\n");
	}
	fputc('\n', f);
	for (i = 0; i < NTESTS; i++) {
		if (!res[i].selected || res[i].ok)
			continue;
		fprintf(f, "- FAILED: %s: ", res[i].t->name);
		bench_md_text(f, res[i].reason);
		fputc('\n', f);
	}
	if (!opt.idle)
		return;
	fprintf(f, "## Kernel stack memory: %d idle threads (%d KiB pthread "
		"stacks, blocked in read() on a pipe)\n\n", opt.threads,
		THREAD_STACK / 1024);
	if (!idle.ok) {
		fprintf(f, "- FAILED: %s: ", IDLE_NAME);
		bench_md_text(f, idle.reason);
		fputs("\n", f);
		if (!idle.created)
			return;
	}
	fprintf(f, "| Reading | before | %d blocked | after join | growth "
		"| per thread | returned |\n|---|---:|---:|---:|---:|---:|---:|\n",
		opt.threads);
	md_mem_row(f, "KernelStack (KiB)", &idle.before, &idle.blocked,
		   &idle.after, 0, 1);
	md_mem_row(f, "dynamic_kstack_pages (KiB)", &idle.before,
		   &idle.blocked, &idle.after, 1,
		   sysconf(_SC_PAGESIZE) / 1024.0);
	fprintf(f, "\n## Wake-up latency of a sleeper (%d KiB of kernel stack "
		"used, %d wake-ups per kind)\n\n| Kind | median (us) | max (us) "
		"| its KernelStack asleep (KiB) |\n|---|---:|---:|---:|\n",
		WAKE_KIB, WAKE_TRIALS);
	for (int k = 0; k < NWAKE; k++) {
		if (wake.ok[k] && wake.asleep_kib[k] >= 0)
			fprintf(f, "| %s | %.1f | %.1f | %lld |\n", wake_names[k],
				wake.median_ns[k] / 1e3, wake.max_ns[k] / 1e3,
				wake.asleep_kib[k]);
		else if (wake.ok[k])
			fprintf(f, "| %s | %.1f | %.1f | absent |\n", wake_names[k],
				wake.median_ns[k] / 1e3, wake.max_ns[k] / 1e3);
		else
			fprintf(f, "| %s | %s | | |\n", wake_names[k],
				wake.skip[k][0] ? wake.skip[k] : "FAILED");
	}
	fputc('\n', f);
}

static void json_ll(FILE *f, const char *key, long long v)
{
	if (v < 0)
		fprintf(f, ", \"%s\": null", key);
	else
		fprintf(f, ", \"%s\": %lld", key, v);
}

static void json_mem(FILE *f, const char *key, const struct mem *m)
{
	fprintf(f, ", \"%s\": {\"kernel_stack_kib\": ", key);
	if (m->kstack_kib < 0)
		fputs("null", f);
	else
		fprintf(f, "%lld", m->kstack_kib);
	json_ll(f, "dynamic_kstack_pages", m->dyn_pages);
	fputc('}', f);
}

/* (b - a) / div, or null when either is absent. */
static void json_delta(FILE *f, const char *key, long long a, long long b,
		       double div)
{
	bench_json_num(f, key, (b - a) / div, a >= 0 && b >= 0);
}

static void write_idle_json(FILE *f)
{
	const struct mem *m0 = &idle.before, *m1 = &idle.blocked;
	const struct mem *m2 = &idle.after;

	fputs(", \"idle_threads\": ", f);
	if (!opt.idle) {
		fputs("null", f);
		return;
	}
	fprintf(f, "{\"status\": \"%s\", \"reason\": ", idle.ok ? "ok" :
		"failed");
	bench_json_str(f, idle.ok ? NULL : idle.reason);
	fprintf(f, ", \"threads\": %d, \"created\": %d, \"stack_kib\": %d, "
		"\"page_kib\": %ld", opt.threads, idle.created,
		THREAD_STACK / 1024, sysconf(_SC_PAGESIZE) / 1024);
	bench_json_num(f, "settle_ms", idle.settle_ms, idle.ok);
	bench_json_num(f, "return_ms", idle.return_ms, idle.created > 0);
	bench_json_num(f, "reclaim_ms", idle.reclaim_ms,
		       idle.ok && reclaim_mode());
	bench_json_num(f, "release_ms", idle.release_ms, idle.created > 0);
	json_mem(f, "before", m0);
	json_mem(f, "blocked", m1);
	json_mem(f, "after", m2);
	fprintf(f, ", \"dynamic_stack_counter\": %s",
		m0->dyn_pages >= 0 ? "true" : "false");
	json_delta(f, "kernel_stack_delta_kib", m0->kstack_kib,
		   m1->kstack_kib, 1);
	json_delta(f, "kernel_stack_per_thread_kib", m0->kstack_kib,
		   m1->kstack_kib, opt.threads);
	json_delta(f, "kernel_stack_returned_kib", m2->kstack_kib,
		   m1->kstack_kib, 1);
	json_delta(f, "dynamic_stack_pages_delta", m0->dyn_pages,
		   m1->dyn_pages, 1);
	json_delta(f, "dynamic_stack_pages_returned", m2->dyn_pages,
		   m1->dyn_pages, 1);
	fprintf(f, ", \"wake_latency\": {\"trials\": %d, \"stack_kib\": %d",
		WAKE_TRIALS, WAKE_KIB);
	for (int k = 0; k < NWAKE; k++) {
		fprintf(f, ", \"%s\": {\"status\": \"%s\", \"reason\": ",
			wake_names[k], wake.ok[k] ? "ok" :
			wake.skip[k][0] ? "skipped" : "failed");
		bench_json_str(f, wake.ok[k] ? NULL : wake.skip[k][0] ?
			       wake.skip[k] : idle.reason);
		bench_json_num(f, "median_ns", wake.median_ns[k], wake.ok[k]);
		bench_json_num(f, "max_ns", wake.max_ns[k], wake.ok[k]);
		json_ll(f, "asleep_kernel_stack_kib",
			wake.ok[k] ? wake.asleep_kib[k] : -1);
		fputc('}', f);
	}
	fputs("}}", f);
}

static void write_json(FILE *f, const struct result *res)
{
	size_t i;
	int j, first = 1;

	bench_json_head(f, SCHEMA, opt.label, &sys);
	fputs(", \"dynamic_kstacks\": ", f);
	bench_json_str(f, have_dyn_param ? dyn_param : NULL);
	fprintf(f, ", \"dynamic_kstacks_on\": %s, "
		"\"dynamic_kstacks_reclaim\": %s, \"runs\": %d, "
		"\"duration_ms\": %d, \"exe\": ",
		have_dyn_param && !strcmp(dyn_param, "on") ? "true" : "false",
		reclaim_mode() ? "true" : "false", opt.runs, opt.duration_ms);
	bench_json_str(f, self_exe);
	fputs(", \"tests\": [", f);
	for (i = 0; i < NTESTS; i++) {
		const struct result *r = &res[i];

		if (!r->selected)
			continue;
		fprintf(f, "%s\n  {\"name\": ", first ? "" : ",");
		first = 0;
		bench_json_str(f, r->t->name);
		fputs(", \"label\": ", f);
		bench_json_str(f, r->t->label);
		fputs(", \"unit\": ", f);
		bench_json_str(f, r->t->unit);
		fprintf(f, ", \"status\": \"%s\", \"reason\": ",
			r->ok ? "ok" : "failed");
		bench_json_str(f, r->ok ? NULL : r->reason);
		bench_json_num(f, "ops_s_median", r->median, r->ok);
		bench_json_num(f, "ops_s_min", r->min, r->ok);
		bench_json_num(f, "ops_s_max", r->max, r->ok);
		fputs(", \"ops_s\": ", f);
		if (r->ok) {
			for (j = 0; j < opt.runs; j++)
				fprintf(f, "%s%.3f", j ? ", " : "[",
					r->ops_s[j]);
			fputc(']', f);
		} else {
			fputs("null", f);
		}
		fputc('}', f);
	}
	fputs("\n]", f);
	write_idle_json(f);
	fputs("}\n", f);
}

/* ---- options -------------------------------------------------------- */

static void usage(FILE *f)
{
	size_t i;

	fprintf(f,
		"usage: %s [options]\n"
		"  --only LIST       comma-separated tests (default: all): ",
		bench_prog);
	for (i = 0; i < NTESTS; i++)
		fprintf(f, "%s ", tests[i].name);
	fprintf(f, IDLE_NAME "\n"
		"  --list            list the tests\n"
		"  --runs N          runs per test (default 5); median, min, max\n"
		"  --duration-ms MS  length of one run (default 2000)\n"
		"  --quick           --runs 3 --duration-ms 300\n"
		"  --threads N       idle-threads: the number of threads "
		"(default 1000)\n"
		"  --json PATH       write JSON results to PATH ('-': stdout;\n"
		"                    the Markdown then goes to stderr)\n"
		"  --label TEXT      configuration label, copied into the JSON\n"
		"  --inject-context1-error\n"
		"                    for tests: context1's child returns a wrong "
		"value\n"
		"  -v, --verbose     progress on stderr\n"
		"  -h, --help        this text\n"
		"Exit status: 0 ok, 1 a test failed, 2 usage error.\n");
}

static void list_tests(void)
{
	size_t i;

	for (i = 0; i < NTESTS; i++)
		printf("%-14s %s (ops: %s)\n", tests[i].name, tests[i].label,
		       tests[i].unit);
	printf("%-14s kernel stack memory of idle threads\n", IDLE_NAME);
}

static void parse_only(const char *list, struct result *res)
{
	char *copy = strdup(list), *tok, *save;
	size_t i;

	if (!copy) {
		perror("strdup");
		exit(1);
	}
	if (!*list || *list == ',' || list[strlen(list) - 1] == ',' ||
	    strstr(list, ",,"))
		bench_usage_error("--only '%s': a comma-separated list of tests", list);
	for (i = 0; i < NTESTS; i++)
		res[i].selected = 0;
	opt.idle = 0;
	for (tok = strtok_r(copy, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		if (!strcmp(tok, IDLE_NAME)) {
			opt.idle = 1;
			continue;
		}
		for (i = 0; i < NTESTS && strcmp(tok, tests[i].name); i++)
			;
		if (i == NTESTS)
			bench_usage_error("--only: unknown test '%s' (--list)", tok);
		res[i].selected = 1;
	}
	free(copy);
}

/* What execl runs: this program's file. */
static void find_self(const char *argv0)
{
	ssize_t n = readlink("/proc/self/exe", self_exe, sizeof(self_exe) - 1);

	if (n > 0) {
		self_exe[n] = 0;
		return;
	}
	if (!strchr(argv0, '/') || !realpath(argv0, self_exe))
		snprintf(self_exe, sizeof(self_exe), "%s", argv0);
}

/* --execl-child N: one link of the execl test's chain. */
static int execl_child(int argc, char **argv)
{
	char *end;
	unsigned long left;

	if (argc != 3)
		bench_usage_error(EXECL_OPT " takes one number");
	errno = 0;
	left = strtoul(argv[2], &end, 10);
	if (errno || end == argv[2] || *end)
		bench_usage_error(EXECL_OPT " '%s': not a number", argv[2]);
	if (!left)
		return 0;
	execl_next(argv[0], left - 1);
}

/* The options into opt and res (--only); usage errors exit with 2. */
static void parse_options(int argc, char **argv, struct result *res)
{
	enum { OPT_ONLY = 256, OPT_LIST, OPT_DUR, OPT_THREADS, OPT_INJECT };
	static const struct option lopts[] = {
		{ "only", required_argument, NULL, OPT_ONLY },
		{ "list", no_argument, NULL, OPT_LIST },
		{ "duration-ms", required_argument, NULL, OPT_DUR },
		{ "threads", required_argument, NULL, OPT_THREADS },
		{ "inject-context1-error", no_argument, NULL, OPT_INJECT },
		BENCH_COMMON_OPTIONS,
		{ NULL, 0, NULL, 0 }
	};
	struct bench_common com = { .runs = -1, .usage = usage };
	int dur = -1, ch;

	opt.idle = 1;
	while ((ch = getopt_long(argc, argv, "vh", lopts, NULL)) != -1) {
		switch (ch) {
		case OPT_ONLY:
			parse_only(optarg, res);
			break;
		case OPT_LIST:
			list_tests();
			exit(0);
		case OPT_DUR:
			dur = bench_parse_long("--duration-ms", optarg, 1, 600000);
			break;
		case OPT_THREADS:
			opt.threads = bench_parse_long("--threads", optarg, 1,
						 MAX_THREADS);
			break;
		case OPT_INJECT:
			opt.inject_context1 = 1;
			break;
		default:	/* --runs, --quick, --json, --label, -v, -h */
			bench_common_option(ch, &com);
			break;
		}
	}
	bench_no_operands(argc, argv);
	opt.runs = com.runs > 0 ? com.runs : com.quick ? 3 : opt.runs;
	opt.duration_ms = dur > 0 ? dur : com.quick ? 300 : opt.duration_ms;
	opt.json = com.json;
	opt.label = com.label;
	opt.verbose = com.verbose;
}

/* Descriptor 0, SIGPIPE, the system description; 0, or 1. */
static int prepare(const char *argv0)
{
	/* dup(0) needs a descriptor 0 */
	if (fcntl(0, F_GETFD) < 0 && open("/dev/null", O_RDONLY) != 0) {
		fprintf(stderr, "%s: no standard input and no /dev/null\n",
			bench_prog);
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);	/* a dead child fails a test */
	bench_gather_sysinfo(&sys);
	have_dyn_param = bench_cmdline_param(&sys, "dynamic_kstacks", dyn_param,
				       sizeof(dyn_param));
	find_self(argv0);
	return 0;
}

/* The selected system tests (their runs' ops/s in mem); 1 if one failed. */
static int run_tests(struct result *res, double *mem)
{
	int failed = 0;
	size_t i;

	for (i = 0; i < NTESTS; i++) {
		struct result *r = &res[i];

		r->ops_s = mem + i * 2 * opt.runs;
		if (!r->selected)
			continue;
		if (opt.verbose)
			fprintf(stderr, "%s (ops/s):", r->t->name);
		run_test(r);
		if (!r->ok) {
			failed = 1;
			fprintf(stderr, "%s%s: %s: %s\n", opt.verbose ? "\n" :
				"", bench_prog, r->t->name, r->reason);
		} else if (opt.verbose) {
			fprintf(stderr, "; median %.0f\n", r->median);
		}
	}
	return failed;
}

/* The kernel-stack memory of idle threads (unless --only); 1 if it failed. */
static int run_idle_threads(void)
{
	if (!opt.idle)
		return 0;
	if (opt.verbose)
		fprintf(stderr, "%s: %d threads ...\n", IDLE_NAME, opt.threads);
	run_idle();
	if (idle.ok)
		run_wake();
	if (!idle.ok) {
		fprintf(stderr, "%s: %s: %s\n", bench_prog, IDLE_NAME,
			idle.reason);
		return 1;
	}
	if (opt.verbose)
		fprintf(stderr, "%s: KernelStack %lld -> %lld -> %lld KiB\n",
			IDLE_NAME, idle.before.kstack_kib,
			idle.blocked.kstack_kib, idle.after.kstack_kib);
	return 0;
}

int main(int argc, char **argv)
{
	struct result res[NTESTS];
	FILE *out = stdout, *jf;
	int failed;
	double *mem;
	size_t i;

	bench_set_prog(argv[0]);
	if (argc > 1 && !strcmp(argv[1], EXECL_OPT))
		return execl_child(argc, argv);
	memset(res, 0, sizeof(res));
	for (i = 0; i < NTESTS; i++) {
		res[i].t = &tests[i];
		res[i].selected = 1;
	}
	parse_options(argc, argv, res);
	jf = bench_json_open(opt.json, &out);
	mem = calloc((size_t)NTESTS * 2 * opt.runs, sizeof(*mem));
	if (!mem) {
		fprintf(stderr, "%s: out of memory\n", bench_prog);
		return 1;
	}
	if (prepare(argv[0]))
		return 1;

	failed = run_tests(res, mem);
	failed |= run_idle_threads();

	print_md(out, res);
	fflush(out);
	if (jf) {
		write_json(jf, res);
		if (bench_json_close(jf, opt.json))
			return 1;
	}
	free(mem);
	return failed ? 1 : 0;
}
