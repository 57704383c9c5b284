// SPDX-License-Identifier: GPL-2.0
/*
 * kml-bench's select rows (lmbench's lat_select): select() over N
 * regular-file fds (always ready) or N listening TCP sockets on 127.0.0.1
 * (never ready), with a zero timeout.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "kml.h"
#include "lat.h"

/* Records fd as the next of the select set, or says why it cannot. */
static int add_select_fd(struct lat_ctx *c, int fd)
{
	if (fd >= FD_SETSIZE) {
		close(fd);
		return lat_skip(c, "fd %d does not fit in an fd_set "
				"(FD_SETSIZE %d)",
				fd, FD_SETSIZE);
	}
	c->many[c->nmany++] = fd;
	FD_SET(fd, &c->set);
	if (fd > c->maxfd)
		c->maxfd = fd;
	return 0;
}

static int skip_nofile(struct lat_ctx *c, const char *what, int e)
{
	struct rlimit rl;
	unsigned long long lim = 0;

	if (!getrlimit(RLIMIT_NOFILE, &rl))
		lim = rl.rlim_cur;
	return lat_skip(c, "cannot open %d %s (%d open so far): %s "
			"(RLIMIT_NOFILE soft limit %llu)", c->b->arg, what,
			c->nmany, strerror(e), lim);
}

static int setup_select_file(struct lat_ctx *c)
{
	int i, fd, r;

	if (!lat_opt.file)
		return lat_skip(c, "%s", lat_opt.file_err);
	c->many = calloc(c->b->arg, sizeof(*c->many));
	if (!c->many)
		return lat_fail(c, "calloc");
	FD_ZERO(&c->set);
	c->maxfd = -1;
	c->expect = c->b->arg;
	for (i = 0; i < c->b->arg; i++) {
		fd = open(lat_opt.file, O_RDONLY);
		if (fd < 0 && (errno == EMFILE || errno == ENFILE))
			return skip_nofile(c, "file fds", errno);
		if (fd < 0)
			return lat_fail(c, "open %s", lat_opt.file);
		r = add_select_fd(c, fd);
		if (r)
			return r;
	}
	return 0;
}

static int setup_select_tcp(struct lat_ctx *c)
{
	struct sockaddr_in sin;
	int i, fd, r;

	c->many = calloc(c->b->arg, sizeof(*c->many));
	if (!c->many)
		return lat_fail(c, "calloc");
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
			return lat_skip(c, "socket(AF_INET, SOCK_STREAM): %s",
					strerror(errno));
		if (bind(fd, (struct sockaddr *)&sin, sizeof(sin))) {
			r = errno;
			close(fd);
			return lat_skip(c, "bind 127.0.0.1 port 0: %s "
					"(is the loopback interface up?)",
					strerror(r));
		}
		if (listen(fd, 1)) {
			r = errno;
			close(fd);
			return lat_skip(c, "listen: %s", strerror(r));
		}
		r = add_select_fd(c, fd);
		if (r)
			return r;
	}
	return 0;
}

static int run_select(struct lat_ctx *c, unsigned long n)
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
			return lat_fail(c, "select");
		if (r != c->expect)
			return lat_failx(c, "select returned %d, expected %d",
					 r, c->expect);
	}
	return 0;
}

/* glibc's select() is pselect6 with a timespec and no signal mask */
static int run_select_call(struct lat_ctx *c, unsigned long n)
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
		if (lat_kerr(r))
			return lat_kfail(c, "pselect6", r);
		if (r != c->expect)
			return lat_failx(c, "pselect6 returned %ld, expected %d",
					 r, c->expect);
	}
	return 0;
}

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

static const struct lat_row rows[] = {
	SELECT_ROW(file, "file fds", 10),
	SELECT_ROW(file, "file fds", 100),
	SELECT_ROW(file, "file fds", 250),
	SELECT_ROW(file, "file fds", 500),
	SELECT_ROW(tcp, "TCP fds", 10),
	SELECT_ROW(tcp, "TCP fds", 100),
	SELECT_ROW(tcp, "TCP fds", 250),
	SELECT_ROW(tcp, "TCP fds", 500),
};

LAT_FAMILY(lat_select, rows);
