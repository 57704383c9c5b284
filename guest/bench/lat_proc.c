// SPDX-License-Identifier: GPL-2.0
/*
 * kml-bench's process rows (lmbench's lat_proc fork and exec): fork +
 * _exit + waitpid, fork + execve (of --exec, /usr/lib/kml/hello by
 * default) + waitpid.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kml.h"
#include "lat.h"

static int run_fork_exit(struct lat_ctx *c, unsigned long n)
{
	pid_t pid;

	fflush(NULL);
	while (n--) {
		pid = fork();
		if (pid < 0)
			return lat_fail(c, "fork");
		if (pid == 0)
			_exit(0);
		if (lat_wait_child(c, pid, "child"))
			return -1;
	}
	return 0;
}

/*
 * fork through libkml: clone(SIGCHLD) as glibc's fork() makes it (without
 * the TID bookkeeping, which only glibc's own child code needs); the child
 * makes no call but exit_group.
 */
static long kfork(void)
{
	return kml_syscall5(SYS_clone, SIGCHLD, 0, 0, 0, 0);
}

static __attribute__((noreturn)) void kexit(int status)
{
	for (;;)
		kml_syscall1(SYS_exit_group, status);
}

static int run_fork_exit_call(struct lat_ctx *c, unsigned long n)
{
	long pid;

	while (n--) {
		pid = kfork();
		if (lat_kerr(pid))
			return lat_kfail(c, "clone", pid);
		if (pid == 0)
			kexit(0);
		if (lat_kwait_child(c, pid, "child"))
			return -1;
	}
	return 0;
}

static int setup_exec(struct lat_ctx *c)
{
	if (access(lat_opt.exec_path, X_OK))
		return lat_skip(c, "exec target %s: %s (use --exec PATH)",
				lat_opt.exec_path, strerror(errno));
	return 0;
}

static int run_fork_exec(struct lat_ctx *c, unsigned long n)
{
	char *argv[] = { (char *)lat_opt.exec_path, NULL };
	char *envp[] = { NULL };
	pid_t pid;

	fflush(NULL);
	while (n--) {
		pid = fork();
		if (pid < 0)
			return lat_fail(c, "fork");
		if (pid == 0) {
			execve(lat_opt.exec_path, argv, envp);
			_exit(127);
		}
		if (lat_wait_child(c, pid, lat_opt.exec_path))
			return -1;
	}
	return 0;
}

static int run_fork_exec_call(struct lat_ctx *c, unsigned long n)
{
	char *argv[] = { (char *)lat_opt.exec_path, NULL };
	char *envp[] = { NULL };
	long pid;

	while (n--) {
		pid = kfork();
		if (lat_kerr(pid))
			return lat_kfail(c, "clone", pid);
		if (pid == 0) {
			kml_syscall3(SYS_execve, (long)lat_opt.exec_path,
				     (long)argv, (long)envp);
			kexit(127);
		}
		if (lat_kwait_child(c, pid, lat_opt.exec_path))
			return -1;
	}
	return 0;
}

static const struct lat_row rows[] = {
	{ .name = "fork_exit", .label = "fork + _exit + waitpid",
	  .unit = "op", .run = run_fork_exit,
	  .run_call = run_fork_exit_call },
	{ .name = "fork_exec", .label = "fork + execve + waitpid",
	  .unit = "op", .setup = setup_exec, .run = run_fork_exec,
	  .run_call = run_fork_exec_call },
};

LAT_FAMILY(lat_proc, rows);
