// SPDX-License-Identifier: GPL-2.0
/*
 * kml-callpath-demo: a static program without a C library (the kernel
 * tree's nolibc) whose every system call goes through libkml: through
 * __vdso_kml_syscall when it runs in kernel mode, through the `syscall`
 * instruction otherwise.  It prints how it ran and a few results:
 *
 *   cpl=0 call_path=1 vdso_kml_syscall=1
 *   getpid=42 getppid=1 uname=Linux 6.12.x-kml
 *   pipe: wrote 5, read 5 "hello"
 *   direct_returns: +N over 100 getppid calls
 *
 * The last line is the growth of this thread's direct returns from the
 * kernel, KernelModeFastSyscalls + KernelModeBypassSyscalls
 * (/proc/thread-self/status), or "unavailable" without those lines.
 * Exit status 0, or 1 when a call failed.
 */
#include "std.h"
#include "arch.h"
#include "kml_nolibc.h"
#include "nolibc.h"

#define FAST_KEY "KernelModeFastSyscalls:"
#define BYPASS_KEY "KernelModeBypassSyscalls:"

static int failed;

/* nolibc has no strstr() */
static const char *find(const char *hay, const char *needle)
{
	size_t n = strlen(needle);

	for (; *hay; hay++)
		if (!strncmp(hay, needle, n))
			return hay;
	return NULL;
}

static void check(const char *what, long r)
{
	if (r < 0) {
		printf("%s failed: %s (%ld)\n", what, strerror(-r), -r);
		failed = 1;
	}
}

/* The number after key in buf, or -1. */
static long status_field(const char *buf, const char *key)
{
	const char *p = find(buf, key);

	if (!p)
		return -1;
	for (p += strlen(key); *p == ' ' || *p == '\t'; p++)
		;	/* nolibc's atol() does not skip blanks */
	return atol(p);
}

/* This thread's direct returns (both counters), or -1. */
static long direct_returns(void)
{
	static char buf[4096];
	long n, f, b, fd = my_syscall4(__NR_openat, AT_FDCWD,
				       "/proc/thread-self/status", O_RDONLY, 0);

	if (fd < 0)
		return -1;
	n = my_syscall3(__NR_read, fd, buf, sizeof(buf) - 1);
	my_syscall1(__NR_close, fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	f = status_field(buf, FAST_KEY);
	b = status_field(buf, BYPASS_KEY);
	return f < 0 || b < 0 ? -1 : f + b;
}

int main(void)
{
	struct utsname u;
	char got[8] = { 0 };
	long r, before, after;
	int fds[2], i;

	printf("cpl=%d call_path=%d vdso_kml_syscall=%d\n",
	       kml_kernel_mode() ? 0 : 3, kml_call_path(),
	       kml_vdso_entry() != NULL);

	r = my_syscall1(__NR_uname, &u);
	check("uname", r);
	printf("getpid=%ld getppid=%ld uname=%s %s\n",
	       (long)my_syscall0(__NR_getpid), (long)my_syscall0(__NR_getppid),
	       r ? "?" : u.sysname, r ? "?" : u.release);

	r = my_syscall2(__NR_pipe2, fds, 0);
	check("pipe2", r);
	if (!r) {
		long w = my_syscall3(__NR_write, fds[1], "hello", 5);
		long n = my_syscall3(__NR_read, fds[0], got, sizeof(got) - 1);

		check("write", w);
		check("read", n);
		printf("pipe: wrote %ld, read %ld \"%s\"\n", w, n, got);
		my_syscall1(__NR_close, fds[0]);
		my_syscall1(__NR_close, fds[1]);
	}

	before = direct_returns();
	for (i = 0; i < 100; i++)
		check("getppid", my_syscall0(__NR_getppid));
	after = direct_returns();
	if (before < 0 || after < 0)
		printf("direct_returns: unavailable\n");
	else
		printf("direct_returns: +%ld over 100 getppid calls\n",
		       after - before);
	return failed;
}
