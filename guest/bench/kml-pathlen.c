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
 * With --json FILE: schema kml-pathlen/1 (the ready line's data, the
 * rounds run, the kernel command line and the CPU vulnerability files).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bench_util.h"

#include "kml.h"
#include "kml_klib.h"

#define SCHEMA		"kml-pathlen/1"
/* FLAGS_SIZE_32 of the kernel's kernel/futex/futex.h (not a uapi value) */
#define PL_FLAGS_SIZE_32	0x02
#define VULN_DIR	"/sys/devices/system/cpu/vulnerabilities"

enum { PATH_SYSCALL, PATH_CALL, PATH_KFUNC, NPATH };
static const char *const path_name[NPATH] = { "syscall", "call", "kfunc" };

typedef long (*site_fn)(long, long, long);

#define SITE_DECL(op) \
	long pl_##op##_syscall(long, long, long); \
	long pl_##op##_call(long, long, long); \
	long pl_##op##_kfunc(long, long, long); \
	extern const char pl_##op##_syscall_at[], pl_##op##_syscall_end[]; \
	extern const char pl_##op##_call_at[], pl_##op##_call_end[]; \
	extern const char pl_##op##_kfunc_at[], pl_##op##_kfunc_end[]
SITE_DECL(getppid);
SITE_DECL(read);
SITE_DECL(write);
SITE_DECL(futex_wake);
SITE_DECL(pipe_rtt);

#define SITES(op) \
	.fn = { pl_##op##_syscall, pl_##op##_call, pl_##op##_kfunc }, \
	.at = { pl_##op##_syscall_at, pl_##op##_call_at, pl_##op##_kfunc_at }, \
	.end = { pl_##op##_syscall_end, pl_##op##_call_end, pl_##op##_kfunc_end }

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
	long a[3];		/* the arguments, set by setup() */
	long expect;		/* the expected result */
	int selected;
};

static struct op ops[] = {
	{ "getppid", "getppid()", SITES(getppid) },
	{ "read", "read 1 byte from /dev/zero", SITES(read) },
	{ "write", "write 1 byte to /dev/null", SITES(write) },
	{ "futex_wake", "futex(FUTEX_WAKE_PRIVATE), no waiters", SITES(futex_wake) },
	{ "pipe_rtt", "pipe round trip: write 1 byte, read it back", SITES(pipe_rtt) },
};
#define NOPS (sizeof(ops) / sizeof(ops[0]))

static struct {
	int path;
	int expect_kernel;
	long warmup;
	long wait_s;
	const char *json;
	const char *label;
	int fast_syscall;
} opt = { .expect_kernel = -1, .warmup = 100, .wait_s = 600, .fast_syscall = -1 };

static void usage(FILE *f)
{
	fprintf(f, "usage: %s [--path syscall|call|kfunc] [--expect-mode user|kernel] "
		"[--only OP,...] [--warmup N] [--wait-s S] [--json FILE] "
		"[--label TEXT] [--fast-syscall 0|1|2] [-v]\noperations:", bench_prog);
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
	       PL_O_FAST };
	static const struct option lopts[] = {
		{ "path", required_argument, NULL, PL_O_PATH },
		{ "expect-mode", required_argument, NULL, PL_O_EXPECT },
		{ "only", required_argument, NULL, PL_O_ONLY },
		{ "warmup", required_argument, NULL, PL_O_WARMUP },
		{ "wait-s", required_argument, NULL, PL_O_WAIT },
		{ "fast-syscall", required_argument, NULL, PL_O_FAST },
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
		else if (ch == PL_O_FAST)
			opt.fast_syscall = bench_parse_long("--fast-syscall", optarg, 0, 2);
		else
			bench_common_option(ch, &com);
	}
	bench_no_operands(argc, argv);
	for (size_t i = 0; i < NOPS && !only; i++)
		ops[i].selected = 1;
	opt.json = com.json;
	opt.label = com.label;
}

/*
 * --fast-syscall N: the path of kernel-mode system calls to count
 * (kernel.kml_fast_syscall), set for this run and put back at exit.
 */
#define FAST_SYSCTL "/proc/sys/kernel/kml_fast_syscall"
static int fast_saved = -1;

static int fast_sysctl(int v)
{
	return bench_write_int(FAST_SYSCTL, v);
}

static void fast_restore(void)
{
	if (fast_saved >= 0 && fast_sysctl(fast_saved))
		fprintf(stderr, "%s: cannot put %s back to %d: %s\n", bench_prog,
			FAST_SYSCTL, fast_saved, strerror(errno));
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
	if (opt.fast_syscall >= 0) {
		FILE *f = fopen(FAST_SYSCTL, "r");

		if (!f || fscanf(f, "%d", &fast_saved) != 1)
			fast_saved = -1;
		if (f)
			fclose(f);
		if (fast_saved < 0 || fast_sysctl(opt.fast_syscall)) {
			fprintf(stderr, "%s: --fast-syscall %d: cannot set %s: %s\n",
				bench_prog, opt.fast_syscall, FAST_SYSCTL,
				fast_saved < 0 ? "not a kml kernel" : strerror(errno));
			return 3;
		}
		atexit(fast_restore);
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

static void set_args(struct op *o, long a1, long a2, long a3, long expect)
{
	o->a[0] = a1;
	o->a[1] = a2;
	o->a[2] = a3;
	o->expect = expect;
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
		r = o->fn[opt.path](o->a[0], o->a[1], o->a[2]);
		if (r != o->expect) {
			fprintf(stderr, "%s: %s returned %ld, expected %ld\n",
				bench_prog, o->name, r, o->expect);
			return -1;
		}
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
