// SPDX-License-Identifier: GPL-2.0
/*
 * kml-bench's file system calls (lmbench's lat_syscall stat, fstat and
 * open): on a file, by default this program (/proc/self/exe; --file).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "kml.h"
#include "lat.h"

static int setup_file(struct lat_ctx *c)
{
	if (!lat_opt.file)
		return lat_skip(c, "%s", lat_opt.file_err);
	return 0;
}

static int setup_file_fd(struct lat_ctx *c)
{
	if (!lat_opt.file)
		return lat_skip(c, "%s", lat_opt.file_err);
	c->fd = open(lat_opt.file, O_RDONLY);
	return c->fd < 0 ? lat_fail(c, "open %s", lat_opt.file) : 0;
}

static int run_stat(struct lat_ctx *c, unsigned long n)
{
	struct stat st;

	while (n--)
		if (stat(lat_opt.file, &st))
			return lat_fail(c, "stat %s", lat_opt.file);
	return 0;
}

static int run_fstat(struct lat_ctx *c, unsigned long n)
{
	struct stat st;

	while (n--)
		if (fstat(c->fd, &st))
			return lat_fail(c, "fstat");
	return 0;
}

static int run_open_close(struct lat_ctx *c, unsigned long n)
{
	int fd;

	while (n--) {
		fd = open(lat_opt.file, O_RDONLY);
		if (fd < 0)
			return lat_fail(c, "open %s", lat_opt.file);
		if (close(fd))
			return lat_fail(c, "close");
	}
	return 0;
}

/* glibc 2.36's stat(), fstat() and open(): newfstatat and openat */
static int run_stat_call(struct lat_ctx *c, unsigned long n)
{
	struct stat st;
	long r;

	while (n--) {
		r = kml_syscall4(SYS_newfstatat, AT_FDCWD, (long)lat_opt.file,
				 (long)&st, 0);
		if (r)
			return lat_kfail(c, "newfstatat", r);
	}
	return 0;
}

static int run_fstat_call(struct lat_ctx *c, unsigned long n)
{
	struct stat st;
	long r;

	while (n--) {
		r = kml_syscall4(SYS_newfstatat, c->fd, (long)"", (long)&st,
				 AT_EMPTY_PATH);
		if (r)
			return lat_kfail(c, "newfstatat (fstat)", r);
	}
	return 0;
}

static int run_open_close_call(struct lat_ctx *c, unsigned long n)
{
	long fd, r;

	while (n--) {
		fd = kml_syscall4(SYS_openat, AT_FDCWD, (long)lat_opt.file,
				  O_RDONLY, 0);
		if (lat_kerr(fd))
			return lat_kfail(c, "openat", fd);
		r = kml_syscall1(SYS_close, fd);
		if (r)
			return lat_kfail(c, "close", r);
	}
	return 0;
}

static const struct lat_row rows[] = {
	{ .name = "stat", .label = "stat",
	  .unit = "op", .setup = setup_file, .run = run_stat,
	  .run_call = run_stat_call },
	{ .name = "fstat", .label = "fstat",
	  .unit = "op", .setup = setup_file_fd, .run = run_fstat,
	  .run_call = run_fstat_call },
	{ .name = "open_close", .label = "open + close",
	  .unit = "op", .setup = setup_file, .run = run_open_close,
	  .run_call = run_open_close_call },
};

LAT_FAMILY(lat_fs, rows);
