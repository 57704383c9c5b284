// SPDX-License-Identifier: GPL-2.0
/*
 * kml-appinit: PID 1 of a kml appliance image (./kml appliance).
 *
 * An appliance runs one service.  Booted with kml=all, every process,
 * this one included, runs in kernel mode.  kml-appinit mounts what the
 * service needs (/proc, /sys, /dev, /tmp), brings the loopback interface
 * up, starts the service and waits until it answers on its TCP port: for
 * redis, PING must get +PONG.  Then it reports, on /dev/ttyS1 (the
 * host's output channel, or the console when that is missing):
 *
 *   kml-appinit: ready service=NAME pid=P port=N boottime_ms=B init_ms=I
 *     kernelmode=K init_cpl=C
 *
 * (boottime_ms: CLOCK_BOOTTIME when the service answered, i.e. since the
 * kernel started; init_ms: since this program started; kernelmode: the
 * service's KernelMode line in /proc/P/status).  With kml.appliance=
 * measure on the kernel command line it also checks the service (SET and
 * GET a key), stops it, reports "KML-EXIT 0" on /dev/ttyS2 (the host's
 * status channel) and powers the machine off; otherwise it keeps the
 * service running and powers off when it exits.
 *
 * The service is described by /etc/appliance, written by the host: the
 * first line is "PORT CHECK" (CHECK: redis or tcp), the following lines
 * the service's argv, one argument per line.
 *
 * Not PID 1 (--here, as on the normal image): nothing is mounted and the
 * machine is not powered off; the report goes to standard output and
 * the exit status says whether the service answered.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kml.h"

#define CONFIG		"/etc/appliance"
#define MAX_ARGS	64
#define READY_TIMEOUT_MS 60000
#define OUT_TTY		"/dev/ttyS1"
#define STATUS_TTY	"/dev/ttyS2"

static FILE *out;
static int pid1;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfprintf(out, fmt, ap);
	va_end(ap);
	fflush(out);
}

static double ms(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Report the status to the host and end: power off as PID 1. */
static void finish(int rc) __attribute__((noreturn));
static void finish(int rc)
{
	if (pid1) {
		FILE *st = fopen(STATUS_TTY, "w");

		if (st) {
			fprintf(st, "KML-EXIT %d\n", rc);
			fclose(st);
		}
		sync();
		reboot(RB_POWER_OFF);
		for (;;)
			pause();
	}
	exit(rc);
}

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fail(const char *fmt, ...)
{
	va_list ap;

	fputs("kml-appinit: ", out);
	va_start(ap, fmt);
	vfprintf(out, fmt, ap);
	va_end(ap);
	fputc('\n', out);
	fflush(out);
	finish(1);
}

static void mount_all(void)
{
	static const struct { const char *src, *dir, *type; unsigned long mode; } m[] = {
		{ "proc", "/proc", "proc", 0555 },
		{ "sysfs", "/sys", "sysfs", 0555 },
		{ "devtmpfs", "/dev", "devtmpfs", 0755 },
		{ "tmpfs", "/tmp", "tmpfs", 01777 },
	};
	size_t i;

	for (i = 0; i < sizeof(m) / sizeof(m[0]); i++) {
		mkdir(m[i].dir, (mode_t)m[i].mode);
		if (mount(m[i].src, m[i].dir, m[i].type, 0, NULL) && errno != EBUSY)
			fail("mount %s: %s", m[i].dir, strerror(errno));
	}
}

static void loopback_up(void)
{
	struct ifreq ifr = { 0 };
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	if (fd < 0)
		fail("socket: %s", strerror(errno));
	strcpy(ifr.ifr_name, "lo");
	if (ioctl(fd, SIOCGIFFLAGS, &ifr))
		fail("lo: SIOCGIFFLAGS: %s", strerror(errno));
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (ioctl(fd, SIOCSIFFLAGS, &ifr))
		fail("lo: SIOCSIFFLAGS: %s", strerror(errno));
	close(fd);
}

/* kml.appliance=measure on the kernel command line? */
static int measure_mode(void)
{
	char line[4096] = "";
	FILE *f = fopen("/proc/cmdline", "r");

	if (f) {
		if (!fgets(line, sizeof(line), f))
			line[0] = '\0';
		fclose(f);
	}
	for (char *tok = strtok(line, " \n"); tok; tok = strtok(NULL, " \n"))
		if (!strcmp(tok, "kml.appliance=measure"))
			return 1;
	return 0;
}

struct service {
	int port;
	char check[16];
	char *argv[MAX_ARGS + 1];
};

static void read_config(const char *path, struct service *s)
{
	char line[1024];
	FILE *f = fopen(path, "r");
	int n = 0;

	if (!f)
		fail("%s: %s", path, strerror(errno));
	if (!fgets(line, sizeof(line), f) ||
	    sscanf(line, "%d %15s", &s->port, s->check) != 2 ||
	    s->port <= 0 || s->port > 65535 ||
	    (strcmp(s->check, "redis") && strcmp(s->check, "tcp")))
		fail("%s: the first line must be \"PORT redis|tcp\"", path);
	while (n < MAX_ARGS && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		s->argv[n] = strdup(line);
		if (!s->argv[n])
			fail("out of memory");
		n++;
	}
	fclose(f);
	if (!n)
		fail("%s: no service command", path);
	s->argv[n] = NULL;
}

static int connect_port(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a))) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Send a redis inline command, compare the reply's first line; 0 if equal */
static int redis_says(int fd, const char *cmd, const char *want)
{
	char buf[256];
	size_t got = 0;

	if (write(fd, cmd, strlen(cmd)) != (ssize_t)strlen(cmd))
		return -1;
	while (got < sizeof(buf) - 1) {
		ssize_t n = read(fd, buf + got, 1);

		if (n <= 0)
			return -1;
		got++;
		if (buf[got - 1] == '\n')
			break;
	}
	buf[got] = '\0';
	return strncmp(buf, want, strlen(want)) ? -1 : 0;
}

/* Poll until the service answers; the connected socket. */
static int wait_ready(const struct service *s, pid_t pid)
{
	double start = ms(CLOCK_MONOTONIC);
	struct timespec tick = { 0, 1000 * 1000 };

	for (;;) {
		int fd, status;

		if (waitpid(pid, &status, WNOHANG) == pid)
			fail("%s exited (status 0x%x) before it answered", s->argv[0], status);
		fd = connect_port(s->port);
		if (fd >= 0) {
			if (strcmp(s->check, "redis") || !redis_says(fd, "PING\r\n", "+PONG"))
				return fd;
			close(fd);
		}
		if (ms(CLOCK_MONOTONIC) - start > READY_TIMEOUT_MS)
			fail("%s did not answer on port %d within %d s", s->argv[0],
			     s->port, READY_TIMEOUT_MS / 1000);
		nanosleep(&tick, NULL);
	}
}

/* The service's KernelMode line in /proc/PID/status: 0, 1, or -1 */
static int kernel_mode_of(pid_t pid)
{
	char path[64], line[256];
	int v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "KernelMode: %d", &v) == 1)
			break;
	fclose(f);
	return v;
}

int main(int argc, char **argv)
{
	double t_init = ms(CLOCK_BOOTTIME), t_ready;
	const char *config = CONFIG;
	struct service s = { 0 };
	int measure, fd, status;
	pid_t pid;

	pid1 = getpid() == 1;
	out = stdout;
	if (argc == 3 && !strcmp(argv[1], "--here"))
		config = argv[2];		/* on a normal image */
	else if (argc != 1 || !pid1) {
		fprintf(stderr, "usage: kml-appinit (as PID 1) | kml-appinit --here CONFIG\n");
		return 2;
	}
	if (pid1) {
		mount_all();
		out = fopen(OUT_TTY, "w");
		if (!out)
			out = stdout;
		setvbuf(out, NULL, _IOLBF, 0);
		loopback_up();
	}
	measure = !pid1 || measure_mode();
	read_config(config, &s);

	pid = fork();
	if (pid < 0)
		fail("fork: %s", strerror(errno));
	if (!pid) {
		int nul = open("/dev/null", O_RDONLY);

		if (nul >= 0)
			dup2(nul, 0);
		dup2(fileno(out), 1);
		dup2(fileno(out), 2);
		execv(s.argv[0], s.argv);
		/* fd 2 is out's: no stdio buffer to lose at _exit */
		dprintf(2, "kml-appinit: exec %s: %s\n", s.argv[0], strerror(errno));
		_exit(127);
	}
	fd = wait_ready(&s, pid);
	t_ready = ms(CLOCK_BOOTTIME);
	say("kml-appinit: ready service=%s pid=%d port=%d boottime_ms=%.1f init_ms=%.1f "
	    "kernelmode=%d init_cpl=%d\n", strrchr(s.argv[0], '/') ?
	    strrchr(s.argv[0], '/') + 1 : s.argv[0], (int)pid, s.port, t_ready,
	    t_ready - t_init, kernel_mode_of(pid), kml_kernel_mode() ? 0 : 3);

	if (!measure) {
		close(fd);
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
		say("kml-appinit: %s ended (status 0x%x)\n", s.argv[0], status);
		finish(1);
	}
	if (!strcmp(s.check, "redis") &&
	    (redis_says(fd, "SET kml appliance\r\n", "+OK") ||
	     redis_says(fd, "GET kml\r\n", "$9")))
		fail("redis did not store and return a key");
	close(fd);
	kill(pid, SIGTERM);
	waitpid(pid, &status, 0);
	say("kml-appinit: checked and stopped %s\n", s.argv[0]);
	finish(0);
}
