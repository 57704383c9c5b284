// SPDX-License-Identifier: GPL-2.0
/*
 * kml-iobench: file I/O throughput, run inside the guest.
 *
 * Modelled on the KML paper's IOzone test (this is an independent
 * implementation): for each file size (default 16, 32, 64, 128, 256 and
 * 512 KiB) and a record (buffer) of 16 KiB, four operations on one file
 * in the directory given by --dir, in this order:
 *
 *   write      a new file: open(O_WRONLY|O_CREAT|O_EXCL), size/record
 *              write() calls of one record each, close().  The file of
 *              the previous iteration is removed first (not timed).
 *   re-write   open(O_WRONLY) of the existing file, the same write()
 *              calls over its data (no allocation), close().
 *   read       open(O_RDONLY), size/record read() calls, close().
 *   re-read    the same again.
 *
 * What is timed (CLOCK_MONOTONIC): the open(), every write()/read() and
 * the close() of each iteration — IOzone's timing with close included
 * (-c), plus the open that a loop of whole-file operations needs.  The
 * re-write and read loops are timed as a whole; write is timed per
 * iteration, around open ... close, because the unlink() before each
 * iteration is not part of writing a file (that costs two vDSO clock
 * reads per iteration, no system call).  fsync() is not timed: it is
 * called once after the write and after the re-write loop, outside the
 * timing, so that the writeback of one loop does not run during the next
 * one (on tmpfs it does nothing).  --fsync adds an fsync() before every
 * close() of the write and re-write loops, inside the timing (IOzone -e).
 * Not timed either: the data checks below.
 *
 * Why a new file for write rather than O_TRUNC: IOzone's write test
 * measures writing a new file (re-write: a file that exists), and ext4 treats a truncated-and-rewritten file
 * specially (auto_da_alloc: it starts writeback at close), which would
 * make write on ext4 a disk test.
 *
 * Data check: every record starts with a 16-byte tag (generation, record
 * number) and continues with a pattern of its generation; each run writes
 * a new generation with write and another with re-write.  The timed read
 * loops compare every record's tag (two 64-bit compares per 16 KiB); after
 * each loop, outside the timing, the whole file is read back and checked
 * (size, every byte, end of file).  Any mismatch or I/O error fails the
 * size (exit status 1).
 *
 * Method: a small file takes micro- or milliseconds, so each measurement
 * is a loop of n iterations of the operation: n is calibrated per size and
 * operation (the calibration loops also warm up) so that one loop takes
 * about --run-ms; then --runs runs of the four loops follow, and the best
 * run (highest throughput) is reported, with the median and the worst.  Throughput = file size x n / loop time, in
 * KiB/s; time per operation = loop time / n (a whole-file operation:
 * open to close).
 *
 * Output: a Markdown table on stdout (stderr when the JSON goes to stdout)
 * and optionally JSON (schema kml-iobench/1) for ./kml bench.  When the
 * kernel command line says kml.accel=tcg, the results are marked EMULATED.
 *
 * Exit status: 0 ok; 1 an I/O error or a data mismatch; 2 a usage error;
 * 3 the mode asked for with --expect-mode is not the mode this process
 * runs in.
 *
 * Build: gcc -O2 -static -Wall -Wextra -Werror -I../libkml -o kml-iobench
 *        kml-iobench.c libkml.a
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"

#include "kml.h"

#define SCHEMA		"kml-iobench/1"
#define MAX_SIZES	32
#define MAX_ITERS	10000000UL
#define MAX_SIZE_KIB	(1024 * 1024)	/* 1 GiB */
#define MAX_RECORD_KIB	4096
#define REASON_MAX	256
#define TAG_MAGIC	0x6b6d6c696f62656eULL	/* "kmliobe n" */
#define TAG_BYTES	16

#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))

enum { OP_WRITE, OP_REWRITE, OP_READ, OP_REREAD, NOPS };
static const char *const op_name[NOPS] = {
	[OP_WRITE] = "write",
	[OP_REWRITE] = "re-write",
	[OP_READ] = "read",
	[OP_REREAD] = "re-read",
};

enum { ST_OK, ST_FAIL };
enum { INJECT_NONE, INJECT_WRITE, INJECT_READ };

static const unsigned long default_sizes[] = { 16, 32, 64, 128, 256, 512 };

static struct {
	const char *dir;
	int runs;
	int run_ms;
	int fsync;
	int verbose;
	unsigned long record_kib;
	unsigned long sizes[MAX_SIZES];	/* KiB */
	int nsizes;
	int inject;		/* INJECT_*: tests of the data checks */
	const char *json;
	const char *label;
} opt = {
	.runs = 5,
	.run_ms = 100,
	.record_kib = 16,
};

struct result {
	unsigned long size_kib;
	int op;
	int status;
	char reason[REASON_MAX];
	unsigned long iters;	/* iterations per timed loop */
	double ns_best, ns_median, ns_worst;	/* per operation */
};

static char path[PATH_MAX];	/* the test file */
static char dir_real[PATH_MAX];
static size_t record;		/* bytes */
static unsigned char *buf;	/* one record, for the timed loops */
static unsigned char *vbuf;	/* one record, for the checks */
static unsigned char *body;	/* the current generation's pattern */
static int body_gen = -1;
static int data_ok = 1;		/* no mismatch seen */

/* ---- system information ------------------------------------------- */

static struct bench_sysinfo sys;

/* The file system of --dir, from /proc/self/mounts */
static struct {
	char fs[64];
	char mnt_point[PATH_MAX];
	char mnt_source[256];
	char mnt_opts[512];
} fsys;

/* /proc/self/mounts escapes space, tab, newline and '\' as \ooo. */
static void unescape_octal(char *s)
{
	char *d = s;

	while (*s) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' &&
		    s[2] >= '0' && s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
			*d++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 +
				      (s[3] - '0'));
			s += 4;
		} else {
			*d++ = *s++;
		}
	}
	*d = 0;
}

/* Is mount point m the directory d or one of its ancestors? */
static size_t mount_covers(const char *m, const char *d)
{
	size_t n = strlen(m);

	if (!strcmp(m, "/"))
		return 1;
	if (strncmp(m, d, n) || (d[n] && d[n] != '/'))
		return 0;
	return n;
}

/* The file system of --dir: the last, longest mount covering it. */
static void find_fs(void)
{
	char line[4096], *src, *mnt, *type, *opts, *save;
	size_t best = 0, n;
	struct statfs sf;
	FILE *f;

	f = fopen("/proc/self/mounts", "r");
	while (f && fgets(line, sizeof(line), f)) {
		src = strtok_r(line, " ", &save);
		mnt = strtok_r(NULL, " ", &save);
		type = strtok_r(NULL, " ", &save);
		opts = strtok_r(NULL, " ", &save);
		if (!src || !mnt || !type || !opts)
			continue;
		unescape_octal(mnt);
		n = mount_covers(mnt, dir_real);
		if (!n || n < best)
			continue;
		best = n;
		unescape_octal(src);
		snprintf(fsys.fs, sizeof(fsys.fs), "%s", type);
		snprintf(fsys.mnt_point, sizeof(fsys.mnt_point), "%s", mnt);
		snprintf(fsys.mnt_source, sizeof(fsys.mnt_source), "%s", src);
		snprintf(fsys.mnt_opts, sizeof(fsys.mnt_opts), "%s", opts);
	}
	if (f)
		fclose(f);
	if (best)
		return;
	/* no /proc: the magic number says at least something */
	if (!statfs(dir_real, &sf))
		snprintf(fsys.fs, sizeof(fsys.fs), "magic 0x%lx",
			 (unsigned long)sf.f_type);
	else
		strcpy(fsys.fs, "unknown");
}

/* ---- data pattern -------------------------------------------------- */

static uint64_t tag_word(int gen, unsigned long rec)
{
	return TAG_MAGIC ^ ((uint64_t)(unsigned int)gen << 32) ^ rec;
}

static void set_tag(unsigned char *p, int gen, unsigned long rec)
{
	uint64_t t[2] = { tag_word(gen, rec), ~tag_word(gen, rec) };

	memcpy(p, t, sizeof(t));
}

static int tag_ok(const unsigned char *p, int gen, unsigned long rec)
{
	uint64_t t[2];

	memcpy(t, p, sizeof(t));
	return t[0] == tag_word(gen, rec) && t[1] == ~tag_word(gen, rec);
}

/* The bytes after the tag: a pattern of the generation (not periodic in
 * 256 bytes, so that a record shifted by a multiple of 256 is noticed). */
static void make_body(int gen)
{
	size_t j;

	if (body_gen == gen)
		return;
	for (j = 0; j < record; j++)
		body[j] = (unsigned char)(j * 131 + (j >> 8) * 7 + gen * 29 + 1);
	body_gen = gen;
}

/* ---- errors --------------------------------------------------------- */

static int __attribute__((format(printf, 2, 3)))
fail(struct result *r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r->reason, sizeof(r->reason), fmt, ap);
	va_end(ap);
	r->status = ST_FAIL;
	return -1;
}

static int io_fail(struct result *r, const char *what, ssize_t got,
		   size_t want, unsigned long rec)
{
	if (got < 0)
		return fail(r, "%s: %s", what, strerror(errno));
	return fail(r, "%s: %zd of %zu bytes at offset %lu", what, got, want,
		    rec * record);
}

static int close_fail(int fd, int err)
{
	close(fd);
	return err;
}

/* ---- the timed loops ------------------------------------------------ */

/*
 * n iterations of write (create) or re-write; timed ns in *ns.  write
 * removes the file before each iteration, outside the timing, so that
 * every iteration creates a new file (O_EXCL checks that).
 */
static int loop_write(struct result *r, unsigned long nrec, int gen,
		      int create, unsigned long n, double *ns)
{
	int flags = O_WRONLY | (create ? O_CREAT | O_EXCL : 0);
	double t0 = 0, total = 0;
	unsigned long i, k;
	ssize_t w;
	int fd;

	make_body(gen);
	memcpy(buf, body, record);
	if (!create)
		t0 = bench_now_ns();
	for (i = 0; i < n; i++) {
		if (create) {
			if (unlink(path) && errno != ENOENT)
				return fail(r, "unlink %s: %s", path,
					    strerror(errno));
			t0 = bench_now_ns();
		}
		fd = open(path, flags, 0644);
		if (fd < 0)
			return fail(r, "open %s: %s", path, strerror(errno));
		for (k = 0; k < nrec; k++) {
			set_tag(buf, gen, k);
			w = write(fd, buf, record);
			if (w != (ssize_t)record)
				return close_fail(fd, io_fail(r, "write", w,
							record, k));
		}
		if (opt.fsync && fsync(fd))
			return close_fail(fd, fail(r, "fsync: %s",
						      strerror(errno)));
		if (close(fd))
			return fail(r, "close: %s", strerror(errno));
		if (create)
			total += bench_now_ns() - t0;
	}
	*ns = create ? total : bench_now_ns() - t0;
	return 0;
}

/* n iterations of read; every record's tag is compared. */
static int loop_read(struct result *r, unsigned long nrec, int gen,
		     unsigned long n, double *ns)
{
	unsigned long i, k, bad = 0, first_bad = 0;
	double t0, t1;
	ssize_t got;
	int fd;

	t0 = bench_now_ns();
	for (i = 0; i < n; i++) {
		fd = open(path, O_RDONLY);
		if (fd < 0)
			return fail(r, "open %s: %s", path, strerror(errno));
		for (k = 0; k < nrec; k++) {
			got = read(fd, buf, record);
			if (got != (ssize_t)record)
				return close_fail(fd, io_fail(r, "read", got,
							record, k));
			if (!tag_ok(buf, gen, k) && !bad++)
				first_bad = k;
		}
		if (close(fd))
			return fail(r, "close: %s", strerror(errno));
	}
	t1 = bench_now_ns();
	if (bad) {
		data_ok = 0;
		return fail(r, "data mismatch: %lu records read back with a "
			    "wrong tag, the first at offset %lu", bad,
			    first_bad * record);
	}
	*ns = t1 - t0;
	return 0;
}

static int loop_op(struct result *r, int op, unsigned long nrec, int gen,
		   unsigned long n, double *ns)
{
	switch (op) {
	case OP_WRITE:
		return loop_write(r, nrec, gen, 1, n, ns);
	case OP_REWRITE:
		return loop_write(r, nrec, gen, 0, n, ns);
	default:
		return loop_read(r, nrec, gen, n, ns);
	}
}

/* ---- checks outside the timing -------------------------------------- */

static int sync_file(struct result *r)
{
	int fd = open(path, O_RDONLY);

	if (fd < 0)
		return fail(r, "open %s: %s", path, strerror(errno));
	if (fsync(fd))
		return close_fail(fd, fail(r, "fsync: %s",
					      strerror(errno)));
	if (close(fd))
		return fail(r, "close: %s", strerror(errno));
	return 0;
}

/* The whole file: its size, every byte of generation gen, end of file. */
static int verify(struct result *r, unsigned long nrec, int gen)
{
	unsigned long k;
	struct stat st;
	ssize_t got;
	size_t j;
	int fd;

	make_body(gen);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return fail(r, "check: open %s: %s", path, strerror(errno));
	if (fstat(fd, &st))
		return close_fail(fd, fail(r, "check: fstat: %s",
					      strerror(errno)));
	if ((unsigned long long)st.st_size != (unsigned long long)nrec * record) {
		data_ok = 0;
		return close_fail(fd, fail(r, "data mismatch: the file has "
					      "%lld bytes, not %llu",
					      (long long)st.st_size,
					      (unsigned long long)nrec * record));
	}
	for (k = 0; k < nrec; k++) {
		got = read(fd, vbuf, record);
		if (got != (ssize_t)record)
			return close_fail(fd, io_fail(r, "check: read", got,
							 record, k));
		if (!tag_ok(vbuf, gen, k) ||
		    memcmp(vbuf + TAG_BYTES, body + TAG_BYTES,
			   record - TAG_BYTES)) {
			data_ok = 0;
			j = 0;		/* the tag, or the first bad byte */
			if (tag_ok(vbuf, gen, k))
				for (j = TAG_BYTES; vbuf[j] == body[j]; j++)
					;
			return close_fail(fd, fail(r, "data mismatch at "
						      "offset %lu (record %lu, "
						      "expected generation %d)",
						      k * record + j, k, gen));
		}
	}
	got = read(fd, vbuf, record);
	if (got != 0) {
		if (got > 0)
			data_ok = 0;
		return close_fail(fd, got < 0 ?
				  fail(r, "check: read: %s", strerror(errno)) :
				  fail(r, "data mismatch: %zd bytes after the "
				       "end of the file", got));
	}
	if (close(fd))
		return fail(r, "check: close: %s", strerror(errno));
	return 0;
}

/* ---- measurement ---------------------------------------------------- */

/* n so that a loop of the operation takes about --run-ms. */
static int calibrate(struct result *r, unsigned long nrec, int gen,
		     unsigned long *n_out)
{
	double target = opt.run_ms * 1e6, ns = 0, want;
	unsigned long n = 1;

	for (;;) {
		if (loop_op(r, r->op, nrec, gen, n, &ns))
			return -1;
		if (ns >= target / 8 || n >= MAX_ITERS)
			break;
		n *= ns < target / 1000 ? 10 : 2;
	}
	want = ns > 0 ? n * (target / ns) : (double)MAX_ITERS;
	if (want > MAX_ITERS)
		want = MAX_ITERS;
	*n_out = want < 1 ? 1 : (unsigned long)want;
	return 0;
}

/* --inject-corruption: flip one byte of the file (tests of the checks). */
static int corrupt(struct result *r, off_t off)
{
	unsigned char c;
	int fd;

	fd = open(path, O_RDWR);
	if (fd < 0)
		return fail(r, "inject: open %s: %s", path, strerror(errno));
	if (pread(fd, &c, 1, off) != 1)
		return close_fail(fd, fail(r, "inject: pread failed"));
	c ^= 0x5a;
	if (pwrite(fd, &c, 1, off) != 1)
		return close_fail(fd, fail(r, "inject: pwrite failed"));
	if (close(fd))
		return fail(r, "inject: close: %s", strerror(errno));
	return 0;
}

/* One timed loop of run `run`, with what follows it outside the timing:
 * fsync (write, re-write) and the check; ns per operation in *ns_op. */
static int timed_op(struct result *r, unsigned long nrec, int gen,
		    unsigned long n, int run, double *ns_op)
{
	int op = r->op, wr = op == OP_WRITE || op == OP_REWRITE;
	double ns;

	/* a bad tag in the last record: the read loop must notice */
	if (run == 0 && op == OP_READ && opt.inject == INJECT_READ &&
	    corrupt(r, (off_t)(nrec - 1) * record))
		return -1;
	if (loop_op(r, op, nrec, gen, n, &ns))
		return -1;
	/* a bad byte in the middle of the last record: the check must */
	if (run == 0 && op == OP_WRITE && opt.inject == INJECT_WRITE &&
	    corrupt(r, (off_t)(nrec - 1) * record + record / 2))
		return -1;
	if ((wr && !opt.fsync && sync_file(r)) || verify(r, nrec, gen))
		return -1;
	*ns_op = ns / n;
	return 0;
}

/* After a failure: every operation of the size that has not failed itself
 * is not measured (its runs are incomplete). */
static void fail_rest(struct result *res, const char *why)
{
	int op;

	for (op = 0; op < NOPS; op++)
		if (res[op].status == ST_OK)
			fail(&res[op], "not measured: %s", why);
}

/* The four operations for one file size; res[NOPS]. */
static void run_size(unsigned long size_kib, struct result *res)
{
	unsigned long nrec = size_kib / opt.record_kib, n[NOPS];
	double *v[NOPS], *mem;
	int op, run, gen = 0;
	char why[64];

	for (op = 0; op < NOPS; op++) {
		res[op].size_kib = size_kib;
		res[op].op = op;
		res[op].status = ST_OK;
		res[op].reason[0] = 0;
	}
	mem = calloc((size_t)NOPS * opt.runs, sizeof(*mem));
	if (!mem) {
		fail(&res[0], "calloc: %s", strerror(errno));
		fail_rest(res, "out of memory");
		return;
	}
	for (op = 0; op < NOPS; op++)
		v[op] = mem + (size_t)op * opt.runs;

	/* calibration, in the order of a run (it also warms up) */
	for (op = 0; op < NOPS; op++) {
		if (calibrate(&res[op], nrec, gen, &n[op]) ||
		    ((op == OP_WRITE || op == OP_REWRITE) &&
		     sync_file(&res[op])) ||
		    verify(&res[op], nrec, gen)) {
			snprintf(why, sizeof(why), "%s failed in the "
				 "calibration", op_name[op]);
			fail_rest(res, why);
			goto out;
		}
		res[op].iters = n[op];
	}

	for (run = 0; run < opt.runs; run++) {
		for (op = 0; op < NOPS; op++) {
			/* write and re-write: a new generation each */
			if (op == OP_WRITE || op == OP_REWRITE)
				gen++;
			if (timed_op(&res[op], nrec, gen, n[op], run,
				     &v[op][run])) {
				snprintf(why, sizeof(why), "%s failed in run "
					 "%d", op_name[op], run + 1);
				fail_rest(res, why);
				goto out;
			}
		}
	}
	for (op = 0; op < NOPS; op++) {
		res[op].ns_median = bench_median(v[op], opt.runs);
		res[op].ns_best = v[op][0];
		res[op].ns_worst = v[op][opt.runs - 1];
	}
out:
	free(mem);
	unlink(path);
}

static double kib_s(const struct result *r, double ns)
{
	return ns > 0 ? r->size_kib * 1e9 / ns : 0;
}

/* ---- output --------------------------------------------------------- */

static const char *timed_text(void)
{
	return opt.fsync ?
		"open() to close() of each iteration: open, size/record "
		"write() or read() calls, fsync() (write and re-write), "
		"close(); write creates a new file each iteration (the "
		"unlink() before it is not timed); the data checks are not "
		"timed" :
		"open() to close() of each iteration: open, size/record "
		"write() or read() calls, close(); write creates a new file "
		"each iteration (the unlink() before it is not timed); not "
		"timed: one fsync() after each write and re-write loop, the "
		"data checks";
}

static void print_md(FILE *f, const struct result *res, int nres)
{
	int i, op;

	bench_md_header(f, &sys, "kml-iobench: file I/O throughput", opt.label);
	fprintf(f, "- directory: %s (%s", dir_real, fsys.fs);
	if (fsys.mnt_point[0])
		fprintf(f, ", %s on %s, %s", fsys.mnt_source, fsys.mnt_point,
			fsys.mnt_opts);
	fprintf(f, ")\n");
	fprintf(f, "- mode: %s (CPL %d)\n", kml_kernel_mode() ? "kernel" :
		"user", kml_kernel_mode() ? 0 : 3);
	fprintf(f, "- record: %lu KiB; timed: %s\n", opt.record_kib,
		timed_text());
	fprintf(f, "- method: loops of about %d ms; best of %d runs "
		"(highest throughput); data checked after every loop\n\n",
		opt.run_ms, opt.runs);

	fprintf(f, "| File size (KiB) |");
	for (op = 0; op < NOPS; op++)
		fprintf(f, " %s KiB/s |", op_name[op]);
	for (op = 0; op < NOPS; op++)
		fprintf(f, " %s µs/op |", op_name[op]);
	fprintf(f, "\n|---:|");
	for (op = 0; op < 2 * NOPS; op++)
		fprintf(f, "---:|");
	fputc('\n', f);
	for (i = 0; i < nres; i += NOPS) {
		fprintf(f, "| %lu |", res[i].size_kib);
		for (op = 0; op < NOPS; op++)
			if (res[i + op].status == ST_OK)
				fprintf(f, " %.0f |", kib_s(&res[i + op],
						res[i + op].ns_best));
			else
				fprintf(f, " FAILED |");
		for (op = 0; op < NOPS; op++)
			if (res[i + op].status == ST_OK)
				fprintf(f, " %.1f |",
					res[i + op].ns_best / 1000);
			else
				fprintf(f, " |");
		fputc('\n', f);
	}
	fputc('\n', f);
	for (i = 0; i < nres; i++) {
		if (res[i].status == ST_OK)
			continue;
		fprintf(f, "- FAILED: %lu KiB %s: ", res[i].size_kib,
			op_name[res[i].op]);
		bench_md_text(f, res[i].reason);
		fputc('\n', f);
	}
}

static void write_json(FILE *f, const struct result *res, int nres)
{
	int i;

	bench_json_head(f, SCHEMA, opt.label, &sys);
	fputs(", \"dir\": ", f);
	bench_json_str(f, dir_real);
	fputs(", \"fs\": ", f);
	bench_json_str(f, fsys.fs);
	fputs(", \"mount\": ", f);
	if (fsys.mnt_point[0]) {
		fputs("{\"source\": ", f);
		bench_json_str(f, fsys.mnt_source);
		fputs(", \"point\": ", f);
		bench_json_str(f, fsys.mnt_point);
		fputs(", \"options\": ", f);
		bench_json_str(f, fsys.mnt_opts);
		fputc('}', f);
	} else {
		fputs("null", f);
	}
	fprintf(f, ", \"cpl\": %d, \"mode\": \"%s\", \"runs\": %d, "
		"\"run_ms\": %d, \"record_kib\": %lu, \"fsync\": %s, "
		"\"best\": \"highest throughput\", \"timed\": ",
		kml_kernel_mode() ? 0 : 3, kml_kernel_mode() ? "kernel" : "user",
		opt.runs, opt.run_ms, opt.record_kib,
		opt.fsync ? "true" : "false");
	bench_json_str(f, timed_text());
	fprintf(f, ", \"verified\": %s", data_ok ? "true" : "false");
	fputs(", \"results\": [", f);
	for (i = 0; i < nres; i++) {
		const struct result *r = &res[i];
		int ok = r->status == ST_OK;

		fprintf(f, "%s\n  {\"size_kib\": %lu, \"op\": \"%s\", "
			"\"status\": \"%s\", \"reason\": ", i ? "," : "",
			r->size_kib, op_name[r->op], ok ? "ok" : "failed");
		bench_json_str(f, ok ? NULL : r->reason);
		fprintf(f, ", \"records\": %lu", r->size_kib / opt.record_kib);
		if (ok && r->iters)
			fprintf(f, ", \"iters\": %lu", r->iters);
		else
			fputs(", \"iters\": null", f);
		bench_json_num(f, "kib_s_best", kib_s(r, r->ns_best), ok);
		bench_json_num(f, "kib_s_median", kib_s(r, r->ns_median), ok);
		bench_json_num(f, "kib_s_worst", kib_s(r, r->ns_worst), ok);
		bench_json_num(f, "ns_best", r->ns_best, ok);
		bench_json_num(f, "ns_median", r->ns_median, ok);
		bench_json_num(f, "ns_worst", r->ns_worst, ok);
		fputc('}', f);
	}
	fputs("\n]}\n", f);
}

/* ---- options -------------------------------------------------------- */


static void usage(FILE *f)
{
	fprintf(f,
		"usage: %s --dir DIR [options]\n"
		"  --dir DIR         directory of the test file (required)\n"
		"  --sizes LIST      file sizes in KiB, comma-separated\n"
		"                    (default 16,32,64,128,256,512)\n"
		"  --record KIB      write()/read() size in KiB (default 16);\n"
		"                    every file size must be a multiple of it\n"
		"  --runs N          runs per size (default 5); the best counts\n"
		"  --run-ms MS       length of one timed loop in ms (default 100)\n"
		"  --quick           --runs 3 --run-ms 20\n"
		"  --fsync           time an fsync() before every close() of\n"
		"                    write and re-write (default: untimed, once\n"
		"                    per loop)\n"
		"  --json PATH       write JSON results to PATH ('-': stdout;\n"
		"                    the Markdown then goes to stderr)\n"
		"  --label TEXT      configuration label, copied into the JSON\n"
		"  --expect-mode M   'user' or 'kernel': exit 3 unless this\n"
		"                    process runs in that mode\n"
		"  --inject-corruption WHERE\n"
		"                    for tests of the data checks: flip a byte of\n"
		"                    the file after the first write loop ('write':\n"
		"                    the check after it must fail) or before the\n"
		"                    first read loop ('read': that loop must fail)\n"
		"  -v, --verbose     progress on stderr\n"
		"  -h, --help        this text\n"
		"Exit status: 0 ok, 1 I/O error or data mismatch, 2 usage error,\n"
		"3 not in the mode of --expect-mode.\n",
		bench_prog);
}

static void parse_sizes(const char *list)
{
	char *copy = strdup(list), *tok, *save;
	int i;

	if (!copy) {
		perror("strdup");
		exit(1);
	}
	opt.nsizes = 0;
	if (!*list || list[strlen(list) - 1] == ',' || *list == ',' ||
	    strstr(list, ",,"))
		bench_usage_error("--sizes '%s': a comma-separated list of sizes "
			    "in KiB", list);
	for (tok = strtok_r(copy, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		if (opt.nsizes == MAX_SIZES)
			bench_usage_error("--sizes: at most %d sizes", MAX_SIZES);
		opt.sizes[opt.nsizes] = bench_parse_long("--sizes", tok, 1,
						     MAX_SIZE_KIB);
		for (i = 0; i < opt.nsizes; i++)
			if (opt.sizes[i] == opt.sizes[opt.nsizes])
				bench_usage_error("--sizes: %s KiB given twice", tok);
		opt.nsizes++;
	}
	free(copy);
}

static void check_dir(const char *dir)
{
	struct stat st;

	if (stat(dir, &st))
		bench_usage_error("--dir %s: %s", dir, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		bench_usage_error("--dir %s: not a directory", dir);
	if (!realpath(dir, dir_real))
		bench_usage_error("--dir %s: %s", dir, strerror(errno));
	if ((size_t)snprintf(path, sizeof(path), "%s/kml-iobench.%ld.tmp",
			     strcmp(dir_real, "/") ? dir_real : "",
			     (long)getpid()) >= sizeof(path))
		bench_usage_error("--dir %s: path too long", dir);
}

/* What the command line asks for, beyond the options in opt. */
struct request {
	const char *dir;	/* --dir */
	int expect_kernel;	/* --expect-mode: 1 kernel, 0 user, -1 none */
	int quick, runs, run_ms;	/* --quick, --runs, --run-ms (-1: none) */
};

/* The options into opt and req; usage errors exit with status 2. */
static void parse_options(int argc, char **argv, struct request *req)
{
	enum { OPT_DIR = 256, OPT_SIZES, OPT_RECORD, OPT_RUNMS, OPT_FSYNC,
	       OPT_EXPECT, OPT_INJECT };
	static const struct option lopts[] = {
		{ "dir", required_argument, NULL, OPT_DIR },
		{ "sizes", required_argument, NULL, OPT_SIZES },
		{ "record", required_argument, NULL, OPT_RECORD },
		{ "run-ms", required_argument, NULL, OPT_RUNMS },
		{ "fsync", no_argument, NULL, OPT_FSYNC },
		{ "expect-mode", required_argument, NULL, OPT_EXPECT },
		{ "inject-corruption", required_argument, NULL, OPT_INJECT },
		BENCH_COMMON_OPTIONS,
		{ NULL, 0, NULL, 0 }
	};
	struct bench_common com = { .runs = -1, .usage = usage };
	int ch, i;
	size_t k;

	for (k = 0; k < ARRAY_SIZE(default_sizes); k++)
		opt.sizes[k] = default_sizes[k];
	opt.nsizes = ARRAY_SIZE(default_sizes);
	req->run_ms = -1;
	req->expect_kernel = -1;
	while ((ch = getopt_long(argc, argv, "vh", lopts, NULL)) != -1) {
		switch (ch) {
		case OPT_DIR:
			if (!*optarg)
				bench_usage_error("--dir needs a directory");
			req->dir = optarg;
			break;
		case OPT_SIZES:
			parse_sizes(optarg);
			break;
		case OPT_RECORD:
			opt.record_kib = bench_parse_long("--record", optarg, 1,
						    MAX_RECORD_KIB);
			break;
		case OPT_RUNMS:
			req->run_ms = bench_parse_long("--run-ms", optarg, 1,
						       60000);
			break;
		case OPT_FSYNC:
			opt.fsync = 1;
			break;
		case OPT_EXPECT:
			req->expect_kernel = bench_parse_expect_mode(optarg);
			break;
		case OPT_INJECT:
			if (!strcmp(optarg, "write"))
				opt.inject = INJECT_WRITE;
			else if (!strcmp(optarg, "read"))
				opt.inject = INJECT_READ;
			else
				bench_usage_error("invalid --inject-corruption value "
					    "'%s' ('write' or 'read')", optarg);
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
	if (!req->dir)
		bench_usage_error("--dir DIR is required (where to write the test "
			    "file)");
	for (i = 0; i < opt.nsizes; i++)
		if (opt.sizes[i] % opt.record_kib)
			bench_usage_error("file size %lu KiB is not a multiple of "
				    "the record size (%lu KiB)", opt.sizes[i],
				    opt.record_kib);
}

/* The record buffers and the results (*res, *nres); 0, or 1. */
static int alloc_buffers(struct result **res, int *nres)
{
	record = opt.record_kib * 1024;
	if (posix_memalign((void **)&buf, 4096, record))
		buf = NULL;
	if (posix_memalign((void **)&vbuf, 4096, record))
		vbuf = NULL;
	body = malloc(record);
	*nres = opt.nsizes * NOPS;
	*res = calloc(*nres, sizeof(**res));
	if (!buf || !vbuf || !body || !*res) {
		fprintf(stderr, "%s: out of memory\n", bench_prog);
		return 1;
	}
	return 0;
}

/* Every size's loops into res (NOPS results a size); 1 if one failed. */
static int run_sizes(struct result *res)
{
	int i, op, failed = 0;

	for (i = 0; i < opt.nsizes; i++) {
		struct result *r = &res[i * NOPS];

		if (opt.verbose)
			fprintf(stderr, "[%d/%d] %lu KiB ...", i + 1,
				opt.nsizes, opt.sizes[i]);
		run_size(opt.sizes[i], r);
		for (op = 0; op < NOPS; op++) {
			failed |= r[op].status != ST_OK;
			if (!opt.verbose)
				continue;
			if (r[op].status == ST_OK)
				fprintf(stderr, " %s %.0f KiB/s", op_name[op],
					kib_s(&r[op], r[op].ns_best));
			else
				fprintf(stderr, " %s FAILED: %s", op_name[op],
					r[op].reason);
		}
		if (opt.verbose)
			fputc('\n', stderr);
	}
	return failed;
}

/* The Markdown to out, the JSON to jf (if any); 0, or 1. */
static int report(FILE *out, FILE *jf, const struct result *res, int nres)
{
	print_md(out, res, nres);
	fflush(out);
	if (jf) {
		write_json(jf, res, nres);
		if (bench_json_close(jf, opt.json))
			return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct request req = { 0 };
	struct result *res;
	FILE *out = stdout, *jf;
	int failed, nres;

	bench_set_prog(argv[0]);
	parse_options(argc, argv, &req);
	check_dir(req.dir);
	if (!bench_in_expected_mode(req.expect_kernel))
		return 3;
	if (req.quick) {
		opt.runs = 3;
		opt.run_ms = 20;
	}
	if (req.runs > 0)
		opt.runs = req.runs;
	if (req.run_ms > 0)
		opt.run_ms = req.run_ms;

	jf = bench_json_open(opt.json, &out);
	if (alloc_buffers(&res, &nres))
		return 1;
	bench_gather_sysinfo(&sys);
	find_fs();

	failed = run_sizes(res);
	if (report(out, jf, res, nres))
		return 1;
	if (failed)
		fprintf(stderr, "%s: %s\n", bench_prog, data_ok ? "I/O failed" :
			"data mismatch: what was read is not what was "
			"written");
	return failed ? 1 : 0;
}
