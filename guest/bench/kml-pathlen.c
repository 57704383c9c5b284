// SPDX-License-Identifier: GPL-2.0
/*
 * kml-pathlen: the guest side of `./kml pathlen`, which counts the
 * instructions of a system call through QEMU's gdb stub.
 *
 * Each operation (getppid, read of one byte from /dev/zero, write of one
 * byte to /dev/null, futex wake without waiters, pipe round trip: write
 * one byte and read it back) enters the kernel at an instruction of its
 * own (pathlen-sites.S): the `syscall` instruction (--path syscall), the
 * `call` of __vdso_kml_syscall (--path call), or the `call` of
 * __vdso_kml_kcall with a handle to the kernel function that does the
 * operation's work (--path kfunc: __do_sys_getppid, ksys_read,
 * ksys_write, futex_wake).  The program
 *
 *   1. warms up: every operation --warmup times, results checked;
 *   2. prints one line on standard error,
 *        kml-pathlen: ready label=L pid=P cpl=C path=P vdso=0x.. done=0x..
 *          ktext=0x.. op=NAME,AT,END ...
 *      (AT: the address of the entering instruction, END: the address the
 *      kernel returns to; done: a flag; ktext: the kernel's _text);
 *   3. runs the operations in a loop, results checked, until the host has
 *      set the flag at `done` (through the gdb stub, while the process is
 *      stopped at a breakpoint) or --wait-s seconds have passed.
 *
 * The program is linked at its own address (guest/Makefile,
 * -Ttext-segment), far from every other static program of the guest, so
 * that only this process reaches the breakpoints.
 *
 * Exit status: 0 when the host set the flag, 1 when an operation failed
 * or nobody set the flag in time, 2 for a usage error, 3 when the mode
 * asked for (--expect-mode, --path call) is not available here.
 * With --json FILE: schema kml-pathlen/2 (the ready line's data, the
 * rounds run, the kernel command line, the CPU vulnerability files, and
 * the bugs and model name lines of /proc/cpuinfo).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/auxv.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_util.h"

#include "kml.h"
#include "kml_klib.h"

#define SCHEMA		"kml-pathlen/2"
/* FLAGS_SIZE_32 of the kernel's kernel/futex/futex.h (not a uapi value) */
#define PL_FLAGS_SIZE_32	0x02
#define VULN_DIR	"/sys/devices/system/cpu/vulnerabilities"

enum { PATH_SYSCALL, PATH_CALL, PATH_KFUNC, NPATH };
static const char *const path_name[NPATH] = { "syscall", "call", "kfunc" };

typedef long (*site_fn)(long, long, long, long);

#define SITE_DECL(op) \
	long pl_##op##_syscall(long, long, long, long); \
	long pl_##op##_call(long, long, long, long); \
	long pl_##op##_kfunc(long, long, long, long); \
	extern const char pl_##op##_syscall_at[], pl_##op##_syscall_end[]; \
	extern const char pl_##op##_call_at[], pl_##op##_call_end[]; \
	extern const char pl_##op##_kfunc_at[], pl_##op##_kfunc_end[]
SITE_DECL(getppid);
SITE_DECL(read);
SITE_DECL(write);
SITE_DECL(futex_wake);
SITE_DECL(pipe_rtt);
/* Operations without a kfunc site: the syscall and call paths only */
#define SITE_DECL2(op) \
	long pl_##op##_syscall(long, long, long, long); \
	long pl_##op##_call(long, long, long, long); \
	extern const char pl_##op##_syscall_at[], pl_##op##_syscall_end[]; \
	extern const char pl_##op##_call_at[], pl_##op##_call_end[]
SITE_DECL2(xpipe_rtt);
SITE_DECL2(fault);
SITE_DECL2(stat);
SITE_DECL2(fstat);
SITE_DECL2(open_close);
SITE_DECL2(select_file_10);
SITE_DECL2(select_file_100);
SITE_DECL2(select_tcp_10);
SITE_DECL2(select_tcp_100);
SITE_DECL2(sig_install);
SITE_DECL2(sig_deliver);
SITE_DECL2(prot_fault);
SITE_DECL2(unix_rtt);
SITE_DECL2(fork_exit);
SITE_DECL2(fork_exec);

#define SITES(op) \
	.fn = { pl_##op##_syscall, pl_##op##_call, pl_##op##_kfunc }, \
	.at = { pl_##op##_syscall_at, pl_##op##_call_at, pl_##op##_kfunc_at }, \
	.end = { pl_##op##_syscall_end, pl_##op##_call_end, pl_##op##_kfunc_end }
#define SITES2(op) \
	.fn = { pl_##op##_syscall, pl_##op##_call, NULL }, \
	.at = { pl_##op##_syscall_at, pl_##op##_call_at, NULL }, \
	.end = { pl_##op##_syscall_end, pl_##op##_call_end, NULL }

/* Used by pathlen-sites.S: the address of __vdso_kml_syscall */
void *pathlen_entry;
/* Used by pathlen-sites.S: __vdso_kml_kcall and the handles (--path kfunc) */
void *pathlen_kentry;
int pl_h_getppid, pl_h_read, pl_h_write, pl_h_futex_wake;
/* Set to 1 by the host through the gdb stub */
volatile int pathlen_done;

static char buf[64];
static int futex_word;
static int fd_zero, fd_null, pipe_fd[2];

struct op {
	const char *name;
	const char *label;
	site_fn fn[NPATH];
	const char *at[NPATH], *end[NPATH];
	long a[4];		/* the arguments, set by setup() */
	long expect;		/* the expected result */
	void (*prep)(struct op *);	/* before each call: fresh arguments */
	int (*post)(struct op *);	/* after it: 0, or -1 with a message */
	int (*setup)(struct op *);	/* once, when selected: 0, or -1 with a message */
	int selected;
	int nfds;		/* select_*: how many fds */
};

static void fault_prep(struct op *o);
static void select_prep(struct op *o);
static int sig_post(struct op *o);
static int prot_post(struct op *o);
static int file_setup(struct op *o);
static int select_file_setup(struct op *o);
static int select_tcp_setup(struct op *o);
static int sig_install_setup(struct op *o);
static int sig_deliver_setup(struct op *o);
static int prot_setup(struct op *o);
static int unix_setup(struct op *o);
static int fork_setup(struct op *o);
static int exec_setup(struct op *o);

static struct op ops[] = {
	{ "getppid", "getppid()", SITES(getppid) },
	{ "read", "read 1 byte from /dev/zero", SITES(read) },
	{ "write", "write 1 byte to /dev/null", SITES(write) },
	{ "futex_wake", "futex(FUTEX_WAKE_PRIVATE), no waiters", SITES(futex_wake) },
	{ "pipe_rtt", "pipe round trip: write 1 byte, read it back", SITES(pipe_rtt) },
	{ "xpipe_rtt", "pipe round trip across modes: write 1 byte, a process of the other "
	  "mode reads it and writes 1 byte back, read it", SITES2(xpipe_rtt) },
	{ "fault", "first touch of a fresh anonymous page (one store)", SITES2(fault),
	  .prep = fault_prep },
	/* the rows of kml-bench; the syscall and call paths only */
	{ "stat", "stat (newfstatat(AT_FDCWD, FILE, buf, 0))", SITES2(stat),
	  .setup = file_setup },
	{ "fstat", "fstat (newfstatat(fd, \"\", buf, AT_EMPTY_PATH))", SITES2(fstat),
	  .setup = file_setup },
	{ "open_close", "openat(AT_FDCWD, FILE, O_RDONLY) + close", SITES2(open_close),
	  .setup = file_setup },
	{ "select_file_10", "select (pselect6, zero timeout) on 10 regular-file fds",
	  SITES2(select_file_10), .prep = select_prep, .setup = select_file_setup, .nfds = 10 },
	{ "select_file_100", "select (pselect6, zero timeout) on 100 regular-file fds",
	  SITES2(select_file_100), .prep = select_prep, .setup = select_file_setup,
	  .nfds = 100 },
	{ "select_tcp_10", "select (pselect6, zero timeout) on 10 listening TCP sockets",
	  SITES2(select_tcp_10), .prep = select_prep, .setup = select_tcp_setup, .nfds = 10 },
	{ "select_tcp_100", "select (pselect6, zero timeout) on 100 listening TCP sockets",
	  SITES2(select_tcp_100), .prep = select_prep, .setup = select_tcp_setup,
	  .nfds = 100 },
	{ "sig_install", "rt_sigaction(SIGUSR2, handler, NULL)", SITES2(sig_install),
	  .setup = sig_install_setup },
	{ "sig_deliver", "kill(self, SIGUSR1): delivery, the handler, rt_sigreturn",
	  SITES2(sig_deliver), .setup = sig_deliver_setup, .post = sig_post },
	{ "prot_fault", "store to a read-only page: SIGSEGV, the handler moves RIP past the "
	  "store, rt_sigreturn", SITES2(prot_fault), .setup = prot_setup, .post = prot_post },
	{ "unix_rtt", "AF_UNIX stream round trip: write 1 byte, read it back (socketpair)",
	  SITES2(unix_rtt), .setup = unix_setup },
	{ "fork_exit", "fork (clone(SIGCHLD)) + child exit_group(0) + wait4",
	  SITES2(fork_exit), .setup = fork_setup },
	{ "fork_exec", "fork (clone(SIGCHLD)) + child execve of a static program that "
	  "exits 0 + wait4", SITES2(fork_exec), .setup = exec_setup },
};
#define NOPS (sizeof(ops) / sizeof(ops[0]))

static struct {
	int path;
	int expect_kernel;
	long warmup;
	long wait_s;
	const char *json;
	const char *label;
	const char *syscall_path;
	const char *echo;	/* --echo RFD,WFD: the partner of xpipe_rtt */
	const char *file;	/* stat, fstat, open_close, select_file_N */
	const char *exec;	/* fork_exec's program */
} opt = { .expect_kernel = -1, .warmup = 100, .wait_s = 600, .syscall_path = NULL,
	  .exec = "/usr/lib/kml/hello" };

static void usage(FILE *f)
{
	fprintf(f, "usage: %s [--path syscall|call|kfunc] [--expect-mode user|kernel] "
		"[--only OP,...] [--warmup N] [--wait-s S] [--json FILE] "
		"[--label TEXT] [--syscall-path complete|generic|bypass] [--echo RFD,WFD] [--file PATH] "
		"[--exec PATH] [-v]\n"
		"operations:", bench_prog);
	for (size_t i = 0; i < NOPS; i++)
		fprintf(f, " %s", ops[i].name);
	fputc('\n', f);
}

static void select_ops(const char *list)
{
	char copy[256], *tok, *save;

	if (strlen(list) >= sizeof(copy))
		bench_usage_error("--only: list too long");
	strcpy(copy, list);
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		size_t i;

		for (i = 0; i < NOPS && strcmp(ops[i].name, tok); i++)
			;
		if (i == NOPS)
			bench_usage_error("--only: unknown operation '%s'", tok);
		ops[i].selected = 1;
	}
}

static void parse_args(int argc, char **argv)
{
	enum { PL_O_PATH = 0x2000, PL_O_EXPECT, PL_O_ONLY, PL_O_WARMUP, PL_O_WAIT,
	       PL_O_SCPATH, PL_O_ECHO, PL_O_FILE, PL_O_EXEC };
	static const struct option lopts[] = {
		{ "path", required_argument, NULL, PL_O_PATH },
		{ "expect-mode", required_argument, NULL, PL_O_EXPECT },
		{ "only", required_argument, NULL, PL_O_ONLY },
		{ "warmup", required_argument, NULL, PL_O_WARMUP },
		{ "wait-s", required_argument, NULL, PL_O_WAIT },
		{ "syscall-path", required_argument, NULL, PL_O_SCPATH },
		{ "echo", required_argument, NULL, PL_O_ECHO },
		{ "file", required_argument, NULL, PL_O_FILE },
		{ "exec", required_argument, NULL, PL_O_EXEC },
		BENCH_COMMON_OPTIONS,
		{ 0 }
	};
	struct bench_common com = { .runs = -1, .usage = usage };
	int ch, only = 0;

	while ((ch = getopt_long(argc, argv, "vh", lopts, NULL)) != -1) {
		if (ch == PL_O_PATH && !strcmp(optarg, "syscall"))
			opt.path = PATH_SYSCALL;
		else if (ch == PL_O_PATH && !strcmp(optarg, "call"))
			opt.path = PATH_CALL;
		else if (ch == PL_O_PATH && !strcmp(optarg, "kfunc"))
			opt.path = PATH_KFUNC;
		else if (ch == PL_O_PATH)
			bench_usage_error("invalid --path value '%s'", optarg);
		else if (ch == PL_O_EXPECT)
			opt.expect_kernel = bench_parse_expect_mode(optarg);
		else if (ch == PL_O_ONLY)
			select_ops(optarg), only = 1;
		else if (ch == PL_O_WARMUP)
			opt.warmup = bench_parse_long("--warmup", optarg, 1, 1000000);
		else if (ch == PL_O_WAIT)
			opt.wait_s = bench_parse_long("--wait-s", optarg, 1, 86400);
		else if (ch == PL_O_SCPATH && (!strcmp(optarg, "complete") ||
					       !strcmp(optarg, "generic") ||
					       !strcmp(optarg, "bypass")))
			opt.syscall_path = optarg;
		else if (ch == PL_O_SCPATH)
			bench_usage_error("invalid --syscall-path value '%s': complete, generic or bypass",
					  optarg);
		else if (ch == PL_O_ECHO)
			opt.echo = optarg;
		else if (ch == PL_O_FILE)
			opt.file = optarg;
		else if (ch == PL_O_EXEC)
			opt.exec = optarg;
		else
			bench_common_option(ch, &com);
	}
	bench_no_operands(argc, argv);
	/* by default the operations of every path but the newer ones */
	for (size_t i = 0; i < NOPS && !only; i++)
		ops[i].selected = ops[i].fn[PATH_KFUNC] != NULL;
	for (size_t i = 0; i < NOPS; i++)
		if (ops[i].selected && !ops[i].fn[opt.path])
			bench_usage_error("--only: %s has no %s path", ops[i].name,
					  path_name[opt.path]);
	opt.json = com.json;
	opt.label = com.label;
}

/*
 * --syscall-path WORD: the path of kernel-mode system calls to count
 * (kernel.kml_syscall_path), set for this run and put back at exit.
 */
#define PATH_SYSCTL "/proc/sys/kernel/kml_syscall_path"
static char path_saved[32];

static int path_sysctl(const char *word)
{
	int fd = open(PATH_SYSCTL, O_WRONLY), r = 0;

	if (fd < 0)
		return -1;
	if (write(fd, word, strlen(word)) != (ssize_t)strlen(word))
		r = -1;
	close(fd);
	return r;
}

static void path_restore(void)
{
	if (path_saved[0] && path_sysctl(path_saved))
		fprintf(stderr, "%s: cannot put %s back to %s: %s\n", bench_prog,
			PATH_SYSCTL, path_saved, strerror(errno));
}

/*
 * --path kfunc: the handles of the kernel functions that do each
 * operation's work, and the address of __vdso_kml_kcall.  0, or 3.
 */
static int kfunc_open(int *h, const char *name)
{
	*h = kml_kfunc_open(name);
	if (*h >= 0)
		return 0;
	fprintf(stderr, "%s: --path kfunc: cannot open %s: %s\n", bench_prog,
		name, strerror(-*h));
	return 3;
}

static int kfunc_setup(void)
{
	const void *base = kml_vdso_base();

	if (!kml_kernel_mode()) {
		fprintf(stderr, "%s: --path kfunc: needs kernel mode\n", bench_prog);
		return 3;
	}
	pathlen_kentry = base ? kml_vdso_sym(base, "__vdso_kml_kcall", "LINUX_2.6",
					     KML_LOOKUP_AUTO) : NULL;
	if (!pathlen_kentry) {
		fprintf(stderr, "%s: --path kfunc: no __vdso_kml_kcall in the vDSO\n",
			bench_prog);
		return 3;
	}
	/* kernel functions read and write this process's memory */
	if (mlockall(MCL_CURRENT | MCL_FUTURE)) {
		fprintf(stderr, "%s: mlockall: %s\n", bench_prog, strerror(errno));
		return 3;
	}
	return kfunc_open(&pl_h_getppid, "__do_sys_getppid") ?:
	       kfunc_open(&pl_h_read, "ksys_read") ?:
	       kfunc_open(&pl_h_write, "ksys_write") ?:
	       kfunc_open(&pl_h_futex_wake, "futex_wake");
}

/* 0, or 3 (with a message) when the mode asked for is not available */
static int check_available(void)
{
	if (!bench_in_expected_mode(opt.expect_kernel))
		return 3;
	if (opt.syscall_path) {
		FILE *f = fopen(PATH_SYSCTL, "r");

		if (!f || !fgets(path_saved, sizeof(path_saved), f))
			path_saved[0] = 0;
		if (f)
			fclose(f);
		path_saved[strcspn(path_saved, "\n")] = 0;
		if (!path_saved[0] || path_sysctl(opt.syscall_path)) {
			fprintf(stderr, "%s: --syscall-path %s: cannot set %s: %s\n",
				bench_prog, opt.syscall_path, PATH_SYSCTL,
				!path_saved[0] ? "not a kml kernel" : strerror(errno));
			return 3;
		}
		atexit(path_restore);
	}
	if (opt.path == PATH_KFUNC)
		return kfunc_setup();
	if (opt.path != PATH_CALL)
		return 0;
	if (!kml_call_path()) {
		fprintf(stderr, "%s: --path call: the call path is not available "
			"here (%s)\n", bench_prog, kml_kernel_mode() ?
			"no __vdso_kml_syscall in the vDSO" : "user mode, CPL 3");
		return 3;
	}
	pathlen_entry = kml_vdso_entry();
	return 0;
}

/*
 * xpipe_rtt: two blocking pipes to a partner of the other mode, which
 * reads one byte and writes it back (kml-pathlen --echo RFD,WFD): the
 * /trusted copy of this program for an ordinary process (copied there and
 * removed once it runs), /usr/bin/kml-pathlen for a kernel-mode one.
 */
#define ECHO_TRUSTED	"/trusted/kml-pathlen-echo"
#define ECHO_ORDINARY	"/usr/bin/kml-pathlen"
static int xpipe_to[2], xpipe_from[2];
static pid_t partner = -1;

static int copy_self(const char *to)
{
	char b[65536];
	ssize_t n;
	int in = open("/proc/self/exe", O_RDONLY), out;

	if (in < 0)
		return -1;
	unlink(to);
	out = open(to, O_WRONLY | O_CREAT | O_EXCL, 0755);
	if (out < 0) {
		close(in);
		return -1;
	}
	while ((n = read(in, b, sizeof(b))) > 0)
		if (write(out, b, n) != n) {
			n = -1;
			break;
		}
	close(in);
	if (fchmod(out, 0755) || close(out) || n < 0)
		return -1;
	return 0;
}

static void xpipe_stop(void)
{
	int st;

	if (partner <= 0)
		return;
	close(xpipe_to[1]);	/* the partner reads end of file and ends */
	close(xpipe_from[0]);
	waitpid(partner, &st, 0);
	partner = -1;
}

static int xpipe_setup(void)
{
	int kernel = kml_kernel_mode();
	const char *prog = kernel ? ECHO_ORDINARY : ECHO_TRUSTED;
	char fds[32], c = 'x';
	bool answered;

	if (pipe2(xpipe_to, O_CLOEXEC) || pipe2(xpipe_from, O_CLOEXEC)) {
		perror("kml-pathlen: xpipe_rtt: pipe");
		return -1;
	}
	if (!kernel && copy_self(ECHO_TRUSTED)) {
		fprintf(stderr, "%s: xpipe_rtt: cannot copy myself to %s: %s\n",
			bench_prog, ECHO_TRUSTED, strerror(errno));
		return -1;
	}
	/* A partner that dies must not kill us silently at the check below */
	signal(SIGPIPE, SIG_IGN);
	partner = fork();
	if (partner < 0) {
		perror("kml-pathlen: fork");
		if (!kernel)
			unlink(ECHO_TRUSTED);
		return -1;
	}
	if (partner == 0) {
		fcntl(xpipe_to[0], F_SETFD, 0);
		fcntl(xpipe_from[1], F_SETFD, 0);
		snprintf(fds, sizeof(fds), "%d,%d", xpipe_to[0], xpipe_from[1]);
		execl(prog, prog, "--echo", fds, "--expect-mode", kernel ? "user" : "kernel",
		      (char *)NULL);
		fprintf(stderr, "%s: cannot run %s: %s\n", bench_prog, prog, strerror(errno));
		_exit(127);
	}
	close(xpipe_to[0]);
	close(xpipe_from[1]);
	atexit(xpipe_stop);
	/* one round trip: the partner runs, in the other mode */
	answered = write(xpipe_to[1], &c, 1) == 1 && read(xpipe_from[0], &c, 1) == 1;
	/* Running or not, the partner needs its copy in /trusted no more */
	if (!kernel)
		unlink(ECHO_TRUSTED);
	if (!answered) {
		fprintf(stderr, "%s: xpipe_rtt: the partner %s (%s mode) did not answer\n",
			bench_prog, prog, kernel ? "user" : "kernel");
		return -1;
	}
	return 0;
}

/* kml-pathlen --echo RFD,WFD: xpipe_rtt's partner */
static int echo_main(void)
{
	int r, w;
	char c;

	if (sscanf(opt.echo, "%d,%d", &r, &w) != 2)
		bench_usage_error("--echo RFD,WFD");
	if (!bench_in_expected_mode(opt.expect_kernel))
		return 3;
	for (;;) {
		ssize_t n = read(r, &c, 1);

		if (n == 0)
			return 0;
		if (n != 1 || write(w, &c, 1) != 1) {
			perror("kml-pathlen --echo");
			return 1;
		}
	}
}

/*
 * fault: pages of an anonymous mapping (no huge pages), each touched
 * once; when all have been, MADV_DONTNEED makes them fresh again.
 */
#define FAULT_PAGES	1024
#define PAGE		4096
static char *fault_mem;
static long fault_next;

static int fault_setup(void)
{
	fault_mem = mmap(NULL, FAULT_PAGES * PAGE, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (fault_mem == MAP_FAILED) {
		perror("kml-pathlen: fault: mmap");
		return -1;
	}
	madvise(fault_mem, FAULT_PAGES * PAGE, MADV_NOHUGEPAGE);
	return 0;
}

static void fault_prep(struct op *o)
{
	if (fault_next == FAULT_PAGES) {
		madvise(fault_mem, FAULT_PAGES * PAGE, MADV_DONTNEED);
		fault_next = 0;
	}
	o->a[0] = (long)(fault_mem + fault_next++ * PAGE);
}

static void set_args(struct op *o, long a1, long a2, long a3, long expect)
{
	o->a[0] = a1;
	o->a[1] = a2;
	o->a[2] = a3;
	o->expect = expect;
}

/*
 * The rows of kml-bench.  stat, fstat, open_close and select_file_N use
 * one file: --file, else /usr/bin/kml-pathlen (the same path in every
 * mode: the kernel-mode copy in /trusted stats the ordinary one), else
 * this program itself.
 */
#define DEFAULT_FILE	"/usr/bin/kml-pathlen"
static char file_path[4096];
static struct stat file_st;
static int file_fd = -1;

static int file_setup(struct op *o)
{
	ssize_t n;

	if (!file_path[0]) {
		if (opt.file)
			snprintf(file_path, sizeof(file_path), "%s", opt.file);
		else if (!access(DEFAULT_FILE, R_OK))
			strcpy(file_path, DEFAULT_FILE);
		else if ((n = readlink("/proc/self/exe", file_path,
				       sizeof(file_path) - 1)) > 0)
			file_path[n] = 0;
		file_fd = open(file_path, O_RDONLY | O_CLOEXEC);
		if (file_fd < 0) {
			fprintf(stderr, "%s: %s: cannot open %s: %s\n", bench_prog, o->name,
				file_path, strerror(errno));
			return -1;
		}
	}
	if (!strcmp(o->name, "stat"))
		set_args(o, AT_FDCWD, (long)file_path, (long)&file_st, 0);
	else if (!strcmp(o->name, "fstat"))
		set_args(o, file_fd, (long)"", (long)&file_st, 0);
	else if (!strcmp(o->name, "open_close"))
		set_args(o, AT_FDCWD, (long)file_path, O_RDONLY, 0);
	o->a[3] = !strcmp(o->name, "fstat") ? AT_EMPTY_PATH : 0;
	return 0;
}

/* select_*_N: a set of N fds, copied into the call's fd_set before each call */
struct sel {
	fd_set set, rd;
	struct timespec ts;
	int maxfd;
};
static struct sel sels[4];
static int nsels;

static int sel_add(struct op *o, struct sel *q, int fd, const char *what)
{
	if (fd < 0 || fd >= FD_SETSIZE) {
		fprintf(stderr, "%s: %s: %s: %s\n", bench_prog, o->name, what,
			fd < 0 ? strerror(errno) : "fd beyond FD_SETSIZE");
		if (fd >= 0)
			close(fd);
		return -1;
	}
	FD_SET(fd, &q->set);
	if (fd > q->maxfd)
		q->maxfd = fd;
	return 0;
}

static struct sel *sel_new(struct op *o)
{
	struct sel *q = &sels[nsels++];

	FD_ZERO(&q->set);
	q->maxfd = -1;
	o->a[3] = (long)q;	/* select_prep's; the site ignores a4 */
	return q;
}

static int select_file_setup(struct op *o)
{
	struct sel *q;

	if (file_setup(o))
		return -1;
	q = sel_new(o);
	for (int i = 0; i < o->nfds; i++)
		if (sel_add(o, q, open(file_path, O_RDONLY | O_CLOEXEC), "open"))
			return -1;
	o->expect = o->nfds;	/* regular files are always ready */
	return 0;
}

static int select_tcp_setup(struct op *o)
{
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct sel *q = sel_new(o);

	for (int i = 0; i < o->nfds; i++) {
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

		if (sel_add(o, q, fd, "socket(AF_INET, SOCK_STREAM)"))
			return -1;
		if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) || listen(fd, 1)) {
			fprintf(stderr, "%s: %s: bind/listen on 127.0.0.1: %s\n",
				bench_prog, o->name, strerror(errno));
			return -1;
		}
	}
	o->expect = 0;		/* nobody connects: no listening socket is ready */
	return 0;
}

static void select_prep(struct op *o)
{
	struct sel *q = (struct sel *)o->a[3];

	q->rd = q->set;
	q->ts.tv_sec = q->ts.tv_nsec = 0;
	o->a[0] = q->maxfd + 1;
	o->a[1] = (long)&q->rd;
	o->a[2] = (long)&q->ts;
}

/* sig_install: the kernel's struct sigaction that glibc's sigaction() made */
static struct {
	void *handler;
	unsigned long flags;
	void *restorer;
	unsigned long mask;
} ksa;
static volatile unsigned long usr_signals;
static unsigned long usr_before;

static void usr_handler(int sig)
{
	(void)sig;
	usr_signals++;
}

static int sig_install_setup(struct op *o)
{
	struct sigaction sa = { .sa_handler = usr_handler };

	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGUSR2, &sa, NULL) ||
	    syscall(SYS_rt_sigaction, SIGUSR2, NULL, &ksa, sizeof(ksa.mask))) {
		fprintf(stderr, "%s: sig_install: sigaction: %s\n", bench_prog, strerror(errno));
		return -1;
	}
	set_args(o, SIGUSR2, (long)&ksa, 0, 0);
	o->a[3] = sizeof(ksa.mask);
	return 0;
}

static int sig_deliver_setup(struct op *o)
{
	struct sigaction sa = { .sa_handler = usr_handler };

	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGUSR1, &sa, NULL)) {
		fprintf(stderr, "%s: sig_deliver: sigaction: %s\n", bench_prog, strerror(errno));
		return -1;
	}
	set_args(o, getpid(), SIGUSR1, 0, 0);
	return 0;
}

static int sig_post(struct op *o)
{
	if (usr_signals == usr_before + 1) {
		usr_before = usr_signals;
		return 0;
	}
	fprintf(stderr, "%s: %s: the handler ran %lu times, not once\n", bench_prog, o->name,
		usr_signals - usr_before);
	return -1;
}

/*
 * prot_fault: a store to a read-only page; the SIGSEGV handler moves the
 * interrupted RIP from the store (the site's _at) to the instruction
 * after it (_end), as kml-bench's prot_fault row does.
 */
static char *prot_page;
static volatile unsigned long prot_faults;
static unsigned long prot_before;

static void segv_handler(int sig, siginfo_t *si, void *ucv)
{
	ucontext_t *uc = ucv;
	greg_t *rip = &uc->uc_mcontext.gregs[REG_RIP];

	for (size_t i = 0; i < NOPS; i++)
		if (!strcmp(ops[i].name, "prot_fault") && si->si_addr == prot_page &&
		    *rip == (greg_t)ops[i].at[opt.path]) {
			*rip = (greg_t)ops[i].end[opt.path];
			prot_faults++;
			return;
		}
	signal(sig, SIG_DFL);	/* not ours: die of it */
}

static int prot_setup(struct op *o)
{
	struct sigaction sa = { .sa_sigaction = segv_handler, .sa_flags = SA_SIGINFO };

	prot_page = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	sigemptyset(&sa.sa_mask);
	if (prot_page == MAP_FAILED || sigaction(SIGSEGV, &sa, NULL)) {
		fprintf(stderr, "%s: prot_fault: setup: %s\n", bench_prog, strerror(errno));
		return -1;
	}
	set_args(o, (long)prot_page, 0, 0, 0);
	return 0;
}

static int prot_post(struct op *o)
{
	if (prot_faults == prot_before + 1) {
		prot_before = prot_faults;
		return 0;
	}
	fprintf(stderr, "%s: %s: %lu faults handled, not 1\n", bench_prog, o->name,
		prot_faults - prot_before);
	return -1;
}

/* unix_rtt: a non-blocking AF_UNIX stream socketpair, one process */
static int unix_setup(struct op *o)
{
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv)) {
		fprintf(stderr, "%s: unix_rtt: socketpair: %s\n", bench_prog, strerror(errno));
		return -1;
	}
	set_args(o, sv[0], sv[1], (long)buf, 1);
	return 0;
}

/* fork_exit, fork_exec: the wait status lands here */
static int wait_status;
static char *exec_argv[2];

static int fork_setup(struct op *o)
{
	set_args(o, (long)&wait_status, 0, 0, 0);
	return 0;
}

static int exec_setup(struct op *o)
{
	if (access(opt.exec, X_OK)) {
		fprintf(stderr, "%s: fork_exec: %s: %s (--exec PATH)\n", bench_prog, opt.exec,
			strerror(errno));
		return -1;
	}
	exec_argv[0] = (char *)opt.exec;
	set_args(o, (long)&wait_status, (long)exec_argv, 0, 0);
	return 0;
}

static int setup(void)
{
	fd_zero = open("/dev/zero", O_RDONLY);
	fd_null = open("/dev/null", O_WRONLY);
	if (fd_zero < 0 || fd_null < 0 || pipe2(pipe_fd, O_NONBLOCK)) {
		perror("kml-pathlen: setup");
		return -1;
	}
	set_args(&ops[0], 0, 0, 0, getppid());
	set_args(&ops[1], fd_zero, (long)buf, 1, 1);
	set_args(&ops[2], fd_null, (long)buf, 1, 1);
	/* futex_wake() takes the kernel's flags: FLAGS_SIZE_32, private */
	set_args(&ops[3], (long)&futex_word,
		 opt.path == PATH_KFUNC ? PL_FLAGS_SIZE_32 : FUTEX_WAKE_PRIVATE, 1, 0);
	set_args(&ops[4], pipe_fd[1], pipe_fd[0], (long)buf, 1);
	if (ops[5].selected && xpipe_setup())
		return -1;
	set_args(&ops[5], xpipe_to[1], xpipe_from[0], (long)buf, 1);
	if (ops[6].selected && fault_setup())
		return -1;
	set_args(&ops[6], 0, 0, 0, 0);
	for (size_t i = 0; i < NOPS; i++)
		if (ops[i].selected && ops[i].setup && ops[i].setup(&ops[i]))
			return -1;
	pathlen_done = 0;	/* its page is present: the host can write it */
	return 0;
}

/* Every selected operation once: 0, or -1 with a message */
static int round_once(void)
{
	for (size_t i = 0; i < NOPS; i++) {
		struct op *o = &ops[i];
		long r;

		if (!o->selected)
			continue;
		if (o->prep)
			o->prep(o);
		r = o->fn[opt.path](o->a[0], o->a[1], o->a[2], o->a[3]);
		if (r != o->expect) {
			fprintf(stderr, "%s: %s returned %ld, expected %ld\n",
				bench_prog, o->name, r, o->expect);
			return -1;
		}
		if (o->post && o->post(o))
			return -1;
	}
	return 0;
}

/* The kernel's _text from /proc/kallsyms (0: not readable) */
static unsigned long kernel_text(void)
{
	char line[256], name[128], type;
	unsigned long addr, found = 0;
	FILE *f = fopen("/proc/kallsyms", "r");

	if (!f)
		return 0;
	while (!found && fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx %c %127s", &addr, &type, name) == 3 &&
		    !strcmp(name, "_text"))
			found = addr;
	fclose(f);
	return found;
}

static void print_ready(unsigned long ktext)
{
	fprintf(stderr, "kml-pathlen: ready label=%s pid=%d cpl=%d path=%s "
		"vdso=%#lx done=%#lx ktext=%#lx", opt.label ? opt.label : "-",
		getpid(), kml_kernel_mode() ? 0 : 3, path_name[opt.path],
		getauxval(AT_SYSINFO_EHDR), (unsigned long)&pathlen_done, ktext);
	for (size_t i = 0; i < NOPS; i++)
		if (ops[i].selected)
			fprintf(stderr, " op=%s,%p,%p", ops[i].name,
				(const void *)ops[i].at[opt.path],
				(const void *)ops[i].end[opt.path]);
	fputc('\n', stderr);
}

/* Rounds until the host sets the flag (or the time is up: -1) */
static long wait_for_host(void)
{
	double limit = bench_now_ns() + opt.wait_s * 1e9;
	long rounds = 0;

	while (!pathlen_done) {
		if (round_once())
			return -2;
		if (++rounds % 256 == 0 && bench_now_ns() > limit) {
			fprintf(stderr, "%s: nobody set the done flag within %ld s "
				"(run through ./kml pathlen)\n", bench_prog, opt.wait_s);
			return -1;
		}
	}
	return rounds;
}

static void json_vulnerabilities(FILE *f)
{
	DIR *d = opendir(VULN_DIR);
	struct dirent *e;
	const char *sep = "";

	fputs(", \"vulnerabilities\": {", f);
	while (d && (e = readdir(d))) {
		char path[512], text[512] = "";
		FILE *v;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", VULN_DIR, e->d_name);
		v = fopen(path, "r");
		if (!v)
			continue;
		if (!fgets(text, sizeof(text), v))
			text[0] = 0;
		fclose(v);
		bench_strip_nl(text);
		fprintf(f, "%s", sep);
		bench_json_str(f, e->d_name);
		fputs(": ", f);
		bench_json_str(f, text);
		sep = ", ";
	}
	if (d)
		closedir(d);
	fputc('}', f);
}

/* The value of the first "KEY\t: value" line of /proc/cpuinfo, as JSON */
static void json_cpuinfo(FILE *f, const char *json_key, const char *key)
{
	char line[4096];
	size_t n = strlen(key);
	FILE *c = fopen("/proc/cpuinfo", "r");
	const char *v = NULL;

	while (c && fgets(line, sizeof(line), c))
		if (!strncmp(line, key, n) && (line[n] == ' ' || line[n] == '\t') &&
		    (v = strchr(line, ':'))) {
			v++;
			v += *v == ' ';
			break;
		}
	fprintf(f, ", \"%s\": ", json_key);
	if (v) {
		bench_strip_nl(line);
		bench_json_str(f, v);
	} else {
		fputs("null", f);
	}
	if (c)
		fclose(c);
}

static void write_json(FILE *f, const struct bench_sysinfo *si, long rounds,
		       unsigned long ktext)
{
	const char *sep = "";

	bench_json_head(f, SCHEMA, opt.label, si);
	fprintf(f, ", \"cpl\": %d, \"path\": \"%s\", \"pid\": %d, \"warmup\": %ld"
		", \"rounds\": %ld, \"done\": %s, \"ktext\": \"%#lx\""
		", \"vdso\": \"%#lx\"", kml_kernel_mode() ? 0 : 3,
		path_name[opt.path], getpid(), opt.warmup, rounds < 0 ? 0 : rounds,
		pathlen_done ? "true" : "false", ktext, getauxval(AT_SYSINFO_EHDR));
	json_vulnerabilities(f);
	json_cpuinfo(f, "cpu_bugs", "bugs");
	json_cpuinfo(f, "cpu_model_name", "model name");
	fputs(", \"ops\": [", f);
	for (size_t i = 0; i < NOPS; i++) {
		if (!ops[i].selected)
			continue;
		fprintf(f, "%s{\"name\": \"%s\", \"label\": ", sep, ops[i].name);
		bench_json_str(f, ops[i].label);
		fprintf(f, ", \"at\": \"%p\", \"end\": \"%p\"}",
			(const void *)ops[i].at[opt.path],
			(const void *)ops[i].end[opt.path]);
		sep = ", ";
	}
	fputs("]}\n", f);
}

int main(int argc, char **argv)
{
	struct bench_sysinfo si;
	unsigned long ktext;
	FILE *jf, *md = stdout;
	long rounds;
	int rc;

	bench_set_prog(argv[0]);
	parse_args(argc, argv);
	if (opt.echo)
		return echo_main();
	rc = check_available();
	if (rc)
		return rc;
	jf = bench_json_open(opt.json, &md);
	bench_gather_sysinfo(&si);
	ktext = kernel_text();
	if (setup())
		return 1;
	for (long i = 0; i < opt.warmup; i++)
		if (round_once())
			return 1;
	print_ready(ktext);
	rounds = wait_for_host();
	fprintf(md, "%s: %ld rounds while the host counted, %s\n", bench_prog,
		rounds < 0 ? 0 : rounds, pathlen_done ? "done" : "not done");
	if (jf) {
		write_json(jf, &si, rounds, ktext);
		if (bench_json_close(jf, opt.json))
			return 1;
	}
	return rounds < 0 ? 1 : 0;
}
