// SPDX-License-Identifier: GPL-2.0
/*
 * The kernel library: libkml's handles (kml_kfunc_open(), kml_kfunc_call()),
 * kml_kread(), kallsyms and BTF import, and the programs kml-ps, kml-udp
 * and kml-top.
 *
 * run-tests runs this program twice: from /usr/lib/kml/tests (user mode)
 * and from /trusted (kernel mode, "klib@kernel").  Tests that call kernel
 * functions or read kernel memory need kernel mode and SKIP in user mode;
 * the refusal in user mode is checked in both (from kernel mode, by
 * running this program's user-mode copy as a helper); the parsers and
 * the two programs (which are in /trusted whoever starts them) are tested
 * in both modes.  On a stock kernel (the host's tests) everything that
 * needs a kml guest SKIPs with the reason.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <time.h>
#include <unistd.h>

#include <bpf/btf.h>

#include "kselftest_harness.h"
#include "kml_util.h"
#include "kml.h"
#include "kml_klib.h"

#define HELPER_ENV	"KML_KLIB_HELPER"
#define USER_COPY	"/usr/lib/kml/tests/klib"
#define KML_PS		"/trusted/kml-ps"
#define KML_PS_USER	"/usr/lib/kml/kml-ps"
#define KML_TOP		"/trusted/kml-top"
#define KML_TOP_USER	"/usr/lib/kml/kml-top"
#define KML_UDP		"/trusted/kml-udp"
#define KML_UDP_USER	"/usr/lib/kml/kml-udp"
#define NONCANONICAL	0x8000000000000000UL

/* ---- environment ------------------------------------------------------- */

/*
 * Kernel mode, and all memory present: kernel functions read this
 * process's memory (strings, buffers) without expecting a page fault, and
 * a fork child (each test is one) starts with its file-backed pages not
 * mapped.  Locks are not inherited across fork, hence per test.
 */
#define NEED_KERNEL_MODE() do { \
	if (!kml_kernel_mode()) \
		SKIP(return, "needs kernel mode (the klib@kernel run, from /trusted)"); \
	ASSERT_EQ(0, mlockall(MCL_CURRENT | MCL_FUTURE)) \
		TH_LOG("mlockall: %s", strerror(errno)); \
} while (0)

#define NEED_KML_KERNEL() do { \
	if (!kml_kernel()) \
		SKIP(return, "not a kml kernel"); \
} while (0)

/* The BTF of the running kernel, or SKIP. */
#define NEED_BTF() do { \
	if (!kml_btf()) \
		SKIP(return, "no kernel BTF: %s", kml_klib_error()); \
} while (0)

static void *ksym(struct __test_metadata *_metadata, const char *name)
{
	void *f = kml_ksym(name);

	EXPECT_NE(NULL, f) TH_LOG("%s", kml_klib_error());
	return f;
}

static long boff(struct __test_metadata *_metadata, const char *type,
		 const char *member)
{
	long o = kml_btf_offsetof(NULL, type, member);

	EXPECT_LE(0, o) TH_LOG("%s", kml_klib_error());
	return o;
}

static long raw_kfunc_open(const void *name)
{
	return kml_syscall2(SYS_arch_prctl, ARCH_KML_KFUNC_OPEN, (long)name);
}

/* A handle; fails the test when the function cannot be opened. */
static int kfopen(struct __test_metadata *_metadata, const char *name)
{
	int h = kml_kfunc_open(name);

	EXPECT_LE(0, h) TH_LOG("kml_kfunc_open(%s): %s", name, kml_kfunc_strerror(h));
	return h;
}

/* ---- kallsyms parser (any mode, any kernel) --------------------------- */

static char *write_tmp(const char *text)
{
	static char path[64];
	int fd;

	snprintf(path, sizeof(path), "/tmp/klib-ksyms-XXXXXX");
	fd = mkstemp(path);
	if (fd < 0)
		return NULL;
	if (write(fd, text, strlen(text)) != (ssize_t)strlen(text)) {
		close(fd);
		return NULL;
	}
	close(fd);
	return path;
}

TEST(kallsyms_parser_rules)
{
	const char *text =
		"ffffffff81000000 T _text\n"
		"ffffffff81000100 T alpha\n"
		"ffffffff81000140 t helper\n"
		"ffffffff81000180 t helper\n"		/* two locals: ambiguous */
		"ffffffff810001c0 t dup\n"
		"ffffffff81000200 T dup\n"		/* the global wins */
		"ffffffff81000240 t same\n"
		"ffffffff81000240 t same\n"		/* aliases: one address */
		"ffffffff81000300 ? marker\n"
		"ffffffff81000400 D data_sym\n"
		"ffffffffa0000000 t modfunc\t[somemod]\n"
		"ffffffff81000500 T zlast\n";
	struct kml_ksyms *t;
	struct kml_ksym s;
	char *path = write_tmp(text);

	ASSERT_NE(NULL, path);
	t = kml_ksyms_load(path);
	ASSERT_NE(NULL, t) TH_LOG("%s", kml_klib_error());
	EXPECT_EQ(11, kml_ksyms_count(t));		/* the module line is skipped */

	ASSERT_EQ(0, kml_ksyms_find(t, "alpha", &s));
	EXPECT_EQ(0xffffffff81000100UL, s.addr);
	EXPECT_EQ('T', s.type);
	EXPECT_EQ(0x40, s.size);			/* to helper at ...140 */
	EXPECT_STREQ("alpha", s.name);

	ASSERT_EQ(0, kml_ksyms_find(t, "dup", &s));
	EXPECT_EQ(0xffffffff81000200UL, s.addr);
	EXPECT_EQ('T', s.type);

	ASSERT_EQ(0, kml_ksyms_find(t, "same", &s));
	EXPECT_EQ(0xffffffff81000240UL, s.addr);

	EXPECT_EQ(-ENOTUNIQ, kml_ksyms_find(t, "helper", &s));
	EXPECT_EQ(ENOTUNIQ, errno);
	EXPECT_NE(NULL, strstr(kml_klib_error(), "'helper'")) TH_LOG("%s", kml_klib_error());

	EXPECT_EQ(-ENOENT, kml_ksyms_find(t, "modfunc", &s));
	EXPECT_NE(NULL, strstr(kml_klib_error(), "'modfunc'"));
	EXPECT_EQ(-ENOENT, kml_ksyms_find(t, "nosuch", &s));
	EXPECT_NE(NULL, strstr(kml_klib_error(), "'nosuch'"));

	ASSERT_EQ(0, kml_ksyms_find(t, "marker", &s));
	EXPECT_EQ('?', s.type);
	ASSERT_EQ(0, kml_ksyms_find(t, "zlast", &s));
	EXPECT_EQ(0, s.size);				/* nothing above it */
	kml_ksyms_free(t);
	unlink(path);

	/* hidden addresses (kptr_restrict, not root): an error, not NULLs */
	path = write_tmp("0000000000000000 T a\n0000000000000000 t b\n");
	ASSERT_NE(NULL, path);
	EXPECT_EQ(NULL, kml_ksyms_load(path));
	EXPECT_EQ(EACCES, errno);
	EXPECT_NE(NULL, strstr(kml_klib_error(), "hidden")) TH_LOG("%s", kml_klib_error());
	unlink(path);

	/* a malformed line is named by its number */
	path = write_tmp("ffffffff81000000 T a\nthis is not kallsyms\n");
	ASSERT_NE(NULL, path);
	EXPECT_EQ(NULL, kml_ksyms_load(path));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_NE(NULL, strstr(kml_klib_error(), ":2:")) TH_LOG("%s", kml_klib_error());
	unlink(path);

	EXPECT_EQ(NULL, kml_ksyms_load("/nonexistent/kallsyms"));
	EXPECT_NE(NULL, strstr(kml_klib_error(), "/nonexistent/kallsyms"));
}

TEST(ksym_errors_name_the_symbol)
{
	struct kml_ksym s;

	NEED_KML_KERNEL();
	if (kml_ksym_lookup("_text", &s) == -EACCES)
		SKIP(return, "%s", kml_klib_error());
	ASSERT_EQ(0, kml_ksym_lookup("_text", &s)) TH_LOG("%s", kml_klib_error());

	errno = 0;
	EXPECT_EQ(NULL, kml_ksym("kml_no_such_symbol_4711"));
	EXPECT_EQ(ENOENT, errno);
	EXPECT_NE(NULL, strstr(kml_klib_error(), "'kml_no_such_symbol_4711'"))
		TH_LOG("%s", kml_klib_error());

	/* data symbols (CONFIG_KALLSYMS_ALL) and functions, with their type */
	ASSERT_EQ(0, kml_ksym_lookup("jiffies", &s)) TH_LOG("%s", kml_klib_error());
	EXPECT_EQ(NULL, strchr("tT", s.type)) TH_LOG("jiffies has type '%c'", s.type);
	EXPECT_EQ((void *)s.addr, kml_ksym("jiffies"));
	ASSERT_EQ(0, kml_ksym_lookup("strlen", &s)) TH_LOG("%s", kml_klib_error());
	EXPECT_NE(NULL, strchr("tT", s.type)) TH_LOG("strlen has type '%c'", s.type);
}

/* ---- BTF (any mode; needs the kernel's BTF) ---------------------------- */

TEST(btf_layouts_match_the_user_abi)
{
	struct kml_btf_member m;

	NEED_BTF();
	/* UAPI types have the same layout in the kernel and here */
	EXPECT_EQ((long)sizeof(struct sockaddr_in), kml_btf_sizeof(NULL, "struct sockaddr_in"));
	EXPECT_EQ((long)offsetof(struct sockaddr_in, sin_port),
		  kml_btf_offsetof(NULL, "sockaddr_in", "sin_port"));
	EXPECT_EQ((long)offsetof(struct sockaddr_in, sin_addr),
		  kml_btf_offsetof(NULL, "sockaddr_in", "sin_addr"));
	ASSERT_EQ(0, kml_btf_member(NULL, "sockaddr_in", "sin_addr.s_addr", &m))
		TH_LOG("%s", kml_klib_error());
	EXPECT_EQ(offsetof(struct sockaddr_in, sin_addr.s_addr), m.offset);
	EXPECT_EQ(sizeof(in_addr_t), m.size);
	/* struct kvec is laid out like struct iovec */
	EXPECT_EQ((long)sizeof(struct iovec), kml_btf_sizeof(NULL, "struct kvec"));
	EXPECT_EQ((long)offsetof(struct iovec, iov_len),
		  kml_btf_offsetof(NULL, "kvec", "iov_len"));
	EXPECT_EQ((long)sizeof(struct iovec), kml_btf_sizeof(NULL, "struct iovec"));
	/* list_head: two pointers */
	EXPECT_EQ((long)(2 * sizeof(void *)), kml_btf_sizeof(NULL, "struct list_head"));
	EXPECT_EQ((long)sizeof(void *), kml_btf_offsetof(NULL, "list_head", "prev"));
	/* base types and typedefs by name */
	EXPECT_EQ((long)sizeof(int), kml_btf_sizeof(NULL, "int"));
	EXPECT_EQ((long)sizeof(pid_t), kml_btf_sizeof(NULL, "pid_t"));
	EXPECT_EQ((long)sizeof(unsigned long), kml_btf_sizeof(NULL, "long unsigned int"));
	ASSERT_EQ(0, kml_btf_member(NULL, "task_struct", "comm", &m));
	EXPECT_EQ(16, m.size);		/* TASK_COMM_LEN, the ABI of prctl(PR_SET_NAME) */
}

TEST(btf_nested_and_anonymous_members)
{
	long common, daddr, pair, rcv, sk_daddr, tasks, prev, path;
	struct kml_btf_member m;

	NEED_BTF();
	/* skc_daddr and skc_rcv_saddr: an anonymous struct in an anonymous union */
	daddr = kml_btf_offsetof(NULL, "sock_common", "skc_daddr");
	pair = kml_btf_offsetof(NULL, "sock_common", "skc_addrpair");
	rcv = kml_btf_offsetof(NULL, "sock_common", "skc_rcv_saddr");
	ASSERT_LE(0, daddr) TH_LOG("%s", kml_klib_error());
	ASSERT_LE(0, pair) TH_LOG("%s", kml_klib_error());
	ASSERT_LE(0, rcv) TH_LOG("%s", kml_klib_error());
	EXPECT_EQ(pair, daddr);
	ASSERT_EQ(0, kml_btf_member(NULL, "sock_common", "skc_daddr", &m));
	EXPECT_EQ(daddr + (long)m.size, rcv);
	/* a path through a struct member */
	common = kml_btf_offsetof(NULL, "struct sock", "__sk_common");
	sk_daddr = kml_btf_offsetof(NULL, "struct sock", "__sk_common.skc_daddr");
	ASSERT_LE(0, common);
	EXPECT_EQ(common + daddr, sk_daddr) TH_LOG("%s", kml_klib_error());
	tasks = kml_btf_offsetof(NULL, "task_struct", "tasks");
	prev = kml_btf_offsetof(NULL, "list_head", "prev");
	path = kml_btf_offsetof(NULL, "task_struct", "tasks.prev");
	ASSERT_LT(0, tasks);
	EXPECT_EQ(tasks + prev, path) TH_LOG("%s", kml_klib_error());
	ASSERT_EQ(0, kml_btf_member(NULL, "task_struct", "tasks", &m));
	EXPECT_EQ((size_t)kml_btf_sizeof(NULL, "list_head"), m.size);
}

TEST(btf_refuses_bitfields)
{
	const struct btf *btf;
	const struct btf_type *t;
	const struct btf_member *m;
	int id, i, found = 0;

	NEED_BTF();
	btf = kml_btf();
	id = btf__find_by_name_kind(btf, "task_struct", BTF_KIND_STRUCT);
	ASSERT_LT(0, id);
	t = btf__type_by_id(btf, (__u32)id);
	m = btf_members(t);
	for (i = 0; i < btf_vlen(t); i++, m++) {
		const char *name = btf__name_by_offset(btf, m->name_off);
		long r;

		if (!btf_member_bitfield_size(t, (__u32)i) || !name || !*name)
			continue;
		found++;
		r = kml_btf_offsetof(NULL, "task_struct", name);
		EXPECT_EQ(-EINVAL, r) TH_LOG("bitfield %s: %ld", name, r);
		EXPECT_NE(NULL, strstr(kml_klib_error(), "bitfield"));
		EXPECT_NE(NULL, strstr(kml_klib_error(), name));
	}
	EXPECT_LT(0, found) TH_LOG("task_struct has no bitfield to test with");
}

TEST(btf_errors_name_what_is_missing)
{
	NEED_BTF();
	EXPECT_EQ(-ENOENT, kml_btf_sizeof(NULL, "struct kml_no_such_type"));
	EXPECT_NE(NULL, strstr(kml_klib_error(), "struct kml_no_such_type"));
	EXPECT_EQ(-ENOENT, kml_btf_sizeof(NULL, "kml_no_such_type"));
	EXPECT_NE(NULL, strstr(kml_klib_error(), "kml_no_such_type"));
	EXPECT_EQ(-ENOENT, kml_btf_offsetof(NULL, "task_struct", "kml_no_member"));
	EXPECT_NE(NULL, strstr(kml_klib_error(), "kml_no_member"));
	EXPECT_NE(NULL, strstr(kml_klib_error(), "task_struct"));
	EXPECT_EQ(-ENOENT, kml_btf_offsetof(NULL, "task_struct", "tasks.kml_no_member"));
	EXPECT_NE(NULL, strstr(kml_klib_error(), "struct list_head has no member "
			       "'kml_no_member'")) TH_LOG("%s", kml_klib_error());
	/* through a pointer: read it and look up its target */
	EXPECT_EQ(-EINVAL, kml_btf_offsetof(NULL, "task_struct", "mm.pgd"));
	EXPECT_NE(NULL, strstr(kml_klib_error(), "pointer")) TH_LOG("%s", kml_klib_error());
	EXPECT_EQ(-EINVAL, kml_btf_offsetof(NULL, "task_struct", "tasks..next"));
	EXPECT_EQ(-EINVAL, kml_btf_offsetof(NULL, "task_struct", ""));
	EXPECT_EQ(-EINVAL, kml_btf_offsetof(NULL, "int", "x"));
	EXPECT_NE(NULL, strstr(kml_klib_error(), "not a struct")) TH_LOG("%s", kml_klib_error());
	EXPECT_EQ(NULL, kml_btf_load("/nonexistent/btf"));
	EXPECT_NE(NULL, strstr(kml_klib_error(), "/nonexistent/btf"));
}

/* ---- refusal in user mode ------------------------------------------- */

/* In the user-mode helper: 0 if every way of calling is refused with EPERM. */
static int eperm_helper(void)
{
	unsigned long r = 4711;
	int fails = 0;
	char buf[8];

	if (kml_kernel_mode()) {
		printf("# helper: runs in kernel mode\n");
		return 10;
	}
	/* EPERM comes first: the name is not looked at */
	if (kml_kfunc_open("strlen") != -EPERM || raw_kfunc_open(NULL) != -EPERM ||
	    raw_kfunc_open((void *)NONCANONICAL) != -EPERM) {
		printf("# helper: kml_kfunc_open was not refused with EPERM\n");
		fails++;
	}
	/* no handle can be called either (the vDSO refuses at CPL 3) */
	if (kml_kfunc_call(0, &r, "abc") != -EPERM || r != 4711) {
		printf("# helper: kml_kfunc_call was not refused with EPERM\n");
		fails++;
	}
	if (kml_kfunc_call6(0, &r, 1, 2, 3, 4, 5, 6) != -EPERM || r != 4711) {
		printf("# helper: kml_kfunc_call6 was not refused with EPERM\n");
		fails++;
	}
	if (kml_kread(buf, (void *)NONCANONICAL, sizeof(buf)) != -EPERM) {
		printf("# helper: kml_kread was not refused with EPERM\n");
		fails++;
	}
	if (!strstr(kml_kfunc_strerror(-EPERM), "not a kernel-mode process"))
		fails++;
	return fails ? 1 : 0;
}

TEST(kfunc_refused_in_user_mode)
{
	char out[4096], *argv[] = { USER_COPY, NULL };
	char *envp[] = { HELPER_ENV "=eperm", NULL };
	int rc;

	NEED_KML_KERNEL();
	if (!kml_kernel_mode()) {
		ASSERT_EQ(0, eperm_helper());
		return;
	}
	/* from kernel mode: this program's copy outside /trusted */
	if (access(USER_COPY, X_OK))
		SKIP(return, "no user-mode copy at %s", USER_COPY);
	rc = kml_run_capture(argv, envp, out, sizeof(out), NULL);
	EXPECT_EQ(0, rc) TH_LOG("helper output: %s", kml_quoted(out));
}

/*
 * The kernel call by address is gone, and ARCH_KML_KFUNC_OPEN moved to
 * its number (0x6002 -> 0x6001): the old numbers are refused, in either
 * mode, so that a program built against them cannot silently call
 * something else.
 */
TEST(old_kernel_call_numbers_are_refused)
{
	struct { uint64_t fn, args[6], ret; } block = { 0 };

	NEED_KML_KERNEL();
	EXPECT_EQ(0x6001, ARCH_KML_KFUNC_OPEN);
	EXPECT_EQ(-EINVAL, kml_syscall2(SYS_arch_prctl, 0x6002, (long)"strlen"));
	EXPECT_EQ(-EINVAL, kml_syscall2(SYS_arch_prctl, 0x6002, 0));
	/* 0x6001 is no longer the call by address: the block is a name */
	if (kml_kernel_mode()) {
		ASSERT_EQ(0, mlockall(MCL_CURRENT | MCL_FUTURE));
		EXPECT_EQ(-ENOENT, raw_kfunc_open(&block));
	}
	errno = 0;
	EXPECT_EQ(-1, syscall(SYS_arch_prctl, 0x6002, "strlen"));
	EXPECT_EQ(EINVAL, errno);
}

/* ---- kernel calls through handles (kernel mode) --------------------- */

/* After execve: the new program starts without handles. */
static int kfunc_exec_helper(void)
{
	unsigned long r = 4711;
	int h;

	if (!kml_kernel_mode()) {
		printf("# helper: not in kernel mode\n");
		return 10;
	}
	if (kml_kfunc_call(0, &r) != -EBADF || r != 4711) {
		printf("# helper: handle 0 survived execve\n");
		return 1;
	}
	mlockall(MCL_CURRENT | MCL_FUTURE);
	h = kml_kfunc_open("__do_sys_getpid");
	if (h != 0 || kml_kfunc_call(h, &r) || (pid_t)r != getpid()) {
		printf("# helper: first handle %d, result %lu\n", h, r);
		return 2;
	}
	return 0;
}

TEST(kfunc_handles_call_kernel_functions)
{
	int h_strlen, h_snprintf, h_getpid, h_j2ms, h_ms2j;
	char s[64], buf[96], expect[96];
	unsigned long r;
	size_t len;

	NEED_KERNEL_MODE();
	/* no table yet: every handle is unknown */
	r = 4711;
	EXPECT_EQ(-EBADF, kml_kfunc_call(0, &r));
	EXPECT_EQ(4711, r);

	h_strlen = kfopen(_metadata, "strlen");
	h_snprintf = kfopen(_metadata, "snprintf");
	h_getpid = kfopen(_metadata, "__do_sys_getpid");
	h_j2ms = kfopen(_metadata, "jiffies_to_msecs");
	h_ms2j = kfopen(_metadata, "__msecs_to_jiffies");
	ASSERT_FALSE(h_strlen < 0 || h_snprintf < 0 || h_getpid < 0 ||
		     h_j2ms < 0 || h_ms2j < 0);
	/* handles are small, distinct, and stable per function */
	EXPECT_EQ(0, h_strlen);
	EXPECT_EQ(4, h_ms2j);
	EXPECT_EQ(h_snprintf, kml_kfunc_open("snprintf"));
	EXPECT_EQ(h_strlen, kml_kfunc_open("strlen"));

	srand((unsigned int)time(NULL) ^ (unsigned int)getpid());
	len = 1 + (size_t)rand() % (sizeof(s) - 2);
	memset(s, 'h', len);
	s[len] = '\0';
	ASSERT_EQ(0, kml_kfunc_call(h_strlen, &r, s));
	EXPECT_EQ(len, r);
	/* six arguments, through R10 for the fourth */
	ASSERT_EQ(0, kml_kfunc_call(h_snprintf, &r, buf, sizeof(buf), "%d|%s|%lx",
				    -7, "kml", 0xfeedUL));
	snprintf(expect, sizeof(expect), "%d|%s|%lx", -7, "kml", 0xfeedUL);
	EXPECT_STREQ(expect, buf);
	EXPECT_EQ(strlen(expect), r);
	ASSERT_EQ(0, kml_kfunc_call(h_getpid, &r));
	EXPECT_EQ(getpid(), (pid_t)r);
	ASSERT_EQ(0, kml_kfunc_call(h_ms2j, &r, 3000));
	ASSERT_EQ(0, kml_kfunc_call(h_j2ms, &r, r));
	EXPECT_EQ(3000, (unsigned int)r);
	/* NULL ret: called, nothing stored */
	EXPECT_EQ(0, kml_kfunc_call(h_strlen, NULL, "abc"));
}

TEST(kfunc_call_known_results)
{
	char buf[96], expect[96];
	unsigned long r, j0, j1;
	void *a_j2ms;
	volatile unsigned long *jiffies;
	struct timespec ts = { 0, 300 * 1000 * 1000 };
	int h_snprintf, h_j2ms;

	NEED_KERNEL_MODE();
	h_snprintf = kfopen(_metadata, "snprintf");
	h_j2ms = kfopen(_metadata, "jiffies_to_msecs");
	a_j2ms = ksym(_metadata, "jiffies_to_msecs");
	jiffies = ksym(_metadata, "jiffies");
	ASSERT_FALSE(h_snprintf < 0 || h_j2ms < 0 || !a_j2ms || !jiffies);

	/* the kernel's snprintf: %ps resolves through the kernel's kallsyms */
	ASSERT_EQ(0, kml_kfunc_call(h_snprintf, &r, buf, sizeof(buf), "%ps|%d|%s",
				    a_j2ms, -42, "kml"));
	snprintf(expect, sizeof(expect), "jiffies_to_msecs|%d|kml", -42);
	EXPECT_STREQ(expect, buf);
	EXPECT_EQ((int)strlen(expect), (int)r);

	/* jiffies read directly, converted by the kernel */
	j0 = *jiffies;
	nanosleep(&ts, NULL);
	j1 = *jiffies;
	ASSERT_EQ(0, kml_kfunc_call(h_j2ms, &r, j1 - j0));
	EXPECT_LE(290, (unsigned int)r) TH_LOG("jiffies advanced %lu (%u ms) over a 300 ms sleep",
					       j1 - j0, (unsigned int)r);
	EXPECT_GE(5000, (unsigned int)r);
}

TEST(kfunc_call_passes_six_arguments)
{
	char buf[128], expect[128];
	unsigned long r;
	int h;

	NEED_KERNEL_MODE();
	h = kfopen(_metadata, "snprintf");
	ASSERT_LE(0, h);
	/* snprintf(buf, size, fmt, a, b, c): all six registers, full width */
	ASSERT_EQ(0, kml_kfunc_call(h, &r, buf, sizeof(buf), "%lx %lx %lx",
				    0x1111222233334444UL, 0x5555666677778888UL,
				    0x99990000aaaabbbbUL));
	snprintf(expect, sizeof(expect), "%lx %lx %lx", 0x1111222233334444UL,
		 0x5555666677778888UL, 0x99990000aaaabbbbUL);
	EXPECT_STREQ(expect, buf);
	EXPECT_EQ(strlen(expect), r);
	ASSERT_EQ(0, kml_kfunc_call6(h, &r, (unsigned long)buf, sizeof(buf),
				     (unsigned long)"%lu.%lu.%lu", 1, 22, 333));
	EXPECT_STREQ("1.22.333", buf);
	EXPECT_EQ(8, r);
}

struct tid_result {
	int h;
	unsigned long ret;
	pid_t tid;
	int err;
};

static void *tid_thread(void *arg)
{
	struct tid_result *t = arg;

	t->tid = gettid();
	t->err = kml_kfunc_call(t->h, &t->ret);
	return NULL;
}

TEST(kfunc_call_runs_as_the_calling_thread)
{
	struct tid_result t = { 0 };
	pthread_t th;
	unsigned long r;

	NEED_KERNEL_MODE();
	t.h = kfopen(_metadata, "__do_sys_gettid");
	ASSERT_LE(0, t.h);
	ASSERT_EQ(0, kml_kfunc_call(t.h, &r));
	EXPECT_EQ(gettid(), (pid_t)r);
	ASSERT_EQ(0, pthread_create(&th, NULL, tid_thread, &t));
	ASSERT_EQ(0, pthread_join(th, NULL));
	ASSERT_EQ(0, t.err);
	EXPECT_EQ(t.tid, (pid_t)t.ret);
	EXPECT_NE(getpid(), (pid_t)t.ret);
}

TEST(kfunc_call_may_sleep)
{
	struct timespec a, b;
	long ms;
	int h;

	NEED_KERNEL_MODE();
	h = kfopen(_metadata, "msleep");
	ASSERT_LE(0, h);
	clock_gettime(CLOCK_MONOTONIC, &a);
	ASSERT_EQ(0, kml_kfunc_call(h, NULL, 200));
	clock_gettime(CLOCK_MONOTONIC, &b);
	ms = (b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000;
	/*
	 * msleep() counts jiffies; under an emulator on a loaded host the
	 * ticks come late and are caught up several at a time, so by the
	 * monotonic clock the sleep can end a few milliseconds early
	 * (197 ms measured once).  Returning at once would take well
	 * under a millisecond.
	 */
	EXPECT_LE(180, ms);
	EXPECT_GE(10000, ms);
}

TEST(kfunc_open_refuses_bad_names)
{
	long page = sysconf(_SC_PAGESIZE);
	char long_name[1024];
	void *hole;

	NEED_KERNEL_MODE();
	EXPECT_EQ(-ENOENT, kml_kfunc_open("kml_no_such_function_anywhere"));
	EXPECT_EQ(-ENOENT, kml_kfunc_open(""));
	memset(long_name, 'a', sizeof(long_name) - 1);
	long_name[sizeof(long_name) - 1] = '\0';
	EXPECT_EQ(-ENAMETOOLONG, kml_kfunc_open(long_name));
	/* a name that cannot be read: NULL, non-canonical, kernel, unmapped */
	EXPECT_EQ(-EFAULT, kml_kfunc_open(NULL));
	EXPECT_EQ(-EFAULT, raw_kfunc_open(NULL));
	EXPECT_EQ(-EFAULT, raw_kfunc_open((void *)NONCANONICAL));
	EXPECT_EQ(-EFAULT, raw_kfunc_open(ksym(_metadata, "linux_banner")));
	hole = mmap(NULL, (size_t)page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, hole);
	EXPECT_EQ(-EFAULT, raw_kfunc_open(hole));
	munmap(hole, (size_t)page);
	EXPECT_EQ(-EFAULT, raw_kfunc_open(hole));
	EXPECT_NE(NULL, strstr(kml_kfunc_strerror(-ENOENT), "no kernel symbol"));
	/* nothing of that was added: the first valid open gets handle 0 */
	EXPECT_EQ(0, kml_kfunc_open("strlen"));
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A text symbol that kallsyms lists more than once, or NULL. */
static const char *ambiguous_text_symbol(char *name, size_t size)
{
	char line[512], sym[256], **names = NULL;
	size_t n = 0, cap = 0, i;
	const char *found = NULL;
	unsigned long addr;
	char type;
	FILE *f = fopen("/proc/kallsyms", "r");

	if (!f)
		return NULL;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx %c %255s", &addr, &type, sym) != 3 ||
		    strchr(line, '[') || (type != 't' && type != 'T'))
			continue;
		if (n == cap) {
			char **more = realloc(names, (cap = cap ? 2 * cap : 4096) *
					      sizeof(*names));
			if (!more)
				break;
			names = more;
		}
		names[n] = strdup(sym);
		if (!names[n])
			break;
		n++;
	}
	fclose(f);
	qsort(names, n, sizeof(*names), cmp_names);
	for (i = 1; i < n && !found; i++)
		if (!strcmp(names[i - 1], names[i]))
			found = names[i];
	if (found)
		snprintf(name, size, "%s", found);
	for (i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return found ? name : NULL;
}

static __attribute__((used, noinline)) int kml_klib_test_user_function(void)
{
	return 7;
}

/*
 * What the call by address refused (data, user code, init text) cannot
 * be opened by name either; nor what only a name check can catch.
 */
TEST(kfunc_open_refuses_what_is_not_a_callable_function)
{
	char twin[256];

	NEED_KERNEL_MODE();
	/* data */
	EXPECT_EQ(-EINVAL, kml_kfunc_open("jiffies"));
	EXPECT_EQ(-EINVAL, kml_kfunc_open("init_task"));
	/* assembly entry points: text, offset 0, but not C functions */
	EXPECT_EQ(-EINVAL, kml_kfunc_open("entry_SYSCALL_64"));
	EXPECT_EQ(-EINVAL, kml_kfunc_open("asm_exc_page_fault"));
	EXPECT_EQ(-EINVAL, kml_kfunc_open("kml_entry_kcall"));
	/* a C function in noinstr text: entry code */
	EXPECT_EQ(-EINVAL, kml_kfunc_open("exc_page_fault"));
	/* init text is freed after boot */
	EXPECT_EQ(-EINVAL, kml_kfunc_open("start_kernel"));
	/* user code, this program's own and the C library's: no kernel symbol */
	EXPECT_EQ(7, kml_klib_test_user_function());
	EXPECT_EQ(-ENOENT, kml_kfunc_open("kml_klib_test_user_function"));
	EXPECT_EQ(-ENOENT, kml_kfunc_open("__libc_start_main"));
	/* more than six parameters (do_mmap has nine) */
	EXPECT_EQ(-E2BIG, kml_kfunc_open("do_mmap"));
	/* several static functions of one name */
	ASSERT_NE(NULL, ambiguous_text_symbol(twin, sizeof(twin)));
	EXPECT_EQ(-ENOTUNIQ, kml_kfunc_open(twin)) TH_LOG("%s", twin);
	EXPECT_NE(NULL, strstr(kml_kfunc_strerror(-EINVAL), "entry of a C function"));
	EXPECT_NE(NULL, strstr(kml_kfunc_strerror(-E2BIG), "six parameters"));
	/* nothing of that was added: the first valid open gets handle 0 */
	EXPECT_EQ(0, kml_kfunc_open("strlen"));
}

TEST(kfunc_call_refuses_unknown_handles)
{
	unsigned long r = 4711;
	int h;

	NEED_KERNEL_MODE();
	h = kfopen(_metadata, "strlen");
	ASSERT_EQ(0, h);
	EXPECT_EQ(-EBADF, kml_kfunc_call(1, &r, "abc"));
	EXPECT_EQ(-EBADF, kml_kfunc_call(-1, &r, "abc"));
	EXPECT_EQ(-EBADF, kml_kfunc_call(KML_KFUNC_MAX, &r, "abc"));
	EXPECT_EQ(-EBADF, kml_kfunc_call(0x7fffffff, &r, "abc"));
	EXPECT_EQ(4711, r);		/* never stored on a refusal */
	EXPECT_NE(NULL, strstr(kml_kfunc_strerror(-EBADF), "no such handle"));
	EXPECT_EQ(0, kml_kfunc_call(h, &r, "abcd"));
	EXPECT_EQ(4, r);
}

TEST(kfunc_table_is_bounded)
{
	char line[512], sym[256];
	unsigned long addr, r;
	int opened = 0, h, ret;
	char type;
	FILE *f;

	NEED_KERNEL_MODE();
	f = fopen("/proc/kallsyms", "r");
	ASSERT_NE(NULL, f);
	/* fill the table with whatever global functions open */
	while (opened < KML_KFUNC_MAX && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx %c %255s", &addr, &type, sym) != 3 ||
		    type != 'T' || strchr(line, '['))
			continue;
		h = kml_kfunc_open(sym);
		if (h >= 0) {
			ASSERT_EQ(opened, h) TH_LOG("%s", sym);
			opened++;
		}
	}
	ASSERT_EQ(KML_KFUNC_MAX, opened);
	/* one more: full, unless it is one of those already open */
	ret = 0;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx %c %255s", &addr, &type, sym) != 3 ||
		    type != 'T' || strchr(line, '['))
			continue;
		ret = kml_kfunc_open(sym);
		if (ret == -ENOSPC)
			break;
	}
	fclose(f);
	EXPECT_EQ(-ENOSPC, ret);
	/* the open ones still work */
	h = kml_kfunc_open("strlen");
	if (h >= 0) {
		EXPECT_EQ(0, kml_kfunc_call(h, &r, "xyz"));
		EXPECT_EQ(3, r);
	} else {
		EXPECT_EQ(-ENOSPC, h);
	}
	EXPECT_EQ(-EBADF, kml_kfunc_call(KML_KFUNC_MAX, &r));
}

TEST(kfunc_handles_follow_fork_and_exec)
{
	char out[4096], *argv[] = { "/proc/self/exe", NULL };
	char *envp[] = { HELPER_ENV "=kfunc-exec", NULL };
	unsigned long r;
	int h_getpid, status;
	pid_t pid;

	NEED_KERNEL_MODE();
	h_getpid = kfopen(_metadata, "__do_sys_getpid");
	ASSERT_EQ(0, h_getpid);
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		unsigned long v = 0;

		mlockall(MCL_CURRENT | MCL_FUTURE);
		/* the copy works in the child, as the child */
		if (kml_kfunc_call(h_getpid, &v) || (pid_t)v != getpid())
			_exit(1);
		/* the child's new handle is the child's only */
		if (kml_kfunc_open("strlen") != 1)
			_exit(2);
		if (kml_kfunc_call(1, &v, "ab") || v != 2)
			_exit(3);
		_exit(0);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
		TH_LOG("child status 0x%x", status);
	EXPECT_EQ(-EBADF, kml_kfunc_call(1, &r, "ab"));
	ASSERT_EQ(0, kml_kfunc_call(h_getpid, &r));
	EXPECT_EQ(getpid(), (pid_t)r);
	/* execve: a new table */
	EXPECT_EQ(0, kml_run_capture(argv, envp, out, sizeof(out), NULL))
		TH_LOG("helper output: %s", kml_quoted(out));
}

static int thread_handle = -1;

static void *open_in_thread(void *arg)
{
	thread_handle = kml_kfunc_open((const char *)arg);
	return NULL;
}

TEST(kfunc_threads_share_handles)
{
	pthread_t t;
	unsigned long r;

	NEED_KERNEL_MODE();
	ASSERT_EQ(0, pthread_create(&t, NULL, open_in_thread, "strlen"));
	ASSERT_EQ(0, pthread_join(t, NULL));
	ASSERT_EQ(0, thread_handle);
	ASSERT_EQ(0, kml_kfunc_call(thread_handle, &r, "four"));
	EXPECT_EQ(4, r);
}

static volatile sig_atomic_t kfunc_alarms;

static void kfunc_on_alarm(int sig)
{
	(void)sig;
	kfunc_alarms++;
}

/*
 * A signal that arrives while the kernel function sleeps: the function
 * returns early, its value reaches the caller, and the handler runs on
 * the way out (the exit work of the call's fast path).
 */
TEST(kfunc_call_delivers_signals_on_return)
{
	struct sigaction sa = { .sa_handler = kfunc_on_alarm };
	struct itimerval it = { .it_value = { 0, 100 * 1000 } };
	struct timespec t0, t1;
	unsigned long r = 0;
	int h;

	NEED_KERNEL_MODE();
	h = kfopen(_metadata, "msleep_interruptible");
	ASSERT_LE(0, h);
	ASSERT_EQ(0, sigaction(SIGALRM, &sa, NULL));
	kfunc_alarms = 0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ASSERT_EQ(0, setitimer(ITIMER_REAL, &it, NULL));
	ASSERT_EQ(0, kml_kfunc_call(h, &r, 5000));
	clock_gettime(CLOCK_MONOTONIC, &t1);
	EXPECT_EQ(1, kfunc_alarms);
	/* interrupted: most of the 5 s were left */
	EXPECT_LT(2000, (unsigned int)r) TH_LOG("%u ms left", (unsigned int)r);
	EXPECT_GT(3, t1.tv_sec - t0.tv_sec);
}

/* Every entry path of the call: the bypass, the generic and the complete */
TEST(kfunc_call_on_every_entry_path)
{
	unsigned long r;
	char old[8] = "";
	int h, mode, max = 2;
	FILE *f;

	NEED_KERNEL_MODE();
	h = kfopen(_metadata, "__do_sys_getpid");
	ASSERT_EQ(0, h);
	f = fopen("/proc/sys/kernel/kml_syscall_path", "r");
	ASSERT_NE(NULL, f);
	ASSERT_NE(NULL, fgets(old, sizeof(old), f));
	fclose(f);
	for (mode = 0; mode <= max; mode++) {
		static const char *const path[] = { "complete", "generic", "bypass" };
		int fd = open("/proc/sys/kernel/kml_syscall_path", O_WRONLY);

		ASSERT_LE(0, fd);
		if (write(fd, path[mode], strlen(path[mode])) < 0) {
			/* the bypass is not offered by this kernel */
			EXPECT_EQ(2, mode);
			close(fd);
			break;
		}
		close(fd);
		r = 0;
		EXPECT_EQ(0, kml_kfunc_call(h, &r)) TH_LOG("kml_syscall_path=%s", path[mode]);
		EXPECT_EQ(getpid(), (pid_t)r) TH_LOG("kml_syscall_path=%s", path[mode]);
		EXPECT_EQ(-EBADF, kml_kfunc_call(h + 1, &r));
	}
	f = fopen("/proc/sys/kernel/kml_syscall_path", "w");
	ASSERT_NE(NULL, f);
	fputs(old, f);
	ASSERT_EQ(0, fclose(f));
}

/* ---- reading kernel memory (kernel mode) ------------------------------ */

/*
 * This process's task_struct: along init_task.tasks with kml_kread()
 * (fault-safe: other tasks may exit meanwhile); 0 if not found.
 */
static uintptr_t own_task(struct __test_metadata *_metadata)
{
	long o_tasks = boff(_metadata, "task_struct", "tasks");
	long o_pid = boff(_metadata, "task_struct", "pid");
	uintptr_t init = (uintptr_t)ksym(_metadata, "init_task"), node, head;
	int pid, n = 0;

	if (o_tasks < 0 || o_pid < 0 || !init)
		return 0;
	head = init + (uintptr_t)o_tasks;
	if (kml_kread(&node, (void *)head, sizeof(node)))
		return 0;
	while (node != head && n++ < 100000) {
		uintptr_t t = node - (uintptr_t)o_tasks;

		if (kml_kread(&pid, (void *)(t + (uintptr_t)o_pid), sizeof(pid)))
			return 0;
		if (pid == getpid())
			return t;
		if (kml_kread(&node, (void *)node, sizeof(node)))
			return 0;
	}
	return 0;
}

TEST(kernel_memory_read_directly_and_with_kread)
{
	char comm[16], name[16];
	uintptr_t init, me, stack;
	long o_comm, o_pid, o_stack;
	int pid;

	NEED_KERNEL_MODE();
	init = (uintptr_t)ksym(_metadata, "init_task");
	o_comm = boff(_metadata, "task_struct", "comm");
	o_pid = boff(_metadata, "task_struct", "pid");
	o_stack = boff(_metadata, "task_struct", "stack");
	ASSERT_FALSE(!init || o_comm < 0 || o_pid < 0 || o_stack < 0);

	/* init_task is pid 0, "swapper/0": directly, and through kml_kread */
	EXPECT_EQ(0, *(volatile int *)(init + (uintptr_t)o_pid));
	EXPECT_STREQ("swapper/0", (const char *)(init + (uintptr_t)o_comm));
	ASSERT_EQ(0, kml_kread(comm, (void *)(init + (uintptr_t)o_comm), sizeof(comm)))
		TH_LOG("%s", kml_klib_error());
	EXPECT_STREQ("swapper/0", comm);

	/* this process, found on the task list */
	me = own_task(_metadata);
	ASSERT_NE(0, me);
	ASSERT_EQ(0, prctl(PR_SET_NAME, "klib-self"));
	ASSERT_EQ(0, prctl(PR_GET_NAME, name));
	EXPECT_STREQ(name, (const char *)(me + (uintptr_t)o_comm));
	ASSERT_EQ(0, kml_kread(&pid, (void *)(me + (uintptr_t)o_pid), sizeof(pid)));
	EXPECT_EQ(getpid(), pid);

	/* refusals of kml_kread: a user address, a non-canonical one */
	EXPECT_EQ(-ERANGE, kml_kread(comm, name, sizeof(comm)));
	EXPECT_EQ(-ERANGE, kml_kread(comm, (void *)NONCANONICAL, sizeof(comm)));

	/* below this task's vmalloc'ed kernel stack is a guard hole */
	stack = *(volatile uintptr_t *)(me + (uintptr_t)o_stack);
	ASSERT_NE(0, stack);
	EXPECT_EQ(-EFAULT, kml_kread(comm, (void *)(stack - 8), 8)) TH_LOG("%s", kml_klib_error());
	EXPECT_EQ(0, kml_kread(comm, (void *)stack, 8));
}

TEST(direct_read_of_unmapped_kernel_memory_is_sigsegv)
{
	uintptr_t me, stack;
	long o_stack;
	int status;
	pid_t pid;

	NEED_KERNEL_MODE();
	o_stack = boff(_metadata, "task_struct", "stack");
	me = own_task(_metadata);
	ASSERT_NE(0, me);
	ASSERT_LE(0, o_stack);
	stack = *(volatile uintptr_t *)(me + (uintptr_t)o_stack);
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		/* the parent's stack is still there: read below it */
		volatile unsigned long v = *(volatile unsigned long *)(stack - 8);

		(void)v;
		_exit(0);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFSIGNALED(status)) TH_LOG("status %#x", status);
	EXPECT_EQ(SIGSEGV, WTERMSIG(status));
}

/* ---- kml-ps (any mode: it runs from /trusted) ------------------------- */

#define MAX_PS	4096

struct ps_line {
	int pid, tgid;
	char state;
	long stack;
	char comm[32];
};

static int parse_ps(char *out, struct ps_line *ps, int max, unsigned long *thread_size)
{
	char *line, *save = NULL;
	int n = 0, header = 0;

	for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		struct ps_line p = { 0 };
		char stack[16];
		int used = 0;

		if (!strncmp(line, "kml-ps: ", 8)) {
			char *ts = strstr(line, "kernel stacks of ");

			if (!ts || sscanf(ts, "kernel stacks of %lu", thread_size) != 1)
				return -1;
			continue;
		}
		if (strstr(line, "PID") && strstr(line, "COMM")) {
			header++;
			continue;
		}
		if (line[0] == '!')
			continue;
		if (sscanf(line, "%d %d %c %15s %n", &p.pid, &p.tgid, &p.state, stack,
			   &used) < 4 || !used)
			return -1;
		snprintf(p.comm, sizeof(p.comm), "%s", line + used);
		p.stack = isdigit((unsigned char)stack[0]) ? atol(stack) : -1;
		if (n < max)
			ps[n++] = p;
	}
	return header == 1 ? n : -1;
}

static const struct ps_line *ps_find(const struct ps_line *ps, int n, int pid, int tgid)
{
	int i;

	for (i = 0; i < n; i++)
		if (ps[i].pid == pid && ps[i].tgid == tgid)
			return &ps[i];
	return NULL;
}

/*
 * Every process in /proc: its comm ("" = none) and whether it is a kernel
 * thread.  For kernel threads /proc/PID/comm is longer than task->comm
 * (a workqueue worker's description, the full kthread name), of which
 * task->comm is a prefix.
 */
struct proc_entry {
	char comm[64];
	int kthread;
};

static void proc_snapshot(struct proc_entry *procs, int max)
{
	DIR *d = opendir("/proc");
	struct dirent *e;

	memset(procs, 0, sizeof(*procs) * (size_t)max);
	if (!d)
		return;
	while ((e = readdir(d))) {
		char path[64], buf[64], status[4096];
		int pid = atoi(e->d_name);
		long n;

		if (pid <= 0 || pid >= max)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/comm", pid);
		n = kml_read_file(path, buf, sizeof(buf));
		if (n <= 0)
			continue;
		buf[strcspn(buf, "\n")] = '\0';
		snprintf(path, sizeof(path), "/proc/%d/status", pid);
		if (kml_read_file(path, status, sizeof(status)) <= 0)
			continue;
		memcpy(procs[pid].comm, buf, sizeof(buf));
		procs[pid].kthread = !!strstr(status, "\nKthread:\t1");
	}
	closedir(d);
}

/* Does kml-ps's comm (task->comm) agree with /proc's? */
static int comm_agrees(const struct proc_entry *proc, const char *ps_comm)
{
	if (proc->kthread)
		return *ps_comm && !strncmp(proc->comm, ps_comm, strlen(ps_comm));
	return !strcmp(proc->comm, ps_comm);
}

static volatile int thread_stop;

static void *named_thread(void *arg)
{
	prctl(PR_SET_NAME, (char *)arg);
	while (!thread_stop)
		usleep(10000);
	return NULL;
}

#define PROC_MAX	32768

/*
 * Three sleepers with names of their own and a thread with a name, for
 * kml-ps to list; the teardown stops and reaps them, also when an ASSERT
 * ends the test early.
 */
FIXTURE(kml_ps) {
	pid_t kids[3];
	char names[3][16], tname[16];
	pthread_t th;
	int have_thread;
};

FIXTURE_SETUP(kml_ps)
{
	int i;

	if (!kml_kernel() || access(KML_PS, X_OK))
		return;			/* the test skips */
	for (i = 0; i < 3; i++) {
		snprintf(self->names[i], sizeof(self->names[i]), "klps%d-%d", i,
			 getpid() % 100000);
		self->kids[i] = fork();
		ASSERT_LE(0, self->kids[i]);
		if (!self->kids[i]) {
			prctl(PR_SET_NAME, self->names[i]);
			for (;;)
				pause();
		}
	}
	snprintf(self->tname, sizeof(self->tname), "klthr-%d", getpid() % 100000);
	thread_stop = 0;
	ASSERT_EQ(0, pthread_create(&self->th, NULL, named_thread, self->tname));
	self->have_thread = 1;
	for (i = 0; i < 500; i++) {	/* until the names are set */
		char path[64], buf[32];
		int j, ok = 1;

		for (j = 0; j < 3; j++) {
			snprintf(path, sizeof(path), "/proc/%d/comm", self->kids[j]);
			ok &= kml_read_file(path, buf, sizeof(buf)) > 0 &&
			      !strncmp(buf, self->names[j], strlen(self->names[j]));
		}
		if (ok)
			break;
		usleep(10000);
	}
	usleep(100000);		/* let the sleepers reach pause() */
}

FIXTURE_TEARDOWN(kml_ps)
{
	int i;

	if (self->have_thread) {
		thread_stop = 1;
		pthread_join(self->th, NULL);
	}
	for (i = 0; i < 3; i++) {
		if (self->kids[i] <= 0)
			continue;
		kill(self->kids[i], SIGKILL);
		waitpid(self->kids[i], NULL, 0);
	}
}

TEST_F(kml_ps, agrees_with_proc)
{
	static struct proc_entry before[PROC_MAX], after[PROC_MAX];
	static struct ps_line ps[MAX_PS];
	static char out[1 << 18];
	char *argv[] = { KML_PS, NULL };
	pid_t ps_pid = 0, tid;
	unsigned long thread_size = 0;
	int i, n, rc, checked = 0, kthreads = 0;
	const struct ps_line *p;

	NEED_KML_KERNEL();
	if (access(KML_PS, X_OK))
		SKIP(return, "%s is not installed", KML_PS);
	proc_snapshot(before, PROC_MAX);
	rc = kml_run_capture(argv, NULL, out, sizeof(out), &ps_pid);
	proc_snapshot(after, PROC_MAX);
	ASSERT_EQ(0, rc) TH_LOG("kml-ps: %s", kml_quoted(out));
	n = parse_ps(out, ps, MAX_PS, &thread_size);
	ASSERT_LT(0, n) TH_LOG("kml-ps output does not parse: %s", kml_quoted(out));
	ASSERT_LE(4096, thread_size);

	/* the idle task, this process, the sleepers, the thread */
	p = ps_find(ps, n, 0, 0);
	ASSERT_NE(NULL, p);
	EXPECT_STREQ("swapper/0", p->comm);
	p = ps_find(ps, n, getpid(), getpid());
	ASSERT_NE(NULL, p);
	EXPECT_STREQ(before[getpid()].comm, p->comm);
	p = ps_find(ps, n, ps_pid, ps_pid);
	ASSERT_NE(NULL, p);
	EXPECT_STREQ("kml-ps", p->comm);
	EXPECT_EQ('R', p->state);
	for (i = 0; i < 3; i++) {
		p = ps_find(ps, n, self->kids[i], self->kids[i]);
		ASSERT_NE(NULL, p) TH_LOG("sleeper %d not listed", self->kids[i]);
		EXPECT_STREQ(self->names[i], p->comm);
		EXPECT_EQ('S', p->state);
		EXPECT_LT(0, p->stack);
		EXPECT_GE((long)thread_size, p->stack);
	}
	tid = 0;
	for (i = 0; i < n; i++)
		if (ps[i].tgid == getpid() && ps[i].pid != getpid() &&
		    !strcmp(ps[i].comm, self->tname))
			tid = ps[i].pid;
	EXPECT_NE(0, tid) TH_LOG("thread %s of %d not listed", self->tname, getpid());

	/* every process that lived through the check, with the same name */
	for (i = 1; i < PROC_MAX; i++) {
		if (!before[i].comm[0] || strcmp(before[i].comm, after[i].comm))
			continue;
		p = ps_find(ps, n, i, i);
		EXPECT_NE(NULL, p) TH_LOG("pid %d (%s) is in /proc, not in kml-ps",
					  i, before[i].comm);
		if (p)
			EXPECT_TRUE(comm_agrees(&before[i], p->comm))
				TH_LOG("pid %d: /proc says '%s'%s, kml-ps '%s'", i,
				       before[i].comm,
				       before[i].kthread ? " (kernel thread)" : "",
				       p->comm);
		checked++;
		kthreads += before[i].kthread;
	}
	EXPECT_LE(8, checked);
	EXPECT_LT(0, kthreads);
	EXPECT_LT(kthreads, checked);
	/* and nothing listed that /proc never had (but kml-ps itself) */
	for (i = 0; i < n; i++) {
		if (ps[i].pid <= 0 || ps[i].pid != ps[i].tgid || ps[i].pid == ps_pid ||
		    ps[i].pid >= PROC_MAX)
			continue;
		EXPECT_TRUE(before[ps[i].pid].comm[0] || after[ps[i].pid].comm[0])
			TH_LOG("kml-ps lists %d (%s), /proc never did", ps[i].pid,
			       ps[i].comm);
	}
}

TEST(kml_ps_refuses_in_user_mode)
{
	char out[4096], *argv[] = { KML_PS_USER, NULL };

	if (access(KML_PS_USER, X_OK))
		SKIP(return, "%s is not installed", KML_PS_USER);
	EXPECT_EQ(2, kml_run_capture(argv, NULL, out, sizeof(out), NULL)) TH_LOG("%s", kml_quoted(out));
	EXPECT_NE(NULL, strstr(out, "not running in kernel mode")) TH_LOG("%s", kml_quoted(out));
}

/* ---- kml-udp (any mode: it runs from /trusted) ------------------------- */

#define UDP_WAYS	4	/* sendto, its call path, kernel_sendmsg, driver */

static int udp_counts(const char *out, unsigned long long *good, unsigned long long *sent)
{
	const char *r = strstr(out, "receiver: ");
	int n = 0;

	if (!r)
		return -1;
	r += strlen("receiver: ");
	while (n < UDP_WAYS) {
		const char *of = strstr(r, " of ");

		if (!of)
			return -1;
		/* the number before " of " and the one after */
		const char *g = of;

		while (g > r && isdigit((unsigned char)g[-1]))
			g--;
		if (sscanf(g, "%llu of %llu", &good[n], &sent[n]) != 2)
			return -1;
		n++;
		r = of + 4;
	}
	return n;
}

static int read_int_file(const char *path)
{
	FILE *f = fopen(path, "r");
	int v = -1;

	if (f) {
		if (fscanf(f, "%d", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

static int run_udp(char *out, size_t size, const char *extra, const char *arg)
{
	char *argv[16] = { KML_UDP, "-r", "3", "-n", "20", "-s", "1500", "-t", "0.2" };
	int n = 9;

	if (extra) {
		argv[n++] = (char *)extra;
		argv[n++] = (char *)arg;
	}
	argv[n] = NULL;
	return kml_run_capture(argv, NULL, out, size, NULL);
}

TEST(kml_udp_delivers_every_payload)
{
	static char out[1 << 16];
	unsigned long long good[UDP_WAYS], sent[UDP_WAYS];
	const char *ratio;
	double r = 0;
	int i;

	NEED_KML_KERNEL();
	if (access(KML_UDP, X_OK))
		SKIP(return, "%s is not installed", KML_UDP);
	ASSERT_EQ(0, run_udp(out, sizeof(out), NULL, NULL)) TH_LOG("%s", kml_quoted(out));
	ASSERT_EQ(UDP_WAYS, udp_counts(out, good, sent)) TH_LOG("%s", kml_quoted(out));
	for (i = 0; i < UDP_WAYS; i++) {
		EXPECT_EQ(sent[i], good[i]);
		EXPECT_LE(4 * 20, sent[i]);	/* warm-up + 3 runs, at least */
	}
	EXPECT_NE(NULL, strstr(out, "0 bad, 0 duplicate, 0 missing")) TH_LOG("%s", kml_quoted(out));
	EXPECT_NE(NULL, strstr(out, "| kernel_sendmsg() |")) TH_LOG("%s", kml_quoted(out));
	EXPECT_NE(NULL, strstr(out, "| driver (__dev_queue_xmit) |")) TH_LOG("%s", kml_quoted(out));
	/* the last line: the driver-level sender against sendto() */
	ratio = strstr(out, "kml-udp: kernel-library/sendto = ");
	ASSERT_NE(NULL, ratio) TH_LOG("%s", kml_quoted(out));
	EXPECT_EQ(1, sscanf(ratio, "kml-udp: kernel-library/sendto = %lf", &r));
	EXPECT_LT(0, r);
	/* lo's knobs were put back */
	EXPECT_EQ(0, read_int_file("/proc/sys/net/ipv4/conf/lo/route_localnet"));
	EXPECT_EQ(0, read_int_file("/proc/sys/net/ipv4/conf/lo/accept_local"));
	EXPECT_NE(NULL, strstr(out, "Delay for sending 20, 1500-byte packets"))
		TH_LOG("%s", kml_quoted(out));
}

TEST(kml_udp_detects_a_corrupted_payload)
{
	static char out[1 << 16];

	NEED_KML_KERNEL();
	if (access(KML_UDP, X_OK))
		SKIP(return, "%s is not installed", KML_UDP);
	EXPECT_EQ(1, run_udp(out, sizeof(out), "--corrupt", "5")) TH_LOG("%s", kml_quoted(out));
	EXPECT_NE(NULL, strstr(out, "4 bad, 0 duplicate, 0 missing")) TH_LOG("%s", kml_quoted(out));
	EXPECT_NE(NULL, strstr(out, "datagram 5: payload differs")) TH_LOG("%s", kml_quoted(out));
}

TEST(kml_udp_detects_a_missing_datagram)
{
	static char out[1 << 16];

	NEED_KML_KERNEL();
	if (access(KML_UDP, X_OK))
		SKIP(return, "%s is not installed", KML_UDP);
	EXPECT_EQ(1, run_udp(out, sizeof(out), "--drop", "7")) TH_LOG("%s", kml_quoted(out));
	EXPECT_NE(NULL, strstr(out, "0 bad, 0 duplicate, 4 missing")) TH_LOG("%s", kml_quoted(out));
	EXPECT_NE(NULL, strstr(out, "datagram 7 never arrived")) TH_LOG("%s", kml_quoted(out));
}

TEST(kml_udp_refuses_in_user_mode)
{
	char out[4096], *argv[] = { KML_UDP_USER, NULL };

	if (access(KML_UDP_USER, X_OK))
		SKIP(return, "%s is not installed", KML_UDP_USER);
	EXPECT_EQ(2, kml_run_capture(argv, NULL, out, sizeof(out), NULL)) TH_LOG("%s", kml_quoted(out));
	EXPECT_NE(NULL, strstr(out, "not running in kernel mode")) TH_LOG("%s", kml_quoted(out));
}

/* ---- kml-top ----------------------------------------------------------- */

/* The line of pid in the last refresh of kml-top's output, or NULL. */
static const char *top_line(const char *out, pid_t pid, char *line, size_t size)
{
	const char *last = NULL, *p = out, *nl;
	char want[16];

	while ((p = strstr(p, "kml-top: refresh ")))
		last = p++;
	if (!last)
		return NULL;
	snprintf(want, sizeof(want), "%7d ", (int)pid);
	for (p = last; (nl = strchr(p, '\n')); p = nl + 1)
		if (!strncmp(p, want, strlen(want))) {
			snprintf(line, size, "%.*s", (int)(nl - p), p);
			return line;
		}
	return NULL;
}

TEST(kml_top_shows_wait_channels_and_stacks)
{
	static char out[1 << 16];
	char *argv[] = { KML_TOP, "-b", "-n", "2", "-d", "0.3", "-m", "1000", NULL };
	char line[256], comm[32], st, wchan[128], proc_wchan[128] = "", path[64];
	long mapped_k, size_k, kb_before, kb_after;
	FILE *f;
	pid_t sleeper, top;
	double cpu;
	long depth;
	int rc, status;

	NEED_KML_KERNEL();
	if (access(KML_TOP, X_OK))
		SKIP(return, "%s is not installed", KML_TOP);
	sleeper = fork();
	ASSERT_LE(0, sleeper);
	if (sleeper == 0) {
		struct timespec ts = { 30, 0 };

		prctl(PR_SET_NAME, "klib-sleeper");
		nanosleep(&ts, NULL);
		_exit(0);
	}
	/* asleep before kml-top starts: its stack can only shrink (reclaim) */
	ASSERT_EQ(0, kml_wait_sleeping(sleeper));
	kb_before = kml_task_stack_kb(sleeper, sleeper);
	rc = kml_run_capture(argv, NULL, out, sizeof(out), &top);
	kb_after = kml_task_stack_kb(sleeper, sleeper);
	snprintf(path, sizeof(path), "/proc/%d/wchan", (int)sleeper);
	f = fopen(path, "r");
	if (f) {
		if (!fgets(proc_wchan, sizeof(proc_wchan), f))
			proc_wchan[0] = '\0';
		fclose(f);
	}
	kill(sleeper, SIGKILL);
	waitpid(sleeper, &status, 0);
	ASSERT_EQ(0, rc) TH_LOG("%s", kml_quoted(out));
	EXPECT_NE(NULL, strstr(out, "kml-top: refresh 2, ")) TH_LOG("%s", kml_quoted(out));
	EXPECT_NE(NULL, strstr(out, "(CPL 0)")) TH_LOG("%s", kml_quoted(out));

	/*
	 * The sleeper: S, a stack in use, and the wait channel the kernel
	 * reports in /proc (with UNWINDER_GUESS, as in the guest kernel, the
	 * first non-scheduler text address on the stack: not always the
	 * nanosleep code)
	 */
	ASSERT_NE(NULL, top_line(out, sleeper, line, sizeof(line))) TH_LOG("%s", kml_quoted(out));
	ASSERT_EQ(7, sscanf(line, "%*d %31s %c %lf %ld %ld/%ldK %127s", comm, &st, &cpu, &depth,
			    &mapped_k, &size_k, wchan)) TH_LOG("%s", line);
	/*
	 * mapped stack pages: what the kernel reports in KernelStack: (the
	 * whole stack unless demand-paged).  A sleeper's stack maps nothing
	 * and, with reclaim, may give pages back, so kml-top's figure lies
	 * between the kernel's after and before.  Whether a new task starts
	 * with one page mapped is the kstack suite's: a stack from the cache
	 * keeps the pages its last task mapped.
	 */
	EXPECT_LT(0, mapped_k) TH_LOG("%s", line);
	EXPECT_GE(size_k, mapped_k) TH_LOG("%s", line);
	EXPECT_LT(0, kb_after) TH_LOG("no KernelStack: for %d", (int)sleeper);
	EXPECT_LE(kb_after, mapped_k) TH_LOG("%s; KernelStack %ld kB before, %ld after",
					     line, kb_before, kb_after);
	EXPECT_GE(kb_before, mapped_k) TH_LOG("%s; KernelStack %ld kB before, %ld after",
					      line, kb_before, kb_after);
	EXPECT_STREQ("klib-sleeper", comm);
	EXPECT_EQ('S', st) TH_LOG("%s", line);
	EXPECT_LT(0, depth) TH_LOG("%s", line);
	EXPECT_GT(64 * 1024, depth) TH_LOG("%s", line);
	EXPECT_STREQ(proc_wchan, wchan) TH_LOG("%s", line);

	/* kml-top itself: running, no wait channel */
	ASSERT_NE(NULL, top_line(out, top, line, sizeof(line))) TH_LOG("%s", kml_quoted(out));
	EXPECT_EQ(2, sscanf(line, "%*d %31s %c", comm, &st)) TH_LOG("%s", line);
	EXPECT_EQ('R', st) TH_LOG("%s", line);
	/* init is always there and sleeping */
	EXPECT_NE(NULL, top_line(out, 1, line, sizeof(line))) TH_LOG("%s", kml_quoted(out));
}

TEST(kml_top_refuses_in_user_mode)
{
	char out[4096], *argv[] = { KML_TOP_USER, "-n", "1", NULL };

	if (access(KML_TOP_USER, X_OK))
		SKIP(return, "%s is not installed", KML_TOP_USER);
	EXPECT_EQ(2, kml_run_capture(argv, NULL, out, sizeof(out), NULL)) TH_LOG("%s", kml_quoted(out));
	EXPECT_NE(NULL, strstr(out, "not running in kernel mode")) TH_LOG("%s", kml_quoted(out));
}

int main(int argc, char **argv)
{
	const char *helper = getenv(HELPER_ENV);

	if (helper && !strcmp(helper, "eperm"))
		return eperm_helper();
	if (helper && !strcmp(helper, "kfunc-exec"))
		return kfunc_exec_helper();
	return test_harness_run(argc, argv);
}
