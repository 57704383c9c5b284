// SPDX-License-Identifier: GPL-2.0
/*
 * kml-bench's IPC round trips (lmbench's lat_pipe and lat_unix): one
 * byte to an echo child and back, over two pipes or an AF_UNIX stream
 * socket pair.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "kml.h"
#include "lat.h"

/* The echo child makes its calls the way the measuring parent does. */
static __attribute__((noreturn)) void echo_child(int rfd, int wfd)
{
	long r;
	char ch;

	for (;;) {
		if (lat_opt.path == PATH_CALL)
			r = kml_syscall3(SYS_read, rfd, (long)&ch, 1);
		else
			r = read(rfd, &ch, 1);
		if (r == 0)
			_exit(0);
		if (r != 1)
			_exit(1);
		if (lat_opt.path == PATH_CALL)
			r = kml_syscall3(SYS_write, wfd, (long)&ch, 1);
		else
			r = write(wfd, &ch, 1);
		if (r != 1)
			_exit(2);
	}
}

/* pfd: the parent's write and read ends; cfd: the child's read, write. */
static int start_echo(struct lat_ctx *c, const int pfd[2], const int cfd[2])
{
	pid_t pid;

	c->wfd = pfd[0];
	c->rfd = pfd[1];
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		lat_fail(c, "fork");
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

static int setup_pipe(struct lat_ctx *c)
{
	int down[2], up[2];
	int pfd[2], cfd[2];

	if (pipe(down))
		return lat_fail(c, "pipe");
	if (pipe(up)) {
		lat_fail(c, "pipe");
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

static int setup_unix(struct lat_ctx *c)
{
	int sv[2], pfd[2], cfd[2];

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		return lat_fail(c, "socketpair(AF_UNIX, SOCK_STREAM)");
	pfd[0] = pfd[1] = sv[0];
	cfd[0] = cfd[1] = sv[1];
	return start_echo(c, pfd, cfd);
}

static int run_rtt(struct lat_ctx *c, unsigned long n)
{
	char ch = 'x';
	ssize_t r;

	while (n--) {
		r = write(c->wfd, &ch, 1);
		if (r != 1)
			return lat_io_fail(c, "write to echo child", r);
		r = read(c->rfd, &ch, 1);
		if (r != 1)
			return lat_io_fail(c, "read from echo child", r);
	}
	return 0;
}

static int run_rtt_call(struct lat_ctx *c, unsigned long n)
{
	char ch = 'x';
	long r;

	while (n--) {
		r = kml_syscall3(SYS_write, c->wfd, (long)&ch, 1);
		if (r != 1)
			return lat_kfail(c, "write to echo child", r);
		r = kml_syscall3(SYS_read, c->rfd, (long)&ch, 1);
		if (r != 1)
			return r ? lat_kfail(c, "read from echo child", r)
				 : lat_failx(c, "read from echo child: "
					     "end of file");
	}
	return 0;
}

static const struct lat_row rows[] = {
	{ .name = "pipe_rtt", .label = "Pipe round trip, 1 byte",
	  .unit = "round trip", .setup = setup_pipe, .run = run_rtt,
	  .run_call = run_rtt_call },
	{ .name = "unix_rtt",
	  .label = "AF_UNIX stream round trip, 1 byte",
	  .unit = "round trip", .setup = setup_unix, .run = run_rtt,
	  .run_call = run_rtt_call },
};

LAT_FAMILY(lat_ipc, rows);
