/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers shared by the kml guest tests, all named kml_*: reading small
 * files, the kernel command line (the one parser of /proc/cmdline in the
 * tests), CPU flags, the CPL, running a program and capturing its output.
 */
#ifndef KML_UTIL_H
#define KML_UTIL_H

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/utsname.h>
#include <sys/wait.h>

/* Read a whole (small) file into buf; returns length or -1. */
static inline long kml_read_file(const char *path, char *buf, size_t size)
{
	FILE *f = fopen(path, "r");
	size_t n;

	if (!f)
		return -1;
	n = fread(buf, 1, size - 1, f);
	buf[n] = '\0';
	fclose(f);
	return (long)n;
}

/*
 * Value of "key=value" on the kernel command line, copied into val;
 * returns 0 if found, -1 if not.
 */
static inline int kml_cmdline_param(const char *key, char *val, size_t size)
{
	char line[4096], *tok, *save;
	size_t klen = strlen(key);

	if (kml_read_file("/proc/cmdline", line, sizeof(line)) < 0)
		return -1;
	for (tok = strtok_r(line, " \n", &save); tok;
	     tok = strtok_r(NULL, " \n", &save)) {
		if (!strncmp(tok, key, klen) && tok[klen] == '=') {
			snprintf(val, size, "%s", tok + klen + 1);
			return 0;
		}
	}
	return -1;
}

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

/* The caller's privilege level, from CS. */
static inline int kml_cpl(void)
{
	unsigned short cs;

	asm volatile("mov %%cs, %0" : "=r"(cs));
	return cs & 3;
}

/* Was this program started from /trusted? 1, 0, or -1 on error. */
static inline int kml_in_trusted(void)
{
	char exe[256];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (n < 0)
		return -1;
	exe[n] = '\0';
	return !strncmp(exe, "/trusted/", 9);
}

/*
 * Did the kernel boot with kml=all (every program in kernel mode)?  The
 * last kml= on the command line counts, as for the kernel.  1, 0, or -1
 * if the command line cannot be read.
 */
static inline int kml_all_mode(void)
{
	char line[4096], *tok, *save, *last = NULL;

	if (kml_read_file("/proc/cmdline", line, sizeof(line)) < 0)
		return -1;
	for (tok = strtok_r(line, " \n", &save); tok;
	     tok = strtok_r(NULL, " \n", &save))
		if (!strncmp(tok, "kml=", 4))
			last = tok + 4;
	return last && !strcmp(last, "all");
}

/* Should this program run in kernel mode?  1, 0, or -1 on error. */
static inline int kml_expect_kernel_mode(void)
{
	int all = kml_all_mode();

	return all ? all : kml_in_trusted();
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

/*
 * Run argv with stdout+stderr into out; exit status (128 + signal), or
 * -1.  In the child, setup(arg), if given, runs last before exec (it may
 * _exit() with a status of its own; nonzero: exit 123).
 */
static inline int kml_run_capture_setup(char *const argv[], char *const envp[],
					int (*setup)(const void *),
					const void *arg, char *out, size_t size,
					pid_t *pidp)
{
	int p[2], status;
	size_t n = 0;
	ssize_t r;
	pid_t pid;

	if (pipe(p))
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (!pid) {
		dup2(p[1], 1);
		dup2(p[1], 2);
		close(p[0]);
		close(p[1]);
		if (setup && setup(arg))
			_exit(123);
		if (envp)
			execve(argv[0], argv, envp);
		else
			execv(argv[0], argv);
		printf("exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	if (pidp)
		*pidp = pid;
	close(p[1]);
	while ((r = read(p[0], out + n, size - 1 - n)) > 0)
		n += (size_t)r;
	out[n] = '\0';
	close(p[0]);
	if (waitpid(pid, &status, 0) != pid)
		return -1;
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}

/* Run argv with stdout+stderr into out; exit status, or -1. */
static inline int kml_run_capture(char *const argv[], char *const envp[],
				  char *out, size_t size, pid_t *pidp)
{
	return kml_run_capture_setup(argv, envp, NULL, NULL, out, size, pidp);
}

/* Program output, indented as TAP diagnostics ("# " on every line). */
static inline const char *kml_quoted(const char *out)
{
	static char q[1 << 17];
	size_t n = 0;

	for (; *out && n + 4 < sizeof(q); out++) {
		q[n++] = *out;
		if (*out == '\n' && out[1]) {
			q[n++] = '#';
			q[n++] = ' ';
		}
	}
	q[n] = '\0';
	return q;
}

/*
 * Install this program as NAME in the trusted directory ($KML_TRUSTED or
 * /trusted), root-owned 0755, unless it is there already: for tests
 * whose kernel-mode side is a copy of themselves.  Its path, or NULL.
 */
static inline const char *kml_install_self(const char *name)
{
	static char path[256];
	const char *dir = getenv("KML_TRUSTED") ?: "/trusted";
	char buf[65536];
	int in, out;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (!access(path, X_OK))
		return path;
	in = open("/proc/self/exe", O_RDONLY);
	out = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0755);
	if (in < 0 || out < 0)
		return NULL;
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, n) != n)
			return NULL;
	if (fchmod(out, 0755) || fchown(out, 0, 0) || close(out))
		return NULL;
	close(in);
	return path;
}

#endif /* KML_UTIL_H */
