// SPDX-License-Identifier: GPL-2.0
/*
 * kml-bench's references and simple system calls (lmbench's lat_syscall
 * null, read and write): an empty function call and a vDSO clock read
 * (no kernel entry), getppid and getpid, 1 byte read from /dev/zero and
 * written to /dev/null.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "kml.h"
#include "lat.h"

static __attribute__((noinline, noclone)) void empty_fn(void)
{
	asm volatile("");
}

static int run_call(struct lat_ctx *c, unsigned long n)
{
	(void)c;
	while (n--)
		empty_fn();
	return 0;
}

static int run_vdso(struct lat_ctx *c, unsigned long n)
{
	struct timespec ts;

	while (n--)
		if (clock_gettime(CLOCK_MONOTONIC, &ts))
			return lat_fail(c, "clock_gettime");
	return 0;
}

/* ---- simple system calls ------------------------------------------ */

static int run_getppid(struct lat_ctx *c, unsigned long n)
{
	(void)c;
	while (n--)
		syscall(SYS_getppid);
	return 0;
}

static int run_getpid(struct lat_ctx *c, unsigned long n)
{
	(void)c;
	while (n--)
		syscall(SYS_getpid);
	return 0;
}

static int run_getppid_call(struct lat_ctx *c, unsigned long n)
{
	(void)c;
	while (n--)
		kml_syscall0(SYS_getppid);
	return 0;
}

static int run_getpid_call(struct lat_ctx *c, unsigned long n)
{
	(void)c;
	while (n--)
		kml_syscall0(SYS_getpid);
	return 0;
}

static int setup_devzero(struct lat_ctx *c)
{
	c->fd = open("/dev/zero", O_RDONLY);
	return c->fd < 0 ? lat_fail(c, "open /dev/zero") : 0;
}

static int setup_devnull(struct lat_ctx *c)
{
	c->fd = open("/dev/null", O_WRONLY);
	return c->fd < 0 ? lat_fail(c, "open /dev/null") : 0;
}

static int run_read(struct lat_ctx *c, unsigned long n)
{
	char ch;
	ssize_t r;

	while (n--) {
		r = read(c->fd, &ch, 1);
		if (r != 1)
			return lat_io_fail(c, "read /dev/zero", r);
	}
	return 0;
}

static int run_write(struct lat_ctx *c, unsigned long n)
{
	char ch = 0;
	ssize_t r;

	while (n--) {
		r = write(c->fd, &ch, 1);
		if (r != 1)
			return lat_io_fail(c, "write /dev/null", r);
	}
	return 0;
}

static int run_read_call(struct lat_ctx *c, unsigned long n)
{
	char ch;
	long r;

	while (n--) {
		r = kml_syscall3(SYS_read, c->fd, (long)&ch, 1);
		if (r != 1)
			return r ? lat_kfail(c, "read /dev/zero", r)
				 : lat_failx(c, "read /dev/zero: end of file");
	}
	return 0;
}

static int run_write_call(struct lat_ctx *c, unsigned long n)
{
	char ch = 0;
	long r;

	while (n--) {
		r = kml_syscall3(SYS_write, c->fd, (long)&ch, 1);
		if (r != 1)
			return lat_kfail(c, "write /dev/null", r);
	}
	return 0;
}

static const struct lat_row rows[] = {
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
};

LAT_FAMILY(lat_syscall, rows);
