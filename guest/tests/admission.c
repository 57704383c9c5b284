// SPDX-License-Identifier: GPL-2.0
/*
 * Kernel-mode admission: which programs run at CPL 0, and who may touch
 * them.  Runs as root in user mode; starts /usr/lib/kml/kml-probe from
 * various places and as various users and reads back its
 * "cpl=N secure=N kernelmode=N" line.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <elf.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "kml_util.h"

#define PROBE		"/usr/lib/kml/kml-probe"
#define PROBE_DYN	"/usr/lib/kml/kml-probe-dyn"
#define KERNEL_LINE	"cpl=0 secure=1 kernelmode=1\n"
#define USER_LINE	"cpl=3 secure=0 kernelmode=0\n"
#define USER_UID	1000
/* The verifier's mark for PROBE, computed on the host (./kml build) */
#define PROBE_MARK	"/usr/lib/kml/marks/kml-probe"
#define MARK_XATTR	"trusted.kml.verified"

static int copy_file(const char *src, const char *dst, mode_t mode, uid_t uid)
{
	char buf[65536];
	int in, out;
	ssize_t n;

	unlink(dst);
	in = open(src, O_RDONLY);
	out = open(dst, O_WRONLY | O_CREAT | O_EXCL, 0700);
	if (in < 0 || out < 0)
		return -1;
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, n) != n)
			return -1;
	close(in);
	if (fchown(out, uid, uid) || fchmod(out, mode))
		return -1;
	return close(out);
}

static int write_sysctl(const char *name, const char *val)
{
	char path[128];
	int fd, ok;

	snprintf(path, sizeof(path), "/proc/sys/kernel/%s", name);
	fd = open(path, O_WRONLY);
	if (fd < 0)
		return -1;
	ok = write(fd, val, strlen(val)) == (ssize_t)strlen(val);
	close(fd);
	return ok ? 0 : -1;
}

/* In a child: drop root for uid (and its group of the same number). */
static int become_user(uid_t uid)
{
	gid_t g = uid;

	return setgroups(1, &g) || setresgid(g, g, g) || setresuid(uid, uid, uid);
}

struct spawn {
	const char *dir;	/* chdir before exec, or NULL */
	const char *root;	/* chroot before exec, or NULL */
	uid_t uid;		/* 0: stay root */
	const char *env;	/* one NAME=VALUE, or NULL */
	int (*setup)(void);	/* last step before exec, or NULL */
	int (*setup_root)(void);	/* first step, as root, or NULL */
};

/* In the child: chroot, chdir, user and setup as struct spawn says. */
static int spawn_setup(const void *arg)
{
	const struct spawn *how = arg;

	if (how->setup_root && how->setup_root())
		_exit(123);
	if (how->root && (chroot(how->root) || chdir("/")))
		_exit(120);
	if (how->dir && chdir(how->dir))
		_exit(121);
	if (how->uid && become_user(how->uid))
		_exit(122);
	return how->setup ? how->setup() : 0;
}

/* Run prog with args; returns the exit status, output in out. */
static int spawn(const struct spawn *how, char *out, size_t size,
		 const char *prog, const char *arg1, const char *arg2,
		 const char *arg3)
{
	char *argv[] = { (char *)prog, (char *)arg1, (char *)arg2,
			 (char *)arg3, NULL };
	char *envp[] = { (char *)(how && how->env ? how->env : "X=1"), NULL };

	return kml_run_capture_setup(argv, envp, how ? spawn_setup : NULL, how,
				     out, size, NULL);
}

static int probe(const struct spawn *how, const char *prog, char *out, size_t size)
{
	return spawn(how, out, size, prog, "info", NULL, NULL);
}

#define EXPECT_MODE(how, prog, line) do {				\
	char _out[256];							\
	ASSERT_EQ(0, probe(how, prog, _out, sizeof(_out)));		\
	ASSERT_STREQ(line, _out);					\
} while (0)

static void install_probe(struct __test_metadata *_metadata)
{
	ASSERT_EQ(0, copy_file(PROBE, "/trusted/kml-probe", 0755, 0));
	ASSERT_EQ(0, copy_file(PROBE_DYN, "/trusted/kml-probe-dyn", 0755, 0));
}

TEST(trusted_program_runs_in_kernel_mode)
{
	install_probe(_metadata);
	EXPECT_MODE(NULL, "/trusted/kml-probe", KERNEL_LINE);
	EXPECT_MODE(NULL, PROBE, USER_LINE);
}

TEST(dynamic_glibc_program_in_kernel_mode)
{
	install_probe(_metadata);
	EXPECT_MODE(NULL, "/trusted/kml-probe-dyn", KERNEL_LINE);
}

TEST(writable_or_foreign_files_run_in_user_mode)
{
	ASSERT_EQ(0, copy_file(PROBE, "/trusted/probe-gw", 0775, 0));
	ASSERT_EQ(0, copy_file(PROBE, "/trusted/probe-ow", 0757, 0));
	ASSERT_EQ(0, copy_file(PROBE, "/trusted/probe-user", 0755, USER_UID));
	EXPECT_MODE(NULL, "/trusted/probe-gw", USER_LINE);
	EXPECT_MODE(NULL, "/trusted/probe-ow", USER_LINE);
	EXPECT_MODE(NULL, "/trusted/probe-user", USER_LINE);
	unlink("/trusted/probe-gw");
	unlink("/trusted/probe-ow");
	unlink("/trusted/probe-user");
}

TEST(writable_or_foreign_directories_run_in_user_mode)
{
	mkdir("/trusted/gw", 0775);
	ASSERT_EQ(0, chmod("/trusted/gw", 0775));
	mkdir("/trusted/user", 0755);
	ASSERT_EQ(0, chown("/trusted/user", USER_UID, USER_UID));
	mkdir("/trusted/ok", 0755);
	ASSERT_EQ(0, copy_file(PROBE, "/trusted/gw/p", 0755, 0));
	ASSERT_EQ(0, copy_file(PROBE, "/trusted/user/p", 0755, 0));
	ASSERT_EQ(0, copy_file(PROBE, "/trusted/ok/p", 0755, 0));
	EXPECT_MODE(NULL, "/trusted/gw/p", USER_LINE);
	EXPECT_MODE(NULL, "/trusted/user/p", USER_LINE);
	EXPECT_MODE(NULL, "/trusted/ok/p", KERNEL_LINE);
	/* A world-writable directory above /trusted spoils it too */
	ASSERT_EQ(0, chmod("/", 0777));
	EXPECT_MODE(NULL, "/trusted/ok/p", USER_LINE);
	ASSERT_EQ(0, chmod("/", 0755));
	unlink("/trusted/gw/p");
	unlink("/trusted/user/p");
	unlink("/trusted/ok/p");
	rmdir("/trusted/gw");
	rmdir("/trusted/user");
	rmdir("/trusted/ok");
}

TEST(judged_on_the_opened_file)
{
	install_probe(_metadata);
	/* A link in /trusted to a file elsewhere: the file is elsewhere */
	unlink("/trusted/link-out");
	ASSERT_EQ(0, symlink(PROBE, "/trusted/link-out"));
	EXPECT_MODE(NULL, "/trusted/link-out", USER_LINE);
	/* A link elsewhere to the trusted file: the file is trusted */
	unlink("/tmp/link-in");
	ASSERT_EQ(0, symlink("/trusted/kml-probe", "/tmp/link-in"));
	EXPECT_MODE(NULL, "/tmp/link-in", KERNEL_LINE);
	unlink("/trusted/link-out");
	unlink("/tmp/link-in");
}

TEST(relative_paths_and_chroot_cannot_fake_it)
{
	struct spawn in_tmp = { .dir = "/tmp" }, in_root = { .dir = "/" };
	struct spawn jail = { .root = "/tmp/jail" };
	char out[256];

	install_probe(_metadata);
	mkdir("/tmp/trusted", 0755);
	ASSERT_EQ(0, copy_file(PROBE, "/tmp/trusted/kml-probe", 0755, 0));
	EXPECT_MODE(&in_tmp, "trusted/kml-probe", USER_LINE);
	EXPECT_MODE(&in_root, "trusted/kml-probe", KERNEL_LINE);

	/* Inside a chroot, "/trusted" is /tmp/jail/trusted: not trusted */
	mkdir("/tmp/jail", 0755);
	mkdir("/tmp/jail/trusted", 0755);
	ASSERT_EQ(0, copy_file(PROBE, "/tmp/jail/trusted/kml-probe", 0755, 0));
	ASSERT_EQ(0, probe(&jail, "/trusted/kml-probe", out, sizeof(out)));
	ASSERT_EQ(0, strncmp(out, "cpl=3 ", 6)) TH_LOG("%s", out);
}

TEST(caller_must_be_root_or_in_the_group)
{
	struct spawn user = { .uid = USER_UID };

	install_probe(_metadata);
	EXPECT_MODE(&user, "/trusted/kml-probe", "cpl=3 secure=0 kernelmode=0\n");
	ASSERT_EQ(0, write_sysctl("kml_group", "1000"));
	EXPECT_MODE(&user, "/trusted/kml-probe", KERNEL_LINE);
	ASSERT_EQ(0, write_sysctl("kml_group", "-1"));
	EXPECT_MODE(&user, "/trusted/kml-probe", "cpl=3 secure=0 kernelmode=0\n");
}

TEST(sysctl_turns_it_off)
{
	install_probe(_metadata);
	ASSERT_EQ(0, write_sysctl("kml_enabled", "0"));
	EXPECT_MODE(NULL, "/trusted/kml-probe", USER_LINE);
	ASSERT_EQ(0, write_sysctl("kml_enabled", "1"));
	EXPECT_MODE(NULL, "/trusted/kml-probe", KERNEL_LINE);
	ASSERT_NE(0, write_sysctl("kml_enabled", "2"));
}

TEST(ld_preload_is_ignored_in_kernel_mode)
{
	struct spawn pre = { .env = "LD_PRELOAD=/usr/lib/kml/kml-preload.so" };
	char out[256];

	install_probe(_metadata);
	ASSERT_EQ(0, probe(&pre, PROBE_DYN, out, sizeof(out)));
	ASSERT_STREQ("PRELOADED\n" USER_LINE, out);	/* the test can fail */
	ASSERT_EQ(0, probe(&pre, "/trusted/kml-probe-dyn", out, sizeof(out)));
	ASSERT_STREQ(KERNEL_LINE, out);
}

TEST(fork_keeps_and_exec_decides_afresh)
{
	char out[256];

	install_probe(_metadata);
	ASSERT_EQ(0, spawn(NULL, out, sizeof(out), "/trusted/kml-probe",
			   "fork-info", NULL, NULL));
	ASSERT_STREQ(KERNEL_LINE, out);
	ASSERT_EQ(0, spawn(NULL, out, sizeof(out), "/trusted/kml-probe",
			   "exec", PROBE, "info"));
	ASSERT_STREQ("cpl=3 secure=0 kernelmode=0\n", out);
	ASSERT_EQ(0, spawn(NULL, out, sizeof(out), PROBE, "exec",
			   "/trusted/kml-probe", "info"));
	ASSERT_STREQ(KERNEL_LINE, out);
}

/* Start "prog CMD 10" as uid; returns its pid. */
static pid_t start_sleeper_cmd(const char *prog, const char *cmd, uid_t uid)
{
	pid_t pid = fork();

	if (pid == 0) {
		if (uid && become_user(uid))
			_exit(122);
		execl(prog, prog, cmd, "10", NULL);
		_exit(127);
	}
	usleep(300 * 1000);	/* let it exec */
	return pid;
}

static pid_t start_sleeper(const char *prog, uid_t uid)
{
	return start_sleeper_cmd(prog, "sleep", uid);
}

/*
 * As uid, try ptrace attach, process_vm_writev and opening /proc/PID/mem
 * for writing; returns a bit mask (1, 2, 4) of the refused ones.
 */
static int tamper(pid_t target, uid_t uid)
{
	int status;
	pid_t pid = fork();

	if (pid == 0) {
		char path[64], byte = 0;
		struct iovec local = { &byte, 1 }, remote = { (void *)0x400000, 1 };
		int denied = 0;

		if (uid && become_user(uid))
			_exit(122);
		if (ptrace(PTRACE_ATTACH, target, 0, 0) < 0 && errno == EPERM)
			denied |= 1;
		else
			ptrace(PTRACE_DETACH, target, 0, 0);
		if (process_vm_writev(target, &local, 1, &remote, 1, 0) < 0 &&
		    errno == EPERM)
			denied |= 2;
		snprintf(path, sizeof(path), "/proc/%d/mem", target);
		if (open(path, O_RDWR) < 0 && (errno == EACCES || errno == EPERM))
			denied |= 4;
		_exit(denied);
	}
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

TEST(non_root_cannot_tamper_with_kernel_mode_process)
{
	pid_t kml, usr;

	install_probe(_metadata);
	ASSERT_EQ(0, write_sysctl("kml_group", "1000"));
	kml = start_sleeper("/trusted/kml-probe", USER_UID);
	usr = start_sleeper(PROBE, USER_UID);
	/* Same user, user-mode target: all three allowed (control) */
	EXPECT_EQ(0, tamper(usr, USER_UID));
	/* Same user, kernel-mode target: all three refused */
	EXPECT_EQ(7, tamper(kml, USER_UID));
	/* Root (CAP_SYS_PTRACE) may */
	EXPECT_EQ(0, tamper(kml, 0));
	kill(kml, SIGKILL);
	kill(usr, SIGKILL);
	waitpid(kml, NULL, 0);
	waitpid(usr, NULL, 0);
	ASSERT_EQ(0, write_sysctl("kml_group", "-1"));
}

/* The io_uring SQPOLL thread ("iou-sqp-PID") of pid, or 0 */
static pid_t sqpoll_thread(pid_t pid)
{
	char path[320], comm[32];
	pid_t tid = 0;
	struct dirent *d;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	dir = opendir(path);
	if (!dir)
		return 0;
	while (!tid && (d = readdir(dir))) {
		snprintf(path, sizeof(path), "/proc/%d/task/%s/comm", pid, d->d_name);
		if (kml_read_file(path, comm, sizeof(comm)) > 0 &&
		    !strncmp(comm, "iou-sqp-", 8))
			tid = atoi(d->d_name);
	}
	closedir(dir);
	return tid;
}

/*
 * The same for the threads that share a kernel-mode mm but never return
 * to the program, so never run at CPL 0 themselves: an io_uring SQPOLL
 * thread of a group member's dumpable program.  Writing the mm through
 * that thread writes code that runs at CPL 0: refused like the program.
 */
TEST(non_root_cannot_tamper_through_an_io_uring_thread)
{
	pid_t kml, usr, tid;

	install_probe(_metadata);
	ASSERT_EQ(0, write_sysctl("kml_group", "1000"));
	kml = start_sleeper_cmd("/trusted/kml-probe", "uring-sleep", USER_UID);
	usr = start_sleeper_cmd(PROBE, "uring-sleep", USER_UID);
	tid = sqpoll_thread(usr);
	if (!tid) {
		kill(kml, SIGKILL);
		kill(usr, SIGKILL);
		write_sysctl("kml_group", "-1");
		SKIP(return, "no io_uring SQPOLL thread (CONFIG_IO_URING?)");
	}
	/* Same user, user-mode target's thread: allowed (control) */
	EXPECT_EQ(0, tamper(tid, USER_UID));
	tid = sqpoll_thread(kml);
	ASSERT_NE(0, tid);
	EXPECT_EQ(7, tamper(tid, USER_UID));
	kill(kml, SIGKILL);
	kill(usr, SIGKILL);
	waitpid(kml, NULL, 0);
	waitpid(usr, NULL, 0);
	ASSERT_EQ(0, write_sysctl("kml_group", "-1"));
}

TEST(root_can_single_step_a_kernel_mode_process)
{
	struct user_regs_struct regs;
	unsigned long last_ip = 0;
	int status, steps = 0;
	pid_t pid;

	install_probe(_metadata);
	pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		int devnull = open("/dev/null", O_WRONLY);

		dup2(devnull, 1);
		ptrace(PTRACE_TRACEME, 0, 0, 0);
		execl("/trusted/kml-probe", "kml-probe", "info", NULL);
		_exit(127);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFSTOPPED(status));	/* SIGTRAP at exec */
	ASSERT_EQ(0, ptrace(PTRACE_GETREGS, pid, 0, &regs));
	TH_LOG("after exec: rip %llx cs %llx", regs.rip, regs.cs);
	ASSERT_EQ(0x33, regs.cs);		/* the kernel's user-mode view */
	ASSERT_LT(regs.rip, 1ULL << 47);
	for (steps = 0; steps < 50; steps++) {
		ASSERT_EQ(0, ptrace(PTRACE_SINGLESTEP, pid, 0, 0));
		ASSERT_EQ(pid, waitpid(pid, &status, 0));
		ASSERT_TRUE(WIFSTOPPED(status));
		ASSERT_EQ(SIGTRAP, WSTOPSIG(status));
		ASSERT_EQ(0, ptrace(PTRACE_GETREGS, pid, 0, &regs));
		ASSERT_NE(last_ip, regs.rip);
		last_ip = regs.rip;
	}
	ASSERT_EQ(0, ptrace(PTRACE_CONT, pid, 0, 0));
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	ASSERT_EQ(0, WEXITSTATUS(status));
}

/* PTRACE_SYSCALL (what strace uses) sees every call of the process. */
TEST(ptrace_sees_every_system_call)
{
	int status, stops = 0;
	pid_t pid;

	install_probe(_metadata);
	pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		ptrace(PTRACE_TRACEME, 0, 0, 0);
		execl("/trusted/kml-probe", "kml-probe", "spin", "500", NULL);
		_exit(127);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));	/* exec stop */
	ASSERT_EQ(0, ptrace(PTRACE_SETOPTIONS, pid, 0, PTRACE_O_TRACESYSGOOD));
	for (;;) {
		ASSERT_EQ(0, ptrace(PTRACE_SYSCALL, pid, 0, 0));
		ASSERT_EQ(pid, waitpid(pid, &status, 0));
		if (WIFEXITED(status))
			break;
		ASSERT_TRUE(WIFSTOPPED(status));
		if (WSTOPSIG(status) == (SIGTRAP | 0x80)) {
			struct user_regs_struct regs;

			ASSERT_EQ(0, ptrace(PTRACE_GETREGS, pid, 0, &regs));
			stops += regs.orig_rax == SYS_getppid;
		}
	}
	ASSERT_EQ(0, WEXITSTATUS(status));
	ASSERT_EQ(1000, stops);		/* 500 calls, entry and exit each */
}

TEST(traced_by_non_root_runs_in_user_mode)
{
	char out[256];
	int fds[2], status;
	pid_t pid;

	install_probe(_metadata);
	ASSERT_EQ(0, write_sysctl("kml_group", "1000"));
	ASSERT_EQ(0, pipe(fds));
	pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		pid_t child;

		if (become_user(USER_UID))
			_exit(122);
		child = fork();
		if (child == 0) {
			dup2(fds[1], 1);
			ptrace(PTRACE_TRACEME, 0, 0, 0);
			execl("/trusted/kml-probe", "kml-probe", "info", NULL);
			_exit(127);
		}
		waitpid(child, &status, 0);		/* exec stop */
		ptrace(PTRACE_CONT, child, 0, 0);
		waitpid(child, &status, 0);
		_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 99);
	}
	close(fds[1]);
	memset(out, 0, sizeof(out));
	ASSERT_GT(read(fds[0], out, sizeof(out) - 1), 0);
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_EQ(0, WEXITSTATUS(status));
	ASSERT_EQ(0, strncmp(out, "cpl=3 ", 6)) TH_LOG("%s", out);
	ASSERT_EQ(0, write_sysctl("kml_group", "-1"));
}

TEST(many_kernel_mode_processes_at_once)
{
	pid_t pids[16];
	int status;

	install_probe(_metadata);
	for (int i = 0; i < 16; i++) {
		pids[i] = fork();
		ASSERT_GE(pids[i], 0);
		if (pids[i] == 0) {
			execl("/trusted/kml-probe", "kml-probe", "spin", "20000", NULL);
			_exit(127);
		}
	}
	for (int i = 0; i < 16; i++) {
		ASSERT_EQ(pids[i], waitpid(pids[i], &status, 0));
		ASSERT_TRUE(WIFEXITED(status));
		ASSERT_EQ(0, WEXITSTATUS(status));
	}
}

/*
 * Attacks on the admission rule (docs/kernel-mode.md, "Threat model").
 * Each attempt must end in user mode or a refusal; each has a control
 * that reaches CPL 0 with only the attacked condition taken away.
 */
#define EXPECT_USER(how, prog) do {					\
	char _out[256];							\
	ASSERT_EQ(0, probe(how, prog, _out, sizeof(_out)));		\
	ASSERT_EQ(0, strncmp(_out, "cpl=3 ", 6)) TH_LOG("%s", _out);	\
} while (0)

/*
 * Every fixture tears down in the parent (FIXTURE_TEARDOWN_PARENT): the
 * harness skips a child's teardown after a failed ASSERT (its child pid
 * does not survive the longjmp), and a sysctl left changed would fail
 * the tests that follow.
 */

/* Tests that admit the kml group (USER_UID) */
FIXTURE(group) {
};

FIXTURE_SETUP(group)
{
	install_probe(_metadata);
	ASSERT_EQ(0, write_sysctl("kml_group", "1000"));
}

FIXTURE_TEARDOWN_PARENT(group)
{
	write_sysctl("kml_group", "-1");
	umount("/trusted");
}

/* Keep only the capabilities in keep: every set, the bounding set too. */
static int keep_caps(unsigned long long keep)
{
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct data[2];

	for (int cap = 0; cap < 64; cap++)
		if (!(keep >> cap & 1) && prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) &&
		    errno != EINVAL)
			return -1;
	memset(data, 0, sizeof(data));
	data[0].effective = data[0].permitted = (__u32)keep;
	data[1].effective = data[1].permitted = (__u32)(keep >> 32);
	return syscall(SYS_capset, &hdr, data);
}

static int drop_all_caps(void)
{
	return keep_caps(0);
}

static int keep_only_rawio(void)
{
	return keep_caps(1ULL << CAP_SYS_RAWIO);
}

static int drop_sys_admin(void)
{
	return keep_caps(~0ULL & ~(1ULL << CAP_SYS_ADMIN));
}

/* Root in the kml group, as a container's root without a user namespace */
static int join_group_keep_setgid(void)
{
	gid_t g = USER_UID;

	return setgroups(1, &g) || keep_caps(1ULL << CAP_SETGID);
}

static int join_group_no_caps(void)
{
	gid_t g = USER_UID;

	return setgroups(1, &g) || keep_caps(0);
}

/*
 * Membership of the kml group counts only where the administrator gave
 * it: a caller with CAP_SETGID could have joined by itself.
 */
TEST(group_membership_with_cap_setgid_does_not_count)
{
	struct spawn setgid = { .setup = join_group_keep_setgid };
	struct spawn member = { .setup = join_group_no_caps };

	install_probe(_metadata);
	ASSERT_EQ(0, write_sysctl("kml_group", "1000"));
	EXPECT_USER(&setgid, "/trusted/kml-probe");
	/* Control: the same membership without CAP_SETGID */
	EXPECT_MODE(&member, "/trusted/kml-probe", KERNEL_LINE);
	ASSERT_EQ(0, write_sysctl("kml_group", "-1"));
}

TEST(root_without_cap_sys_rawio_runs_in_user_mode)
{
	struct spawn none = { .setup = drop_all_caps };
	struct spawn rawio = { .setup = keep_only_rawio };

	install_probe(_metadata);
	EXPECT_USER(&none, "/trusted/kml-probe");
	EXPECT_USER(&none, "/trusted/kml-probe-dyn");
	/* Control: CAP_SYS_RAWIO alone is enough */
	EXPECT_MODE(&rawio, "/trusted/kml-probe", KERNEL_LINE);
}

static int set_no_new_privs(void)
{
	return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
}

TEST_F(group, no_new_privs_runs_in_user_mode)
{
	struct spawn nnp = { .setup = set_no_new_privs };
	struct spawn member_nnp = { .uid = USER_UID, .setup = set_no_new_privs };
	struct spawn member = { .uid = USER_UID };

	EXPECT_USER(&nnp, "/trusted/kml-probe");
	EXPECT_USER(&member_nnp, "/trusted/kml-probe");
	EXPECT_MODE(&member, "/trusted/kml-probe", KERNEL_LINE);	/* control */
}

static int allow_all_seccomp_filter(void)
{
	struct sock_filter allow[] = {
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = 1, .filter = allow };

	return syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog);
}

TEST(seccomp_confined_caller_runs_in_user_mode)
{
	struct spawn confined = { .setup = allow_all_seccomp_filter };

	install_probe(_metadata);
	EXPECT_USER(&confined, "/trusted/kml-probe");
	EXPECT_MODE(NULL, "/trusted/kml-probe", KERNEL_LINE);	/* control */
}

static int write_str(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY), ok;

	if (fd < 0)
		return -1;
	ok = write(fd, val, strlen(val)) == (ssize_t)strlen(val);
	close(fd);
	return ok ? 0 : -1;
}

/* As USER_UID: a user namespace in which it is root, with its own mounts */
static int enter_user_namespace(void)
{
	/* Dumpable again after the switch from root: uid_map, gid_map */
	if (prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) ||
	    unshare(CLONE_NEWUSER | CLONE_NEWNS) ||
	    write_str("/proc/self/setgroups", "deny") ||
	    write_str("/proc/self/uid_map", "0 1000 1") ||
	    write_str("/proc/self/gid_map", "0 1000 1"))
		return -1;
	return mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL);
}

/* ... and there, root-owned programs of its choice bound onto /trusted */
static int bind_programs_onto_trusted(void)
{
	if (enter_user_namespace())
		return -1;
	return mount("/usr/lib/kml", "/trusted", NULL, MS_BIND, NULL);
}

static int enter_mount_namespace(void)
{
	if (unshare(CLONE_NEWNS))
		return -1;
	return mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL);
}

static int bind_in_mount_namespace(void)
{
	if (enter_mount_namespace())
		return -1;
	return mount("/usr/lib/kml", "/trusted", NULL, MS_BIND, NULL);
}

/* Another file bound onto the trusted program's own path */
static int bind_file_in_mount_namespace(void)
{
	if (enter_mount_namespace())
		return -1;
	return mount("/usr/lib/kml/kml-probe", "/trusted/kml-probe", NULL,
		     MS_BIND, NULL);
}

/* As systemd's ReadOnlyPaths= and ProtectSystem= do: a read-only copy */
static int read_only_copy_in_mount_namespace(void)
{
	if (enter_mount_namespace() ||
	    mount("/trusted", "/trusted", NULL, MS_BIND, NULL))
		return -1;
	return mount(NULL, "/trusted", NULL,
		     MS_REMOUNT | MS_BIND | MS_RDONLY, NULL);
}

static int nosuid_copy_in_mount_namespace(void)
{
	if (enter_mount_namespace() ||
	    mount("/trusted", "/trusted", NULL, MS_BIND, NULL))
		return -1;
	return mount(NULL, "/trusted", NULL,
		     MS_REMOUNT | MS_BIND | MS_NOSUID, NULL);
}

TEST_F(group, mount_namespace_copies_match_and_bind_mounts_never_do)
{
	struct spawn member = { .uid = USER_UID };
	struct spawn userns = { .uid = USER_UID, .setup = enter_user_namespace };
	struct spawn userns_bind = { .uid = USER_UID,
				     .setup = bind_programs_onto_trusted };
	struct spawn member_mntns = { .uid = USER_UID,
				      .setup_root = enter_mount_namespace };
	struct spawn mntns = { .setup = enter_mount_namespace };
	struct spawn mntns_ro = { .setup = read_only_copy_in_mount_namespace };
	struct spawn mntns_nosuid = { .setup = nosuid_copy_in_mount_namespace };
	struct spawn mntns_bind = { .setup = bind_in_mount_namespace };
	struct spawn mntns_bind_file = { .setup = bind_file_in_mount_namespace };

	EXPECT_MODE(&member, "/trusted/kml-probe", KERNEL_LINE);	/* control */
	/* A group member in a user namespace: neither its copy of /trusted */
	EXPECT_USER(&userns, "/trusted/kml-probe");
	/* ... nor root-owned programs it binds there (the probe of /usr/lib) */
	EXPECT_USER(&userns_bind, "/trusted/kml-probe");
	/*
	 * A service's private mount namespace (made by root, as systemd
	 * does, then the member runs in it): the copy is the same file
	 */
	EXPECT_MODE(&member_mntns, "/trusted/kml-probe", KERNEL_LINE);
	ASSERT_EQ(0, write_sysctl("kml_group", "-1"));
	EXPECT_MODE(&mntns, "/trusted/kml-probe", KERNEL_LINE);
	EXPECT_MODE(&mntns_ro, "/trusted/kml-probe", KERNEL_LINE);
	/* The caller's own mount flags still count */
	EXPECT_USER(&mntns_nosuid, "/trusted/kml-probe");
	/* Another directory, or another file, bound onto the trusted path */
	EXPECT_USER(&mntns_bind, "/trusted/kml-probe");
	EXPECT_USER(&mntns_bind_file, "/trusted/kml-probe");
	/* A bind mount onto /trusted in the initial namespace hides it */
	ASSERT_EQ(0, mount("/usr/lib/kml", "/trusted", NULL, MS_BIND, NULL));
	EXPECT_USER(NULL, "/trusted/kml-probe");
	ASSERT_EQ(0, umount("/trusted"));
	EXPECT_MODE(NULL, "/trusted/kml-probe", KERNEL_LINE);	/* control */
}

/* The PT_INTERP path of an ELF program, into buf. */
static int elf_interp(const char *prog, char *buf, size_t size)
{
	Elf64_Ehdr eh;
	Elf64_Phdr ph;
	int fd = open(prog, O_RDONLY), ret = -1;

	if (fd < 0)
		return -1;
	if (pread(fd, &eh, sizeof(eh), 0) != sizeof(eh))
		goto out;
	for (int i = 0; i < eh.e_phnum; i++) {
		if (pread(fd, &ph, sizeof(ph), eh.e_phoff + i * sizeof(ph)) !=
		    sizeof(ph))
			break;
		if (ph.p_type != PT_INTERP || ph.p_filesz >= size)
			continue;
		if (pread(fd, buf, ph.p_filesz, ph.p_offset) == (ssize_t)ph.p_filesz) {
			buf[ph.p_filesz] = '\0';
			ret = 0;
		}
		break;
	}
out:
	close(fd);
	return ret;
}

/*
 * The ELF interpreter runs at CPL 0 as well: a copy of the system's
 * own, bound over it, is refused when a user owns it or anyone but root
 * may write it.  The bind mounts are in the initial mount namespace
 * (the only one whose /trusted counts); the fixture removes them.
 */
FIXTURE(interp) {
	char path[256];
};

FIXTURE_SETUP(interp)
{
	install_probe(_metadata);
	ASSERT_EQ(0, elf_interp(PROBE_DYN, self->path, sizeof(self->path)));
	ASSERT_EQ(0, copy_file(self->path, "/tmp/ld-user.so", 0755, USER_UID));
	ASSERT_EQ(0, copy_file(self->path, "/tmp/ld-gw.so", 0775, 0));
	ASSERT_EQ(0, copy_file(self->path, "/tmp/ld-root.so", 0755, 0));
}

FIXTURE_TEARDOWN_PARENT(interp)
{
	while (umount(self->path) == 0)
		;
	unlink("/tmp/ld-user.so");
	unlink("/tmp/ld-gw.so");
	unlink("/tmp/ld-root.so");
}

TEST_F(interp, interpreter_must_pass_the_rules_too)
{
	EXPECT_MODE(NULL, "/trusted/kml-probe-dyn", KERNEL_LINE);
	ASSERT_EQ(0, mount("/tmp/ld-user.so", self->path, NULL, MS_BIND, NULL));
	EXPECT_USER(NULL, "/trusted/kml-probe-dyn");
	ASSERT_EQ(0, umount(self->path));
	ASSERT_EQ(0, mount("/tmp/ld-gw.so", self->path, NULL, MS_BIND, NULL));
	EXPECT_USER(NULL, "/trusted/kml-probe-dyn");
	ASSERT_EQ(0, umount(self->path));
	/* Control: the same bind with a root-owned, unwritable copy */
	ASSERT_EQ(0, mount("/tmp/ld-root.so", self->path, NULL, MS_BIND, NULL));
	EXPECT_MODE(NULL, "/trusted/kml-probe-dyn", KERNEL_LINE);
	ASSERT_EQ(0, umount(self->path));
}

/*
 * A file that a kernel-mode process maps executable after exec (a
 * library, a plugin) runs at CPL 0 too: it must pass the interpreter's
 * rules.  A user's copy and root's copy in a world-writable directory
 * are refused; the system's loader, and any file in user mode, are not.
 */
TEST_F(interp, executable_mappings_must_pass_the_rules_too)
{
	char out[256];

	ASSERT_EQ(0, spawn(NULL, out, sizeof(out), "/trusted/kml-probe",
			   "map-exec", "/tmp/ld-user.so", NULL));
	EXPECT_EQ(0, strncmp(out, "mmap=EPERM ", 11)) TH_LOG("%s", out);
	ASSERT_EQ(0, spawn(NULL, out, sizeof(out), "/trusted/kml-probe",
			   "map-exec", "/tmp/ld-root.so", NULL));
	EXPECT_EQ(0, strncmp(out, "mmap=EPERM ", 11)) TH_LOG("%s", out);
	ASSERT_EQ(0, spawn(NULL, out, sizeof(out), "/trusted/kml-probe",
			   "map-exec", self->path, NULL));
	EXPECT_EQ(0, strncmp(out, "mmap=ok mprotect=ok", 19)) TH_LOG("%s", out);
	ASSERT_EQ(0, spawn(NULL, out, sizeof(out), PROBE, "map-exec",
			   "/tmp/ld-user.so", NULL));
	EXPECT_EQ(0, strncmp(out, "mmap=ok mprotect=ok", 19)) TH_LOG("%s", out);
}

static char interp_path[256];

/* A root-owned copy of the interpreter bound over it, in a new namespace */
static int bind_interp_in_mount_namespace(void)
{
	if (enter_mount_namespace())
		return -1;
	return mount("/tmp/ld-root.so", interp_path, NULL, MS_BIND, NULL);
}

/*
 * A root-owned, unwritable loader that is not the one the administrator
 * installed -- a rootful container's own, here bound over the path in
 * another mount namespace -- passes the file rules, but is not the file
 * its path names in the initial mount namespace: user mode.  A plain
 * copy of the initial namespace's mounts is no reason to refuse.
 */
TEST_F(interp, interpreter_of_another_mount_namespace_is_refused)
{
	struct spawn bound = { .setup = bind_interp_in_mount_namespace };
	struct spawn copy = { .setup = enter_mount_namespace };

	ASSERT_LT(strlen(self->path), sizeof(interp_path));
	strcpy(interp_path, self->path);
	EXPECT_USER(&bound, "/trusted/kml-probe-dyn");
	EXPECT_MODE(&copy, "/trusted/kml-probe-dyn", KERNEL_LINE);
}

/*
 * kernel.kml_trusted_dir names another directory; a nosuid mount there
 * is refused.  Bad values fail and change nothing.
 */
#define NOSUID_DIR	"/kml-nosuid"

FIXTURE(trusted_dir) {
};

FIXTURE_SETUP(trusted_dir)
{
	install_probe(_metadata);
	mkdir(NOSUID_DIR, 0755);
	ASSERT_EQ(0, mount("tmpfs", NOSUID_DIR, "tmpfs", MS_NOSUID, "mode=755"));
	ASSERT_EQ(0, copy_file(PROBE, NOSUID_DIR "/kml-probe", 0755, 0));
}

FIXTURE_TEARDOWN_PARENT(trusted_dir)
{
	write_sysctl("kml_trusted_dir", "/trusted");
	umount(NOSUID_DIR);
	rmdir(NOSUID_DIR);
}

static int read_sysctl(const char *name, char *buf, size_t size)
{
	char path[128];

	snprintf(path, sizeof(path), "/proc/sys/kernel/%s", name);
	if (kml_read_file(path, buf, size) < 0)
		return -1;
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

TEST_F(trusted_dir, nosuid_mount_runs_in_user_mode)
{
	char val[256];

	ASSERT_EQ(0, write_sysctl("kml_trusted_dir", NOSUID_DIR));
	ASSERT_EQ(0, read_sysctl("kml_trusted_dir", val, sizeof(val)));
	ASSERT_STREQ(NOSUID_DIR, val);
	EXPECT_USER(NULL, NOSUID_DIR "/kml-probe");
	/* /trusted is no longer the trusted directory */
	EXPECT_USER(NULL, "/trusted/kml-probe");
	/* Control: the same mount without nosuid */
	ASSERT_EQ(0, mount(NULL, NOSUID_DIR, NULL, MS_REMOUNT, "mode=755"));
	EXPECT_MODE(NULL, NOSUID_DIR "/kml-probe", KERNEL_LINE);
}

TEST_F(trusted_dir, bad_values_are_refused_and_change_nothing)
{
	static const char *const bad[] = {
		"trusted", "/no/such/dir", NOSUID_DIR "/kml-probe",
	};
	char val[256];

	for (unsigned int i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ASSERT_NE(0, write_sysctl("kml_trusted_dir", bad[i]));
		ASSERT_EQ(0, read_sysctl("kml_trusted_dir", val, sizeof(val)));
		ASSERT_STREQ("/trusted", val);
		EXPECT_MODE(NULL, "/trusted/kml-probe", KERNEL_LINE);
	}
}

/*
 * The trusted directory is looked up by its path at every exec, not
 * pinned: a file system mounted on it can be unmounted, and once it is
 * renamed it is no longer trusted, while a new directory of its name is.
 * The fixture puts the previous setting back and removes what the tests
 * made, whether they pass or not.
 */
#define TDIR		"/kml-tdir"
#define TDIR_MOVED	"/kml-tdir-moved"

FIXTURE(tdir) {
	char old[256];
};

FIXTURE_SETUP(tdir)
{
	ASSERT_EQ(0, read_sysctl("kml_trusted_dir", self->old, sizeof(self->old)));
	mkdir(TDIR, 0755);
	ASSERT_EQ(0, chmod(TDIR, 0755));
}

FIXTURE_TEARDOWN_PARENT(tdir)
{
	write_sysctl("kml_trusted_dir", self->old);
	umount(TDIR);
	unlink(TDIR "/kml-probe");
	unlink(TDIR_MOVED "/kml-probe");
	rmdir(TDIR);
	rmdir(TDIR_MOVED);
}

TEST_F(tdir, trusted_file_system_can_be_unmounted)
{
	ASSERT_EQ(0, mount("tmpfs", TDIR, "tmpfs", 0, "mode=755"));
	ASSERT_EQ(0, copy_file(PROBE, TDIR "/kml-probe", 0755, 0));
	ASSERT_EQ(0, write_sysctl("kml_trusted_dir", TDIR));
	EXPECT_MODE(NULL, TDIR "/kml-probe", KERNEL_LINE);
	/* Not busy: the setting holds no reference to the mount */
	ASSERT_EQ(0, umount(TDIR)) TH_LOG("umount: %s", strerror(errno));
	/* The next exec finds whatever is mounted there now */
	ASSERT_EQ(0, mount("tmpfs", TDIR, "tmpfs", 0, "mode=755"));
	ASSERT_EQ(0, copy_file(PROBE, TDIR "/kml-probe", 0755, 0));
	EXPECT_MODE(NULL, TDIR "/kml-probe", KERNEL_LINE);
}

TEST_F(tdir, renamed_trusted_dir_is_no_longer_trusted)
{
	ASSERT_EQ(0, copy_file(PROBE, TDIR "/kml-probe", 0755, 0));
	ASSERT_EQ(0, write_sysctl("kml_trusted_dir", TDIR));
	EXPECT_MODE(NULL, TDIR "/kml-probe", KERNEL_LINE);
	ASSERT_EQ(0, rename(TDIR, TDIR_MOVED));
	EXPECT_MODE(NULL, TDIR_MOVED "/kml-probe", USER_LINE);
	/* A new directory of the configured name is the trusted one */
	ASSERT_EQ(0, mkdir(TDIR, 0755));
	ASSERT_EQ(0, chmod(TDIR, 0755));
	ASSERT_EQ(0, copy_file(PROBE, TDIR "/kml-probe", 0755, 0));
	EXPECT_MODE(NULL, TDIR "/kml-probe", KERNEL_LINE);
}

/*
 * The trusted directory is what its path names only while nobody but
 * root can change that: a directory on the path writable by others, or
 * a symbolic link on it, makes the setting refused, and a later change
 * of an ancestor makes the directory untrusted at once.
 */
#define OPEN_PARENT	"/kml-open"
#define OPEN_TDIR	OPEN_PARENT "/t"

FIXTURE(open_parent) {
	char old[256];
};

FIXTURE_SETUP(open_parent)
{
	install_probe(_metadata);
	ASSERT_EQ(0, read_sysctl("kml_trusted_dir", self->old, sizeof(self->old)));
	mkdir(OPEN_PARENT, 0755);
	ASSERT_EQ(0, chmod(OPEN_PARENT, 0755));
	mkdir(OPEN_TDIR, 0755);
	ASSERT_EQ(0, chmod(OPEN_TDIR, 0755));
	ASSERT_EQ(0, copy_file(PROBE, OPEN_TDIR "/kml-probe", 0755, 0));
}

FIXTURE_TEARDOWN_PARENT(open_parent)
{
	write_sysctl("kml_trusted_dir", self->old);
	unlink(OPEN_PARENT "/link");
	unlink(OPEN_TDIR "/kml-probe");
	rmdir(OPEN_TDIR);
	rmdir(OPEN_PARENT);
}

TEST_F(open_parent, writable_ancestor_is_refused_then_untrusts)
{
	char val[256];

	ASSERT_EQ(0, chmod(OPEN_PARENT, 0777));
	ASSERT_NE(0, write_sysctl("kml_trusted_dir", OPEN_TDIR));
	ASSERT_EQ(0, read_sysctl("kml_trusted_dir", val, sizeof(val)));
	ASSERT_STREQ(self->old, val);
	/* Control: root's own parent */
	ASSERT_EQ(0, chmod(OPEN_PARENT, 0755));
	ASSERT_EQ(0, write_sysctl("kml_trusted_dir", OPEN_TDIR));
	EXPECT_MODE(NULL, OPEN_TDIR "/kml-probe", KERNEL_LINE);
	/* Opened to others later: untrusted from the next exec on */
	ASSERT_EQ(0, chmod(OPEN_PARENT, 0757));
	EXPECT_MODE(NULL, OPEN_TDIR "/kml-probe", USER_LINE);
	ASSERT_EQ(0, chmod(OPEN_PARENT, 0755));
	EXPECT_MODE(NULL, OPEN_TDIR "/kml-probe", KERNEL_LINE);
}

TEST_F(open_parent, symlink_on_the_path_is_not_followed)
{
	/* a link to /trusted: refused as the setting ... */
	ASSERT_EQ(0, symlink("/trusted", OPEN_PARENT "/link"));
	ASSERT_NE(0, write_sysctl("kml_trusted_dir", OPEN_PARENT "/link"));
	/* ... and, made after it, no longer the trusted directory */
	ASSERT_EQ(0, write_sysctl("kml_trusted_dir", OPEN_TDIR));
	ASSERT_EQ(0, rename(OPEN_TDIR, OPEN_PARENT "/t2"));
	ASSERT_EQ(0, symlink("/trusted", OPEN_TDIR));
	EXPECT_MODE(NULL, "/trusted/kml-probe", USER_LINE);
	ASSERT_EQ(0, unlink(OPEN_TDIR));
	ASSERT_EQ(0, rename(OPEN_PARENT "/t2", OPEN_TDIR));
	EXPECT_MODE(NULL, OPEN_TDIR "/kml-probe", KERNEL_LINE);
}

/* In a child as uid (0: root with keep applied): write val to name. */
static int try_sysctl(uid_t uid, int (*setup)(void), const char *name,
		      const char *val)
{
	int status;
	pid_t pid = fork();

	if (pid == 0) {
		if (uid && become_user(uid))
			_exit(122);
		if (setup && setup())
			_exit(123);
		_exit(write_sysctl(name, val) ? (errno == EPERM ? 1 :
						 errno == EACCES ? 2 : 3) : 0);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

TEST(only_cap_sys_admin_changes_the_sysctls)
{
	static const char *const names[] = {
		"kml_enabled", "kml_group", "kml_require_mark",
		"kml_syscall_path", "kml_trusted_dir",
	};
	static const char *const other[] = { "0", "4242", "1", "complete", "/tmp" };
	char before[256], after[256];

	for (unsigned int i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		ASSERT_EQ(0, read_sysctl(names[i], before, sizeof(before)));
		ASSERT_STRNE(other[i], before);
		/* An ordinary user cannot even open it for writing */
		EXPECT_EQ(2, try_sysctl(USER_UID, NULL, names[i], other[i]));
		/* Root without CAP_SYS_ADMIN (a container's root) is refused */
		EXPECT_EQ(1, try_sysctl(0, drop_sys_admin, names[i], other[i]));
		ASSERT_EQ(0, read_sysctl(names[i], after, sizeof(after)));
		EXPECT_STREQ(before, after) TH_LOG("%s changed", names[i]);
		/* Control: the administrator can */
		ASSERT_EQ(0, try_sysctl(0, NULL, names[i], before));
	}
}

/*
 * A tracer of the same user races PTRACE_ATTACH against the exec of a
 * trusted program, thousands of times.  Attached before exec decided,
 * the program must run in user mode; after, the attach must fail.
 */
#define RACE_ROUNDS	2000

/*
 * One round, as USER_UID: 0 attach refused, 1 attached, -1 the attacker
 * won, -2 broken.  The first attempt comes after a delay that varies
 * with the round, so that the rounds sample the whole exec.
 */
static int attach_race_round(int round)
{
	char out[128] = "", go = 0;
	int status, fds[2], gate[2], attached = 0;
	pid_t pid;

	if (pipe(fds) || pipe(gate))
		return -2;
	pid = fork();
	if (pid < 0)
		return -2;
	if (pid == 0) {
		dup2(fds[1], 1);
		close(fds[0]);
		close(gate[1]);
		/* Traceable by its parent until the exec, like any process */
		prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
		if (read(gate[0], &go, 1) != 1)
			_exit(126);
		execl("/trusted/kml-probe", "kml-probe", "info", NULL);
		_exit(127);
	}
	close(fds[1]);
	close(gate[0]);
	if (write(gate[1], &go, 1) != 1)
		return -2;
	close(gate[1]);
	for (volatile int spin = 0; spin < (round % 64) * 500; spin++)
		;
	/* Attached, or refused once the task is kernel-mode (or gone) */
	while (!attached) {
		if (ptrace(PTRACE_ATTACH, pid, 0, 0) == 0)
			attached = 1;
		else if (errno != EAGAIN && errno != EINTR)
			break;
	}
	for (;;) {
		if (waitpid(pid, &status, attached ? __WALL : 0) != pid)
			return -2;
		if (WIFEXITED(status) || WIFSIGNALED(status))
			break;
		/* Stops of the tracee: let it run, signals included */
		ptrace(PTRACE_CONT, pid, 0,
		       WSTOPSIG(status) == SIGSTOP || WSTOPSIG(status) == SIGTRAP ?
		       0 : WSTOPSIG(status));
	}
	if (read(fds[0], out, sizeof(out) - 1) < 0)
		return -2;
	close(fds[0]);
	if (attached && !strncmp(out, "cpl=0", 5))
		return -1;
	return attached;
}

TEST_F_TIMEOUT(group, ptrace_attach_never_wins_the_race_with_exec, 600)
{
	int status, fds[2], counts[2] = { 0, 0 };
	pid_t pid;

	ASSERT_EQ(0, pipe(fds));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		int c[2] = { 0, 0 };

		close(fds[0]);
		if (become_user(USER_UID))
			_exit(122);
		for (int i = 0; i < RACE_ROUNDS; i++) {
			int r = attach_race_round(i);

			if (r < 0)
				_exit(r == -1 ? 1 : 2);
			c[r]++;
		}
		if (write(fds[1], c, sizeof(c)) != sizeof(c))
			_exit(3);
		_exit(0);
	}
	close(fds[1]);
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	ASSERT_EQ(0, WEXITSTATUS(status)) TH_LOG("1: a tracer attached to a kernel-mode image");
	ASSERT_EQ(sizeof(counts), read(fds[0], counts, sizeof(counts)));
	TH_LOG("%d rounds: attach refused %d, attached before exec %d",
	       RACE_ROUNDS, counts[0], counts[1]);
	ASSERT_EQ(RACE_ROUNDS, counts[0] + counts[1]);
	/* Both outcomes happened: the rounds did straddle the exec */
	ASSERT_LT(0, counts[0]);
	ASSERT_LT(0, counts[1]);
}

static int disable_tsc(void)
{
	return prctl(PR_SET_TSC, PR_TSC_SIGSEGV, 0, 0, 0);
}

/* RDTSC cannot be stopped at CPL 0: a caller that stopped it stays out */
TEST(tsc_disabled_caller_runs_in_user_mode)
{
	struct spawn no_tsc = { .setup = disable_tsc };

	install_probe(_metadata);
	EXPECT_USER(&no_tsc, "/trusted/kml-probe");
	EXPECT_MODE(NULL, "/trusted/kml-probe", KERNEL_LINE);	/* control */
}

/*
 * Personality flags that a set-user-ID exec clears (PER_CLEAR_ON_SETID)
 * and an ordinary 64-bit exec keeps.
 */
#define UNSAFE_PERSONALITY	(ADDR_NO_RANDOMIZE | ADDR_COMPAT_LAYOUT)

static int set_unsafe_personality(void)
{
	return personality(UNSAFE_PERSONALITY) == -1;
}

/* Personality of prog started with UNSAFE_PERSONALITY */
static unsigned long personality_after_exec(const char *prog)
{
	char path[64], buf[64];
	unsigned long pers = ~0UL;
	pid_t pid = fork();

	if (pid == 0) {
		if (set_unsafe_personality())
			_exit(123);
		execl(prog, prog, "sleep", "10", NULL);
		_exit(127);
	}
	usleep(300 * 1000);	/* let it exec */
	snprintf(path, sizeof(path), "/proc/%d/personality", pid);
	if (kml_read_file(path, buf, sizeof(buf)) > 0)
		pers = strtoul(buf, NULL, 16);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return pers;
}

TEST(kernel_mode_exec_clears_personality_like_setuid)
{
	const unsigned long unsafe = UNSAFE_PERSONALITY;

	install_probe(_metadata);
	EXPECT_EQ(0, personality_after_exec("/trusted/kml-probe") & unsafe);
	/* Control: an ordinary exec keeps them */
	EXPECT_EQ(unsafe, personality_after_exec(PROBE) & unsafe);
}

/* Does /proc/PID/status, read as uid, have a line starting with key? */
static int status_has(pid_t pid, uid_t uid, const char *key)
{
	int status;
	pid_t child = fork();

	if (child == 0) {
		char path[64], buf[4096], want[64];

		if (uid && become_user(uid))
			_exit(122);
		snprintf(path, sizeof(path), "/proc/%d/status", pid);
		snprintf(want, sizeof(want), "\n%s", key);
		if (kml_read_file(path, buf, sizeof(buf)) < 0)
			_exit(3);
		_exit(strstr(buf, want) ? 1 : 0);
	}
	if (child < 0 || waitpid(child, &status, 0) != child || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

TEST(counters_are_shown_only_to_who_may_trace)
{
	pid_t kml;

	install_probe(_metadata);
	kml = start_sleeper("/trusted/kml-probe", 0);
	/* Everybody may know the mode, as NoNewPrivs or Seccomp */
	EXPECT_EQ(1, status_has(kml, 65534, "KernelMode:\t1"));
	EXPECT_EQ(0, status_has(kml, 65534, "KernelModeFastSyscalls:"));
	EXPECT_EQ(0, status_has(kml, 65534, "KernelModeBypassSyscalls:"));
	EXPECT_EQ(0, status_has(kml, 65534, "KernelStack:"));
	/* Control: root sees them */
	EXPECT_EQ(1, status_has(kml, 0, "KernelModeFastSyscalls:"));
	EXPECT_EQ(1, status_has(kml, 0, "KernelModeBypassSyscalls:"));
	EXPECT_EQ(1, status_has(kml, 0, "KernelStack:"));
	kill(kml, SIGKILL);
	waitpid(kml, NULL, 0);
}

/*
 * kernel.kml_require_mark=1: only programs whose trusted.kml.verified
 * mark (written after a clean scan by ./kml verify) matches their
 * contents are admitted.  The fixture switches the policy back off.
 */
FIXTURE(mark) {
	char value[256];
};

FIXTURE_SETUP(mark)
{
	ASSERT_LT(0, kml_read_file(PROBE_MARK, self->value, sizeof(self->value)))
		TH_LOG("%s missing: the image lacks the verifier's mark", PROBE_MARK);
	self->value[strcspn(self->value, "\n")] = '\0';
	ASSERT_EQ(0, strncmp(self->value, "kmlverify-", 10));
	install_probe(_metadata);
	ASSERT_EQ(0, write_sysctl("kml_require_mark", "1"));
}

FIXTURE_TEARDOWN_PARENT(mark)
{
	write_sysctl("kml_require_mark", "0");
}

static int set_mark(const char *path, const char *value)
{
	return setxattr(path, MARK_XATTR, value, strlen(value), 0);
}

TEST_F(mark, unmarked_program_runs_in_user_mode)
{
	ASSERT_EQ(-1, getxattr("/trusted/kml-probe", MARK_XATTR, NULL, 0));
	ASSERT_EQ(ENODATA, errno);
	EXPECT_MODE(NULL, "/trusted/kml-probe", USER_LINE);
	/* The policy switch: off again, the same file is admitted. */
	ASSERT_EQ(0, write_sysctl("kml_require_mark", "0"));
	EXPECT_MODE(NULL, "/trusted/kml-probe", KERNEL_LINE);
}

TEST_F(mark, verified_program_runs_in_kernel_mode)
{
	ASSERT_EQ(0, set_mark("/trusted/kml-probe", self->value));
	EXPECT_MODE(NULL, "/trusted/kml-probe", KERNEL_LINE);
	/* The mark does not replace the placement rules. */
	ASSERT_EQ(0, chmod("/trusted/kml-probe", 0775));
	EXPECT_MODE(NULL, "/trusted/kml-probe", USER_LINE);
}

TEST_F(mark, mark_of_other_contents_is_refused)
{
	char *sha = strstr(self->value, "sha256=");

	ASSERT_NE(NULL, sha);
	sha += 7;
	*sha = *sha == '0' ? '1' : '0';		/* another file's hash */
	ASSERT_EQ(0, set_mark("/trusted/kml-probe", self->value));
	EXPECT_MODE(NULL, "/trusted/kml-probe", USER_LINE);
}

TEST_F(mark, changed_after_marking_is_refused)
{
	int fd;

	ASSERT_EQ(0, set_mark("/trusted/kml-probe", self->value));
	EXPECT_MODE(NULL, "/trusted/kml-probe", KERNEL_LINE);
	fd = open("/trusted/kml-probe", O_WRONLY | O_APPEND);
	ASSERT_LE(0, fd);
	ASSERT_EQ(1, write(fd, "", 1));		/* still a valid ELF file */
	ASSERT_EQ(0, close(fd));
	EXPECT_MODE(NULL, "/trusted/kml-probe", USER_LINE);
}

TEST_F(mark, malformed_marks_are_refused)
{
	static const char *const bad[] = {
		"hello",
		"kmlverify-1 policy=0 mode=default",
		"kmlverify-1 policy=0 mode=default sha256=abc",
		"kmlverify-1 policy=0 mode=default sha256=",
	};
	char longv[300];

	for (unsigned int i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ASSERT_EQ(0, set_mark("/trusted/kml-probe", bad[i]));
		EXPECT_MODE(NULL, "/trusted/kml-probe", USER_LINE);
	}
	/* Longer than any mark: refused, not truncated */
	snprintf(longv, sizeof(longv), "%s%0*d", self->value,
		 (int)(sizeof(longv) - 1 - strlen(self->value)), 0);
	ASSERT_EQ(0, set_mark("/trusted/kml-probe", longv));
	EXPECT_MODE(NULL, "/trusted/kml-probe", USER_LINE);
}

TEST_F(mark, only_root_can_mark)
{
	int status;
	pid_t pid;

	ASSERT_EQ(0, copy_file(PROBE, "/tmp/kml-probe-user", 0755, USER_UID));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		if (become_user(USER_UID))
			_exit(2);
		_exit(set_mark("/tmp/kml-probe-user", self->value) == -1 &&
		      errno == EPERM ? 0 : 1);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_EQ(0, WEXITSTATUS(status));
	unlink("/tmp/kml-probe-user");
}

/*
 * A program opened while it lay in the trusted directory, then deleted
 * there or replaced by a rename, is no longer what the administrator
 * keeps in it: an exec through a descriptor held from before
 * (execveat() with AT_EMPTY_PATH, as fexecve()) or through
 * /proc/PID/exe runs it in user mode.
 */
#define GONE		"/trusted/kml-gone"

/* The child's last setup step: execveat() of the descriptor *arg. */
static int exec_held_fd(const void *arg)
{
	char *argv[] = { "kml-probe", "info", NULL };
	char *envp[] = { "X=1", NULL };

	execveat(*(const int *)arg, "", argv, envp, AT_EMPTY_PATH);
	printf("execveat: %s\n", strerror(errno));
	return 1;
}

/* kml-probe info through fd; the exit status, its output in out */
static int probe_fd(int fd, char *out, size_t size)
{
	/* Never executed: exec_held_fd() replaces the child first */
	char *argv[] = { "/nonexistent", NULL };

	return kml_run_capture_setup(argv, NULL, exec_held_fd, &fd, out, size,
				     NULL);
}

#define EXPECT_FD_MODE(fd, line) do {					\
	char _out[256];							\
	ASSERT_EQ(0, probe_fd(fd, _out, sizeof(_out)));			\
	ASSERT_STREQ(line, _out);					\
} while (0)

/*
 * GONE through descriptors opened for reading and with O_PATH: kernel
 * mode while it is in the directory (the control), user mode once it is
 * unlinked or, with replacement, once replacement is renamed over it.
 */
static void exec_held_after_removal(struct __test_metadata *_metadata,
				    const char *replacement)
{
	int rd = open(GONE, O_RDONLY), opath = open(GONE, O_PATH);

	ASSERT_LE(0, rd);
	ASSERT_LE(0, opath);
	EXPECT_FD_MODE(rd, KERNEL_LINE);
	EXPECT_FD_MODE(opath, KERNEL_LINE);
	if (replacement) {
		ASSERT_EQ(0, rename(replacement, GONE));
	} else {
		ASSERT_EQ(0, unlink(GONE));
	}
	EXPECT_FD_MODE(rd, USER_LINE);
	EXPECT_FD_MODE(opath, USER_LINE);
	close(rd);
	close(opath);
}

/*
 * /proc/PID/exe of a kernel-mode sleeper started from GONE: kernel mode
 * while GONE is there (the control), user mode once it is unlinked.
 */
static void exec_proc_exe_after_unlink(struct __test_metadata *_metadata)
{
	char exe[64];
	pid_t kml = start_sleeper(GONE, 0);

	ASSERT_EQ(1, status_has(kml, 0, "KernelMode:\t1"));
	snprintf(exe, sizeof(exe), "/proc/%d/exe", kml);
	EXPECT_MODE(NULL, exe, KERNEL_LINE);
	ASSERT_EQ(0, unlink(GONE));
	EXPECT_MODE(NULL, exe, USER_LINE);
	kill(kml, SIGKILL);
	waitpid(kml, NULL, 0);
}

TEST(deleted_program_runs_in_user_mode)
{
	ASSERT_EQ(0, copy_file(PROBE, GONE, 0755, 0));
	exec_held_after_removal(_metadata, NULL);
}

TEST(program_replaced_by_rename_runs_in_user_mode)
{
	ASSERT_EQ(0, copy_file(PROBE, GONE, 0755, 0));
	ASSERT_EQ(0, copy_file(PROBE, GONE ".new", 0755, 0));
	exec_held_after_removal(_metadata, GONE ".new");
	/* The file now at the path is in the directory: admitted */
	EXPECT_MODE(NULL, GONE, KERNEL_LINE);
	unlink(GONE);
}

TEST(deleted_program_through_proc_exe_runs_in_user_mode)
{
	ASSERT_EQ(0, copy_file(PROBE, GONE, 0755, 0));
	exec_proc_exe_after_unlink(_metadata);
}

/* A valid verification mark does not bring a deleted program back. */
TEST_F(mark, deleted_marked_program_runs_in_user_mode)
{
	ASSERT_EQ(0, copy_file(PROBE, GONE, 0755, 0));
	ASSERT_EQ(0, set_mark(GONE, self->value));
	exec_held_after_removal(_metadata, NULL);
	ASSERT_EQ(0, copy_file(PROBE, GONE, 0755, 0));
	ASSERT_EQ(0, set_mark(GONE, self->value));
	exec_proc_exe_after_unlink(_metadata);
}

/*
 * A kernel-mode process is not dumpable, as a set-user-ID program: a kml
 * group member who started it can neither read it through /proc
 * (PTRACE_MODE_READ) nor get a core of it, under fs.suid_dumpable=0.
 * The fixture sends cores to a directory of its own, which the member
 * may write, and puts core_pattern and fs.suid_dumpable back.
 */
#define SUID_DUMPABLE	"/proc/sys/fs/suid_dumpable"

FIXTURE(dump) {
	char suid_dumpable[16];
	char pattern[256];	/* core_pattern before the test */
	char dir[32];		/* where cores go; "": no core dumps */
};

FIXTURE_SETUP(dump)
{
	char pattern[64];

	install_probe(_metadata);
	ASSERT_LT(0, kml_read_file(SUID_DUMPABLE, self->suid_dumpable,
				   sizeof(self->suid_dumpable)));
	/* A kernel without core dumps (CONFIG_COREDUMP=n) has no core_pattern */
	if (!read_sysctl("core_pattern", self->pattern, sizeof(self->pattern))) {
		strcpy(self->dir, "/tmp/kml-core-XXXXXX");
		ASSERT_NE(NULL, mkdtemp(self->dir));
		ASSERT_EQ(0, chown(self->dir, USER_UID, USER_UID));
		snprintf(pattern, sizeof(pattern), "%s/core.%%p", self->dir);
		ASSERT_EQ(0, write_sysctl("core_pattern", pattern));
	}
	ASSERT_EQ(0, write_str(SUID_DUMPABLE, "0"));
	ASSERT_EQ(0, write_sysctl("kml_group", "1000"));
}

FIXTURE_TEARDOWN_PARENT(dump)
{
	DIR *d;
	struct dirent *e;

	write_sysctl("kml_group", "-1");
	write_str(SUID_DUMPABLE, self->suid_dumpable);
	if (!self->dir[0])
		return;
	write_sysctl("core_pattern", self->pattern);
	d = opendir(self->dir);
	while (d && (e = readdir(d)))
		unlinkat(dirfd(d), e->d_name, 0);
	if (d)
		closedir(d);
	rmdir(self->dir);
}

/* As uid, open and read /proc/PID/name: 0, or the errno of the failure. */
static int read_proc_as(pid_t pid, const char *name, uid_t uid)
{
	int status;
	pid_t child = fork();

	if (child == 0) {
		char path[64], buf[64];
		int fd;

		if (uid && become_user(uid))
			_exit(255);
		snprintf(path, sizeof(path), "/proc/%d/%s", pid, name);
		fd = open(path, O_RDONLY);
		if (fd < 0 || read(fd, buf, sizeof(buf)) < 0)
			_exit(errno);
		_exit(0);
	}
	if (child < 0 || waitpid(child, &status, 0) != child || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

/* Owner of /proc/PID/status: root when the process is not dumpable. */
static uid_t proc_owner(pid_t pid)
{
	char path[32];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	return stat(path, &st) ? (uid_t)-1 : st.st_uid;
}

TEST_F(dump, member_cannot_read_its_kernel_mode_process)
{
	pid_t kml = start_sleeper("/trusted/kml-probe", USER_UID);
	pid_t usr = start_sleeper(PROBE, USER_UID);

	ASSERT_EQ(1, status_has(kml, 0, "KernelMode:\t1"));
	/* Control: the member's ordinary process is open to it */
	EXPECT_EQ(USER_UID, proc_owner(usr));
	EXPECT_EQ(0, read_proc_as(usr, "environ", USER_UID));
	EXPECT_EQ(0, read_proc_as(usr, "maps", USER_UID));
	/* Its kernel-mode process is not dumpable, and closed to it */
	EXPECT_EQ(0, proc_owner(kml));
	EXPECT_EQ(EACCES, read_proc_as(kml, "environ", USER_UID));
	EXPECT_EQ(EACCES, read_proc_as(kml, "maps", USER_UID));
	/* Root (CAP_SYS_PTRACE) may read it */
	EXPECT_EQ(0, read_proc_as(kml, "maps", 0));
	kill(kml, SIGKILL);
	kill(usr, SIGKILL);
	waitpid(kml, NULL, 0);
	waitpid(usr, NULL, 0);
}

/* SIGABRT to pid; did it dump core (wait status and file both)? */
static int aborts_with_core(struct __test_metadata *_metadata,
			    const char *dir, pid_t pid)
{
	char core[64];
	int status;

	ASSERT_EQ(0, kill(pid, SIGABRT));
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFSIGNALED(status));
	ASSERT_EQ(SIGABRT, WTERMSIG(status));
	snprintf(core, sizeof(core), "%s/core.%d", dir, pid);
	EXPECT_EQ(!!WCOREDUMP(status), !access(core, F_OK));
	return WCOREDUMP(status) && !access(core, F_OK);
}

TEST_F(dump, kernel_mode_process_leaves_no_core)
{
	struct rlimit unlimited = { RLIM_INFINITY, RLIM_INFINITY };
	pid_t kml, usr;

	if (!self->dir[0])
		SKIP(return, "this kernel writes no core dumps (CONFIG_COREDUMP=n)");
	ASSERT_EQ(0, setrlimit(RLIMIT_CORE, &unlimited));
	kml = start_sleeper("/trusted/kml-probe", USER_UID);
	usr = start_sleeper(PROBE, USER_UID);
	ASSERT_EQ(1, status_has(kml, 0, "KernelMode:\t1"));
	/* Control: the member's ordinary process dumps core */
	EXPECT_EQ(1, aborts_with_core(_metadata, self->dir, usr));
	EXPECT_EQ(0, aborts_with_core(_metadata, self->dir, kml));
}

/*
 * Scripts never run in kernel mode.  For a script the rules would judge
 * its interpreter, and a trusted interpreter would then admit any
 * script, wherever it lies: the interpreter of a script runs in user
 * mode, and the kernel logs the refusal with the path of the script in
 * the trusted directory or of the trusted interpreter.  The shell is the
 * guest's /bin/sh (busybox: a copy must be called sh).  The fixture
 * removes the files it makes.
 */
#define SHELL_DIR	"/trusted/kml-shell"
#define TRUSTED_SH	SHELL_DIR "/sh"
#define SCRIPT_BIN_SH	"/trusted/kml-script-bin-sh"
#define SCRIPT_TRUSTED	"/trusted/kml-script-trusted-sh"
#define SH_SCRIPT	"/tmp/kml-sh-script"
#define PROBE_INTERP	"/trusted/kml-probe-interp"
#define PROBE_SCRIPT	"/tmp/kml-probe-script"
/* The shell's own KernelMode, with builtins only (no exec) */
#define SHOW_MODE	"while read -r k v; do case $k in KernelMode:) " \
			"echo kernelmode=$v;; esac; done </proc/self/status\n"

static int write_file(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600), ok;

	if (fd < 0)
		return -1;
	ok = write(fd, text, strlen(text)) == (ssize_t)strlen(text) &&
	     !fchmod(fd, mode);
	return close(fd) || !ok ? -1 : 0;
}

FIXTURE(script) {
};

FIXTURE_SETUP(script)
{
	mkdir(SHELL_DIR, 0755);
	ASSERT_EQ(0, chmod(SHELL_DIR, 0755));
	ASSERT_EQ(0, copy_file("/bin/sh", TRUSTED_SH, 0755, 0));
	ASSERT_EQ(0, copy_file(PROBE, PROBE_INTERP, 0755, 0));
	ASSERT_EQ(0, write_file(SCRIPT_BIN_SH, "#!/bin/sh\n" SHOW_MODE, 0755));
	ASSERT_EQ(0, write_file(SCRIPT_TRUSTED, "#!" TRUSTED_SH "\n" SHOW_MODE, 0755));
	ASSERT_EQ(0, write_file(SH_SCRIPT, "#!" TRUSTED_SH "\n" SHOW_MODE, 0755));
	/* kml-probe reads only its first argument, info: the script's path follows */
	ASSERT_EQ(0, write_file(PROBE_SCRIPT, "#!" PROBE_INTERP " info\n", 0755));
}

FIXTURE_TEARDOWN_PARENT(script)
{
	unlink(SCRIPT_BIN_SH);
	unlink(SCRIPT_TRUSTED);
	unlink(SH_SCRIPT);
	unlink(PROBE_SCRIPT);
	unlink(PROBE_INTERP);
	unlink(TRUSTED_SH);
	rmdir(SHELL_DIR);
}

/*
 * /dev/kmsg from its end on.  The kernel logs at most 10 refusals in 5
 * seconds: the wait lets this test's lines through, whatever the tests
 * before it logged.
 */
static int kmsg_open(void)
{
	int fd;

	sleep(6);
	fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK);
	if (fd >= 0 && lseek(fd, 0, SEEK_END) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Has the kernel logged "PATH runs in user mode" since kmsg_open()? */
static int kmsg_user_mode(int fd, const char *path)
{
	char rec[8192], want[256];
	ssize_t n;

	snprintf(want, sizeof(want), "%s runs in user mode", path);
	for (;;) {
		n = read(fd, rec, sizeof(rec) - 1);
		if (n < 0 && errno == EPIPE)	/* records overwritten: go on */
			continue;
		if (n <= 0)
			return 0;
		rec[n] = '\0';
		if (strstr(rec, want))
			return 1;
	}
}

TEST_F(script, script_in_trusted_dir_runs_in_user_mode)
{
	char out[256];
	int kmsg = kmsg_open();

	ASSERT_LE(0, kmsg);
	ASSERT_EQ(0, spawn(NULL, out, sizeof(out), SCRIPT_BIN_SH, NULL, NULL, NULL));
	EXPECT_STREQ("kernelmode=0\n", out);
	EXPECT_EQ(1, kmsg_user_mode(kmsg, SCRIPT_BIN_SH));
	/* Nor with the trusted shell as its interpreter */
	ASSERT_EQ(0, spawn(NULL, out, sizeof(out), SCRIPT_TRUSTED, NULL, NULL, NULL));
	EXPECT_STREQ("kernelmode=0\n", out);
	EXPECT_EQ(1, kmsg_user_mode(kmsg, SCRIPT_TRUSTED));
	close(kmsg);
	/* Control: the trusted shell itself, given the same commands */
	ASSERT_EQ(0, spawn(NULL, out, sizeof(out), TRUSTED_SH, "-c", SHOW_MODE, NULL));
	EXPECT_STREQ("kernelmode=1\n", out);
}

TEST_F(script, trusted_shell_runs_scripts_in_user_mode)
{
	char out[256];
	int kmsg = kmsg_open();

	ASSERT_LE(0, kmsg);
	ASSERT_EQ(0, spawn(NULL, out, sizeof(out), SH_SCRIPT, NULL, NULL, NULL));
	EXPECT_STREQ("kernelmode=0\n", out);
	EXPECT_EQ(1, kmsg_user_mode(kmsg, TRUSTED_SH));
	close(kmsg);
	/* Control: the same shell run directly */
	ASSERT_EQ(0, spawn(NULL, out, sizeof(out), TRUSTED_SH, "-c", SHOW_MODE, NULL));
	EXPECT_STREQ("kernelmode=1\n", out);
}

TEST_F(script, trusted_program_as_interpreter_runs_in_user_mode)
{
	char out[256];
	int kmsg = kmsg_open();

	ASSERT_LE(0, kmsg);
	/* The kernel runs PROBE_INTERP info PROBE_SCRIPT info */
	ASSERT_EQ(0, probe(NULL, PROBE_SCRIPT, out, sizeof(out)));
	EXPECT_STREQ(USER_LINE, out);
	EXPECT_EQ(1, kmsg_user_mode(kmsg, PROBE_INTERP));
	close(kmsg);
	/* Control: the same program and arguments, run directly */
	ASSERT_EQ(0, spawn(NULL, out, sizeof(out), PROBE_INTERP, "info",
			   PROBE_SCRIPT, "info"));
	EXPECT_STREQ(KERNEL_LINE, out);
}

TEST_HARNESS_MAIN
