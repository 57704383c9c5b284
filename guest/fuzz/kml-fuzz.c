// SPDX-License-Identifier: GPL-2.0
/*
 * kml-fuzz: the differential fuzzer's driver (an ordinary process).
 *
 * For each seed it runs the same random program, kml-fuzz-case SEED OPS,
 * as an ordinary process (/usr/lib/kml/kml-fuzz-case) and from /trusted
 * (kernel mode, CPL 0), one after the other, and compares how both end:
 * the exit status or terminating signal, and the output (standard output
 * and error through one pipe).  A run that does not end within the time
 * per case is killed (SIGKILL) and reported as a hang.  TAP:
 *
 *   ok N seed S
 *   not ok N seed S user: STATUS out LINES #DIGEST kernel: STATUS out ...
 *   #   line L: user:   ...
 *   #   line L: kernel: ...
 *   # kml-fuzz: N programs per mode, M divergences, seeds A..B
 *
 * with "# progress" every 500 seeds and the plan (1..N) at the end.
 * Before the first seed it checks that the /trusted copy really runs at
 * CPL 0 and the other at CPL 3 (kml-fuzz-case --cpl); it stops (Bail out!,
 * exit status 2) when they do not.
 *
 * Usage: kml-fuzz [-n COUNT] [-s FIRST_SEED] [-o OPS] [-t SECONDS_PER_CASE]
 *                 [-T TOTAL_SECONDS] [-a AVOID] [-q] [-v]
 *                 [-U USER_PATH] [-K KERNEL_PATH] [-C]
 *   -T  stop after this many seconds (COUNT is then an upper bound)
 *   -a  passed to kml-fuzz-case as --avoid (kinds, classes, KIND@CLASS)
 *   -q  no "ok" lines (only divergences, progress and the summary)
 *   -v  keep the kernel's messages about crashed processes
 *       (debug.exception-trace; turned off by default: the serial console
 *       under TCG is slow, and they are no kernel problem)
 *   -U, -K, -C  other programs for the two modes, no CPL check (tests)
 * Exit status: 0 when both modes ended alike for every seed, 1 on any
 * divergence, 2 on a usage error or when kernel mode is not reached.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_OUT		(64 * 1024)	/* output kept per run */
#define PROGRESS_EVERY	500
#define EXCEPTION_TRACE	"/proc/sys/debug/exception-trace"

struct result {
	int hang;		/* killed after the time per case */
	int status;		/* waitpid() status */
	char out[MAX_OUT + 1];
	size_t len;		/* bytes kept */
	size_t total;		/* bytes written */
};

static const char *user_path = "/usr/lib/kml/kml-fuzz-case";
static const char *kernel_path = "/trusted/kml-fuzz-case";

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Run argv with its standard output and error into r; kill it after
 * timeout seconds. */
static void run(char *const argv[], int timeout, struct result *r)
{
	int fds[2], devnull;
	pid_t pid;
	double deadline = now() + timeout;

	memset(r, 0, offsetof(struct result, out));
	r->len = r->total = 0;
	if (pipe2(fds, O_CLOEXEC)) {
		perror("kml-fuzz: pipe");
		exit(2);
	}
	pid = fork();
	if (pid < 0) {
		perror("kml-fuzz: fork");
		exit(2);
	}
	if (pid == 0) {
		devnull = open("/dev/null", O_RDONLY);
		dup2(devnull, 0);
		dup2(fds[1], 1);
		dup2(fds[1], 2);
		execv(argv[0], argv);
		fprintf(stderr, "kml-fuzz: exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(fds[1]);
	for (;;) {
		struct pollfd p = { .fd = fds[0], .events = POLLIN };
		int left = (deadline - now()) * 1000;
		char buf[4096];
		ssize_t n;

		if (left <= 0 || poll(&p, 1, left) == 0) {
			r->hang = 1;
			kill(pid, SIGKILL);
			break;
		}
		n = read(fds[0], buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (r->len < MAX_OUT) {
			size_t k = (size_t)n < MAX_OUT - r->len ? (size_t)n : MAX_OUT - r->len;
			memcpy(r->out + r->len, buf, k);
			r->len += k;
		}
		r->total += n;
	}
	close(fds[0]);
	/* the pipe closed (or the run hung): the process ends soon; a child
	 * that closed its output and kept running is a hang too */
	for (;;) {
		int left = (deadline - now()) * 1000;
		pid_t w = waitpid(pid, &r->status, WNOHANG);

		if (w == pid)
			break;
		if (left <= 0 && !r->hang) {
			r->hang = 1;
			kill(pid, SIGKILL);
		}
		usleep(r->hang ? 1000 : 200);
	}
	r->out[r->len] = 0;
}

static void describe(const struct result *r, char *buf, size_t size)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	int lines = 0;

	for (size_t i = 0; i < r->len; i++) {
		h = (h ^ (uint8_t)r->out[i]) * 0x100000001b3ULL;
		lines += r->out[i] == '\n';
	}
	char st[32];
	if (r->hang)
		snprintf(st, sizeof(st), "hang");
	else if (WIFEXITED(r->status))
		snprintf(st, sizeof(st), "exit %d", WEXITSTATUS(r->status));
	else if (WIFSIGNALED(r->status))
		snprintf(st, sizeof(st), "signal %d", WTERMSIG(r->status));
	else
		snprintf(st, sizeof(st), "status %#x", r->status);
	snprintf(buf, size, "%s out %d lines #%08x", st, lines, (uint32_t)(h ^ (h >> 32)));
}

static int same(const struct result *u, const struct result *k)
{
	if (u->hang || k->hang)
		return u->hang && k->hang && u->len == k->len &&
		       !memcmp(u->out, k->out, u->len);
	return u->status == k->status && u->total == k->total && u->len == k->len &&
	       !memcmp(u->out, k->out, u->len);
}

/* the line starting at *p (without its newline); advances *p */
static const char *next_line(const char **p, const char *end, int *len)
{
	const char *s = *p, *e;

	if (s >= end)
		return NULL;
	e = memchr(s, '\n', end - s);
	if (!e)
		e = end;
	*len = e - s;
	*p = e < end ? e + 1 : e;
	return s;
}

/* TAP diagnostics: the first output lines where the modes differ */
static void show_difference(const struct result *u, const struct result *k)
{
	const char *pu = u->out, *pk = k->out, *eu = u->out + u->len, *ek = k->out + k->len;
	int line = 1, shown = 0;

	for (;; line++) {
		int lu = 0, lk = 0;
		const char *su = next_line(&pu, eu, &lu), *sk = next_line(&pk, ek, &lk);

		if (!su && !sk)
			break;
		if (su && sk && lu == lk && !memcmp(su, sk, lu))
			continue;
		printf("#   line %d: user:   %.*s\n", line, su ? lu : 5, su ? su : "(end)");
		printf("#   line %d: kernel: %.*s\n", line, sk ? lk : 5, sk ? sk : "(end)");
		if (++shown == 3)
			break;
	}
}

/* "cpl N" from PATH --cpl, or -1 */
static int cpl_of(const char *path)
{
	char *argv[] = { (char *)path, "--cpl", NULL };
	static struct result r;
	int cpl;

	run(argv, 30, &r);
	if (r.hang || !WIFEXITED(r.status) || WEXITSTATUS(r.status) != 0 ||
	    sscanf(r.out, "cpl %d", &cpl) != 1)
		return -1;
	return cpl;
}

static int set_exception_trace(const char *value, char *old, size_t size)
{
	int fd = open(EXCEPTION_TRACE, O_RDWR);
	ssize_t n;

	if (fd < 0)
		return -1;
	if (old) {
		n = read(fd, old, size - 1);
		old[n > 0 ? n : 0] = 0;
	}
	/* a sysctl takes a write at offset 0 only */
	n = pwrite(fd, value, strlen(value), 0);
	close(fd);
	return n < 0 ? -1 : 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: kml-fuzz [-n COUNT] [-s FIRST_SEED] [-o OPS] "
		"[-t SECONDS_PER_CASE] [-T TOTAL_SECONDS] [-a AVOID] [-q] [-v] "
		"[-U USER_PATH] [-K KERNEL_PATH] [-C]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	unsigned long long count = 100, first = 1, seed, done = 0, diverged = 0;
	int ops = 48, per_case = 20, total = 0, quiet = 0, verbose = 0, check_cpl = 1, c;
	const char *avoid = NULL;
	char old_trace[32] = "", ops_s[16], seed_s[32];
	static struct result u, k;
	double t0 = now();

	while ((c = getopt(argc, argv, "n:s:o:t:T:a:qvU:K:C")) != -1) {
		switch (c) {
		case 'n': count = strtoull(optarg, NULL, 0); break;
		case 's': first = strtoull(optarg, NULL, 0); break;
		case 'o': ops = atoi(optarg); break;
		case 't': per_case = atoi(optarg); break;
		case 'T': total = atoi(optarg); break;
		case 'a': avoid = optarg; break;
		case 'q': quiet = 1; break;
		case 'v': verbose = 1; break;
		case 'U': user_path = optarg; break;
		case 'K': kernel_path = optarg; break;
		case 'C': check_cpl = 0; break;
		default: usage();
		}
	}
	if (optind != argc || count == 0 || ops <= 0 || per_case <= 0 || total < 0)
		usage();
	setvbuf(stdout, NULL, _IOLBF, 0);

	if (check_cpl) {
		int cu = cpl_of(user_path), ck = cpl_of(kernel_path);

		if (ck != 0 || cu != 3) {
			printf("Bail out! %s runs at CPL %d, %s at CPL %d: expected 3 and 0 "
			       "(is kml-fuzz-case in the trusted directory, and kml on?)\n",
			       user_path, cu, kernel_path, ck);
			return 2;
		}
		printf("# %s: CPL 3, %s: CPL 0\n", user_path, kernel_path);
	}
	if (!verbose)
		set_exception_trace("0\n", old_trace, sizeof(old_trace));

	snprintf(ops_s, sizeof(ops_s), "%d", ops);
	char *uargv[] = { (char *)user_path, seed_s, ops_s, "--avoid", (char *)avoid, NULL };
	char *kargv[] = { (char *)kernel_path, seed_s, ops_s, "--avoid", (char *)avoid, NULL };
	if (!avoid)
		uargv[3] = kargv[3] = NULL;

	printf("# kml-fuzz: seeds from %llu, %d operations, %d s per case%s%s\n", first, ops,
	       per_case, avoid ? ", avoiding " : "", avoid ? avoid : "");
	for (seed = first; done < count; seed++) {
		if (total && now() - t0 >= total)
			break;
		snprintf(seed_s, sizeof(seed_s), "%llu", seed);
		run(uargv, per_case, &u);
		run(kargv, per_case, &k);
		done++;
		if (same(&u, &k)) {
			if (!quiet)
				printf("ok %llu seed %llu%s\n", done, seed,
				       u.hang ? " # hang in both modes" : "");
		} else {
			char du[96], dk[96];

			diverged++;
			describe(&u, du, sizeof(du));
			describe(&k, dk, sizeof(dk));
			printf("not ok %llu seed %llu user: %s kernel: %s\n", done, seed, du, dk);
			show_difference(&u, &k);
		}
		if (done % PROGRESS_EVERY == 0)
			printf("# progress: %llu programs per mode, %llu divergences, %.0f s\n",
			       done, diverged, now() - t0);
	}
	if (!verbose && old_trace[0])
		set_exception_trace(old_trace, NULL, 0);
	printf("1..%llu\n", done);
	printf("# kml-fuzz: %llu programs per mode, %llu divergences, seeds %llu..%llu, "
	       "%.0f s\n", done, diverged, first, done ? first + done - 1 : first, now() - t0);
	return diverged ? 1 : 0;
}
