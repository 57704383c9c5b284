// SPDX-License-Identifier: GPL-2.0
/*
 * kml-apps: the small guest-side pieces of `./kml apps`, the application
 * benchmark, which runs Debian's programs (redis-server, nginx, iperf3,
 * find) as ordinary processes and in kernel mode through kml-modes.
 *
 *   kml-apps now
 *	prints CLOCK_MONOTONIC in nanoseconds (kml-modes -t times a run with
 *	it: the busybox shell has no clock finer than a second)
 *
 *   kml-apps wait-port PORT [SECONDS]
 *	waits until a TCP socket listens on PORT (IPv4 or IPv6, any
 *	address), read from /proc/net/tcp and tcp6; polls every 20 ms, gives up after SECONDS
 *	(default 60) with exit status 1.  It makes no connection: a server
 *	that counts connections (iperf3) sees only its client.
 *
 *   kml-apps mktree MANIFEST DIR
 *	creates, under DIR, every path listed in MANIFEST (one per line; a
 *	line ending in '/' is a directory, any other an empty file, parents
 *	made as needed) and prints the number of directories and files.  The
 *	host writes MANIFEST from the kernel source tree, so that `find`
 *	walks a tree of a kernel source's shape without its 1.4 GB of text.
 *
 *   kml-apps ordinary PROG [ARGS...]
 *	runs PROG as an ordinary process wherever it lies: sets no_new_privs
 *	(prctl PR_SET_NO_NEW_PRIVS), which keeps the program in user mode
 *	even in a kml=all boot (a caller that asked to be confined is never
 *	admitted to kernel mode), then executes it (PATH is searched).  In
 *	an appliance boot, kml-modes starts the stock column's server and
 *	the clients this way.
 *
 * Exit status: 0 done, 1 failed (with a message), 2 usage; ordinary: the
 * program's, or 127 when it cannot be executed.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define TCP_LISTEN_STATE 0x0A	/* TCP_LISTEN in include/net/tcp_states.h */
#define POLL_NS 20000000L

static int usage(void)
{
	fprintf(stderr, "usage: kml-apps now\n"
			"       kml-apps wait-port PORT [SECONDS]\n"
			"       kml-apps mktree MANIFEST DIR\n"
			"       kml-apps ordinary PROG [ARGS...]\n");
	return 2;
}

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* A number in [lo, hi] from s, or -1. */
static long number(const char *s, long lo, long hi)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return -1;
	return v;
}

/* 1 if the table file (/proc/net/tcp or tcp6) shows a socket listening
 * on port, 0 if not, -1 error */
static int listening_in(const char *file, long port)
{
	char line[512];
	unsigned int lport, state;
	int found = 0;
	FILE *f = fopen(file, "r");

	if (!f)
		return -1;
	if (!fgets(line, sizeof(line), f)) {	/* the header */
		fclose(f);
		return -1;
	}
	/* "  0: 0100007F:18EB 00000000:0000 0A ...", tcp6 with 32-digit addresses */
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, " %*d: %*[0-9A-Fa-f]:%x %*[0-9A-Fa-f]:%*x %x",
			   &lport, &state) == 2 &&
		    lport == port && state == TCP_LISTEN_STATE)
			found = 1;
	fclose(f);
	return found;
}

/* 1 if a TCP socket listens on port, IPv4 or IPv6 (a server on [::] takes
 * IPv4 connections too, as iperf3's on Debian's kernel), 0 if not, -1
 * error; a kernel without IPv6 has no tcp6 table */
static int listening(long port)
{
	int r = listening_in("/proc/net/tcp", port);

	if (r == 0 && access("/proc/net/tcp6", F_OK) == 0)
		r = listening_in("/proc/net/tcp6", port);
	return r;
}

static int wait_port(int argc, char **argv)
{
	long port, secs = 60;
	long long deadline;
	struct timespec pause = { 0, POLL_NS };

	if (argc < 1 || argc > 2)
		return usage();
	port = number(argv[0], 1, 65535);
	if (argc == 2)
		secs = number(argv[1], 1, 3600);
	if (port < 0 || secs < 0) {
		fprintf(stderr, "kml-apps: wait-port: bad port or seconds\n");
		return 2;
	}
	deadline = now_ns() + secs * 1000000000LL;
	for (;;) {
		int r = listening(port);

		if (r < 0) {
			perror("kml-apps: /proc/net/tcp");
			return 1;
		}
		if (r)
			return 0;
		if (now_ns() > deadline) {
			fprintf(stderr, "kml-apps: nothing listens on port %ld after %ld s\n",
				port, secs);
			return 1;
		}
		nanosleep(&pause, NULL);
	}
}

/* 1 if a component of path is ".." */
static int climbs(const char *path)
{
	for (const char *p = path; p; p = strchr(p, '/')) {
		if (*p == '/')
			p++;
		if (p[0] == '.' && p[1] == '.' && (p[2] == '/' || !p[2]))
			return 1;
	}
	return 0;
}

/* mkdir -p of path's first len bytes; 0 or -1 (errno set) */
static int make_dirs(char *path, size_t len, long *ndirs)
{
	for (size_t i = 1; i <= len; i++) {
		char c = path[i];

		if (i < len && c != '/')
			continue;
		path[i] = '\0';
		if (mkdir(path, 0755) == 0)
			(*ndirs)++;
		else if (errno != EEXIST)
			return -1;
		path[i] = c;
	}
	return 0;
}

static int mktree(int argc, char **argv)
{
	char line[PATH_MAX], path[PATH_MAX];
	long ndirs = 0, nfiles = 0, lineno = 0;
	size_t root;
	FILE *f;

	if (argc != 2)
		return usage();
	f = fopen(argv[0], "r");
	if (!f) {
		fprintf(stderr, "kml-apps: %s: %s\n", argv[0], strerror(errno));
		return 1;
	}
	root = strlen(argv[1]);
	if (root == 0 || root >= sizeof(path) / 2) {
		fclose(f);
		fprintf(stderr, "kml-apps: mktree: bad directory\n");
		return 2;
	}
	memcpy(path, argv[1], root);
	path[root] = '\0';
	if (make_dirs(path, root, &ndirs))
		goto fail;
	while (fgets(line, sizeof(line), f)) {
		size_t n = strlen(line);
		int dir;
		int fd;

		lineno++;
		if (n && line[n - 1] == '\n')
			line[--n] = '\0';
		if (!n)
			continue;
		if (line[0] == '/' || climbs(line) || root + 1 + n >= sizeof(path)) {
			fclose(f);
			fprintf(stderr, "kml-apps: %s:%ld: bad path\n", argv[0], lineno);
			return 1;
		}
		dir = line[n - 1] == '/';
		snprintf(path, sizeof(path), "%s/%s", argv[1], line);
		n = strlen(path);
		if (dir) {
			if (make_dirs(path, n - 1, &ndirs))
				goto fail;
			continue;
		}
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0 && errno == ENOENT) {
			if (make_dirs(path, strrchr(path, '/') - path, &ndirs))
				goto fail;
			fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		}
		if (fd < 0)
			goto fail;
		close(fd);
		nfiles++;
	}
	if (ferror(f)) {
		fclose(f);
		fprintf(stderr, "kml-apps: %s: read error\n", argv[0]);
		return 1;
	}
	fclose(f);
	printf("kml-apps: %s: %ld directories, %ld files\n", argv[1], ndirs, nfiles);
	return 0;
fail:
	fprintf(stderr, "kml-apps: %s: %s\n", path, strerror(errno));
	fclose(f);
	return 1;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return usage();
	if (!strcmp(argv[1], "now") && argc == 2) {
		printf("%lld\n", now_ns());
		return 0;
	}
	if (!strcmp(argv[1], "wait-port"))
		return wait_port(argc - 2, argv + 2);
	if (!strcmp(argv[1], "mktree"))
		return mktree(argc - 2, argv + 2);
	if (!strcmp(argv[1], "ordinary") && argc >= 3) {
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) {
			perror("kml-apps: PR_SET_NO_NEW_PRIVS");
			return 1;
		}
		execvp(argv[2], argv + 2);
		fprintf(stderr, "kml-apps: %s: %s\n", argv[2], strerror(errno));
		return 127;
	}
	return usage();
}
