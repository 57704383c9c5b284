/* SPDX-License-Identifier: GPL-2.0 */
/*
 * kml-bench's rows, lmbench-style: one file per family of operations
 * (lat_syscall.c, lat_fs.c, lat_select.c, lat_sig.c, lat_ipc.c,
 * lat_proc.c, lat_pagefault.c), linked into the one program kml-bench
 * (kml-bench.c: options, the table of rows, measurement, output).
 *
 * A row has a setup (files, sockets, an echo child, handlers), a loop
 * that performs the operation n times, and, for --path call, the same
 * loop with its system calls through libkml.  kml-bench.c undoes what a
 * setup left in the row's context (struct lat_ctx) after the row.
 */
#ifndef KML_LAT_H
#define KML_LAT_H

#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <sys/select.h>
#include <sys/types.h>

#define LAT_REASON_MAX	256
#define LAT_ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))

enum { PATH_SYSCALL, PATH_CALL };

/* The options the rows read (kml-bench.c sets them). */
struct lat_options {
	int path;		/* PATH_* */
	int runs;
	int run_ms;
	int verbose;
	const char *json;
	const char *label;
	const char *exec_path;
	const char *file;	/* stat/open target; NULL: see file_err */
	char file_err[LAT_REASON_MAX];	/* why there is no file */
};

extern struct lat_options lat_opt;

/* ---- per-row context ---------------------------------------------- */

struct lat_row;

struct lat_ctx {
	const struct lat_row *b;
	int (*run)(struct lat_ctx *c, unsigned long n);	/* the loop timed */
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

struct lat_row {
	const char *name;
	const char *label;
	const char *unit;	/* "op", "round trip", "page" */
	int (*setup)(struct lat_ctx *c);	/* 0 ok, 1 skipped, -1 failed */
	int (*run)(struct lat_ctx *c, unsigned long n);	/* 0 ok, -1 failed */
	/*
	 * --path call: the loop with its system calls through libkml; or,
	 * for a row without one, why not (no_call), or that its loop makes
	 * no system call at all (nosys).  Every row says one of the three.
	 */
	int (*run_call)(struct lat_ctx *c, unsigned long n);
	const char *no_call;
	int nosys;
	int arg;
	unsigned long quantum;	/* iterations are a multiple of this */
};

/* A family's rows, in the order kml-bench lists them. */
struct lat_family {
	const struct lat_row *rows;
	size_t nrows;
};

#define LAT_FAMILY(name, rows) \
	const struct lat_family name = { rows, LAT_ARRAY_SIZE(rows) }

extern const struct lat_family lat_syscall, lat_fs, lat_select, lat_sig,
	lat_ipc, lat_proc, lat_pagefault;

/* ---- what a row's setup and loop say (kml-bench.c) ----------------- */

/* The reason, -1 (the row failed). */
__attribute__((format(printf, 2, 3)))
int lat_failx(struct lat_ctx *c, const char *fmt, ...);

/* Like lat_failx(), with ": strerror(errno)" appended. */
__attribute__((format(printf, 2, 3)))
int lat_fail(struct lat_ctx *c, const char *fmt, ...);

/* lat_fail() for a raw kernel result r (-errno) of libkml. */
int lat_kfail(struct lat_ctx *c, const char *what, long r);

/* Is r, the raw result of a system call, an error (-4095..-1)? */
static inline int lat_kerr(long r)
{
	return r < 0 && r > -4096;
}

/* The reason, 1 (the row is skipped). */
__attribute__((format(printf, 2, 3)))
int lat_skip(struct lat_ctx *c, const char *fmt, ...);

/* A failed 1-byte read or write: r is what the call returned. */
int lat_io_fail(struct lat_ctx *c, const char *what, ssize_t r);

/* Reap a child that must exit with 0; what names it in the reason. */
int lat_wait_child(struct lat_ctx *c, pid_t pid, const char *what);

/* lat_wait_child() with wait4 through libkml. */
int lat_kwait_child(struct lat_ctx *c, long pid, const char *what);

#endif /* KML_LAT_H */
