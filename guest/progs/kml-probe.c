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
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/io_uring.h>
#include <sys/auxv.h>
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
	} else if (!strcmp(cmd, "spin") && argc > 2) {
		long n = atol(argv[2]), acc = 0;

		for (long i = 0; i < n; i++)
			acc += syscall(SYS_getppid) ^ i;
		return acc == 0x7fffffff;	/* keep acc alive */
	} else {
		fprintf(stderr, "usage: kml-probe info|fork-info|exec PROG...|sleep S|spin N|uring-sleep S\n");
		return 2;
	}
	return 0;
}
