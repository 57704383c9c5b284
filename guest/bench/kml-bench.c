// SPDX-License-Identifier: GPL-2.0
/*
 * kml-bench: system call latency benchmark, run inside the guest.
 *
 * What it measures: the latency of one operation for each row below, in
 * the spirit of lmbench's lat_syscall, lat_select, lat_sig, lat_pipe,
 * lat_unix and lat_proc (this is an independent implementation):
 *
 *   call, vdso_clock_gettime    references: an empty function call and a
 *                               vDSO clock read (no kernel entry)
 *   getppid, getpid             null system calls, syscall(SYS_...)
 *   read, write                 1 byte from /dev/zero, to /dev/null
 *   stat, fstat, open_close     on a file (default: our own executable)
 *   select_{file,tcp}_N         select() over N regular-file fds (always
 *                               ready) or N listening TCP sockets on
 *                               127.0.0.1 (never ready, zero timeout)
 *   sigaction, sig_deliver      handler installation; kill(self) delivery
 *   prot_fault                  write to a read-only page; the SIGSEGV
 *                               handler steps over the faulting store
 *   pipe_rtt, unix_rtt          1-byte round trip to an echo child
 *   fork_exit, fork_exec        fork + _exit / execve + waitpid
 *   page_fault                  first touch of an anonymous page
 *
 * System-call path (--path): "syscall" (default) issues every call through
 * the C library, that is with the `syscall` instruction.  "call" issues the
 * system calls of each row's loop through libkml (guest/libkml), which in a
 * kernel-mode process (a copy run from /trusted) calls the vDSO function
 * __vdso_kml_syscall instead: the same system calls as the C library
 * makes (newfstatat for stat and fstat, openat, pselect6, rt_sigaction,
 * clone for fork, wait4, ...).  Rows without a system call in their loop
 * (call, vdso_clock_gettime) are measured as they are, with path "none";
 * rows whose loop needs a call that cannot go through libkml (the signal
 * return of sig_deliver and prot_fault: glibc's restorer executes
 * `syscall`) are reported as skipped, with the reason.  --path call in a
 * process where the call path is not available (user mode, a kernel
 * without __vdso_kml_syscall) is refused with exit status 3.
 *
 * How: every row has a setup (files, sockets, echo child, handlers), a loop
 * that performs the operation n times, and a generic cleanup.  The loop is
 * timed with CLOCK_MONOTONIC (ns) and with lfence+rdtsc (cycles).  A row
 * is warmed up, then n is calibrated by growing it until one loop takes at
 * least 1/8 of --run-ms, and scaled so that one run takes about --run-ms
 * (at least 3 operations per run).  --runs runs follow; each run gives the
 * mean time per operation over its n iterations (loop overhead included,
 * not subtracted).  The median of the runs is reported, with the runs'
 * min and max.  The TSC frequency is estimated from all timed runs.
 *
 * Output: a Markdown table on stdout (stderr when the JSON goes to stdout),
 * two "seed layouts" arranged like KML paper Table 2 and the usermode-
 * kernel thesis Table 6.1, and optionally JSON (schema kml-bench/2: /1
 * plus the path, the CPL and the layouts, so that ./kml bench can combine
 * several runs).
 * When the kernel command line says kml.accel=tcg, the results are marked
 * EMULATED: QEMU TCG timings are not hardware timings.
 *
 * Exit status: 0 when every row is ok or skipped, 1 when a row failed,
 * 2 for a usage error, 3 when the mode asked for (--expect-mode, --path
 * call) is not available here.
 *
 * Build: gcc -O2 -static -Wall -Wextra -Werror -I../libkml -o kml-bench
 *        kml-bench.c libkml.a
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>
#include <x86intrin.h>

#include "bench_util.h"

#include "kml.h"

#define SCHEMA		"kml-bench/2"
#define DEFAULT_EXEC	"/usr/lib/kml/hello"
#define MIN_ITERS	3UL
#define MAX_ITERS	1000000000UL
#define PF_CHUNK	256UL		/* pages per mmap in page_fault */
#define REASON_MAX	256

#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))

enum { PATH_SYSCALL, PATH_CALL };
static const char *const path_name[] = {
	[PATH_SYSCALL] = "syscall",
	[PATH_CALL] = "call",
};

static struct {
	int path;		/* PATH_* */
	int runs;
	int run_ms;
	int verbose;
	const char *json;
	const char *label;
	const char *exec_path;
	const char *file;	/* stat/open target; NULL: see file_err */
} opt = {
	.runs = 5,
	.run_ms = 100,
	.exec_path = DEFAULT_EXEC,
};

static char file_buf[PATH_MAX];
static char file_err[REASON_MAX];

/* ---- per-row context ---------------------------------------------- */

struct bench;

struct bctx {
	const struct bench *b;
	int (*run)(struct bctx *c, unsigned long n);	/* the loop timed */
	char *reason;
	size_t reason_sz;
	int fd;			/* /dev/zero, /dev/null, the file */
	int wfd, rfd;		/* parent ends towards the echo child */
	int *many;		/* select fds */
	int nmany;
	int maxfd;
	int expect;		/* select()'s expected return value */
	fd_set set;
	pid_t child;		/* echo child */
	pid_t self;
	char *page;
	size_t pagesz;
	int saved_sig;		/* signal whose old action to restore */
	struct sigaction old_sa;
	struct sigaction sa;
	struct ksigaction {	/* the kernel's struct sigaction */
		void (*handler)(int);
		unsigned long flags;
		void (*restorer)(void);
		unsigned long mask;
	} ksa;			/* sa as glibc gave it to the kernel */
};

struct bench {
	const char *name;
	const char *label;
	const char *unit;	/* "op", "round trip", "page" */
	int (*setup)(struct bctx *c);	/* 0 ok, 1 skipped, -1 failed */
	int (*run)(struct bctx *c, unsigned long n);	/* 0 ok, -1 failed */
	/*
	 * --path call: the loop with its system calls through libkml; or,
	 * for a row without one, why not (no_call), or that its loop makes
	 * no system call at all (nosys).  Every row says one of the three.
	 */
	int (*run_call)(struct bctx *c, unsigned long n);
	const char *no_call;
	int nosys;
	int arg;
	unsigned long quantum;	/* iterations are a multiple of this */
};

enum { ST_NOTRUN, ST_OK, ST_SKIP, ST_FAIL };

static const char *const status_name[] = {
	[ST_NOTRUN] = "not run",
	[ST_OK] = "ok",
	[ST_SKIP] = "skipped",
	[ST_FAIL] = "failed",
};

struct result {
	const char *name;
	const char *label;
	const char *unit;
	const char *path;	/* "syscall", "call", "none"; NULL: not run */
	int status;
	char reason[REASON_MAX];
	double ns_med, ns_min, ns_max;
	double cyc_med, cyc_min, cyc_max;
	unsigned long iters;
};

/* One column of the seed layouts: the results of one configuration. */
struct result_set {
	const char *label;
	const struct result *rows;
	size_t nrows;
};

__attribute__((format(printf, 2, 3)))
static int failx(struct bctx *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->reason, c->reason_sz, fmt, ap);
	va_end(ap);
	return -1;
}

/* Like failx(), with ": strerror(errno)" appended. */
__attribute__((format(printf, 2, 3)))
static int fail(struct bctx *c, const char *fmt, ...)
{
	int e = errno;
	va_list ap;
	size_t len;

	va_start(ap, fmt);
	vsnprintf(c->reason, c->reason_sz, fmt, ap);
	va_end(ap);
	len = strlen(c->reason);
	snprintf(c->reason + len, c->reason_sz - len, ": %s", strerror(e));
	return -1;
}

/* fail() for a raw kernel result r (-errno) of libkml. */
static int kfail(struct bctx *c, const char *what, long r)
{
	errno = r < 0 && r > -4096 ? (int)-r : 0;
	if (!errno)
		return failx(c, "%s: returned %ld", what, r);
	return fail(c, "%s", what);
}

/* Is r, the raw result of a system call, an error (-4095..-1)? */
static int kerr(long r)
{
	return r < 0 && r > -4096;
}

__attribute__((format(printf, 2, 3)))
static int skip(struct bctx *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->reason, c->reason_sz, fmt, ap);
	va_end(ap);
	return 1;
}

/* A failed 1-byte read or write: r is what the call returned. */
static int io_fail(struct bctx *c, const char *what, ssize_t r)
{
	if (r < 0)
		return fail(c, "%s", what);
	if (r == 0)
		return failx(c, "%s: unexpected end of file", what);
	return failx(c, "%s: returned %zd", what, r);
}

static int child_status(struct bctx *c, int st, const char *what)
{
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 0;
	if (WIFEXITED(st))
		return failx(c, "%s exited with status %d", what,
			     WEXITSTATUS(st));
	return failx(c, "%s killed by signal %d (%s)", what, WTERMSIG(st),
		     strsignal(WTERMSIG(st)));
}

static int wait_child(struct bctx *c, pid_t pid, const char *what)
{
	int st;

	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return fail(c, "waitpid (%s)", what);
	return child_status(c, st, what);
}

/* wait_child() with wait4 through libkml. */
static int kwait_child(struct bctx *c, long pid, const char *what)
{
	long r;
	int st;

	do
		r = kml_syscall4(SYS_wait4, pid, (long)&st, 0, 0);
	while (r == -EINTR);
	if (kerr(r))
		return kfail(c, "wait4", r);
	return child_status(c, st, what);
}

/* Undoes whatever a setup did, also after a partial setup. */
static int cleanup(struct bctx *c)
{
	int ret = 0, i;

	if (c->fd >= 0)
		close(c->fd);
	if (c->wfd >= 0)
		close(c->wfd);
	if (c->rfd >= 0 && c->rfd != c->wfd)
		close(c->rfd);
	c->fd = c->wfd = c->rfd = -1;
	for (i = 0; i < c->nmany; i++)
		close(c->many[i]);
	free(c->many);
	c->many = NULL;
	c->nmany = 0;
	/* the echo child sees end of file now and exits */
	if (c->child > 0)
		ret = wait_child(c, c->child, "echo child");
	c->child = 0;
	if (c->saved_sig)
		sigaction(c->saved_sig, &c->old_sa, NULL);
	c->saved_sig = 0;
	if (c->page)
		munmap(c->page, c->pagesz);
	c->page = NULL;
	return ret;
}

/* ---- references --------------------------------------------------- */

static __attribute__((noinline, noclone)) void empty_fn(void)
{
	asm volatile("");
}

static int run_call(struct bctx *c, unsigned long n)
{
	(void)c;
	while (n--)
		empty_fn();
	return 0;
}

static int run_vdso(struct bctx *c, unsigned long n)
{
	struct timespec ts;

	while (n--)
		if (clock_gettime(CLOCK_MONOTONIC, &ts))
			return fail(c, "clock_gettime");
	return 0;
}

/* ---- simple system calls ------------------------------------------ */

static int run_getppid(struct bctx *c, unsigned long n)
{
	(void)c;
	while (n--)
		syscall(SYS_getppid);
	return 0;
}

static int run_getpid(struct bctx *c, unsigned long n)
{
	(void)c;
	while (n--)
		syscall(SYS_getpid);
	return 0;
}

static int run_getppid_call(struct bctx *c, unsigned long n)
{
	(void)c;
	while (n--)
		kml_syscall0(SYS_getppid);
	return 0;
}

static int run_getpid_call(struct bctx *c, unsigned long n)
{
	(void)c;
	while (n--)
		kml_syscall0(SYS_getpid);
	return 0;
}

static int setup_devzero(struct bctx *c)
{
	c->fd = open("/dev/zero", O_RDONLY);
	return c->fd < 0 ? fail(c, "open /dev/zero") : 0;
}

static int setup_devnull(struct bctx *c)
{
	c->fd = open("/dev/null", O_WRONLY);
	return c->fd < 0 ? fail(c, "open /dev/null") : 0;
}

static int run_read(struct bctx *c, unsigned long n)
{
	char ch;
	ssize_t r;

	while (n--) {
		r = read(c->fd, &ch, 1);
		if (r != 1)
			return io_fail(c, "read /dev/zero", r);
	}
	return 0;
}

static int run_write(struct bctx *c, unsigned long n)
{
	char ch = 0;
	ssize_t r;

	while (n--) {
		r = write(c->fd, &ch, 1);
		if (r != 1)
			return io_fail(c, "write /dev/null", r);
	}
	return 0;
}

static int run_read_call(struct bctx *c, unsigned long n)
{
	char ch;
	long r;

	while (n--) {
		r = kml_syscall3(SYS_read, c->fd, (long)&ch, 1);
		if (r != 1)
			return r ? kfail(c, "read /dev/zero", r)
				 : failx(c, "read /dev/zero: end of file");
	}
	return 0;
}

static int run_write_call(struct bctx *c, unsigned long n)
{
	char ch = 0;
	long r;

	while (n--) {
		r = kml_syscall3(SYS_write, c->fd, (long)&ch, 1);
		if (r != 1)
			return kfail(c, "write /dev/null", r);
	}
	return 0;
}

static int setup_file(struct bctx *c)
{
	if (!opt.file)
		return skip(c, "%s", file_err);
	return 0;
}

static int setup_file_fd(struct bctx *c)
{
	if (!opt.file)
		return skip(c, "%s", file_err);
	c->fd = open(opt.file, O_RDONLY);
	return c->fd < 0 ? fail(c, "open %s", opt.file) : 0;
}

static int run_stat(struct bctx *c, unsigned long n)
{
	struct stat st;

	while (n--)
		if (stat(opt.file, &st))
			return fail(c, "stat %s", opt.file);
	return 0;
}

static int run_fstat(struct bctx *c, unsigned long n)
{
	struct stat st;

	while (n--)
		if (fstat(c->fd, &st))
			return fail(c, "fstat");
	return 0;
}

static int run_open_close(struct bctx *c, unsigned long n)
{
	int fd;

	while (n--) {
		fd = open(opt.file, O_RDONLY);
		if (fd < 0)
			return fail(c, "open %s", opt.file);
		if (close(fd))
			return fail(c, "close");
	}
	return 0;
}

/* glibc 2.36's stat(), fstat() and open(): newfstatat and openat */
static int run_stat_call(struct bctx *c, unsigned long n)
{
	struct stat st;
	long r;

	while (n--) {
		r = kml_syscall4(SYS_newfstatat, AT_FDCWD, (long)opt.file,
				 (long)&st, 0);
		if (r)
			return kfail(c, "newfstatat", r);
	}
	return 0;
}

static int run_fstat_call(struct bctx *c, unsigned long n)
{
	struct stat st;
	long r;

	while (n--) {
		r = kml_syscall4(SYS_newfstatat, c->fd, (long)"", (long)&st,
				 AT_EMPTY_PATH);
		if (r)
			return kfail(c, "newfstatat (fstat)", r);
	}
	return 0;
}

static int run_open_close_call(struct bctx *c, unsigned long n)
{
	long fd, r;

	while (n--) {
		fd = kml_syscall4(SYS_openat, AT_FDCWD, (long)opt.file,
				  O_RDONLY, 0);
		if (kerr(fd))
			return kfail(c, "openat", fd);
		r = kml_syscall1(SYS_close, fd);
		if (r)
			return kfail(c, "close", r);
	}
	return 0;
}

/* ---- select ------------------------------------------------------- */

/* Records fd as the next of the select set, or says why it cannot. */
static int add_select_fd(struct bctx *c, int fd)
{
	if (fd >= FD_SETSIZE) {
		close(fd);
		return skip(c, "fd %d does not fit in an fd_set (FD_SETSIZE %d)",
			    fd, FD_SETSIZE);
	}
	c->many[c->nmany++] = fd;
	FD_SET(fd, &c->set);
	if (fd > c->maxfd)
		c->maxfd = fd;
	return 0;
}

static int skip_nofile(struct bctx *c, const char *what, int e)
{
	struct rlimit rl;
	unsigned long long lim = 0;

	if (!getrlimit(RLIMIT_NOFILE, &rl))
		lim = rl.rlim_cur;
	return skip(c, "cannot open %d %s (%d open so far): %s "
		    "(RLIMIT_NOFILE soft limit %llu)", c->b->arg, what,
		    c->nmany, strerror(e), lim);
}

static int setup_select_file(struct bctx *c)
{
	int i, fd, r;

	if (!opt.file)
		return skip(c, "%s", file_err);
	c->many = calloc(c->b->arg, sizeof(*c->many));
	if (!c->many)
		return fail(c, "calloc");
	FD_ZERO(&c->set);
	c->maxfd = -1;
	c->expect = c->b->arg;
	for (i = 0; i < c->b->arg; i++) {
		fd = open(opt.file, O_RDONLY);
		if (fd < 0 && (errno == EMFILE || errno == ENFILE))
			return skip_nofile(c, "file fds", errno);
		if (fd < 0)
			return fail(c, "open %s", opt.file);
		r = add_select_fd(c, fd);
		if (r)
			return r;
	}
	return 0;
}

static int setup_select_tcp(struct bctx *c)
{
	struct sockaddr_in sin;
	int i, fd, r;

	c->many = calloc(c->b->arg, sizeof(*c->many));
	if (!c->many)
		return fail(c, "calloc");
	FD_ZERO(&c->set);
	c->maxfd = -1;
	c->expect = 0;
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sin.sin_port = 0;
	for (i = 0; i < c->b->arg; i++) {
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (fd < 0 && (errno == EMFILE || errno == ENFILE))
			return skip_nofile(c, "TCP sockets", errno);
		if (fd < 0)
			return skip(c, "socket(AF_INET, SOCK_STREAM): %s",
				    strerror(errno));
		if (bind(fd, (struct sockaddr *)&sin, sizeof(sin))) {
			r = errno;
			close(fd);
			return skip(c, "bind 127.0.0.1 port 0: %s "
				    "(is the loopback interface up?)",
				    strerror(r));
		}
		if (listen(fd, 1)) {
			r = errno;
			close(fd);
			return skip(c, "listen: %s", strerror(r));
		}
		r = add_select_fd(c, fd);
		if (r)
			return r;
	}
	return 0;
}

static int run_select(struct bctx *c, unsigned long n)
{
	struct timeval tv;
	fd_set rd;
	int r;

	while (n--) {
		rd = c->set;
		tv.tv_sec = 0;
		tv.tv_usec = 0;
		r = select(c->maxfd + 1, &rd, NULL, NULL, &tv);
		if (r < 0)
			return fail(c, "select");
		if (r != c->expect)
			return failx(c, "select returned %d, expected %d",
				     r, c->expect);
	}
	return 0;
}

/* glibc's select() is pselect6 with a timespec and no signal mask */
static int run_select_call(struct bctx *c, unsigned long n)
{
	struct timespec ts;
	fd_set rd;
	long r;

	while (n--) {
		rd = c->set;
		ts.tv_sec = 0;
		ts.tv_nsec = 0;
		r = kml_syscall6(SYS_pselect6, c->maxfd + 1, (long)&rd, 0, 0,
				 (long)&ts, 0);
		if (kerr(r))
			return kfail(c, "pselect6", r);
		if (r != c->expect)
			return failx(c, "pselect6 returned %ld, expected %d",
				     r, c->expect);
	}
	return 0;
}

/* ---- signals ------------------------------------------------------ */

static volatile unsigned long sig_count;

static void usr1_handler(int sig)
{
	(void)sig;
	sig_count++;
}

static int setup_usr1(struct bctx *c)
{
	memset(&c->sa, 0, sizeof(c->sa));
	c->sa.sa_handler = usr1_handler;
	sigemptyset(&c->sa.sa_mask);
	if (sigaction(SIGUSR1, &c->sa, &c->old_sa))
		return fail(c, "sigaction SIGUSR1");
	c->saved_sig = SIGUSR1;
	c->self = getpid();
	/* what glibc made of it (SA_RESTORER and its restorer), for libkml */
	if (syscall(SYS_rt_sigaction, SIGUSR1, NULL, &c->ksa,
		    sizeof(c->ksa.mask)))
		return fail(c, "rt_sigaction SIGUSR1 (read back)");
	return 0;
}

static int run_sigaction(struct bctx *c, unsigned long n)
{
	while (n--)
		if (sigaction(SIGUSR1, &c->sa, NULL))
			return fail(c, "sigaction SIGUSR1");
	return 0;
}

static int run_sigaction_call(struct bctx *c, unsigned long n)
{
	long r;

	while (n--) {
		r = kml_syscall4(SYS_rt_sigaction, SIGUSR1, (long)&c->ksa, 0,
				 sizeof(c->ksa.mask));
		if (r)
			return kfail(c, "rt_sigaction SIGUSR1", r);
	}
	return 0;
}

static int run_sig_deliver(struct bctx *c, unsigned long n)
{
	unsigned long i;

	sig_count = 0;
	for (i = 0; i < n; i++)
		if (kill(c->self, SIGUSR1))
			return fail(c, "kill SIGUSR1");
	if (sig_count != n)
		return failx(c, "%lu signals sent, %lu handled", n, sig_count);
	return 0;
}

/*
 * The faulting store is one instruction at a known address: the SIGSEGV
 * handler moves the interrupted RIP to prot_resume, so each iteration is
 * exactly fault + signal delivery + handler + rt_sigreturn.
 */
void kb_prot_store(volatile char *p);
extern const char kb_prot_resume[];

asm(".text\n"
    ".globl kb_prot_store\n"
    ".type kb_prot_store, @function\n"
    "kb_prot_store:\n"
    "	movb $1, (%rdi)\n"
    ".globl kb_prot_resume\n"
    "kb_prot_resume:\n"
    "	ret\n"
    ".size kb_prot_store, . - kb_prot_store\n");

static char *volatile prot_page;
static volatile unsigned long prot_faults;

static void segv_handler(int sig, siginfo_t *si, void *ucv)
{
	static const char msg[] = "kml-bench: unexpected SIGSEGV\n";
	ucontext_t *uc = ucv;
	greg_t *rip = &uc->uc_mcontext.gregs[REG_RIP];
	struct sigaction dfl;

	if (si->si_addr == prot_page &&
	    *rip == (greg_t)(uintptr_t)kb_prot_store) {
		*rip = (greg_t)(uintptr_t)kb_prot_resume;
		prot_faults++;
		return;
	}
	/* not ours: die of the fault, loudly */
	if (write(STDERR_FILENO, msg, sizeof(msg) - 1) < 0)
		sig = SIGSEGV;
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	sigaction(sig, &dfl, NULL);
}

static int setup_prot(struct bctx *c)
{
	c->pagesz = sysconf(_SC_PAGESIZE);
	c->page = mmap(NULL, c->pagesz, PROT_READ,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (c->page == MAP_FAILED) {
		c->page = NULL;
		return fail(c, "mmap");
	}
	prot_page = c->page;
	memset(&c->sa, 0, sizeof(c->sa));
	c->sa.sa_sigaction = segv_handler;
	c->sa.sa_flags = SA_SIGINFO;
	sigemptyset(&c->sa.sa_mask);
	if (sigaction(SIGSEGV, &c->sa, &c->old_sa))
		return fail(c, "sigaction SIGSEGV");
	c->saved_sig = SIGSEGV;
	return 0;
}

static int run_prot(struct bctx *c, unsigned long n)
{
	unsigned long i;

	prot_faults = 0;
	for (i = 0; i < n; i++)
		kb_prot_store(c->page);
	if (prot_faults != n)
		return failx(c, "%lu stores to a read-only page, %lu faults",
			     n, prot_faults);
	return 0;
}

/* ---- IPC round trips ---------------------------------------------- */

/* The echo child makes its calls the way the measuring parent does. */
static __attribute__((noreturn)) void echo_child(int rfd, int wfd)
{
	long r;
	char ch;

	for (;;) {
		if (opt.path == PATH_CALL)
			r = kml_syscall3(SYS_read, rfd, (long)&ch, 1);
		else
			r = read(rfd, &ch, 1);
		if (r == 0)
			_exit(0);
		if (r != 1)
			_exit(1);
		if (opt.path == PATH_CALL)
			r = kml_syscall3(SYS_write, wfd, (long)&ch, 1);
		else
			r = write(wfd, &ch, 1);
		if (r != 1)
			_exit(2);
	}
}

/* pfd: the parent's write and read ends; cfd: the child's read, write. */
static int start_echo(struct bctx *c, const int pfd[2], const int cfd[2])
{
	pid_t pid;

	c->wfd = pfd[0];
	c->rfd = pfd[1];
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		fail(c, "fork");
		close(cfd[0]);
		if (cfd[1] != cfd[0])
			close(cfd[1]);
		return -1;
	}
	if (pid == 0) {
		close(pfd[0]);
		if (pfd[1] != pfd[0])
			close(pfd[1]);
		echo_child(cfd[0], cfd[1]);
	}
	c->child = pid;
	close(cfd[0]);
	if (cfd[1] != cfd[0])
		close(cfd[1]);
	return 0;
}

static int setup_pipe(struct bctx *c)
{
	int down[2], up[2];
	int pfd[2], cfd[2];

	if (pipe(down))
		return fail(c, "pipe");
	if (pipe(up)) {
		fail(c, "pipe");
		close(down[0]);
		close(down[1]);
		return -1;
	}
	pfd[0] = down[1];
	pfd[1] = up[0];
	cfd[0] = down[0];
	cfd[1] = up[1];
	return start_echo(c, pfd, cfd);
}

static int setup_unix(struct bctx *c)
{
	int sv[2], pfd[2], cfd[2];

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		return fail(c, "socketpair(AF_UNIX, SOCK_STREAM)");
	pfd[0] = pfd[1] = sv[0];
	cfd[0] = cfd[1] = sv[1];
	return start_echo(c, pfd, cfd);
}

static int run_rtt(struct bctx *c, unsigned long n)
{
	char ch = 'x';
	ssize_t r;

	while (n--) {
		r = write(c->wfd, &ch, 1);
		if (r != 1)
			return io_fail(c, "write to echo child", r);
		r = read(c->rfd, &ch, 1);
		if (r != 1)
			return io_fail(c, "read from echo child", r);
	}
	return 0;
}

static int run_rtt_call(struct bctx *c, unsigned long n)
{
	char ch = 'x';
	long r;

	while (n--) {
		r = kml_syscall3(SYS_write, c->wfd, (long)&ch, 1);
		if (r != 1)
			return kfail(c, "write to echo child", r);
		r = kml_syscall3(SYS_read, c->rfd, (long)&ch, 1);
		if (r != 1)
			return r ? kfail(c, "read from echo child", r)
				 : failx(c, "read from echo child: end of file");
	}
	return 0;
}

/* ---- processes ---------------------------------------------------- */

static int run_fork_exit(struct bctx *c, unsigned long n)
{
	pid_t pid;

	fflush(NULL);
	while (n--) {
		pid = fork();
		if (pid < 0)
			return fail(c, "fork");
		if (pid == 0)
			_exit(0);
		if (wait_child(c, pid, "child"))
			return -1;
	}
	return 0;
}

/*
 * fork through libkml: clone(SIGCHLD) as glibc's fork() makes it (without
 * the TID bookkeeping, which only glibc's own child code needs); the child
 * makes no call but exit_group.
 */
static long kfork(void)
{
	return kml_syscall5(SYS_clone, SIGCHLD, 0, 0, 0, 0);
}

static __attribute__((noreturn)) void kexit(int status)
{
	for (;;)
		kml_syscall1(SYS_exit_group, status);
}

static int run_fork_exit_call(struct bctx *c, unsigned long n)
{
	long pid;

	while (n--) {
		pid = kfork();
		if (kerr(pid))
			return kfail(c, "clone", pid);
		if (pid == 0)
			kexit(0);
		if (kwait_child(c, pid, "child"))
			return -1;
	}
	return 0;
}

static int setup_exec(struct bctx *c)
{
	if (access(opt.exec_path, X_OK))
		return skip(c, "exec target %s: %s (use --exec PATH)",
			    opt.exec_path, strerror(errno));
	return 0;
}

static int run_fork_exec(struct bctx *c, unsigned long n)
{
	char *argv[] = { (char *)opt.exec_path, NULL };
	char *envp[] = { NULL };
	pid_t pid;

	fflush(NULL);
	while (n--) {
		pid = fork();
		if (pid < 0)
			return fail(c, "fork");
		if (pid == 0) {
			execve(opt.exec_path, argv, envp);
			_exit(127);
		}
		if (wait_child(c, pid, opt.exec_path))
			return -1;
	}
	return 0;
}

static int run_fork_exec_call(struct bctx *c, unsigned long n)
{
	char *argv[] = { (char *)opt.exec_path, NULL };
	char *envp[] = { NULL };
	long pid;

	while (n--) {
		pid = kfork();
		if (kerr(pid))
			return kfail(c, "clone", pid);
		if (pid == 0) {
			kml_syscall3(SYS_execve, (long)opt.exec_path,
				     (long)argv, (long)envp);
			kexit(127);
		}
		if (kwait_child(c, pid, opt.exec_path))
			return -1;
	}
	return 0;
}

/* ---- memory ------------------------------------------------------- */

static int setup_page_fault(struct bctx *c)
{
	c->pagesz = sysconf(_SC_PAGESIZE);
	return 0;
}

static int run_page_fault(struct bctx *c, unsigned long n)
{
	unsigned long k, i;
	size_t len;
	volatile char *p;

	while (n) {
		k = n < PF_CHUNK ? n : PF_CHUNK;
		len = k * c->pagesz;
		p = mmap(NULL, len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			return fail(c, "mmap");
		for (i = 0; i < k; i++)
			p[i * c->pagesz] = 1;
		if (munmap((void *)p, len))
			return fail(c, "munmap");
		n -= k;
	}
	return 0;
}

static int run_page_fault_call(struct bctx *c, unsigned long n)
{
	unsigned long k, i;
	size_t len;
	volatile char *p;
	long r;

	while (n) {
		k = n < PF_CHUNK ? n : PF_CHUNK;
		len = k * c->pagesz;
		r = kml_syscall6(SYS_mmap, 0, len, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (kerr(r))
			return kfail(c, "mmap", r);
		p = (volatile char *)r;
		for (i = 0; i < k; i++)
			p[i * c->pagesz] = 1;
		r = kml_syscall2(SYS_munmap, (long)p, len);
		if (r)
			return kfail(c, "munmap", r);
		n -= k;
	}
	return 0;
}

/* ---- the rows ----------------------------------------------------- */

#define SELECT_ROW(kind, what, n)					\
	{								\
		.name = "select_" #kind "_" #n,				\
		.label = "select() on " #n " " what,			\
		.unit = "op",						\
		.setup = setup_select_##kind,				\
		.run = run_select,					\
		.run_call = run_select_call,				\
		.arg = n,						\
	}

#define NO_CALL_SIGRETURN "the signal return (rt_sigreturn) is made by " \
	"glibc's restorer with the syscall instruction"

static const struct bench benches[] = {
	{ .name = "call", .label = "Empty function call (reference)",
	  .unit = "op", .run = run_call, .nosys = 1 },
	{ .name = "vdso_clock_gettime",
	  .label = "clock_gettime(CLOCK_MONOTONIC) via vDSO (reference)",
	  .unit = "op", .run = run_vdso, .nosys = 1 },
	{ .name = "getppid", .label = "Null syscall: getppid",
	  .unit = "op", .run = run_getppid, .run_call = run_getppid_call },
	{ .name = "getpid", .label = "getpid",
	  .unit = "op", .run = run_getpid, .run_call = run_getpid_call },
	{ .name = "read", .label = "read 1 byte from /dev/zero",
	  .unit = "op", .setup = setup_devzero, .run = run_read,
	  .run_call = run_read_call },
	{ .name = "write", .label = "write 1 byte to /dev/null",
	  .unit = "op", .setup = setup_devnull, .run = run_write,
	  .run_call = run_write_call },
	{ .name = "stat", .label = "stat",
	  .unit = "op", .setup = setup_file, .run = run_stat,
	  .run_call = run_stat_call },
	{ .name = "fstat", .label = "fstat",
	  .unit = "op", .setup = setup_file_fd, .run = run_fstat,
	  .run_call = run_fstat_call },
	{ .name = "open_close", .label = "open + close",
	  .unit = "op", .setup = setup_file, .run = run_open_close,
	  .run_call = run_open_close_call },
	SELECT_ROW(file, "file fds", 10),
	SELECT_ROW(file, "file fds", 100),
	SELECT_ROW(file, "file fds", 250),
	SELECT_ROW(file, "file fds", 500),
	SELECT_ROW(tcp, "TCP fds", 10),
	SELECT_ROW(tcp, "TCP fds", 100),
	SELECT_ROW(tcp, "TCP fds", 250),
	SELECT_ROW(tcp, "TCP fds", 500),
	{ .name = "sigaction", .label = "Signal handler installation",
	  .unit = "op", .setup = setup_usr1, .run = run_sigaction,
	  .run_call = run_sigaction_call },
	{ .name = "sig_deliver",
	  .label = "Signal delivery (kill self, SIGUSR1)",
	  .unit = "op", .setup = setup_usr1, .run = run_sig_deliver,
	  .no_call = NO_CALL_SIGRETURN },
	{ .name = "prot_fault",
	  .label = "Protection fault + SIGSEGV handler",
	  .unit = "op", .setup = setup_prot, .run = run_prot,
	  .no_call = NO_CALL_SIGRETURN },
	{ .name = "pipe_rtt", .label = "Pipe round trip, 1 byte",
	  .unit = "round trip", .setup = setup_pipe, .run = run_rtt,
	  .run_call = run_rtt_call },
	{ .name = "unix_rtt",
	  .label = "AF_UNIX stream round trip, 1 byte",
	  .unit = "round trip", .setup = setup_unix, .run = run_rtt,
	  .run_call = run_rtt_call },
	{ .name = "fork_exit", .label = "fork + _exit + waitpid",
	  .unit = "op", .run = run_fork_exit,
	  .run_call = run_fork_exit_call },
	{ .name = "fork_exec", .label = "fork + execve + waitpid",
	  .unit = "op", .setup = setup_exec, .run = run_fork_exec,
	  .run_call = run_fork_exec_call },
	{ .name = "page_fault",
	  .label = "Page fault, first touch of anonymous page",
	  .unit = "page", .setup = setup_page_fault, .run = run_page_fault,
	  .run_call = run_page_fault_call, .quantum = PF_CHUNK },
};

#define NBENCH	ARRAY_SIZE(benches)

/* ---- measurement -------------------------------------------------- */

static double tsc_ns_total, tsc_cyc_total;

static inline uint64_t tsc(void)
{
	_mm_lfence();
	return __rdtsc();
}

/* Runs n iterations; total elapsed ns and cycles. */
static int timed(struct bctx *c, unsigned long n, double *ns, double *cyc)
{
	double t0, t1;
	uint64_t c0, c1;
	int r;

	t0 = bench_now_ns();
	c0 = tsc();
	r = c->run(c, n);
	c1 = tsc();
	t1 = bench_now_ns();
	*ns = t1 - t0;
	*cyc = (double)(c1 - c0);
	return r;
}

static unsigned long round_up(unsigned long n, unsigned long q)
{
	return (n + q - 1) / q * q;
}

static int measure(struct bctx *c, struct result *r)
{
	unsigned long q = c->b->quantum ? c->b->quantum : 1;
	double target = opt.run_ms * 1e6;
	double ns, cyc, want, *vns, *vcyc;
	unsigned long n;
	int i, ret = -1;

	/* warm-up (also starts children, faults in code and data) */
	if (timed(c, q, &ns, &cyc))
		return -1;
	/* calibrate: grow n until a loop takes >= 1/8 of a run */
	n = q;
	for (;;) {
		if (timed(c, n, &ns, &cyc))
			return -1;
		if (ns >= target / 8 || n >= MAX_ITERS)
			break;
		n *= ns < target / 1000 ? 10 : 2;
	}
	want = ns > 0 ? n * (target / ns) : MAX_ITERS;
	if (want > MAX_ITERS)
		want = MAX_ITERS;
	n = (unsigned long)want;
	if (n < MIN_ITERS)
		n = MIN_ITERS;
	n = round_up(n, q);

	vns = calloc(2 * opt.runs, sizeof(*vns));
	if (!vns)
		return fail(c, "calloc");
	vcyc = vns + opt.runs;
	for (i = 0; i < opt.runs; i++) {
		if (timed(c, n, &ns, &cyc))
			goto out;
		tsc_ns_total += ns;
		tsc_cyc_total += cyc;
		vns[i] = ns / n;
		vcyc[i] = cyc / n;
	}
	r->iters = n;
	r->ns_med = bench_median(vns, opt.runs);	/* sorts */
	r->ns_min = vns[0];
	r->ns_max = vns[opt.runs - 1];
	r->cyc_med = bench_median(vcyc, opt.runs);
	r->cyc_min = vcyc[0];
	r->cyc_max = vcyc[opt.runs - 1];
	ret = 0;
out:
	free(vns);
	return ret;
}

static void run_bench(const struct bench *b, struct result *r)
{
	char scratch[REASON_MAX];
	struct bctx c = {
		.b = b,
		.reason = r->reason,
		.reason_sz = sizeof(r->reason),
		.fd = -1,
		.wfd = -1,
		.rfd = -1,
	};
	int st;

	r->reason[0] = 0;
	r->path = b->nosys ? "none" : path_name[opt.path];
	c.run = b->run;
	if (opt.path == PATH_CALL && !b->nosys) {
		c.run = b->run_call;
		if (!c.run) {
			r->status = ST_SKIP;
			r->path = NULL;
			snprintf(r->reason, sizeof(r->reason), "not available "
				 "through the call path: %s", b->no_call);
			return;
		}
	}
	st = b->setup ? b->setup(&c) : 0;
	if (st > 0)
		r->status = ST_SKIP;
	else if (st < 0)
		r->status = ST_FAIL;
	else
		r->status = measure(&c, r) ? ST_FAIL : ST_OK;
	/* cleanup may fail the row (echo child); keep an earlier reason */
	if (r->status != ST_OK) {
		c.reason = scratch;
		c.reason_sz = sizeof(scratch);
	}
	if (cleanup(&c) && r->status == ST_OK)
		r->status = ST_FAIL;
}

/* ---- system information ------------------------------------------- */

static struct bench_sysinfo sys;

/* ---- output: Markdown --------------------------------------------- */

static const struct result *set_find(const struct result_set *s,
				     const char *name)
{
	size_t i;

	for (i = 0; i < s->nrows; i++)
		if (!strcmp(s->rows[i].name, name))
			return &s->rows[i];
	return NULL;
}

/* A number with about 3-4 significant digits. */
static const char *fmt_num(char *buf, size_t sz, double v)
{
	if (v < 1)
		snprintf(buf, sz, "%.3f", v);
	else if (v < 10)
		snprintf(buf, sz, "%.2f", v);
	else if (v < 100)
		snprintf(buf, sz, "%.1f", v);
	else
		snprintf(buf, sz, "%.0f", v);
	return buf;
}

static double tsc_ghz(void)
{
	return tsc_ns_total > 0 ? tsc_cyc_total / tsc_ns_total : 0;
}

static void print_header(FILE *f)
{
	bench_md_header(f, &sys, "kml-bench: system call latency", opt.label);
	if (tsc_ghz() > 0)
		fprintf(f, "- tsc: %.3f GHz (cycles per ns against "
			"CLOCK_MONOTONIC)\n", tsc_ghz());
	else
		fprintf(f, "- tsc: unknown (nothing was timed)\n");
	fprintf(f, "- method: %d runs of about %d ms per row; median of "
		"the runs' mean time per operation\n", opt.runs, opt.run_ms);
	fprintf(f, "- file: %s\n", opt.file ? opt.file : file_err);
	fprintf(f, "- exec target: %s\n", opt.exec_path);
	fprintf(f, "- mode: %s (CPL %d)\n", kml_kernel_mode() ? "kernel" :
		"user", kml_kernel_mode() ? 0 : 3);
	fprintf(f, "- path: %s\n\n", opt.path == PATH_CALL ?
		"call (system calls through libkml: __vdso_kml_syscall)" :
		"syscall (system calls through the C library: the syscall "
		"instruction)");
}

static void print_main_table(FILE *f, const struct result_set *s)
{
	char a[32], b[32];
	size_t i;

	fprintf(f, "## Results%s%s%s%s\n\n", s->label ? ": " : "",
		s->label ? s->label : "", sys.emulated ? " — " : "",
		sys.emulated ? BENCH_EMULATED_NOTE : "");
	fprintf(f, "| Benchmark | ns (median) | cycles (median) | "
		"ns min–max | iterations/run |\n");
	fprintf(f, "|---|---:|---:|---:|---:|\n");
	for (i = 0; i < s->nrows; i++) {
		const struct result *r = &s->rows[i];

		if (r->status == ST_NOTRUN)
			continue;
		fputs("| ", f);
		bench_md_text(f, r->label);
		if (strcmp(r->unit, "op"))
			fprintf(f, " (per %s)", r->unit);
		if (r->status != ST_OK) {
			fprintf(f, " | %s: ", r->status == ST_SKIP ?
				"skipped" : "FAILED");
			bench_md_text(f, r->reason);
			fputs(" | | | |\n", f);
			continue;
		}
		fprintf(f, " | %s", fmt_num(a, sizeof(a), r->ns_med));
		fprintf(f, " | %s", fmt_num(a, sizeof(a), r->cyc_med));
		fprintf(f, " | %s–%s", fmt_num(a, sizeof(a), r->ns_min),
			fmt_num(b, sizeof(b), r->ns_max));
		fprintf(f, " | %lu |\n", r->iters);
	}
	fputc('\n', f);
}

struct layout_row {
	const char *title;
	const char *name;	/* benchmark row */
};

struct layout {
	const char *title;
	const char *unit;
	double div;		/* ns per unit */
	const struct layout_row *rows;
	size_t nrows;
};

static const struct layout_row kml_table2_rows[] = {
	{ "getpid", "getpid" },
	{ "read", "read" },
	{ "write", "write" },
	{ "stat", "stat" },
	{ "fstat", "fstat" },
};

static const struct layout_row thesis_table61_rows[] = {
	{ "Simple syscall", "getppid" },
	{ "Simple read", "read" },
	{ "Simple write", "write" },
	{ "Simple stat", "stat" },
	{ "Simple fstat", "fstat" },
	{ "Simple open/close", "open_close" },
	{ "Select on 10 fd's", "select_file_10" },
	{ "Select on 100 fd's", "select_file_100" },
	{ "Select on 250 fd's", "select_file_250" },
	{ "Select on 500 fd's", "select_file_500" },
	{ "Select on 10 tcp fd's", "select_tcp_10" },
	{ "Select on 100 tcp fd's", "select_tcp_100" },
	{ "Select on 250 tcp fd's", "select_tcp_250" },
	{ "Select on 500 tcp fd's", "select_tcp_500" },
	{ "Signal handler installation", "sigaction" },
	{ "Signal handler overhead", "sig_deliver" },
	{ "Protection fault", "prot_fault" },
	{ "Pipe latency", "pipe_rtt" },
	{ "AF_UNIX sock stream latency", "unix_rtt" },
	{ "Process fork+exit", "fork_exit" },
	{ "Process fork+execve", "fork_exec" },
};

static const struct layout layouts[] = {
	{ "KML paper Table 2 layout", "ns", 1,
	  kml_table2_rows, ARRAY_SIZE(kml_table2_rows) },
	{ "Usermode-kernel thesis Table 6.1 layout", "µs", 1000,
	  thesis_table61_rows, ARRAY_SIZE(thesis_table61_rows) },
};

/* One row per layout entry, one column per result set. */
static void print_layout(FILE *f, const struct layout *l,
			 const struct result_set *sets, size_t nsets)
{
	const struct result *r;
	size_t i, j;
	char buf[32];
	int any = 0;

	for (i = 0; i < l->nrows; i++)
		for (j = 0; j < nsets; j++) {
			r = set_find(&sets[j], l->rows[i].name);
			any |= r && r->status != ST_NOTRUN;
		}
	if (!any)
		return;

	fprintf(f, "## %s (%s)%s%s\n\n", l->title, l->unit,
		sys.emulated ? " — " : "", sys.emulated ? BENCH_EMULATED_NOTE : "");
	fputs("| Operation |", f);
	for (j = 0; j < nsets; j++) {
		fputc(' ', f);
		bench_md_text(f, sets[j].label ? sets[j].label : "measured");
		fprintf(f, " (%s) |", l->unit);
	}
	fputs("\n|---|", f);
	for (j = 0; j < nsets; j++)
		fputs("---:|", f);
	fputc('\n', f);
	for (i = 0; i < l->nrows; i++) {
		fprintf(f, "| %s |", l->rows[i].title);
		for (j = 0; j < nsets; j++) {
			r = set_find(&sets[j], l->rows[i].name);
			if (!r || r->status == ST_NOTRUN)
				fputs(" n/a |", f);
			else if (r->status == ST_OK)
				fprintf(f, " %s |", fmt_num(buf, sizeof(buf),
							    r->ns_med / l->div));
			else
				fprintf(f, " %s |", status_name[r->status]);
		}
		fputc('\n', f);
	}
	fputc('\n', f);
}

/* ---- output: JSON ------------------------------------------------- */

/* The seed layouts, so that a combination of runs can print them too. */
static void write_json_layouts(FILE *f)
{
	size_t i, j;

	fputs(", \"layouts\": [", f);
	for (i = 0; i < ARRAY_SIZE(layouts); i++) {
		const struct layout *l = &layouts[i];

		fprintf(f, "%s\n  {\"title\": ", i ? "," : "");
		bench_json_str(f, l->title);
		fputs(", \"unit\": ", f);
		bench_json_str(f, l->unit);
		fprintf(f, ", \"ns_per_unit\": %g, \"rows\": [", l->div);
		for (j = 0; j < l->nrows; j++) {
			fputs(j ? ", [" : "[", f);
			bench_json_str(f, l->rows[j].title);
			fputs(", ", f);
			bench_json_str(f, l->rows[j].name);
			fputc(']', f);
		}
		fputs("]}", f);
	}
	fputs("]", f);
}

static void write_json(FILE *f, const struct result_set *s)
{
	size_t i;
	int first = 1;

	bench_json_head(f, SCHEMA, opt.label, &sys);
	if (tsc_ghz() > 0)
		fprintf(f, ", \"tsc_ghz\": %.4f", tsc_ghz());
	else
		fputs(", \"tsc_ghz\": null", f);
	fprintf(f, ", \"runs\": %d, \"run_ms\": %d, \"file\": ",
		opt.runs, opt.run_ms);
	bench_json_str(f, opt.file);
	fputs(", \"exec\": ", f);
	bench_json_str(f, opt.exec_path);
	fprintf(f, ", \"path\": \"%s\", \"cpl\": %d, \"call_path\": %s, "
		"\"vdso_kml_syscall\": %s", path_name[opt.path],
		kml_kernel_mode() ? 0 : 3, kml_call_path() ? "true" : "false",
		kml_vdso_entry() ? "true" : "false");
	write_json_layouts(f);
	fputs(", \"rows\": [", f);
	for (i = 0; i < s->nrows; i++) {
		const struct result *r = &s->rows[i];
		int ok = r->status == ST_OK;

		if (r->status == ST_NOTRUN)
			continue;
		fprintf(f, "%s\n  {\"name\": ", first ? "" : ",");
		first = 0;
		bench_json_str(f, r->name);
		fputs(", \"label\": ", f);
		bench_json_str(f, r->label);
		fprintf(f, ", \"status\": \"%s\", \"reason\": ",
			status_name[r->status]);
		bench_json_str(f, ok ? NULL : r->reason);
		bench_json_num(f, "ns_median", r->ns_med, ok);
		bench_json_num(f, "ns_min", r->ns_min, ok);
		bench_json_num(f, "ns_max", r->ns_max, ok);
		bench_json_num(f, "cycles_median", r->cyc_med, ok);
		bench_json_num(f, "cycles_min", r->cyc_min, ok);
		bench_json_num(f, "cycles_max", r->cyc_max, ok);
		if (ok)
			fprintf(f, ", \"iters\": %lu", r->iters);
		else
			fputs(", \"iters\": null", f);
		fputs(", \"unit\": ", f);
		bench_json_str(f, r->unit);
		fputs(", \"path\": ", f);
		bench_json_str(f, r->path);
		fputc('}', f);
	}
	fputs("\n]}\n", f);
}

/* ---- options ------------------------------------------------------ */


static void usage(FILE *f)
{
	fprintf(f,
		"usage: %s [options]\n"
		"  --runs N          timed runs per row (default 5)\n"
		"  --run-ms MS       length of one run in ms (default 100)\n"
		"  --quick           --runs 3 --run-ms 20\n"
		"  --only A[,B...]   run only these rows (see --list)\n"
		"  --list            list the rows and exit\n"
		"  --json PATH       write JSON results to PATH ('-': stdout;\n"
		"                    the Markdown then goes to stderr)\n"
		"  --label TEXT      configuration label, copied into the JSON\n"
		"  --exec PATH       exec target of fork_exec (default %s)\n"
		"  --file PATH       file for stat/fstat/open/select\n"
		"                    (default: this program, /proc/self/exe)\n"
		"  --path P          system calls through 'syscall' (the C\n"
		"                    library; default) or 'call' (libkml's call\n"
		"                    path: kernel-mode processes only)\n"
		"  --expect-mode M   'user' or 'kernel': exit 3 unless this\n"
		"                    process runs in that mode\n"
		"  -v, --verbose     progress on stderr\n"
		"  -h, --help        this text\n",
		bench_prog, DEFAULT_EXEC);
}

static int find_bench(const char *name)
{
	size_t i;

	for (i = 0; i < NBENCH; i++)
		if (!strcmp(benches[i].name, name))
			return (int)i;
	return -1;
}

static void parse_only(const char *list, int *selected)
{
	char *copy = strdup(list), *tok, *save;
	int k, any = 0;
	size_t i;

	if (!copy) {
		perror("strdup");
		exit(1);
	}
	for (tok = strtok_r(copy, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		k = find_bench(tok);
		if (k < 0) {
			fprintf(stderr, "%s: unknown benchmark '%s'; valid "
				"names:", bench_prog, tok);
			for (i = 0; i < NBENCH; i++)
				fprintf(stderr, " %s", benches[i].name);
			fputc('\n', stderr);
			exit(2);
		}
		selected[k] = 1;
		any = 1;
	}
	free(copy);
	if (!any)
		bench_usage_error("--only needs at least one benchmark name");
}

static void resolve_file(const char *argv0, const char *given)
{
	struct stat st;
	ssize_t n;

	if (given) {
		if (stat(given, &st))
			bench_usage_error("--file %s: %s", given, strerror(errno));
		opt.file = given;
		return;
	}
	n = readlink("/proc/self/exe", file_buf, sizeof(file_buf) - 1);
	if (n > 0) {
		file_buf[n] = 0;
		if (!stat(file_buf, &st)) {
			opt.file = file_buf;
			return;
		}
	}
	if (strchr(argv0, '/') && !stat(argv0, &st)) {
		opt.file = argv0;
		return;
	}
	snprintf(file_err, sizeof(file_err), "no file to stat: "
		 "/proc/self/exe unusable (use --file PATH)");
}

/* What the command line asks for, beyond the options in opt. */
struct request {
	int selected[NBENCH];	/* --only: the rows asked for */
	int only;		/* --only was given */
	int list;		/* --list */
	int expect_kernel;	/* --expect-mode: 1 kernel, 0 user, -1 none */
	int quick, runs, run_ms;	/* --quick, --runs, --run-ms (-1: none) */
	const char *file;	/* --file */
};

/* The options into opt and req; usage errors exit with status 2. */
static void parse_options(int argc, char **argv, struct request *req)
{
	enum { O_RUNMS = 256, O_ONLY, O_LIST, O_EXEC, O_FILE, O_SCPATH,
	       O_EXPECT };
	static const struct option lopts[] = {
		{ "run-ms", required_argument, NULL, O_RUNMS },
		{ "only", required_argument, NULL, O_ONLY },
		{ "list", no_argument, NULL, O_LIST },
		{ "exec", required_argument, NULL, O_EXEC },
		{ "file", required_argument, NULL, O_FILE },
		{ "path", required_argument, NULL, O_SCPATH },
		{ "expect-mode", required_argument, NULL, O_EXPECT },
		BENCH_COMMON_OPTIONS,
		{ NULL, 0, NULL, 0 }
	};
	struct bench_common com = { .runs = -1, .usage = usage };
	int ch;

	req->run_ms = -1;
	req->expect_kernel = -1;
	while ((ch = getopt_long(argc, argv, "vh", lopts, NULL)) != -1) {
		switch (ch) {
		case O_RUNMS:
			req->run_ms = (int)bench_parse_long("--run-ms", optarg,
							    1, 60000);
			break;
		case O_ONLY:
			parse_only(optarg, req->selected);
			req->only = 1;
			break;
		case O_LIST:
			req->list = 1;
			break;
		case O_EXEC:
			if (!*optarg)
				bench_usage_error("--exec needs a path");
			opt.exec_path = optarg;
			break;
		case O_FILE:
			if (!*optarg)
				bench_usage_error("--file needs a path");
			req->file = optarg;
			break;
		case O_SCPATH:
			if (!strcmp(optarg, "syscall"))
				opt.path = PATH_SYSCALL;
			else if (!strcmp(optarg, "call"))
				opt.path = PATH_CALL;
			else
				bench_usage_error("invalid --path value '%s' "
					    "('syscall' or 'call')", optarg);
			break;
		case O_EXPECT:
			req->expect_kernel = bench_parse_expect_mode(optarg);
			break;
		default:	/* --runs, --quick, --json, --label, -v, -h */
			bench_common_option(ch, &com);
			break;
		}
	}
	bench_no_operands(argc, argv);
	opt.json = com.json;
	opt.label = com.label;
	opt.verbose = com.verbose;
	req->quick = com.quick;
	req->runs = com.runs;
}

/*
 * Can this process measure what it was asked to: the rows are complete,
 * the mode is the one expected, the call path is there for --path call?
 * 0, or the exit status (1: internal error, 3: not available here).
 */
static int check_available(const struct request *req)
{
	size_t i;

	for (i = 0; i < NBENCH; i++)
		if (!benches[i].nosys && !benches[i].run_call &&
		    !benches[i].no_call) {
			fprintf(stderr, "%s: internal error: row %s says "
				"nothing about the call path\n", bench_prog,
				benches[i].name);
			return 1;
		}
	if (!bench_in_expected_mode(req->expect_kernel))
		return 3;
	if (opt.path == PATH_CALL && !kml_call_path()) {
		fprintf(stderr, "%s: --path call: the call path is not "
			"available here: %s\n", bench_prog,
			!kml_kernel_mode() ? "this process runs in user mode "
			"(CPL 3); the call path is for kernel-mode processes "
			"(run a copy from /trusted)" :
			!kml_vdso_base() ? "there is no vDSO "
			"(AT_SYSINFO_EHDR is 0)" :
			"the vDSO has no __vdso_kml_syscall (LINUX_2.6): "
			"not a kml kernel with fast system calls");
		return 3;
	}
	return 0;
}

/* Measure the rows asked for into results; 1 if one failed. */
static int run_rows(const struct request *req, struct result *results)
{
	int failed = 0, done = 0, total = 0;
	size_t i;

	for (i = 0; i < NBENCH; i++) {
		results[i].name = benches[i].name;
		results[i].label = benches[i].label;
		results[i].unit = benches[i].unit;
		total += !req->only || req->selected[i];
	}
	for (i = 0; i < NBENCH; i++) {
		struct result *r = &results[i];

		if (req->only && !req->selected[i])
			continue;
		if (opt.verbose)
			fprintf(stderr, "[%2d/%d] %s ...", ++done, total,
				benches[i].name);
		run_bench(&benches[i], r);
		if (opt.verbose) {
			if (r->status == ST_OK)
				fprintf(stderr, " %.1f ns\n", r->ns_med);
			else
				fprintf(stderr, " %s: %s\n",
					status_name[r->status], r->reason);
		}
		failed |= r->status == ST_FAIL;
	}
	return failed;
}

/* The Markdown tables to out, the JSON to jf (if any); 0, or 1. */
static int report(FILE *out, FILE *jf, struct result *results)
{
	struct result_set set = { .label = opt.label, .rows = results,
				  .nrows = NBENCH };
	size_t i;

	print_header(out);
	print_main_table(out, &set);
	for (i = 0; i < ARRAY_SIZE(layouts); i++)
		print_layout(out, &layouts[i], &set, 1);
	fflush(out);
	if (jf) {
		write_json(jf, &set);
		if (bench_json_close(jf, opt.json))
			return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static struct request req;
	static struct result results[NBENCH];
	FILE *out = stdout, *jf;
	int rc, failed;
	size_t i;

	bench_set_prog(argv[0]);
	parse_options(argc, argv, &req);
	if (req.list) {
		for (i = 0; i < NBENCH; i++)
			printf("%-20s %s\n", benches[i].name,
			       benches[i].label);
		return 0;
	}
	rc = check_available(&req);
	if (rc)
		return rc;
	if (req.quick) {
		opt.runs = 3;
		opt.run_ms = 20;
	}
	if (req.runs > 0)
		opt.runs = req.runs;
	if (req.run_ms > 0)
		opt.run_ms = req.run_ms;
	resolve_file(argv[0] ? argv[0] : "", req.file);
	jf = bench_json_open(opt.json, &out);

	/* a dead echo child must fail a row, not kill us */
	signal(SIGPIPE, SIG_IGN);
	bench_gather_sysinfo(&sys);

	failed = run_rows(&req, results);
	if (report(out, jf, results))
		return 1;
	if (failed)
		fprintf(stderr, "%s: some rows failed\n", bench_prog);
	return failed ? 1 : 0;
}
