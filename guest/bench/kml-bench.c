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
 * that performs the operation n times, and a generic cleanup; the rows are
 * lmbench-style families, one file each (lat.h: lat_syscall.c, lat_fs.c,
 * lat_select.c, lat_sig.c, lat_ipc.c, lat_proc.c, lat_pagefault.c).  The
 * loop is timed with CLOCK_MONOTONIC (ns) and with lfence+rdtsc (cycles)
 * by bench_measure() (bench_util.c): a row is warmed up, then n is
 * calibrated by growing it until one loop takes at least 1/8 of --run-ms,
 * and scaled so that one run takes about --run-ms (at least 3 operations
 * per run).  --runs runs follow; each run gives the mean time per
 * operation over its n iterations (loop overhead included, not
 * subtracted).  The median of the runs is reported, with the runs' min
 * and max.  The TSC frequency is estimated from all timed runs.
 *
 * Output: one line per row on stdout (stderr when the JSON goes to
 * stdout), and with --json the results as JSON (schema kml-bench/2: /1
 * plus the path, the CPL and the "seed layouts", arranged like KML paper
 * Table 2 and the usermode-kernel thesis Table 6.1), which ./kml bench
 * combines over several runs and renders as tables.
 * When the kernel command line says kml.accel=tcg, the results are marked
 * EMULATED: QEMU TCG timings are not hardware timings.
 *
 * Exit status: 0 when every row is ok or skipped, 1 when a row failed,
 * 2 for a usage error, 3 when the mode asked for (--expect-mode, --path
 * call) is not available here.
 *
 * Build: guest/Makefile (kml-bench.c lat_*.c bench_util.c libkml.a)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_util.h"
#include "kml.h"
#include "lat.h"

#define SCHEMA		"kml-bench/2"
#define DEFAULT_EXEC	"/usr/lib/kml/hello"
#define MAX_ROWS	64

static const char *const path_name[] = {
	[PATH_SYSCALL] = "syscall",
	[PATH_CALL] = "call",
};

struct lat_options lat_opt = {
	.runs = 5,
	.run_ms = 100,
	.exec_path = DEFAULT_EXEC,
};

static char file_buf[PATH_MAX];

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
	char reason[LAT_REASON_MAX];
	double ns_med, ns_min, ns_max;
	double cyc_med, cyc_min, cyc_max;
	unsigned long iters;
};

/* The results of one configuration. */
struct result_set {
	const char *label;
	const struct result *rows;
	size_t nrows;
};

/* ---- the rows: the families in the order of the table -------------- */

static const struct lat_family *const families[] = {
	&lat_syscall, &lat_fs, &lat_select, &lat_sig, &lat_ipc, &lat_proc,
	&lat_pagefault,
};

static struct lat_row rows[MAX_ROWS];
static size_t nrows;

static void collect_rows(void)
{
	size_t i, j;

	for (i = 0; i < LAT_ARRAY_SIZE(families); i++)
		for (j = 0; j < families[i]->nrows; j++) {
			if (nrows == MAX_ROWS) {
				fprintf(stderr, "%s: internal error: more than "
					"%d rows\n", bench_prog, MAX_ROWS);
				exit(1);
			}
			rows[nrows++] = families[i]->rows[j];
		}
}

/* ---- what a row's setup and loop say (lat.h) ----------------------- */

int lat_failx(struct lat_ctx *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->reason, c->reason_sz, fmt, ap);
	va_end(ap);
	return -1;
}

__attribute__((format(printf, 2, 3)))
int lat_fail(struct lat_ctx *c, const char *fmt, ...)
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

int lat_kfail(struct lat_ctx *c, const char *what, long r)
{
	errno = r < 0 && r > -4096 ? (int)-r : 0;
	if (!errno)
		return lat_failx(c, "%s: returned %ld", what, r);
	return lat_fail(c, "%s", what);
}

__attribute__((format(printf, 2, 3)))
int lat_skip(struct lat_ctx *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->reason, c->reason_sz, fmt, ap);
	va_end(ap);
	return 1;
}

int lat_io_fail(struct lat_ctx *c, const char *what, ssize_t r)
{
	if (r < 0)
		return lat_fail(c, "%s", what);
	if (r == 0)
		return lat_failx(c, "%s: unexpected end of file", what);
	return lat_failx(c, "%s: returned %zd", what, r);
}

static int child_status(struct lat_ctx *c, int st, const char *what)
{
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 0;
	if (WIFEXITED(st))
		return lat_failx(c, "%s exited with status %d", what,
				 WEXITSTATUS(st));
	return lat_failx(c, "%s killed by signal %d (%s)", what, WTERMSIG(st),
			 strsignal(WTERMSIG(st)));
}

int lat_wait_child(struct lat_ctx *c, pid_t pid, const char *what)
{
	int st;

	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return lat_fail(c, "waitpid (%s)", what);
	return child_status(c, st, what);
}

int lat_kwait_child(struct lat_ctx *c, long pid, const char *what)
{
	long r;
	int st;

	do
		r = kml_syscall4(SYS_wait4, pid, (long)&st, 0, 0);
	while (r == -EINTR);
	if (lat_kerr(r))
		return lat_kfail(c, "wait4", r);
	return child_status(c, st, what);
}

/* Undoes whatever a setup did, also after a partial setup. */
static int cleanup(struct lat_ctx *c)
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
		ret = lat_wait_child(c, c->child, "echo child");
	c->child = 0;
	if (c->saved_sig)
		sigaction(c->saved_sig, &c->old_sa, NULL);
	c->saved_sig = 0;
	if (c->page)
		munmap(c->page, c->pagesz);
	c->page = NULL;
	return ret;
}

/* ---- measurement -------------------------------------------------- */

static int run_loop(void *ctx, unsigned long n)
{
	struct lat_ctx *c = ctx;

	return c->run(c, n);
}

static void run_bench(const struct lat_row *b, struct result *r)
{
	char scratch[LAT_REASON_MAX];
	struct lat_ctx c = {
		.b = b,
		.reason = r->reason,
		.reason_sz = sizeof(r->reason),
		.fd = -1,
		.wfd = -1,
		.rfd = -1,
	};
	struct bench_timing t;
	int st;

	r->reason[0] = 0;
	r->path = b->nosys ? "none" : path_name[lat_opt.path];
	c.run = b->run;
	if (lat_opt.path == PATH_CALL && !b->nosys) {
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
	if (st > 0) {
		r->status = ST_SKIP;
	} else if (st < 0) {
		r->status = ST_FAIL;
	} else if (bench_measure(run_loop, &c, b->quantum, lat_opt.runs,
				 lat_opt.run_ms, &t)) {
		r->status = ST_FAIL;
	} else {
		r->status = ST_OK;
		r->iters = t.iters;
		r->ns_med = t.ns_med;
		r->ns_min = t.ns_min;
		r->ns_max = t.ns_max;
		r->cyc_med = t.cyc_med;
		r->cyc_min = t.cyc_min;
		r->cyc_max = t.cyc_max;
	}
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

static double tsc_ghz(void)
{
	return bench_tsc_ghz();
}

/* ---- output: text ------------------------------------------------- */

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

/*
 * One line per row, lmbench-style; ./kml bench makes the tables (and the
 * seed layouts) from the JSON.
 */
static void print_text(FILE *f, const struct result_set *s)
{
	char a[32], b[32], c[32], d[32];
	size_t i;

	fprintf(f, "kml-bench: system call latency%s%s%s%s\n",
		s->label ? ": " : "", s->label ? s->label : "",
		sys.emulated ? " — " : "",
		sys.emulated ? BENCH_EMULATED_NOTE : "");
	fprintf(f, "kml-bench: %s mode (CPL %d), path %s, accel %s, %d runs "
		"of about %d ms per row, tsc %.3f GHz\n",
		kml_kernel_mode() ? "kernel" : "user",
		kml_kernel_mode() ? 0 : 3, path_name[lat_opt.path], sys.accel,
		lat_opt.runs, lat_opt.run_ms, tsc_ghz());
	fprintf(f, "kml-bench: file %s, exec target %s\n",
		lat_opt.file ? lat_opt.file : lat_opt.file_err,
		lat_opt.exec_path);
	for (i = 0; i < s->nrows; i++) {
		const struct result *r = &s->rows[i];

		if (r->status == ST_NOTRUN)
			continue;
		if (r->status != ST_OK) {
			fprintf(f, "%-20s %s: %s\n", r->name,
				r->status == ST_SKIP ? "skipped" : "FAILED",
				r->reason);
			continue;
		}
		fprintf(f, "%-20s %8s ns %8s cycles per %s (%s-%s ns, %lu "
			"iterations/run)\n", r->name,
			fmt_num(a, sizeof(a), r->ns_med),
			fmt_num(b, sizeof(b), r->cyc_med), r->unit,
			fmt_num(c, sizeof(c), r->ns_min),
			fmt_num(d, sizeof(d), r->ns_max), r->iters);
	}
}

/* ---- output: JSON ------------------------------------------------- */

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
	  kml_table2_rows, LAT_ARRAY_SIZE(kml_table2_rows) },
	{ "Usermode-kernel thesis Table 6.1 layout", "µs", 1000,
	  thesis_table61_rows, LAT_ARRAY_SIZE(thesis_table61_rows) },
};


/* The seed layouts, so that a combination of runs can print them too. */
static void write_json_layouts(FILE *f)
{
	size_t i, j;

	fputs(", \"layouts\": [", f);
	for (i = 0; i < LAT_ARRAY_SIZE(layouts); i++) {
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

	bench_json_head(f, SCHEMA, lat_opt.label, &sys);
	if (tsc_ghz() > 0)
		fprintf(f, ", \"tsc_ghz\": %.4f", tsc_ghz());
	else
		fputs(", \"tsc_ghz\": null", f);
	fprintf(f, ", \"runs\": %d, \"run_ms\": %d, \"file\": ",
		lat_opt.runs, lat_opt.run_ms);
	bench_json_str(f, lat_opt.file);
	fputs(", \"exec\": ", f);
	bench_json_str(f, lat_opt.exec_path);
	fprintf(f, ", \"path\": \"%s\", \"cpl\": %d, \"call_path\": %s, "
		"\"vdso_kml_syscall\": %s", path_name[lat_opt.path],
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

	for (i = 0; i < nrows; i++)
		if (!strcmp(rows[i].name, name))
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
			for (i = 0; i < nrows; i++)
				fprintf(stderr, " %s", rows[i].name);
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
		lat_opt.file = given;
		return;
	}
	n = readlink("/proc/self/exe", file_buf, sizeof(file_buf) - 1);
	if (n > 0) {
		file_buf[n] = 0;
		if (!stat(file_buf, &st)) {
			lat_opt.file = file_buf;
			return;
		}
	}
	if (strchr(argv0, '/') && !stat(argv0, &st)) {
		lat_opt.file = argv0;
		return;
	}
	snprintf(lat_opt.file_err, sizeof(lat_opt.file_err), "no file to stat: "
		 "/proc/self/exe unusable (use --file PATH)");
}

/* What the command line asks for, beyond the options in lat_opt. */
struct request {
	int selected[MAX_ROWS];	/* --only: the rows asked for */
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
			lat_opt.exec_path = optarg;
			break;
		case O_FILE:
			if (!*optarg)
				bench_usage_error("--file needs a path");
			req->file = optarg;
			break;
		case O_SCPATH:
			if (!strcmp(optarg, "syscall"))
				lat_opt.path = PATH_SYSCALL;
			else if (!strcmp(optarg, "call"))
				lat_opt.path = PATH_CALL;
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
	lat_opt.json = com.json;
	lat_opt.label = com.label;
	lat_opt.verbose = com.verbose;
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

	for (i = 0; i < nrows; i++)
		if (!rows[i].nosys && !rows[i].run_call &&
		    !rows[i].no_call) {
			fprintf(stderr, "%s: internal error: row %s says "
				"nothing about the call path\n", bench_prog,
				rows[i].name);
			return 1;
		}
	if (!bench_in_expected_mode(req->expect_kernel))
		return 3;
	if (lat_opt.path == PATH_CALL && !kml_call_path()) {
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

	for (i = 0; i < nrows; i++) {
		results[i].name = rows[i].name;
		results[i].label = rows[i].label;
		results[i].unit = rows[i].unit;
		total += !req->only || req->selected[i];
	}
	for (i = 0; i < nrows; i++) {
		struct result *r = &results[i];

		if (req->only && !req->selected[i])
			continue;
		if (lat_opt.verbose)
			fprintf(stderr, "[%2d/%d] %s ...", ++done, total,
				rows[i].name);
		run_bench(&rows[i], r);
		if (lat_opt.verbose) {
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

/* The text to out, the JSON to jf (if any); 0, or 1. */
static int report(FILE *out, FILE *jf, struct result *results)
{
	struct result_set set = { .label = lat_opt.label, .rows = results,
				  .nrows = nrows };

	print_text(out, &set);
	fflush(out);
	if (jf) {
		write_json(jf, &set);
		if (bench_json_close(jf, lat_opt.json))
			return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static struct request req;
	static struct result results[MAX_ROWS];
	FILE *out = stdout, *jf;
	int rc, failed;
	size_t i;

	bench_set_prog(argv[0]);
	collect_rows();
	parse_options(argc, argv, &req);
	if (req.list) {
		for (i = 0; i < nrows; i++)
			printf("%-20s %s\n", rows[i].name, rows[i].label);
		return 0;
	}
	rc = check_available(&req);
	if (rc)
		return rc;
	if (req.quick) {
		lat_opt.runs = 3;
		lat_opt.run_ms = 20;
	}
	if (req.runs > 0)
		lat_opt.runs = req.runs;
	if (req.run_ms > 0)
		lat_opt.run_ms = req.run_ms;
	resolve_file(argv[0] ? argv[0] : "", req.file);
	jf = bench_json_open(lat_opt.json, &out);

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
