// SPDX-License-Identifier: GPL-2.0
/*
 * Foundation tests: the guest kernel is the kml build, configured as the
 * project needs (SMP, PTI as requested, SMEP/SMAP, the syscalls the config
 * fragment enables), and the guest image is complete (/trusted, a
 * dynamically linked glibc program).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sys/auxv.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "kml_util.h"

TEST(release_is_kml_6_12)
{
	struct utsname u;
	size_t n;

	ASSERT_EQ(0, uname(&u));
	TH_LOG("release %s", u.release);
	ASSERT_EQ(0, strncmp(u.release, "6.12.", 5));
	/* 6.12.N-kml, -kml-debug, -kml-defconfig or -kml-debian: ./kml's kernels */
	n = strcspn(u.release + 5, "-") + 5;
	ASSERT_GT(n, 5);
	ASSERT_TRUE(!strcmp(u.release + n, "-kml") ||
		    !strcmp(u.release + n, "-kml-debug") ||
		    !strcmp(u.release + n, "-kml-defconfig") ||
		    !strcmp(u.release + n, "-kml-debian"));
	ASSERT_TRUE(kml_kernel());
}

TEST(online_cpus_match_vm)
{
	char val[16];

	ASSERT_EQ(0, kml_cmdline_param("kml.smp", val, sizeof(val)))
		TH_LOG("kml.smp= missing: not booted by ./kml?");
	ASSERT_EQ(atol(val), sysconf(_SC_NPROCESSORS_ONLN));
}

TEST(pti_matches_cmdline)
{
	char val[16];
	int flag = kml_cpu_flag("pti");

	if (kml_cmdline_param("pti", val, sizeof(val)))
		SKIP(return, "no pti= on the command line");
	ASSERT_GE(flag, 0);
	if (!strcmp(val, "on")) {
		ASSERT_EQ(1, flag) TH_LOG("pti=on but no pti cpu flag");
	} else if (!strcmp(val, "off")) {
		ASSERT_EQ(0, flag) TH_LOG("pti=off but pti cpu flag set");
	}
}

TEST(smep_smap_available)
{
	/* QEMU -cpu max provides both; the kernel enables what it lists. */
	ASSERT_EQ(1, kml_cpu_flag("smep"));
	ASSERT_EQ(1, kml_cpu_flag("smap"));
}

TEST(trusted_dir_is_root_owned)
{
	struct stat st;

	ASSERT_EQ(0, stat("/trusted", &st));
	ASSERT_TRUE(S_ISDIR(st.st_mode));
	ASSERT_EQ(0, st.st_uid);
	ASSERT_EQ(0, st.st_mode & (S_IWGRP | S_IWOTH));
}

TEST(vdso_is_mapped)
{
	ASSERT_NE(0, getauxval(AT_SYSINFO_EHDR));
}

TEST(dynamic_glibc_program)
{
	int fds[2], status;
	char buf[256] = "";
	ssize_t n;
	pid_t pid;

	ASSERT_EQ(0, pipe(fds));
	pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		dup2(fds[1], 1);
		execl("/usr/bin/kml-hello-dyn", "kml-hello-dyn", "arg1", NULL);
		_exit(127);
	}
	close(fds[1]);
	n = read(fds[0], buf, sizeof(buf) - 1);
	ASSERT_GT(n, 0);
	buf[n] = '\0';
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	ASSERT_EQ(0, WEXITSTATUS(status));
	ASSERT_EQ(0, strncmp(buf, "hello from glibc 2.", 19)) TH_LOG("got %s", buf);
	ASSERT_NE(NULL, strstr(buf, " arg1\n"));
}

TEST(exit_status_and_signals_reach_parent)
{
	int status;
	pid_t pid = fork();

	ASSERT_GE(pid, 0);
	if (pid == 0)
		_exit(42);
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	ASSERT_EQ(42, WEXITSTATUS(status));

	pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		pause();
		_exit(0);
	}
	ASSERT_EQ(0, kill(pid, SIGKILL));
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFSIGNALED(status));
	ASSERT_EQ(SIGKILL, WTERMSIG(status));
}

static void *thread_fn(void *arg)
{
	return (char *)arg + 1;
}

TEST(pthreads_and_futex)
{
	pthread_t t;
	void *ret;
	char c;

	ASSERT_EQ(0, pthread_create(&t, NULL, thread_fn, &c));
	ASSERT_EQ(0, pthread_join(t, &ret));
	ASSERT_EQ(&c + 1, (char *)ret);
}

TEST(event_fds)
{
	struct itimerspec its = { .it_value = { .tv_nsec = 1000000 } };
	struct epoll_event ev = { .events = EPOLLIN }, out;
	struct signalfd_siginfo si;
	uint64_t v = 0;
	sigset_t set;
	int ep, efd, tfd, sfd;

	efd = eventfd(3, 0);
	ASSERT_GE(efd, 0);
	ep = epoll_create1(0);
	ASSERT_GE(ep, 0);
	ASSERT_EQ(0, epoll_ctl(ep, EPOLL_CTL_ADD, efd, &ev));
	ASSERT_EQ(1, epoll_wait(ep, &out, 1, 1000));
	ASSERT_EQ(8, read(efd, &v, 8));
	ASSERT_EQ(3, v);

	tfd = timerfd_create(CLOCK_MONOTONIC, 0);
	ASSERT_GE(tfd, 0);
	ASSERT_EQ(0, timerfd_settime(tfd, 0, &its, NULL));
	ASSERT_EQ(8, read(tfd, &v, 8));
	ASSERT_GE(v, 1);

	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	ASSERT_EQ(0, sigprocmask(SIG_BLOCK, &set, NULL));
	sfd = signalfd(-1, &set, 0);
	ASSERT_GE(sfd, 0);
	ASSERT_EQ(0, kill(getpid(), SIGUSR1));
	ASSERT_EQ(sizeof(si), read(sfd, &si, sizeof(si)));
	ASSERT_EQ(SIGUSR1, si.ssi_signo);
	close(sfd);
	close(tfd);
	close(ep);
	close(efd);
}

TEST(unix_and_inet_sockets)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	int sv[2], lfd, cfd, afd;
	char buf[4];

	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
	ASSERT_EQ(4, write(sv[0], "ping", 4));
	ASSERT_EQ(4, read(sv[1], buf, 4));
	ASSERT_EQ(0, memcmp(buf, "ping", 4));

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	ASSERT_GE(lfd, 0);
	ASSERT_EQ(0, bind(lfd, (struct sockaddr *)&sa, sizeof(sa)));
	ASSERT_EQ(0, listen(lfd, 1));
	ASSERT_EQ(0, getsockname(lfd, (struct sockaddr *)&sa, &len));
	cfd = socket(AF_INET, SOCK_STREAM, 0);
	ASSERT_GE(cfd, 0);
	ASSERT_EQ(0, connect(cfd, (struct sockaddr *)&sa, sizeof(sa)));
	afd = accept(lfd, NULL, NULL);
	ASSERT_GE(afd, 0);
	ASSERT_EQ(4, write(cfd, "pong", 4));
	ASSERT_EQ(4, read(afd, buf, 4));
	ASSERT_EQ(0, memcmp(buf, "pong", 4));
	close(afd);
	close(cfd);
	close(lfd);
	close(sv[0]);
	close(sv[1]);
}

TEST(anonymous_memory)
{
	size_t len = 64 << 20, page = getpagesize();
	unsigned char *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	ASSERT_NE(MAP_FAILED, p);
	for (size_t i = 0; i < len; i += page)
		p[i] = (unsigned char)(i / page);
	for (size_t i = 0; i < len; i += page)
		ASSERT_EQ((unsigned char)(i / page), p[i]);
	ASSERT_EQ(0, mprotect(p, len, PROT_READ));
	ASSERT_EQ(0, munmap(p, len));
}

TEST_HARNESS_MAIN
