/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The kml guest tests' helpers: those of the series' selftests
 * (tools/testing/selftests/x86/kml_util.h, found through -I$(KSFT)), and
 * a few only the project's tests use: CPU flags, "is this one of ./kml's
 * kernels" by its release, kml_run_capture() without a setup hook, a
 * task's mapped kernel stack as the kernel reports it, and its state.
 */
#ifndef KML_GUEST_UTIL_H
#define KML_GUEST_UTIL_H

#include <sys/utsname.h>
#include <time.h>

#include "x86/kml_util.h"

/* Does the "flags" line of /proc/cpuinfo list flag? */
static inline int kml_cpu_flag(const char *flag)
{
	static char info[1 << 16];
	char *line, *save, *tok;

	if (kml_read_file("/proc/cpuinfo", info, sizeof(info)) < 0)
		return -1;
	line = strstr(info, "\nflags");
	if (!line)
		return -1;
	line = strchr(line, ':');
	if (!line)
		return -1;
	line[strcspn(line, "\n")] = '\0';
	for (tok = strtok_r(line + 1, " ", &save); tok;
	     tok = strtok_r(NULL, " ", &save))
		if (!strcmp(tok, flag))
			return 1;
	return 0;
}

/*
 * Is this a kml kernel?  ./kml builds them with a release that ends in
 * -kml, or in -kml-debug and -kml-defconfig for the other two kernels:
 * "-kml" after the version, then nothing or one more "-" word.
 */
static inline int kml_kernel(void)
{
	struct utsname u;
	const char *k;

	if (uname(&u))
		return 0;
	k = strstr(u.release, "-kml");
	return k && (!k[4] || (k[4] == '-' && k[5] && !strchr(k + 5, '-')));
}

/* Run argv with stdout+stderr into out; exit status, or -1. */
static inline int kml_run_capture(char *const argv[], char *const envp[],
				  char *out, size_t size, pid_t *pidp)
{
	return kml_run_capture_setup(argv, envp, NULL, NULL, out, size, pidp);
}

/*
 * KernelStack: of thread tid of process pid (/proc/PID/task/TID/status),
 * in kB: the mapped part of a dynamic stack; -1 if absent.
 */
static inline long kml_task_stack_kb(pid_t pid, pid_t tid)
{
	char path[64], buf[4096], *p;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/status", (int)pid, (int)tid);
	if (kml_read_file(path, buf, sizeof(buf)) < 0)
		return -1;
	p = strstr(buf, "\nKernelStack:");
	return p ? strtol(p + 13, NULL, 10) : -1;
}

/* State letter of /proc/PID/stat ('S': sleeping), or 0. */
static inline char kml_proc_state(pid_t pid)
{
	char path[64], buf[512], *p;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	if (kml_read_file(path, buf, sizeof(buf)) <= 0)
		return 0;
	p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : 0;
}

/* Wait (at most ~10 s) until pid sleeps; 0 if it does. */
static inline int kml_wait_sleeping(pid_t pid)
{
	struct timespec ms = { 0, 1000 * 1000 };

	for (int i = 0; i < 10000; i++) {
		if (kml_proc_state(pid) == 'S')
			return 0;
		nanosleep(&ms, NULL);
	}
	return -1;
}

#endif /* KML_GUEST_UTIL_H */
