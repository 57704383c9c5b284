// SPDX-License-Identifier: GPL-2.0
/*
 * kml-probe: reports how it runs, for the kernel-mode admission tests.
 *
 *   kml-probe info           cpl=N secure=N kernelmode=N
 *   kml-probe fork-info      the same, printed by a forked child
 *   kml-probe exec PROG ARGS execv PROG (mode decided afresh)
 *   kml-probe sleep SECONDS  for ptrace targets
 *   kml-probe spin N         N getppid() calls and some arithmetic
 *   kml-probe uring-sleep S  dumpable, an io_uring SQPOLL ring (a kernel
 *                            thread of the process), then sleep S: a
 *                            ptrace target reached through that thread
 *   kml-probe map-exec FILE  map FILE executable, then readable and
 *                            mprotect() it executable: "mmap=R mprotect=R"
 *                            (R: ok or the error's name)
 *   kml-probe kfunc NAME     open a kernel-library handle: "kfunc=R"
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/io_uring.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static int cpl(void)
{
	unsigned short cs;

	asm volatile("mov %%cs, %0" : "=r"(cs));
	return cs & 3;
}

static int kernel_mode(void)
{
	char line[256];
	int v = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "KernelMode: %d", &v) == 1)
			break;
	fclose(f);
	return v;
}

/* The kernel-library handle request (arch/x86/include/uapi/asm/prctl.h) */
#define ARCH_KML_KFUNC_OPEN	0x6001

static const char *result(int err)
{
	return err ? strerrorname_np(err) : "ok";
}

/* Map @path executable, and readable then mprotect()ed executable */
static int map_exec(const char *path)
{
	int fd = open(path, O_RDONLY), e1 = 0, e2 = 0;
	void *p;

	if (fd < 0) {
		perror(path);
		return 5;
	}
	p = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
	if (p == MAP_FAILED)
		e1 = errno;
	else
		munmap(p, 4096);
	p = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
	if (p == MAP_FAILED) {
		perror("mmap PROT_READ");
		return 6;
	}
	if (mprotect(p, 4096, PROT_READ | PROT_EXEC))
		e2 = errno;
	printf("mmap=%s mprotect=%s\n", result(e1), result(e2));
	return 0;
}

static void info(void)
{
	printf("cpl=%d secure=%lu kernelmode=%d\n", cpl(),
	       getauxval(AT_SECURE), kernel_mode());
	fflush(stdout);
}

int main(int argc, char **argv)
{
	const char *cmd = argc > 1 ? argv[1] : "info";

	if (!strcmp(cmd, "info")) {
		info();
	} else if (!strcmp(cmd, "fork-info")) {
		int status;
		pid_t pid;

		fflush(stdout);
		pid = fork();
		if (pid < 0)
			return 2;
		if (pid == 0) {
			info();
			_exit(0);
		}
		if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
			return 3;
		return WEXITSTATUS(status);
	} else if (!strcmp(cmd, "exec") && argc > 2) {
		execv(argv[2], argv + 2);
		perror("execv");
		return 127;
	} else if (!strcmp(cmd, "sleep") && argc > 2) {
		sleep(atoi(argv[2]));
	} else if (!strcmp(cmd, "uring-sleep") && argc > 2) {
		struct io_uring_params p = {
			.flags = IORING_SETUP_SQPOLL, .sq_thread_idle = 60000,
		};

		if (prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) ||
		    syscall(__NR_io_uring_setup, 4, &p) < 0) {
			perror("io_uring_setup");
			return 4;
		}
		sleep(atoi(argv[2]));
	} else if (!strcmp(cmd, "map-exec") && argc > 2) {
		return map_exec(argv[2]);
	} else if (!strcmp(cmd, "kfunc") && argc > 2) {
		long r = syscall(SYS_arch_prctl, ARCH_KML_KFUNC_OPEN, argv[2]);

		printf("kfunc=%s\n", result(r < 0 ? errno : 0));
	} else if (!strcmp(cmd, "spin") && argc > 2) {
		long n = atol(argv[2]), acc = 0;

		for (long i = 0; i < n; i++)
			acc += syscall(SYS_getppid) ^ i;
		return acc == 0x7fffffff;	/* keep acc alive */
	} else {
		fprintf(stderr, "usage: kml-probe info|fork-info|exec PROG...|sleep S|spin N|uring-sleep S|map-exec FILE|kfunc NAME\n");
		return 2;
	}
	return 0;
}
