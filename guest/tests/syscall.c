// SPDX-License-Identifier: GPL-2.0
/*
 * Fast system calls for kernel-mode processes, and libkml's call path.
 *
 * run-tests runs this program twice: from /usr/lib/kml/tests (user mode)
 * and from /trusted (kernel mode, "syscall@kernel").  Three ways into the
 * kernel are compared wherever they apply:
 *
 *   syscall instruction  an out-of-line `syscall` (sys_insn below)
 *   libkml               kml_syscall6(): __vdso_kml_syscall in kernel
 *                        mode, the `syscall` instruction otherwise
 *   __vdso_kml_syscall   called directly (also in user mode, where it
 *                        executes `syscall` itself), when the vDSO has it
 *
 * Tests in the "fast" fixture switch /proc/sys/kernel/kml_syscall_path
 * (restored by the parent afterwards, even if the test crashes) through
 * its paths: bypass (where the kernel offers it), generic (the generic
 * entry work with the direct return) and complete; they need a kml kernel
 * and root, and skip otherwise with the reason.  The other tests run on
 * the path the boot selected (the default, bypass, or
 * sysctl.kernel.kml_syscall_path=generic in one of the test
 * configurations).  Everything
 * else also runs on a stock kernel (there is no __vdso_kml_syscall there
 * and libkml falls back to the `syscall` instruction), except the fuzz
 * run, which is only for a kml guest.
 */
#define _GNU_SOURCE
#include <asm/prctl.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "kml_util.h"
#include "kml.h"

#define SYSCTL		"/proc/sys/kernel/kml_syscall_path"
#define FAST_KEY	"KernelModeFastSyscalls:"
#define BYPASS_KEY	"KernelModeBypassSyscalls:"
#define V_BYPASS	2		/* path_names[] indices */
#define V_GENERIC	1
#define N_CALLS		1000
#define KERNEL_ADDR	0xffffffff81000000UL
#define NONCANONICAL	0x8000000000000000UL
#define X32_BIT		0x40000000L
#define KML_STR_(x)	#x
#define KML_STR(x)	KML_STR_(x)	/* a macro's value as a string */

/* ---- the sysctl and the counter -------------------------------------- */

/* kernel.kml_syscall_path's words, by V_* value */
static const char *const path_names[] = { "complete", "generic", "bypass" };

/* The path's V_* value, or -1 */
static int sysctl_get(void)
{
	char buf[32];

	if (kml_read_file(SYSCTL, buf, sizeof(buf)) <= 0)
		return -1;
	buf[strcspn(buf, "\n")] = 0;
	for (int v = 0; v <= V_BYPASS; v++)
		if (!strcmp(buf, path_names[v]))
			return v;
	return -1;
}

/* 0, or -errno */
static int sysctl_write(const char *word)
{
	char buf[32];
	int fd = open(SYSCTL, O_WRONLY), r = 0;

	if (fd < 0)
		return -errno;
	snprintf(buf, sizeof(buf), "%s\n", word);
	if (write(fd, buf, strlen(buf)) != (ssize_t)strlen(buf))
		r = -errno;
	close(fd);
	return r;
}

static int sysctl_set(int v)
{
	return sysctl_write(path_names[v]);
}

/* The number after key in a status file's text, or -1. */
static long key_parse(const char *buf, const char *key)
{
	size_t len = strlen(key);
	const char *p;
	long v = 0;

	for (p = buf; *p; p++)
		if (!strncmp(p, key, len))
			break;
	if (!*p)
		return -1;
	p += len;
	while (*p == ' ' || *p == '\t')
		p++;
	if (*p < '0' || *p > '9')
		return -1;
	while (*p >= '0' && *p <= '9')
		v = v * 10 + (*p++ - '0');
	return v;
}

/*
 * Direct returns, through either path: KernelModeFastSyscalls (generic
 * work) + KernelModeBypassSyscalls, or -1.
 */
static long fast_parse(const char *buf)
{
	long f = key_parse(buf, FAST_KEY), b = key_parse(buf, BYPASS_KEY);

	return f < 0 || b < 0 ? -1 : f + b;
}

/* A counter of the calling thread (key, or both if NULL), from fd. */
static long status_pread(int fd, const char *key)
{
	char buf[4096];
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);

	if (n <= 0)
		return -1;
	buf[n] = '\0';
	return key ? key_parse(buf, key) : fast_parse(buf);
}

/* The direct returns of the calling thread, from an open status fd. */
static long fast_pread(int fd)
{
	return status_pread(fd, NULL);
}

static int fast_open(void)
{
	return open("/proc/thread-self/status", O_RDONLY);
}

static long fast_count(void)
{
	int fd = fast_open();
	long v;

	if (fd < 0)
		return -1;
	v = fast_pread(fd);
	close(fd);
	return v;
}

/*
 * What the counter of direct returns must do for this process: 1 = grow
 * with every plain call (kernel mode, kml_syscall_path generic or bypass), 0 = stay
 * put (user mode, or the sysctl 0), -1 = no counter (not a kml kernel).
 */
static int fast_expected(struct __test_metadata *_metadata)
{
	int v;

	if (!kml_kernel())
		return -1;
	v = sysctl_get();
	ASSERT_GE(v, 0) TH_LOG("%s unreadable on a kml kernel", SYSCTL);
	ASSERT_LE(0, fast_count()) TH_LOG("no %s line on a kml kernel",
					  FAST_KEY);
	return kml_cpl() == 0 && v >= V_GENERIC;
}

/* ---- three ways into the kernel --------------------------------------- */

typedef long (*sysfn_t)(long nr, long a1, long a2, long a3, long a4,
			long a5, long a6);

long sys_insn(long nr, long a1, long a2, long a3, long a4, long a5, long a6);
long vdso_call6(void *entry, long nr, long a1, long a2, long a3, long a4,
		long a5, long a6);
asm(".pushsection .text\n"
    ".globl sys_insn\n"
    ".type sys_insn, @function\n"
    "sys_insn:\n"
    "	mov %rdi, %rax\n"
    "	mov %rsi, %rdi\n"
    "	mov %rdx, %rsi\n"
    "	mov %rcx, %rdx\n"
    "	mov %r8, %r10\n"
    "	mov %r9, %r8\n"
    "	mov 8(%rsp), %r9\n"
    "	syscall\n"
    "	ret\n"
    ".size sys_insn, . - sys_insn\n"
    /* a direct call of the vDSO function, whatever libkml decided */
    ".globl vdso_call6\n"
    ".type vdso_call6, @function\n"
    "vdso_call6:\n"
    "	mov %rdi, %r11\n"
    "	mov %rsi, %rax\n"
    "	mov %rdx, %rdi\n"
    "	mov %rcx, %rsi\n"
    "	mov %r8, %rdx\n"
    "	mov %r9, %r10\n"
    "	mov 8(%rsp), %r8\n"
    "	mov 16(%rsp), %r9\n"
    "	sub $8, %rsp\n"
    "	call *%r11\n"
    "	add $8, %rsp\n"
    "	ret\n"
    ".size vdso_call6, . - vdso_call6\n"
    ".popsection\n");

static long sys_vdso(long nr, long a1, long a2, long a3, long a4, long a5,
		     long a6)
{
	return vdso_call6(kml_vdso_entry(), nr, a1, a2, a3, a4, a5, a6);
}

struct mech {
	const char *name;
	sysfn_t fn;
	void *entry;	/* for the assembly checks: NULL = `syscall` */
};

static int get_mechs(struct mech m[3])
{
	int n = 0;

	m[n++] = (struct mech){ "syscall instruction", sys_insn, NULL };
	m[n++] = (struct mech){ kml_call_path() ? "libkml (call path)" :
				"libkml (syscall fallback)", kml_syscall6,
				NULL };
	if (kml_vdso_entry())
		m[n++] = (struct mech){ "__vdso_kml_syscall", sys_vdso,
					kml_vdso_entry() };
	return n;
}

#define SC0(m, nr)		(m)->fn((nr), 0, 0, 0, 0, 0, 0)
#define SC1(m, nr, a)		(m)->fn((nr), (long)(a), 0, 0, 0, 0, 0)
#define SC2(m, nr, a, b)	(m)->fn((nr), (long)(a), (long)(b), 0, 0, 0, 0)
#define SC3(m, nr, a, b, c)	\
	(m)->fn((nr), (long)(a), (long)(b), (long)(c), 0, 0, 0)
#define SC4(m, nr, a, b, c, d)	\
	(m)->fn((nr), (long)(a), (long)(b), (long)(c), (long)(d), 0, 0)

/* ---- mode and libkml ---------------------------------------------------- */

TEST(mode_and_call_path)
{
	int trusted = kml_in_trusted(), kernel = kml_cpl() == 0;
	void *entry = kml_vdso_entry();

	ASSERT_GE(trusted, 0);
	TH_LOG("cpl %d, from %s; vDSO at %p, __vdso_kml_syscall at %p, "
	       "call path %d", kml_cpl(), trusted ? "/trusted" : "elsewhere",
	       kml_vdso_base(), entry, kml_call_path());
	ASSERT_EQ(trusted ? 0 : 3, kml_cpl());
	ASSERT_EQ(kernel, kml_kernel_mode());
	ASSERT_EQ(getauxval(AT_SYSINFO_EHDR), (unsigned long)kml_vdso_base());
	if (kml_kernel()) {
		ASSERT_NE(NULL, entry) TH_LOG("a kml kernel's vDSO must "
					      "export __vdso_kml_syscall");
	}
	ASSERT_EQ(kernel && entry, kml_call_path());
	/* and the answer is stable */
	ASSERT_EQ(kernel && entry, kml_call_path());
}

/* The vDSO parser: every lookup method finds the same addresses. */
TEST(vdso_lookup_methods_agree)
{
	static const char *const names[] = {
		"__vdso_clock_gettime", "__vdso_gettimeofday", "__vdso_time",
		"__vdso_getcpu", "__vdso_clock_getres", "__vdso_kml_syscall",
	};
	static const enum kml_lookup hows[] = {
		KML_LOOKUP_GNU_HASH, KML_LOOKUP_SYSV_HASH, KML_LOOKUP_LINEAR,
	};
	const void *base = kml_vdso_base();
	int (*vgettime)(clockid_t, struct timespec *);
	struct timespec t0, t, t1;
	static const char zeros[4096];
	void *p;

	ASSERT_NE(NULL, base);
	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		p = kml_vdso_sym(base, names[i], "LINUX_2.6", KML_LOOKUP_AUTO);
		TH_LOG("%s: %p", names[i], p);
		for (size_t j = 0; j < ARRAY_SIZE(hows); j++) {
			ASSERT_EQ(p, kml_vdso_sym(base, names[i], "LINUX_2.6",
						  hows[j]))
				TH_LOG("%s, method %d", names[i], hows[j]);
		}
		ASSERT_EQ(p, kml_vdso_sym(base, names[i], NULL,
					  KML_LOOKUP_AUTO));
		if (p) {
			ASSERT_EQ(NULL, kml_vdso_sym(base, names[i],
						     "LINUX_9.9",
						     KML_LOOKUP_AUTO));
		}
	}
	ASSERT_EQ(kml_vdso_entry(), kml_vdso_sym(base, "__vdso_kml_syscall",
						 "LINUX_2.6",
						 KML_LOOKUP_LINEAR));
	for (size_t j = 0; j < ARRAY_SIZE(hows); j++) {
		ASSERT_EQ(NULL, kml_vdso_sym(base, "__vdso_no_such_thing",
					     NULL, hows[j]));
	}
	ASSERT_EQ(NULL, kml_vdso_sym(NULL, "__vdso_time", NULL,
				     KML_LOOKUP_AUTO));
	ASSERT_EQ(NULL, kml_vdso_sym(zeros, "__vdso_time", NULL,
				     KML_LOOKUP_AUTO));
	ASSERT_EQ(NULL, kml_vdso_sym(base, NULL, NULL, KML_LOOKUP_AUTO));

	/* what it found really is the function */
	vgettime = kml_vdso_sym(base, "__vdso_clock_gettime", "LINUX_2.6",
				KML_LOOKUP_AUTO);
	ASSERT_NE(NULL, vgettime);
	ASSERT_EQ(0, clock_gettime(CLOCK_MONOTONIC, &t0));
	ASSERT_EQ(0, vgettime(CLOCK_MONOTONIC, &t));
	ASSERT_EQ(0, clock_gettime(CLOCK_MONOTONIC, &t1));
	ASSERT_LE(t0.tv_sec * 1000000000LL + t0.tv_nsec,
		  t.tv_sec * 1000000000LL + t.tv_nsec);
	ASSERT_LE(t.tv_sec * 1000000000LL + t.tv_nsec,
		  t1.tv_sec * 1000000000LL + t1.tv_nsec);
}

/* kml_syscall(): syscall(2) semantics */
TEST(kml_syscall_sets_errno)
{
	char buf[4];

	ASSERT_EQ(getppid(), kml_syscall(SYS_getppid));
	errno = 0;
	ASSERT_EQ(-1, kml_syscall(SYS_read, -1, buf, 1));
	ASSERT_EQ(EBADF, errno);
	ASSERT_EQ(-1, kml_syscall(1000));
	ASSERT_EQ(ENOSYS, errno);
	ASSERT_EQ(-EBADF, kml_syscall3(SYS_read, -1, (long)buf, 1));
}

/* ---- the same results on every path -------------------------------- */

#define FILE_TEXT "fast system calls for kernel-mode processes\n"

/* A temporary file with FILE_TEXT; its path in path[]. */
static void make_file(struct __test_metadata *_metadata, char *path,
		      size_t sz)
{
	int fd;

	snprintf(path, sz, "/tmp/kml-syscall-XXXXXX");
	fd = mkstemp(path);
	ASSERT_LE(0, fd);
	ASSERT_EQ(strlen(FILE_TEXT), write(fd, FILE_TEXT, strlen(FILE_TEXT)));
	close(fd);
}

static long long ts_ns(const struct timespec *t)
{
	return t->tv_sec * 1000000000LL + t->tv_nsec;
}

/* Issue a set of calls through m; compare with the C library's answers. */
static void check_results(struct __test_metadata *_metadata,
			  const struct mech *m, const char *file)
{
	const char *mn = m->name;
	struct utsname u_ref, u;
	struct timespec t0, t, t1;
	struct rlimit rl_ref, rl;
	struct stat st_ref, st;
	char buf[256], ref[256];
	int fds[2];
	long fd, r;
	mode_t old;

	ASSERT_EQ(getpid(), SC0(m, SYS_getpid)) TH_LOG("%s", mn);
	ASSERT_EQ(getppid(), SC0(m, SYS_getppid)) TH_LOG("%s", mn);
	ASSERT_EQ(gettid(), SC0(m, SYS_gettid)) TH_LOG("%s", mn);
	ASSERT_EQ(getuid(), SC0(m, SYS_getuid)) TH_LOG("%s", mn);
	ASSERT_EQ(geteuid(), SC0(m, SYS_geteuid)) TH_LOG("%s", mn);
	ASSERT_EQ(getgid(), SC0(m, SYS_getgid)) TH_LOG("%s", mn);
	ASSERT_EQ(getpgid(0), SC1(m, SYS_getpgid, 0)) TH_LOG("%s", mn);
	ASSERT_EQ(getsid(0), SC1(m, SYS_getsid, 0)) TH_LOG("%s", mn);

	ASSERT_EQ(0, uname(&u_ref));
	memset(&u, 0xa5, sizeof(u));
	ASSERT_EQ(0, SC1(m, SYS_uname, &u)) TH_LOG("%s", mn);
	ASSERT_EQ(0, memcmp(&u_ref, &u, sizeof(u))) TH_LOG("%s", mn);

	/* read of a file */
	fd = SC4(m, SYS_openat, AT_FDCWD, file, O_RDONLY, 0);
	ASSERT_LE(0, fd) TH_LOG("%s: openat %s: %ld", mn, file, fd);
	memset(buf, 0, sizeof(buf));
	ASSERT_EQ(strlen(FILE_TEXT), SC3(m, SYS_read, fd, buf, sizeof(buf)))
		TH_LOG("%s", mn);
	ASSERT_STREQ(FILE_TEXT, buf);
	ASSERT_EQ(0, SC3(m, SYS_read, fd, buf, sizeof(buf))) TH_LOG("%s", mn);
	ASSERT_EQ(strlen(FILE_TEXT), SC3(m, SYS_lseek, fd, 0, SEEK_END));
	ASSERT_EQ(0, stat(file, &st_ref));
	ASSERT_EQ(0, SC4(m, SYS_newfstatat, fd, "", &st, AT_EMPTY_PATH))
		TH_LOG("%s", mn);
	ASSERT_EQ(st_ref.st_ino, st.st_ino);
	ASSERT_EQ(st_ref.st_size, st.st_size);
	ASSERT_EQ(0, SC4(m, SYS_newfstatat, AT_FDCWD, file, &st, 0));
	ASSERT_EQ(st_ref.st_ino, st.st_ino);
	ASSERT_EQ(-EINVAL, SC3(m, SYS_lseek, fd, 0, 12345)) TH_LOG("%s", mn);
	ASSERT_EQ(0, SC1(m, SYS_close, fd)) TH_LOG("%s", mn);
	ASSERT_EQ(-EBADF, SC1(m, SYS_close, fd)) TH_LOG("%s", mn);
	ASSERT_EQ(-ENOENT, SC4(m, SYS_openat, AT_FDCWD, "/nonexistent/kml",
			       O_RDONLY, 0)) TH_LOG("%s", mn);

	/* write to a pipe, read back with the C library */
	ASSERT_EQ(0, pipe(fds));
	ASSERT_EQ(4, SC3(m, SYS_write, fds[1], "kml!", 4)) TH_LOG("%s", mn);
	memset(buf, 0, sizeof(buf));
	ASSERT_EQ(4, read(fds[0], buf, sizeof(buf)));
	ASSERT_STREQ("kml!", buf);
	close(fds[0]);
	close(fds[1]);

	/* clock_gettime as a system call, between two vDSO readings */
	ASSERT_EQ(0, clock_gettime(CLOCK_MONOTONIC, &t0));
	ASSERT_EQ(0, SC2(m, SYS_clock_gettime, CLOCK_MONOTONIC, &t))
		TH_LOG("%s", mn);
	ASSERT_EQ(0, clock_gettime(CLOCK_MONOTONIC, &t1));
	ASSERT_LE(ts_ns(&t0), ts_ns(&t)) TH_LOG("%s", mn);
	ASSERT_LE(ts_ns(&t), ts_ns(&t1)) TH_LOG("%s", mn);

	ASSERT_NE(NULL, getcwd(ref, sizeof(ref)));
	r = SC2(m, SYS_getcwd, buf, sizeof(buf));
	ASSERT_EQ(strlen(ref) + 1, r) TH_LOG("%s", mn);
	ASSERT_STREQ(ref, buf);
	r = readlink("/proc/self/exe", ref, sizeof(ref) - 1);
	ASSERT_LT(0, r);
	ref[r] = '\0';
	memset(buf, 0, sizeof(buf));
	ASSERT_EQ(r, SC4(m, SYS_readlinkat, AT_FDCWD, "/proc/self/exe", buf,
			 sizeof(buf) - 1)) TH_LOG("%s", mn);
	ASSERT_STREQ(ref, buf);

	ASSERT_EQ(0, getrlimit(RLIMIT_NOFILE, &rl_ref));
	ASSERT_EQ(0, SC2(m, SYS_getrlimit, RLIMIT_NOFILE, &rl));
	ASSERT_EQ(rl_ref.rlim_cur, rl.rlim_cur);
	ASSERT_EQ(rl_ref.rlim_max, rl.rlim_max);
	old = umask(027);
	ASSERT_EQ(027, SC1(m, SYS_umask, old)) TH_LOG("%s", mn);
	ASSERT_EQ(old, umask(old));
	ASSERT_EQ(-EBADF, SC3(m, SYS_read, -1, buf, 1)) TH_LOG("%s", mn);
}

TEST(same_results_on_every_path)
{
	struct mech m[3];
	char file[64];
	int n = get_mechs(m);

	make_file(_metadata, file, sizeof(file));
	for (int i = 0; i < n; i++)
		check_results(_metadata, &m[i], file);
	unlink(file);
}

/*
 * Tests that switch kml_syscall_path: the parent puts the old value back,
 * also when the test dies.
 */
FIXTURE(fast) {
	int saved;
	int top;	/* the highest value the kernel accepts */
};

FIXTURE_SETUP(fast)
{
	int r;

	self->saved = -1;
	if (!kml_kernel())
		SKIP(return, "not a kml kernel: no %s", SYSCTL);
	if (geteuid())
		SKIP(return, "writing %s needs root", SYSCTL);
	self->saved = sysctl_get();
	ASSERT_LE(0, self->saved) TH_LOG("%s unreadable on a kml kernel",
					 SYSCTL);
	r = sysctl_set(V_BYPASS);
	if (r == -EINVAL) {
		self->top = V_GENERIC;
		TH_LOG("the kernel offers no bypass (%s rejects it)", SYSCTL);
	} else {
		ASSERT_EQ(0, r);
		self->top = V_BYPASS;
	}
	/* Only the paths' words: not the old numbers, nor prefixes */
	ASSERT_EQ(-EINVAL, sysctl_write("2"));
	ASSERT_EQ(-EINVAL, sysctl_write("bypas"));
	ASSERT_EQ(-EINVAL, sysctl_write("fast"));
}

FIXTURE_TEARDOWN_PARENT(fast)
{
	if (self->saved >= 0 && sysctl_get() != self->saved) {
		ASSERT_EQ(0, sysctl_set(self->saved));
	}
}

TEST_F(fast, same_results_fast_and_complete)
{
	struct mech m[3];
	char file[64];
	int n = get_mechs(m);

	make_file(_metadata, file, sizeof(file));
	for (int v = self->top; v >= 0; v--) {
		ASSERT_EQ(0, sysctl_set(v));
		ASSERT_EQ(v, sysctl_get());
		for (int i = 0; i < n; i++) {
			TH_LOG("kml_syscall_path=%s, %s", path_names[v], m[i].name);
			check_results(_metadata, &m[i], file);
		}
	}
	unlink(file);
}

/*
 * N getppid calls through m; the growth of the generic path's counter
 * (*fast) and of the bypass's (*bypass); fd: status.  -1 if unreadable.
 */
static void count_getppid(int fd, const struct mech *m, int n, long *fast,
			  long *bypass)
{
	long f0 = status_pread(fd, FAST_KEY), b0 = status_pread(fd, BYPASS_KEY);
	long f1, b1;

	for (int i = 0; i < n; i++)
		SC0(m, SYS_getppid);
	f1 = status_pread(fd, FAST_KEY);
	b1 = status_pread(fd, BYPASS_KEY);
	*fast = f0 < 0 || f1 < 0 ? -1 : f1 - f0;
	*bypass = b0 < 0 || b1 < 0 ? -1 : b1 - b0;
}

/*
 * Each value of the sysctl takes its own path: 2 counts in the bypass's
 * counter, 1 in the generic path's, 0 in neither; an ordinary process
 * counts nowhere.  (Each counter's own read adds at most one.)
 */
TEST_F(fast, fast_path_is_taken)
{
	struct mech m[3];
	int n = get_mechs(m), fd = fast_open();
	long f, b;

	ASSERT_LE(0, fd);
	ASSERT_LE(0, status_pread(fd, FAST_KEY)) TH_LOG("no %s line", FAST_KEY);
	ASSERT_LE(0, status_pread(fd, BYPASS_KEY))
		TH_LOG("no %s line", BYPASS_KEY);

	for (int v = self->top; v >= 0; v--) {
		ASSERT_EQ(0, sysctl_set(v));
		for (int i = 0; i < n; i++) {
			count_getppid(fd, &m[i], N_CALLS, &f, &b);
			TH_LOG("kml_syscall_path=%s, %s: generic +%ld, bypass +%ld over %d calls",
			       path_names[v], m[i].name, f, b, N_CALLS);
			ASSERT_LE(0, f);
			ASSERT_LE(0, b);
			if (kml_cpl() != 0 || v == 0) {
				ASSERT_EQ(0, f + b);
			} else if (v == V_GENERIC) {
				ASSERT_LE(N_CALLS, f);
				ASSERT_EQ(0, b);
			} else {
				ASSERT_LE(N_CALLS, b);
				ASSERT_GE(2, f);
			}
		}
	}
	if (kml_cpl() != 0) {
		ASSERT_EQ(0, fast_pread(fd)) TH_LOG("user mode: must stay 0");
	}
	close(fd);
}

/*
 * The calls after which the frame may not be what the bypass's direct
 * return assumes never take it, and neither do calls while a tracer or
 * seccomp filter wants to see them: arch_prctl(ARCH_GET_FS) and fork()
 * (a tracer may change the frame at its PTRACE_EVENT_FORK stop) count on
 * the generic path; getppid in a child with a seccomp filter that allows
 * everything counts on the generic path too.
 */
TEST_F(fast, bypass_leaves_out_what_it_must)
{
	struct mech m[3];
	int n = get_mechs(m), fd = fast_open(), status;
	unsigned long fs;
	long f0, b0, f1, b1;
	pid_t pid;

	if (self->top < V_BYPASS)
		SKIP(return, "the kernel offers no bypass");
	if (kml_cpl() != 0)
		SKIP(return, "an ordinary process takes neither path");
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, sysctl_set(V_BYPASS));
	for (int i = 0; i < n; i++) {
		f0 = status_pread(fd, FAST_KEY);
		b0 = status_pread(fd, BYPASS_KEY);
		for (int j = 0; j < N_CALLS; j++)
			ASSERT_EQ(0, SC2(&m[i], SYS_arch_prctl, ARCH_GET_FS, &fs));
		f1 = status_pread(fd, FAST_KEY);
		b1 = status_pread(fd, BYPASS_KEY);
		TH_LOG("%s: arch_prctl: generic +%ld, bypass +%ld", m[i].name,
		       f1 - f0, b1 - b0);
		ASSERT_LE(N_CALLS, f1 - f0);
		ASSERT_GE(2, b1 - b0);
	}

	f0 = status_pread(fd, FAST_KEY);
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0)
		_exit(0);
	f1 = status_pread(fd, FAST_KEY);
	TH_LOG("fork: generic +%ld", f1 - f0);
	ASSERT_EQ(1, f1 - f0);		/* the parent's return from fork */
	ASSERT_EQ(pid, waitpid(pid, &status, 0));

	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		struct sock_filter allow = BPF_STMT(BPF_RET | BPF_K,
						    SECCOMP_RET_ALLOW);
		struct sock_fprog prog = { .len = 1, .filter = &allow };

		int cfd = fast_open();	/* this thread's own file */

		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
		    syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog))
			_exit(10);
		f0 = status_pread(cfd, FAST_KEY);
		b0 = status_pread(cfd, BYPASS_KEY);
		for (int j = 0; j < N_CALLS; j++)
			sys_insn(SYS_getppid, 0, 0, 0, 0, 0, 0);
		f1 = status_pread(cfd, FAST_KEY);
		b1 = status_pread(cfd, BYPASS_KEY);
		if (b1 - b0 != 0)
			_exit(11);
		_exit(f1 - f0 >= N_CALLS ? 0 : 12);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	ASSERT_EQ(0, WEXITSTATUS(status))
		TH_LOG("10: no seccomp filter, 11: bypass taken, 12: no direct return");
	close(fd);
}

/* ---- registers and the red zone ------------------------------------- */

/*
 * regcheck(): load the pattern into every register, enter the kernel
 * through `syscall` (entry NULL) or `call *entry`, store every register.
 */
struct regblk {
	unsigned long entry;		/*   0 */
	unsigned long nr;		/*   8 */
	unsigned long in[12];		/*  16: rdi rsi rdx r10 r8 r9 */
					/*      rbx rbp r12 r13 r14 r15 */
	unsigned long out[12];		/* 112 */
	unsigned long rax;		/* 208 */
	unsigned long rsp_in;		/* 216 */
	unsigned long rsp_out;		/* 224 */
	unsigned long pad;		/* 232 */
	unsigned char xin[16][16];	/* 240 */
	unsigned char xout[16][16];	/* 496 */
};
_Static_assert(offsetof(struct regblk, out) == 112, "regblk layout");
_Static_assert(offsetof(struct regblk, rax) == 208, "regblk layout");
_Static_assert(offsetof(struct regblk, xin) == 240, "regblk layout");
_Static_assert(offsetof(struct regblk, xout) == 496, "regblk layout");

static const char *const reg_names[12] = {
	"rdi", "rsi", "rdx", "r10", "r8", "r9",
	"rbx", "rbp", "r12", "r13", "r14", "r15",
};

void regcheck(struct regblk *b);
asm(".pushsection .text\n"
    ".globl regcheck\n"
    ".type regcheck, @function\n"
    "regcheck:\n"
    "	push %rbx\n"
    "	push %rbp\n"
    "	push %r12\n"
    "	push %r13\n"
    "	push %r14\n"
    "	push %r15\n"
    "	push %rdi\n"			/* 7 pushes: rsp 16-byte aligned */
    "	mov %rsp, 216(%rdi)\n"
#define XIN(i) "	movdqu 240+16*" #i "(%rdi), %xmm" #i "\n"
    XIN(0) XIN(1) XIN(2) XIN(3) XIN(4) XIN(5) XIN(6) XIN(7)
    XIN(8) XIN(9) XIN(10) XIN(11) XIN(12) XIN(13) XIN(14) XIN(15)
    "	mov 64(%rdi), %rbx\n"
    "	mov 72(%rdi), %rbp\n"
    "	mov 80(%rdi), %r12\n"
    "	mov 88(%rdi), %r13\n"
    "	mov 96(%rdi), %r14\n"
    "	mov 104(%rdi), %r15\n"
    "	mov 0(%rdi), %r11\n"
    "	mov 8(%rdi), %rax\n"
    "	mov 24(%rdi), %rsi\n"
    "	mov 32(%rdi), %rdx\n"
    "	mov 40(%rdi), %r10\n"
    "	mov 48(%rdi), %r8\n"
    "	mov 56(%rdi), %r9\n"
    "	test %r11, %r11\n"
    "	mov 16(%rdi), %rdi\n"
    "	jz 1f\n"
    "	call *%r11\n"
    "	jmp 2f\n"
    "1:	syscall\n"
    "2:	mov (%rsp), %rcx\n"
    "	mov %rax, 208(%rcx)\n"
    "	mov %rdi, 112(%rcx)\n"
    "	mov %rsi, 120(%rcx)\n"
    "	mov %rdx, 128(%rcx)\n"
    "	mov %r10, 136(%rcx)\n"
    "	mov %r8, 144(%rcx)\n"
    "	mov %r9, 152(%rcx)\n"
    "	mov %rbx, 160(%rcx)\n"
    "	mov %rbp, 168(%rcx)\n"
    "	mov %r12, 176(%rcx)\n"
    "	mov %r13, 184(%rcx)\n"
    "	mov %r14, 192(%rcx)\n"
    "	mov %r15, 200(%rcx)\n"
    "	mov %rsp, 224(%rcx)\n"
#define XOUT(i) "	movdqu %xmm" #i ", 496+16*" #i "(%rcx)\n"
    XOUT(0) XOUT(1) XOUT(2) XOUT(3) XOUT(4) XOUT(5) XOUT(6) XOUT(7)
    XOUT(8) XOUT(9) XOUT(10) XOUT(11) XOUT(12) XOUT(13) XOUT(14) XOUT(15)
    "	pop %rdi\n"
    "	pop %r15\n"
    "	pop %r14\n"
    "	pop %r13\n"
    "	pop %r12\n"
    "	pop %rbp\n"
    "	pop %rbx\n"
    "	ret\n"
    ".size regcheck, . - regcheck\n"
    ".popsection\n");

static void regblk_fill(struct regblk *b, void *entry, long nr,
			unsigned long seed)
{
	memset(b, 0, sizeof(*b));
	b->entry = (unsigned long)entry;
	b->nr = nr;
	for (int i = 0; i < 12; i++)
		b->in[i] = seed ^ (0x0101010101010101UL * (i + 1));
	for (int i = 0; i < 16; i++)
		for (int j = 0; j < 16; j++)
			b->xin[i][j] = (unsigned char)(seed >> (j % 8) * 8) ^
				       (unsigned char)(i * 16 + j);
}

/* Every register but rax, rcx, r11 as it was; rax what the call gave. */
static void regblk_check(struct __test_metadata *_metadata,
			 const struct regblk *b, const char *what)
{
	for (int i = 0; i < 12; i++) {
		ASSERT_EQ(b->in[i], b->out[i])
			TH_LOG("%s: %s changed", what, reg_names[i]);
	}
	ASSERT_EQ(b->rsp_in, b->rsp_out) TH_LOG("%s: rsp changed", what);
	for (int i = 0; i < 16; i++) {
		ASSERT_EQ(0, memcmp(b->xin[i], b->xout[i], 16))
			TH_LOG("%s: xmm%d changed", what, i);
	}
}

static void check_registers(struct __test_metadata *_metadata,
			    const struct mech *m, const char *ctx)
{
	struct regblk b;
	char what[128];

	snprintf(what, sizeof(what), "%s%s: getppid", ctx, m->name);
	regblk_fill(&b, m->entry, SYS_getppid, 0x1234567890abcdefUL);
	regcheck(&b);
	ASSERT_EQ(getppid(), (long)b.rax) TH_LOG("%s", what);
	regblk_check(_metadata, &b, what);

	/* an unknown number: all six argument registers hold patterns */
	snprintf(what, sizeof(what), "%s%s: nr 1000", ctx, m->name);
	regblk_fill(&b, m->entry, 1000, 0xfedcba0987654321UL);
	regcheck(&b);
	ASSERT_EQ(-ENOSYS, (long)b.rax) TH_LOG("%s", what);
	regblk_check(_metadata, &b, what);

	/* a call that uses its arguments (the rest are patterns too) */
	snprintf(what, sizeof(what), "%s%s: read", ctx, m->name);
	regblk_fill(&b, m->entry, SYS_read, 0x0f1e2d3c4b5a6978UL);
	b.in[0] = -1;				/* rdi: a bad fd */
	regcheck(&b);
	ASSERT_EQ(-EBADF, (long)b.rax) TH_LOG("%s", what);
	regblk_check(_metadata, &b, what);
}

/* The syscall instruction and the vDSO function (when there is one). */
static int reg_mechs(struct mech m[2])
{
	int n = 0;

	m[n++] = (struct mech){ "syscall instruction", sys_insn, NULL };
	if (kml_vdso_entry())
		m[n++] = (struct mech){ "__vdso_kml_syscall", sys_vdso,
					kml_vdso_entry() };
	return n;
}

TEST(registers_preserved)
{
	struct mech m[2];
	int n = reg_mechs(m);

	for (int i = 0; i < n; i++)
		check_registers(_metadata, &m[i], "");
}

TEST_F(fast, registers_preserved_fast_and_complete)
{
	struct mech m[2];
	int n = reg_mechs(m);
	char ctx[64];

	for (int v = self->top; v >= 0; v--) {
		ASSERT_EQ(0, sysctl_set(v));
		snprintf(ctx, sizeof(ctx), "kml_syscall_path=%s, ", path_names[v]);
		for (int i = 0; i < n; i++)
			check_registers(_metadata, &m[i], ctx);
	}
}

/*
 * Red zone.  redzone_syscall(nr): a leaf that keeps 16 words in the 128
 * bytes below its RSP, executes `syscall`, returns how many changed.
 * redzone_call_adjusted(entry): the same around `call *entry` with RSP
 * moved below the red zone first (what a compiler does): nothing may
 * change.  redzone_call_unadjusted(entry, out): `call *entry` with the
 * red zone still live, as a leaf must not do: the call itself writes its
 * return address at -8(%rsp) and the callee owns what lies below; out[0]
 * = the word at -8 afterwards, out[1] = that return address, out[2] =
 * how many of the other 15 words changed; the result = how many of 16
 * words of its own frame ABOVE RSP changed (must be none).
 */
#define RZ_PATTERN "$0x6b6d6c00a5a50000"
/* Store the 16 pattern words in the red zone (clobbers rdx, rsi, r8). */
#define RZ_FILL								\
	"	movabs " RZ_PATTERN ", %rdx\n"				\
	"	xor %esi, %esi\n"					\
	"1:	lea (%rdx,%rsi), %r8\n"				\
	"	mov %r8, -128(%rsp,%rsi,8)\n"				\
	"	inc %rsi\n"						\
	"	cmp $16, %rsi\n"					\
	"	jne 1b\n"
/* RAX = how many of the 16 red-zone words changed. */
#define RZ_COUNT							\
	"	movabs " RZ_PATTERN ", %rdx\n"				\
	"	xor %eax, %eax\n"					\
	"	xor %esi, %esi\n"					\
	"2:	lea (%rdx,%rsi), %r8\n"				\
	"	cmp %r8, -128(%rsp,%rsi,8)\n"				\
	"	je 3f\n"						\
	"	inc %rax\n"						\
	"3:	inc %rsi\n"						\
	"	cmp $16, %rsi\n"					\
	"	jne 2b\n"
unsigned long redzone_syscall(long nr);
unsigned long redzone_call_adjusted(void *entry);
unsigned long redzone_call_unadjusted(void *entry, unsigned long out[3]);
asm(".pushsection .text\n"
    ".globl redzone_syscall\n"
    "redzone_syscall:\n"
    RZ_FILL
    "	mov %rdi, %rax\n"
    "	syscall\n"
    RZ_COUNT
    "	ret\n"

    ".globl redzone_call_adjusted\n"
    "redzone_call_adjusted:\n"
    RZ_FILL
    "	mov %rdi, %r11\n"
    "	mov $" KML_STR(SYS_getppid) ", %eax\n"
    "	sub $136, %rsp\n"		/* below the red zone, aligned */
    "	call *%r11\n"
    "	add $136, %rsp\n"
    RZ_COUNT
    "	ret\n"

    ".globl redzone_call_unadjusted\n"
    "redzone_call_unadjusted:\n"
    "	sub $264, %rsp\n"		/* own frame; RSP aligned */
    "	mov %rsi, 128(%rsp)\n"		/* out, above the patterns */
    "	movabs " RZ_PATTERN ", %rdx\n"
    "	xor %esi, %esi\n"
    "1:	lea (%rdx,%rsi), %r8\n"
    "	mov %r8, -128(%rsp,%rsi,8)\n"	/* the red zone */
    "	not %r8\n"
    "	mov %r8, (%rsp,%rsi,8)\n"	/* the frame above RSP */
    "	inc %rsi\n"
    "	cmp $16, %rsi\n"
    "	jne 1b\n"
    "	mov %rdi, %r11\n"
    "	mov $" KML_STR(SYS_getppid) ", %eax\n"
    "	call *%r11\n"
    "4:	movabs " RZ_PATTERN ", %rdx\n"
    "	xor %eax, %eax\n"		/* frame words changed */
    "	xor %edi, %edi\n"		/* red zone words changed */
    "	xor %esi, %esi\n"
    "2:	lea (%rdx,%rsi), %r8\n"
    "	cmp %r8, -128(%rsp,%rsi,8)\n"
    "	je 3f\n"
    "	cmp $15, %rsi\n"		/* -8(%rsp): the return address */
    "	je 3f\n"
    "	inc %rdi\n"
    "3:	not %r8\n"
    "	cmp %r8, (%rsp,%rsi,8)\n"
    "	je 5f\n"
    "	inc %rax\n"
    "5:	inc %rsi\n"
    "	cmp $16, %rsi\n"
    "	jne 2b\n"
    "	mov 128(%rsp), %rsi\n"
    "	mov -8(%rsp), %rcx\n"
    "	mov %rcx, (%rsi)\n"
    "	lea 4b(%rip), %rcx\n"
    "	mov %rcx, 8(%rsi)\n"
    "	mov %rdi, 16(%rsi)\n"
    "	add $264, %rsp\n"
    "	ret\n"
    ".popsection\n");

static void check_red_zone(struct __test_metadata *_metadata, const char *ctx)
{
	void *entry = kml_vdso_entry();
	unsigned long bad = 0, out[3];

	for (int i = 0; i < N_CALLS; i++)
		bad += redzone_syscall(SYS_getppid);
	ASSERT_EQ(0, bad) TH_LOG("%ssyscall: red zone words changed", ctx);
	bad = redzone_syscall(1000);
	ASSERT_EQ(0, bad) TH_LOG("%ssyscall -ENOSYS: red zone changed", ctx);
	if (!entry)
		return;
	for (int i = 0; i < N_CALLS; i++)
		bad += redzone_call_adjusted(entry);
	ASSERT_EQ(0, bad) TH_LOG("%scall with RSP below the red zone: %lu "
				 "words changed", ctx, bad);
	ASSERT_EQ(0, redzone_call_unadjusted(entry, out))
		TH_LOG("%scall: the caller's frame above RSP changed", ctx);
	ASSERT_EQ(out[1], out[0]) TH_LOG("%scall: -8(%%rsp) is not the "
					 "return address", ctx);
	TH_LOG("%s__vdso_kml_syscall used %lu of the 15 words below its "
	       "return address", ctx, out[2]);
}

TEST(red_zone_survives)
{
	check_red_zone(_metadata, "");
}

TEST_F(fast, red_zone_survives_fast_and_complete)
{
	char ctx[64];

	for (int v = self->top; v >= 0; v--) {
		ASSERT_EQ(0, sysctl_set(v));
		snprintf(ctx, sizeof(ctx), "kml_syscall_path=%s: ", path_names[v]);
		check_red_zone(_metadata, ctx);
	}
}

/* ---- errors ------------------------------------------------------------ */

static void check_errors(struct __test_metadata *_metadata,
			 const struct mech *m)
{
	static const long bad_nrs[] = {
		1000, -1, 400, 512, 547, 0x7fffffff, X32_BIT + SYS_getpid,
		X32_BIT + 1000, 0x100000000L + 1000,
	};
	static const long other_nrs[] = {
		0x100000000L + SYS_getppid, (long)0xffffffff00000000UL + 1000,
	};
	char *ro = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS,
			-1, 0);
	int zero = open("/dev/zero", O_RDONLY), fds[2];
	struct stat st;
	long r;

	ASSERT_NE(MAP_FAILED, ro);
	ASSERT_LE(0, zero);
	ASSERT_EQ(0, pipe(fds));

	/* invalid numbers: -ENOSYS, the process lives on */
	for (size_t i = 0; i < ARRAY_SIZE(bad_nrs); i++) {
		long want = sys_insn(bad_nrs[i], 0, 0, 0, 0, 0, 0);

		r = SC0(m, bad_nrs[i]);
		ASSERT_EQ(want, r) TH_LOG("%s: nr %#lx", m->name, bad_nrs[i]);
		if (kml_kernel() || (bad_nrs[i] & X32_BIT) == 0) {
			ASSERT_EQ(-ENOSYS, r)
				TH_LOG("%s: nr %#lx", m->name, bad_nrs[i]);
		}
	}
	/* whatever the kernel makes of the upper half: the same everywhere */
	for (size_t i = 0; i < ARRAY_SIZE(other_nrs); i++) {
		r = SC0(m, other_nrs[i]);
		ASSERT_EQ(sys_insn(other_nrs[i], 0, 0, 0, 0, 0, 0), r)
			TH_LOG("%s: nr %#lx", m->name, other_nrs[i]);
	}

	/* bad pointers: -EFAULT */
	ASSERT_EQ(-EFAULT, SC3(m, SYS_read, zero, NULL, 1)) TH_LOG("%s", m->name);
	ASSERT_EQ(-EFAULT, SC3(m, SYS_read, zero, ro, 1)) TH_LOG("%s", m->name);
	ASSERT_EQ(-EFAULT, SC3(m, SYS_read, zero, KERNEL_ADDR, 1))
		TH_LOG("%s", m->name);
	ASSERT_EQ(-EFAULT, SC3(m, SYS_write, fds[1], 1, 1)) TH_LOG("%s", m->name);
	ASSERT_EQ(-EFAULT, SC3(m, SYS_write, fds[1], KERNEL_ADDR, 1))
		TH_LOG("%s", m->name);
	ASSERT_EQ(-EFAULT, SC3(m, SYS_write, fds[1], NONCANONICAL, 1))
		TH_LOG("%s", m->name);
	ASSERT_EQ(-EFAULT, SC4(m, SYS_newfstatat, AT_FDCWD, KERNEL_ADDR, &st, 0))
		TH_LOG("%s", m->name);
	ASSERT_EQ(-EFAULT, SC4(m, SYS_newfstatat, AT_FDCWD, "/", KERNEL_ADDR, 0))
		TH_LOG("%s", m->name);
	ASSERT_EQ(-EFAULT, SC1(m, SYS_uname, KERNEL_ADDR)) TH_LOG("%s", m->name);
	ASSERT_EQ(-EFAULT, SC2(m, SYS_clock_gettime, CLOCK_MONOTONIC,
			       NONCANONICAL)) TH_LOG("%s", m->name);
	ASSERT_EQ(-EFAULT, SC2(m, SYS_pipe2, ro, 0)) TH_LOG("%s", m->name);
	/* still alive, still working */
	ASSERT_EQ(getppid(), SC0(m, SYS_getppid));
	close(fds[0]);
	close(fds[1]);
	close(zero);
	munmap(ro, 4096);
}

TEST(invalid_numbers_and_bad_pointers)
{
	struct mech m[3];
	int n = get_mechs(m);

	for (int i = 0; i < n; i++)
		check_errors(_metadata, &m[i]);
}

TEST_F(fast, invalid_numbers_and_bad_pointers_fast_and_complete)
{
	struct mech m[3];
	int n = get_mechs(m);

	for (int v = self->top; v >= 0; v--) {
		ASSERT_EQ(0, sysctl_set(v));
		for (int i = 0; i < n; i++)
			check_errors(_metadata, &m[i]);
	}
}

/* ---- signals during blocking calls --------------------------------- */

struct sigshare {
	volatile int handled;
};

static struct sigshare *shared;

static void on_usr1(int sig)
{
	shared->handled++;
}

static struct sigshare *map_shared(struct __test_metadata *_metadata)
{
	struct sigshare *s = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
				  MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	ASSERT_NE(MAP_FAILED, s);
	return s;
}

/*
 * A read of an empty pipe through m, interrupted by SIGUSR1 from a child
 * once the read sleeps.  With SA_RESTART the child writes a byte after the
 * handler ran and the read sleeps again: the read must restart and return
 * it.  Without SA_RESTART: -EINTR.
 */
static void blocking_read(struct __test_metadata *_metadata,
			  const struct mech *m, int restart)
{
	struct sigaction sa = { .sa_handler = on_usr1,
				.sa_flags = restart ? SA_RESTART : 0 };
	pid_t parent = getpid(), pid;
	int fds[2], status;
	char c = 0;
	long r;

	shared->handled = 0;
	ASSERT_EQ(0, sigaction(SIGUSR1, &sa, NULL));
	ASSERT_EQ(0, pipe(fds));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		if (kml_wait_sleeping(parent))
			_exit(2);
		kill(parent, SIGUSR1);
		if (restart) {
			for (int i = 0; i < 10000 && !shared->handled; i++)
				usleep(1000);
			if (!shared->handled || kml_wait_sleeping(parent))
				_exit(3);
			if (write(fds[1], "k", 1) != 1)
				_exit(4);
		}
		_exit(0);
	}
	r = SC3(m, SYS_read, fds[0], &c, 1);
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	ASSERT_EQ(0, WEXITSTATUS(status)) TH_LOG("%s: the signalling child "
						 "failed", m->name);
	ASSERT_EQ(1, shared->handled) TH_LOG("%s", m->name);
	if (restart) {
		ASSERT_EQ(1, r) TH_LOG("%s: SA_RESTART read gave %ld",
				       m->name, r);
		ASSERT_EQ('k', c);
	} else {
		ASSERT_EQ(-EINTR, r) TH_LOG("%s: read gave %ld", m->name, r);
	}
	close(fds[0]);
	close(fds[1]);
	signal(SIGUSR1, SIG_DFL);
}

TEST(signal_with_sa_restart_restarts_blocking_read)
{
	struct mech m[3];
	int n = get_mechs(m);

	shared = map_shared(_metadata);
	for (int i = 0; i < n; i++) {
		TH_LOG("%s", m[i].name);	/* which one, if it dies */
		blocking_read(_metadata, &m[i], 1);
	}
}

TEST(signal_without_sa_restart_interrupts_blocking_read)
{
	struct mech m[3];
	int n = get_mechs(m);

	shared = map_shared(_metadata);
	for (int i = 0; i < n; i++) {
		TH_LOG("%s", m[i].name);
		blocking_read(_metadata, &m[i], 0);
	}
}

/*
 * SIGSTOP and SIGCONT (no handler) restart a blocking call transparently:
 * a read of an empty pipe (-ERESTARTSYS) and nanosleep (restart_syscall,
 * -ERESTART_RESTARTBLOCK).  The call runs in a child, which exits with 0
 * when the call completed as it should.
 */
static void stop_and_continue(struct __test_metadata *_metadata,
			      const struct mech *m, int sleep)
{
	int fds[2], status;
	pid_t pid;

	ASSERT_EQ(0, pipe(fds));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		struct timespec req = { 1, 0 };
		char c = 0;
		long r;

		if (sleep)
			_exit(SC2(m, SYS_nanosleep, &req, NULL) ? 1 : 0);
		r = SC3(m, SYS_read, fds[0], &c, 1);
		_exit(r == 1 && c == 'k' ? 0 : 2);
	}
	ASSERT_EQ(0, kml_wait_sleeping(pid));
	ASSERT_EQ(0, kill(pid, SIGSTOP));
	ASSERT_EQ(pid, waitpid(pid, &status, WUNTRACED));
	ASSERT_TRUE(WIFSTOPPED(status));
	ASSERT_EQ(0, kill(pid, SIGCONT));
	if (!sleep) {
		ASSERT_EQ(0, kml_wait_sleeping(pid));
		ASSERT_EQ(1, write(fds[1], "k", 1));
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status))
		TH_LOG("%s, %s: killed by signal %d", m->name,
		       sleep ? "nanosleep" : "read", WTERMSIG(status));
	ASSERT_EQ(0, WEXITSTATUS(status))
		TH_LOG("%s, %s: the call did not complete", m->name,
		       sleep ? "nanosleep" : "read");
	close(fds[0]);
	close(fds[1]);
}

TEST(stop_and_continue_restart_blocking_calls)
{
	struct mech m[3];
	int n = get_mechs(m);

	for (int i = 0; i < n; i++) {
		stop_and_continue(_metadata, &m[i], 0);
		stop_and_continue(_metadata, &m[i], 1);
	}
}

/* nanosleep is never restarted after a handler: -EINTR, time left. */
TEST(signal_interrupts_nanosleep)
{
	struct sigaction sa = { .sa_handler = on_usr1,
				.sa_flags = SA_RESTART };
	struct mech m[3];
	int n = get_mechs(m), status;
	pid_t parent = getpid(), pid;

	shared = map_shared(_metadata);
	ASSERT_EQ(0, sigaction(SIGUSR1, &sa, NULL));
	for (int i = 0; i < n; i++) {
		struct timespec req = { 20, 0 }, rem = { 0, 0 };
		long r;

		shared->handled = 0;
		pid = fork();
		ASSERT_LE(0, pid);
		if (pid == 0)
			_exit(kml_wait_sleeping(parent) || kill(parent, SIGUSR1));
		r = SC2(&m[i], SYS_nanosleep, &req, &rem);
		ASSERT_EQ(pid, waitpid(pid, &status, 0));
		ASSERT_EQ(0, WEXITSTATUS(status));
		ASSERT_EQ(-EINTR, r) TH_LOG("%s", m[i].name);
		ASSERT_EQ(1, shared->handled);
		ASSERT_TRUE(rem.tv_sec > 0 || rem.tv_nsec > 0)
			TH_LOG("%s: no time left", m[i].name);
		ASSERT_GE(20, rem.tv_sec);
	}
	signal(SIGUSR1, SIG_DFL);
}

/* ---- process calls through the fast path ----------------------------- */

/*
 * raw_clone_run(flags, stack_top, fn, arg): clone through `syscall`; the
 * child starts on stack_top, runs fn(arg) and exits with its result.
 */
long raw_clone_run(unsigned long flags, void *stack_top, int (*fn)(void *),
		   void *arg);
asm(".pushsection .text\n"
    ".globl raw_clone_run\n"
    "raw_clone_run:\n"
    "	and $-16, %rsi\n"
    "	sub $16, %rsi\n"
    "	mov %rdx, 0(%rsi)\n"		/* fn and arg on the new stack */
    "	mov %rcx, 8(%rsi)\n"
    "	xor %edx, %edx\n"		/* parent_tid */
    "	xor %r10d, %r10d\n"		/* child_tid */
    "	xor %r8d, %r8d\n"		/* tls */
    "	mov $" KML_STR(SYS_clone) ", %eax\n"
    "	syscall\n"
    "	test %rax, %rax\n"
    "	jnz 1f\n"
    "	xor %ebp, %ebp\n"		/* the child, on the new stack */
    "	pop %rax\n"
    "	pop %rdi\n"
    "	call *%rax\n"
    "	mov %eax, %edi\n"
    "	mov $" KML_STR(SYS_exit) ", %eax\n"
    "	syscall\n"
    "	ud2\n"
    "1:	ret\n"
    ".popsection\n");

struct clone_share {
	char *stack;
	size_t size;
	volatile int ran;
	volatile int on_stack;
	volatile long fast;	/* counter growth in the child */
	volatile long ppid;
};

/* Runs in the clone child: shared memory, no C library (shared TLS). */
static int clone_child(void *arg)
{
	static char buf[4096];
	struct clone_share *s = arg;
	char here;
	long fd, n, c0 = -1, c1 = -1;

	s->on_stack = &here >= s->stack && &here < s->stack + s->size;
	fd = sys_insn(SYS_openat, AT_FDCWD, (long)"/proc/thread-self/status",
		      O_RDONLY, 0, 0, 0);
	if (fd >= 0) {
		n = sys_insn(SYS_pread64, fd, (long)buf, sizeof(buf) - 1, 0,
			     0, 0);
		if (n > 0) {
			buf[n] = 0;
			c0 = fast_parse(buf);
		}
	}
	for (int i = 0; i < N_CALLS; i++)
		s->ppid = sys_insn(SYS_getppid, 0, 0, 0, 0, 0, 0);
	if (fd >= 0) {
		n = sys_insn(SYS_pread64, fd, (long)buf, sizeof(buf) - 1, 0,
			     0, 0);
		if (n > 0) {
			buf[n] = 0;
			c1 = fast_parse(buf);
		}
		sys_insn(SYS_close, fd, 0, 0, 0, 0, 0);
	}
	s->fast = c0 < 0 || c1 < 0 ? -1 : c1 - c0;
	s->ran = 1;
	return 42;
}

TEST(clone_on_a_new_stack)
{
	int expect = fast_expected(_metadata), status;
	struct clone_share *s = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
				     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	size_t size = 256 * 1024;
	char *stack = mmap(NULL, size, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	long pid;

	ASSERT_NE(MAP_FAILED, s);
	ASSERT_NE(MAP_FAILED, stack);
	s->stack = stack;
	s->size = size;
	pid = raw_clone_run(CLONE_VM | SIGCHLD, stack + size, clone_child, s);
	ASSERT_LT(0, pid);
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status)) TH_LOG("status %#x", status);
	ASSERT_EQ(42, WEXITSTATUS(status));
	ASSERT_EQ(1, s->ran);
	ASSERT_EQ(1, s->on_stack) TH_LOG("the child did not run on its stack");
	ASSERT_EQ(getpid(), s->ppid);
	TH_LOG("child: counter +%ld over %d getppid calls", s->fast, N_CALLS);
	if (expect == 1) {
		ASSERT_LE(N_CALLS, s->fast);
	} else if (expect == 0) {
		ASSERT_EQ(0, s->fast);
	}
}

TEST(vfork_child_exits)
{
	int expect = fast_expected(_metadata), status;
	volatile long fast = -2;
	pid_t pid;

	pid = vfork();
	if (pid == 0) {
		/* shares our memory until it exits: only plain calls */
		int fd = fast_open();
		long c0 = fast_pread(fd);

		for (int i = 0; i < N_CALLS; i++)
			sys_insn(SYS_getppid, 0, 0, 0, 0, 0, 0);
		fast = c0 < 0 ? -1 : fast_pread(fd) - c0;
		close(fd);
		_exit(7);
	}
	ASSERT_LT(0, pid);
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	ASSERT_EQ(7, WEXITSTATUS(status));
	TH_LOG("vfork child: counter +%ld over %d calls", fast, N_CALLS);
	if (expect == 1) {
		ASSERT_LE(N_CALLS, fast);
	} else if (expect == 0) {
		ASSERT_EQ(0, fast);
	}
}

/*
 * rt_sigreturn: a handler that overwrites every register (it is assembly
 * and returns to the restorer, which only needs rax) must leave nothing
 * behind once the signal returns.
 */
volatile unsigned long clobber_handled;
void clobber_handler(int sig);
asm(".pushsection .text\n"
    ".globl clobber_handler\n"
    "clobber_handler:\n"
    "	incq clobber_handled(%rip)\n"
    "	movabs $0xdeadbeefdeadbeef, %rax\n"
    "	mov %rax, %rbx\n"
    "	mov %rax, %rbp\n"
    "	mov %rax, %rdi\n"
    "	mov %rax, %rsi\n"
    "	mov %rax, %rdx\n"
    "	mov %rax, %rcx\n"
    "	mov %rax, %r8\n"
    "	mov %rax, %r9\n"
    "	mov %rax, %r10\n"
    "	mov %rax, %r11\n"
    "	mov %rax, %r12\n"
    "	mov %rax, %r13\n"
    "	mov %rax, %r14\n"
    "	mov %rax, %r15\n"
    "	movq %rax, %xmm0\n"
    "	punpcklqdq %xmm0, %xmm0\n"
#define XCOPY(i) "	movdqa %xmm0, %xmm" #i "\n"
    XCOPY(1) XCOPY(2) XCOPY(3) XCOPY(4) XCOPY(5) XCOPY(6) XCOPY(7)
    XCOPY(8) XCOPY(9) XCOPY(10) XCOPY(11) XCOPY(12) XCOPY(13) XCOPY(14)
    XCOPY(15)
    "	ret\n"
    ".popsection\n");

TEST(rt_sigreturn_restores_every_register)
{
	struct sigaction sa = { .sa_handler = clobber_handler };
	struct mech m[2];
	int n = reg_mechs(m);

	ASSERT_EQ(0, sigaction(SIGUSR1, &sa, NULL));
	for (int i = 0; i < n; i++) {
		struct regblk b;
		char what[64];

		snprintf(what, sizeof(what), "%s: kill + handler",
			 m[i].name);
		regblk_fill(&b, m[i].entry, SYS_kill, 0x5555aaaa3333ccccUL);
		b.in[0] = getpid();		/* rdi */
		b.in[1] = SIGUSR1;		/* rsi */
		clobber_handled = 0;
		regcheck(&b);
		ASSERT_EQ(1, clobber_handled) TH_LOG("%s", what);
		ASSERT_EQ(0, (long)b.rax) TH_LOG("%s", what);
		regblk_check(_metadata, &b, what);
	}
	signal(SIGUSR1, SIG_DFL);
}

/*
 * A system call whose return delivers a signal needs the complete path:
 * it must not be counted.  The handler reads the counter, so the kill and
 * the signal return are told apart (the signal return may count: its
 * restored frame can be fit for the direct return).
 */
static int probe_fd;
static volatile long probe_in_handler;

static void probe_handler(int sig)
{
	probe_in_handler = fast_pread(probe_fd);
}

TEST_F(fast, signal_delivery_is_not_a_fast_return)
{
	struct sigaction sa = { .sa_handler = probe_handler };
	long pid = getpid(), calib, c0, c1;
	struct mech m[3];
	int n = get_mechs(m);

	probe_fd = fast_open();
	ASSERT_LE(0, probe_fd);
	ASSERT_EQ(0, sigaction(SIGUSR1, &sa, NULL));
	for (int v = self->top; v >= V_GENERIC; v--) {
		ASSERT_EQ(0, sysctl_set(v));
		c0 = fast_pread(probe_fd);
		calib = fast_pread(probe_fd) - c0;	/* what one read adds */
		ASSERT_EQ(kml_cpl() == 0 ? 1 : 0, calib);
		for (int i = 0; i < n; i++) {
			probe_in_handler = -1;
			c0 = fast_pread(probe_fd);
			ASSERT_EQ(0, m[i].fn(SYS_kill, pid, SIGUSR1, 0, 0, 0, 0));
			c1 = fast_pread(probe_fd);
			ASSERT_LE(0, probe_in_handler)
				TH_LOG("%s: no handler", m[i].name);
			ASSERT_EQ(calib, probe_in_handler - c0)
				TH_LOG("kml_syscall_path=%s, %s: the kill that delivered a signal was counted as a direct return",
				       path_names[v], m[i].name);
			TH_LOG("kml_syscall_path=%s, %s: rt_sigreturn %s through the direct return",
			       path_names[v], m[i].name,
			       c1 - probe_in_handler - calib ? "returned" :
			       "did not return");
		}
	}
	signal(SIGUSR1, SIG_DFL);
	close(probe_fd);
}

/* exit_group from a second thread ends the whole process. */
struct exit_share {
	volatile int ran;
	volatile long fast;
	sysfn_t fn;
};

static void *exiting_thread(void *arg)
{
	struct exit_share *s = arg;
	int fd = fast_open();
	long c0 = fast_pread(fd);

	for (int i = 0; i < N_CALLS; i++)
		sys_insn(SYS_getppid, 0, 0, 0, 0, 0, 0);
	s->fast = c0 < 0 ? -1 : fast_pread(fd) - c0;
	s->ran = 1;
	s->fn(SYS_exit_group, 42, 0, 0, 0, 0, 0);
	return NULL;
}

TEST(exit_group_from_a_thread)
{
	int expect = fast_expected(_metadata), status;
	struct exit_share *s = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
				    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	struct mech m[3];
	int n = get_mechs(m);

	ASSERT_NE(MAP_FAILED, s);
	for (int i = 0; i < n; i++) {
		pthread_t t;
		pid_t pid;

		s->ran = 0;
		s->fast = -2;
		s->fn = m[i].fn;
		pid = fork();
		ASSERT_LE(0, pid);
		if (pid == 0) {
			if (pthread_create(&t, NULL, exiting_thread, s))
				_exit(1);
			pthread_join(t, NULL);	/* never returns */
			_exit(2);
		}
		ASSERT_EQ(pid, waitpid(pid, &status, 0));
		ASSERT_TRUE(WIFEXITED(status)) TH_LOG("%s", m[i].name);
		ASSERT_EQ(42, WEXITSTATUS(status)) TH_LOG("%s", m[i].name);
		ASSERT_EQ(1, s->ran);
		TH_LOG("%s: thread counter +%ld over %d calls", m[i].name,
		       s->fast, N_CALLS);
		if (expect == 1) {
			ASSERT_LE(N_CALLS, s->fast);
		} else if (expect == 0) {
			ASSERT_EQ(0, s->fast);
		}
	}
}

/* ---- fuzz -------------------------------------------------------------- */

/*
 * A forked child makes FUZZ_CALLS system calls chosen at random from an
 * allow-list of calls that cannot harm the VM, block for good, change
 * credentials, signals or memory layout, or write outside a guarded
 * scratch area; arguments come from a pool of interesting values.
 * Every fd it starts with is non-blocking, stdin/out/err are /dev/null,
 * and an interval timer interrupts whatever blocks anyway.  It must exit
 * normally; the console must stay clean (the host checks).
 */
#define FUZZ_CALLS	20000
#define FUZZ_SCRATCH	(64 * 1024)
#define FUZZ_SEED	0x6b6d6c2d66757a7aULL

static const long fuzz_nrs[] = {
	SYS_read, SYS_write, SYS_close, SYS_stat, SYS_fstat, SYS_lstat,
	SYS_poll, SYS_lseek, SYS_pread64, SYS_pwrite64, SYS_access, SYS_pipe,
	SYS_select, SYS_sched_yield, SYS_mincore, SYS_dup, SYS_dup2,
	SYS_getpid, SYS_socketpair, SYS_getsockname, SYS_getpeername,
	SYS_getsockopt, SYS_shutdown, SYS_uname, SYS_fsync, SYS_fdatasync,
	SYS_getcwd, SYS_readlink, SYS_umask, SYS_gettimeofday,
	SYS_getrlimit, SYS_getrusage, SYS_sysinfo, SYS_times, SYS_getuid,
	SYS_getgid, SYS_geteuid, SYS_getegid, SYS_getppid, SYS_getpgrp,
	SYS_getgroups, SYS_getresuid, SYS_getresgid, SYS_getpgid,
	SYS_getsid, SYS_capget, SYS_rt_sigpending, SYS_statfs, SYS_fstatfs,
	SYS_getpriority, SYS_sched_getparam, SYS_sched_getscheduler,
	SYS_sched_get_priority_max, SYS_sched_get_priority_min,
	SYS_sched_rr_get_interval, SYS_sysfs, SYS_gettid, SYS_time,
	SYS_getxattr, SYS_lgetxattr, SYS_fgetxattr, SYS_listxattr,
	SYS_flistxattr, SYS_sched_getaffinity, SYS_getdents64,
	SYS_fadvise64, SYS_clock_gettime, SYS_clock_getres,
	SYS_epoll_wait, SYS_epoll_ctl, SYS_ioprio_get, SYS_newfstatat,
	SYS_readlinkat, SYS_faccessat, SYS_timerfd_create,
	SYS_timerfd_gettime, SYS_eventfd2, SYS_epoll_create1, SYS_dup3,
	SYS_pipe2, SYS_getcpu, SYS_sched_getattr, SYS_getrandom, SYS_statx,
	SYS_getitimer, SYS_kcmp,
	/* numbers that are no system call */
	1000, 400, 512, -1, X32_BIT + SYS_getpid,
};
#define FUZZ_NNRS ARRAY_SIZE(fuzz_nrs)

struct fuzz_share {
	volatile unsigned long done;
	volatile long nr, args[6];
	volatile int mech;
	volatile unsigned long ok, err, eintr;
	volatile unsigned char used[FUZZ_NNRS];
};

static unsigned long long fuzz_state;

static unsigned long long fuzz_rand(void)
{
	/* xorshift64* */
	fuzz_state ^= fuzz_state >> 12;
	fuzz_state ^= fuzz_state << 25;
	fuzz_state ^= fuzz_state >> 27;
	return fuzz_state * 0x2545f4914f6cdd1dULL;
}

static void fuzz_alarm(int sig)
{
}

static __attribute__((noreturn)) void fuzz_child(struct fuzz_share *s,
						 unsigned long long seed)
{
	struct sigaction sa = { .sa_handler = fuzz_alarm };	/* no restart */
	struct itimerval it = { { 0, 10000 }, { 0, 10000 } };
	long pool[64], r, a[6];
	int npool = 0, null, fds[2], sv[2], nm;
	char *area, *scratch, *ro, *none;
	struct mech m[3];
	size_t pg = 4096, i;

	null = open("/dev/null", O_RDWR);
	if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 ||
	    dup2(null, 2) < 0)
		_exit(10);
	signal(SIGPIPE, SIG_IGN);
	if (sigaction(SIGALRM, &sa, NULL))
		_exit(11);

	/* scratch between PROT_NONE guards; a read-only page; a none page */
	area = mmap(NULL, FUZZ_SCRATCH + 4 * pg, PROT_NONE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (area == MAP_FAILED)
		_exit(12);
	scratch = area + pg;
	ro = scratch + FUZZ_SCRATCH + pg;
	none = ro + pg;
	if (mprotect(scratch, FUZZ_SCRATCH, PROT_READ | PROT_WRITE) ||
	    mprotect(ro, pg, PROT_READ | PROT_WRITE))
		_exit(13);
	strcpy(ro, "/");
	strcpy(ro + 16, "/proc/self/status");
	strcpy(ro + 64, "/dev/null");
	strcpy(ro + 128, "");
	strcpy(ro + 144, "user.kml");
	if (mprotect(ro, pg, PROT_READ))
		_exit(14);

	/* values */
	for (long v = 0; v <= 12; v++)
		pool[npool++] = v;
	pool[npool++] = -1;
	pool[npool++] = 16;
	pool[npool++] = 64;
	pool[npool++] = 4096;
	pool[npool++] = 65536;
	pool[npool++] = 0x7fffffff;
	pool[npool++] = 0x80000000L;
	pool[npool++] = -4096;
	pool[npool++] = (long)scratch;
	pool[npool++] = (long)scratch + 1;
	pool[npool++] = (long)scratch + 4096;
	pool[npool++] = (long)scratch + FUZZ_SCRATCH / 2;
	pool[npool++] = (long)scratch + FUZZ_SCRATCH - 8;
	pool[npool++] = (long)ro;
	pool[npool++] = (long)ro + 16;
	pool[npool++] = (long)ro + 64;
	pool[npool++] = (long)ro + 128;
	pool[npool++] = (long)ro + 144;
	pool[npool++] = (long)none;
	pool[npool++] = 1;
	pool[npool++] = (long)KERNEL_ADDR;
	pool[npool++] = (long)NONCANONICAL;
	/* fds to play with, none blocking */
	if (open("/dev/zero", O_RDWR | O_NONBLOCK) < 0 ||
	    open("/", O_RDONLY | O_DIRECTORY) < 0 ||
	    open("/proc/self/status", O_RDONLY) < 0 ||
	    pipe2(fds, O_NONBLOCK) ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) ||
	    eventfd(0, EFD_NONBLOCK) < 0)
		_exit(15);

	nm = get_mechs(m);
	fuzz_state = seed ? seed : 1;
	if (setitimer(ITIMER_REAL, &it, NULL))
		_exit(16);
	for (s->done = 0; s->done < FUZZ_CALLS; s->done++) {
		size_t k = fuzz_rand() % FUZZ_NNRS;
		int mi = fuzz_rand() % nm;

		for (i = 0; i < 6; i++) {
			unsigned long long x = fuzz_rand();

			/* mostly the pool, sometimes any number */
			a[i] = x % 8 ? pool[(x >> 8) % npool] : (long)x;
			s->args[i] = a[i];
		}
		s->nr = fuzz_nrs[k];
		s->mech = mi;
		s->used[k] = 1;
		r = m[mi].fn(fuzz_nrs[k], a[0], a[1], a[2], a[3], a[4], a[5]);
		if (r == -EINTR)
			s->eintr++;
		else if (r < 0 && r > -4096)
			s->err++;
		else
			s->ok++;
	}
	_exit(0);
}

FIXTURE(fuzz) {
	int unused;
};

FIXTURE_SETUP(fuzz)
{
	if (!kml_kernel())
		SKIP(return, "random system calls run only in a kml guest "
		     "(uname -r ends in -kml, -kml-debug or -kml-defconfig), not on a development machine");
}

FIXTURE_TEARDOWN(fuzz)
{
}

TEST_F_TIMEOUT(fuzz, random_system_calls, 600)
{
	struct fuzz_share *s = mmap(NULL, sizeof(*s), PROT_READ | PROT_WRITE,
				    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	unsigned long long seed = FUZZ_SEED;
	const char *env = getenv("KML_FUZZ_SEED");
	struct timespec t0, t;
	int status, used = 0;
	struct mech m[3];
	pid_t pid, w;

	ASSERT_NE(MAP_FAILED, s);
	if (env)
		seed = strtoull(env, NULL, 0);
	get_mechs(m);
	TH_LOG("seed %#llx (KML_FUZZ_SEED), %d calls, %zu numbers, via %s, "
	       "%s%s", seed, FUZZ_CALLS, FUZZ_NNRS, m[0].name, m[1].name,
	       kml_vdso_entry() ? ", __vdso_kml_syscall" : "");
	fflush(NULL);
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0)
		fuzz_child(s, seed);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		w = waitpid(pid, &status, WNOHANG);
		ASSERT_LE(0, w);
		if (w == pid)
			break;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 500) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			ASSERT_TRUE(0) TH_LOG("stuck after %lu calls, in nr %ld "
					      "(%#lx, %#lx, %#lx, ...) via %d",
					      s->done, s->nr, s->args[0],
					      s->args[1], s->args[2], s->mech);
		}
		usleep(20000);
	}
	clock_gettime(CLOCK_MONOTONIC, &t);
	for (size_t k = 0; k < FUZZ_NNRS; k++)
		used += s->used[k];
	TH_LOG("%lu calls in %ld s: %lu ok, %lu errors, %lu interrupted; "
	       "%d of %zu numbers", s->done, (long)(t.tv_sec - t0.tv_sec),
	       s->ok, s->err, s->eintr, used, FUZZ_NNRS);
	ASSERT_TRUE(WIFEXITED(status))
		TH_LOG("killed by signal %d after %lu calls, in nr %ld "
		       "(%#lx, %#lx, %#lx, %#lx, %#lx, %#lx) via %d",
		       WTERMSIG(status), s->done, s->nr, s->args[0],
		       s->args[1], s->args[2], s->args[3], s->args[4],
		       s->args[5], s->mech);
	ASSERT_EQ(0, WEXITSTATUS(status)) TH_LOG("setup step %d failed",
						 WEXITSTATUS(status));
	ASSERT_EQ(FUZZ_CALLS, s->done);
	ASSERT_LT(0, s->ok);
	ASSERT_LT(0, s->err);
	ASSERT_LE(FUZZ_NNRS / 2, used);
	/* and this process is fine */
	ASSERT_EQ(getppid(), kml_syscall0(SYS_getppid));
}

TEST_HARNESS_MAIN
