// SPDX-License-Identifier: GPL-2.0
/*
 * Process behaviour that must be the same in user mode and in kernel
 * mode.  run-tests runs this program twice: from /usr/lib/kml/tests (user
 * mode) and from /trusted (kernel mode, as "process@kernel"); the
 * mode_is_as_expected test checks that each run really is in the mode
 * its location implies.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/filter.h>
#include <linux/fs.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "kml_util.h"

TEST(mode_is_as_expected)
{
	int trusted = kml_in_trusted(), kernel = kml_expect_kernel_mode();

	ASSERT_GE(trusted, 0);
	ASSERT_GE(kernel, 0);
	TH_LOG("cpl %d, from %s%s", kml_cpl(), trusted ? "/trusted" : "elsewhere",
	       kml_all_mode() == 1 ? ", kml=all" : "");
	ASSERT_EQ(kernel ? 0 : 3, kml_cpl());
}

/* Faults kill only the process, with the usual signal. */
TEST_SIGNAL(null_pointer_write, SIGSEGV)
{
	*(volatile int *)0 = 1;
}

TEST_SIGNAL(ud2_is_sigill, SIGILL)
{
	asm volatile("ud2");
}

TEST_SIGNAL(divide_by_zero, SIGFPE)
{
	asm volatile("xor %%ecx, %%ecx\n\tmov $1, %%eax\n\tcltd\n\tidivl %%ecx"
		     ::: "eax", "ecx", "edx");
}

TEST_SIGNAL(int3_is_sigtrap, SIGTRAP)
{
	asm volatile("int3");
}

TEST_SIGNAL(write_to_kernel_text, SIGSEGV)
{
	/* Kernel text is mapped read-only even at CPL 0 */
	char line[256];
	unsigned long addr = 0;
	FILE *f = fopen("/proc/kallsyms", "r");

	while (f && fgets(line, sizeof(line), f))
		if (strstr(line, " T _stext")) {
			addr = strtoul(line, NULL, 16);
			break;
		}
	if (!addr)
		addr = 0xffffffff81000000UL;
	*(volatile int *)addr = 1;
}

TEST_SIGNAL(non_canonical_access, SIGSEGV)
{
	*(volatile int *)0x8000000000000000UL = 1;
}

TEST_SIGNAL(write_to_readonly_mapping, SIGSEGV)
{
	char *p = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p != MAP_FAILED)
		*(volatile char *)p = 1;
}

static void pin_to_cpu0(void)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(0, &set);
	sched_setaffinity(0, sizeof(set), &set);
}

/* A busy loop on the same CPU is preempted and dies by signal. */
static void loop_and_kill(struct __test_metadata *_metadata, int sig)
{
	volatile unsigned long progress = 0;
	struct timespec ts = { 0, 20 * 1000 * 1000 };
	int status, i;
	pid_t pid;

	pin_to_cpu0();
	pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0)
		for (;;)
			;
	for (i = 0; i < 10; i++) {	/* we get the CPU back: preemption */
		nanosleep(&ts, NULL);
		progress++;
	}
	ASSERT_EQ(10, progress);
	ASSERT_EQ(0, kill(pid, sig));
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFSIGNALED(status));
	ASSERT_EQ(sig, WTERMSIG(status));
}

TEST(busy_loop_dies_by_sigint)
{
	loop_and_kill(_metadata, SIGINT);
}

TEST(busy_loop_dies_by_sigkill)
{
	loop_and_kill(_metadata, SIGKILL);
}

static volatile int handled, nested, depth;
static char *altstack;

static void on_usr2(int sig)
{
	nested = depth;
}

static void on_usr1(int sig)
{
	char here;

	depth++;
	if (altstack && (&here < altstack || &here >= altstack + SIGSTKSZ * 4))
		handled = -1;
	else
		handled = sig;
	raise(SIGUSR2);		/* nested delivery while in a handler */
	depth--;
}

TEST(signal_handlers_altstack_nested)
{
	struct sigaction sa = { .sa_handler = on_usr1, .sa_flags = SA_ONSTACK };
	stack_t ss = { .ss_size = SIGSTKSZ * 4 };

	altstack = malloc(ss.ss_size);
	ASSERT_NE(NULL, altstack);
	ss.ss_sp = altstack;
	ASSERT_EQ(0, sigaltstack(&ss, NULL));
	ASSERT_EQ(0, sigaction(SIGUSR1, &sa, NULL));
	sa.sa_handler = on_usr2;
	sa.sa_flags = 0;
	ASSERT_EQ(0, sigaction(SIGUSR2, &sa, NULL));
	ASSERT_EQ(0, raise(SIGUSR1));
	ASSERT_EQ(SIGUSR1, handled);
	ASSERT_EQ(1, nested);
	ASSERT_EQ(0, depth);
}

static void on_alarm(int sig)
{
}

static ssize_t read_with_alarm(int flags, int *err)
{
	struct sigaction sa = { .sa_handler = on_alarm, .sa_flags = flags };
	struct itimerval it = { .it_value = { 0, 100 * 1000 } };
	int fds[2];
	pid_t pid;
	char c;
	ssize_t n;

	if (pipe(fds) || sigaction(SIGALRM, &sa, NULL))
		return -2;
	pid = fork();
	if (pid == 0) {
		usleep(400 * 1000);
		write(fds[1], "x", 1);
		_exit(0);
	}
	setitimer(ITIMER_REAL, &it, NULL);
	n = read(fds[0], &c, 1);
	*err = errno;
	waitpid(pid, NULL, 0);
	close(fds[0]);
	close(fds[1]);
	return n;
}

TEST(sa_restart_restarts_and_eintr_without)
{
	int err = 0;

	ASSERT_EQ(1, read_with_alarm(SA_RESTART, &err));
	ASSERT_EQ(-1, read_with_alarm(0, &err));
	ASSERT_EQ(EINTR, err);
}

TEST(fork_vfork_exit_status)
{
	int status;
	pid_t pid = fork();

	ASSERT_GE(pid, 0);
	if (pid == 0)
		_exit(kml_cpl() == (kml_expect_kernel_mode() ? 0 : 3) ? 11 : 1);
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_EQ(11, WEXITSTATUS(status));

	pid = vfork();
	ASSERT_GE(pid, 0);
	if (pid == 0)
		_exit(12);
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_EQ(12, WEXITSTATUS(status));
}

static void *thread_cpl(void *arg)
{
	return (void *)(long)kml_cpl();
}

TEST(pthreads_share_the_mode)
{
	pthread_t t[4];
	void *ret;

	for (int i = 0; i < 4; i++)
		ASSERT_EQ(0, pthread_create(&t[i], NULL, thread_cpl, NULL));
	for (int i = 0; i < 4; i++) {
		ASSERT_EQ(0, pthread_join(t[i], &ret));
		ASSERT_EQ(kml_cpl(), (long)ret);
	}
}

TEST(execve_user_and_trusted_images)
{
	int status;
	pid_t pid = fork();

	ASSERT_GE(pid, 0);
	if (pid == 0) {
		execl("/bin/sh", "sh", "-c", "exit 5", NULL);
		_exit(127);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_EQ(5, WEXITSTATUS(status));
}

/*
 * The mode /bin/sh (outside /trusted) gets: 1 kernel, 0 user, else an
 * error.  With no_new_privs it asked to stay confined: user mode always.
 */
static int sh_kernel_mode(int no_new_privs)
{
	int status;
	pid_t pid = fork();

	if (pid < 0)
		return -1;
	if (pid == 0) {
		if (no_new_privs && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
			_exit(126);
		execl("/bin/sh", "sh", "-c",
		      "grep -q '^KernelMode:.1$' /proc/self/status", NULL);
		_exit(127);
	}
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status) == 0 ? 1 : WEXITSTATUS(status) == 1 ? 0 : -1;
}

/* Outside /trusted: kernel mode only with kml=all, never when confined */
TEST(exec_outside_trusted_takes_the_boot_mode)
{
	int all = kml_all_mode();

	ASSERT_GE(all, 0);
	ASSERT_EQ(all, sh_kernel_mode(0));
	ASSERT_EQ(0, sh_kernel_mode(1));
}

TEST(mmap_mprotect_munmap_brk)
{
	size_t len = 16 << 20;
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *b0, *b1;

	ASSERT_NE(MAP_FAILED, p);
	for (size_t i = 0; i < len; i += 4096)
		p[i] = (char)i;
	ASSERT_EQ(0, mprotect(p, len, PROT_READ));
	ASSERT_EQ((char)4096, p[4096]);
	ASSERT_EQ(0, mprotect(p, len, PROT_READ | PROT_WRITE | PROT_EXEC));
	p[0] = (char)0xc3;			/* ret */
	((void (*)(void))p)();			/* run code from a new mapping */
	ASSERT_EQ(0, munmap(p, len));

	b0 = sbrk(0);
	ASSERT_NE((void *)-1, sbrk(1 << 20));
	b1 = sbrk(0);
	ASSERT_EQ(1 << 20, b1 - b0);
	memset(b0, 0x5a, 1 << 20);
	ASSERT_NE((void *)-1, sbrk(-(1 << 20)));
}

static unsigned long recurse(unsigned int n)
{
	volatile char frame[4000];

	frame[0] = (char)n;
	frame[sizeof(frame) - 1] = (char)n;
	if (!n)
		return frame[0];
	return recurse(n - 1) + frame[sizeof(frame) - 1];
}

TEST(stack_grows_by_megabytes)
{
	/* ~6 MiB of stack, one not-yet-mapped page after another */
	ASSERT_EQ(((1500UL * 1501) / 2) % 256 == 0 ? 0 : 1, recurse(1500) ? 1 : 0);
}

/*
 * A leaf function that keeps 16 values in its red zone (the 128 bytes
 * below RSP) and checks them while spinning: interrupts taken meanwhile
 * must not touch them.  Returns the number of corrupted checks.
 */
unsigned long redzone_spin(unsigned long iterations);
asm(".pushsection .text\n"
    ".globl redzone_spin\n"
    "redzone_spin:\n"
    "	movabs $0x1122334455667700, %rax\n"
    "	xor %ecx, %ecx\n"
    "1:	lea (%rax,%rcx), %rdx\n"
    "	mov %rdx, -128(%rsp,%rcx,8)\n"
    "	inc %rcx\n"
    "	cmp $16, %rcx\n"
    "	jne 1b\n"
    "	xor %r8d, %r8d\n"			/* corrupted count */
    "2:	xor %ecx, %ecx\n"
    "3:	lea (%rax,%rcx), %rdx\n"
    "	cmp %rdx, -128(%rsp,%rcx,8)\n"
    "	je 4f\n"
    "	inc %r8\n"
    "	mov %rdx, -128(%rsp,%rcx,8)\n"
    "4:	inc %rcx\n"
    "	cmp $16, %rcx\n"
    "	jne 3b\n"
    "	dec %rdi\n"
    "	jnz 2b\n"
    "	mov %r8, %rax\n"
    "	ret\n"
    ".popsection\n");

/* Local timer interrupts taken so far by CPU 0. */
static unsigned long cpu0_timer_interrupts(void)
{
	static char buf[1 << 16];
	char *line;

	if (kml_read_file("/proc/interrupts", buf, sizeof(buf)) < 0)
		return 0;
	line = strstr(buf, "LOC:");
	return line ? strtoul(line + 4, NULL, 10) : 0;
}

TEST(red_zone_survives_interrupts)
{
	unsigned long before, after, bad = 0;
	struct timespec t0, t1;

	pin_to_cpu0();
	before = cpu0_timer_interrupts();
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		bad += redzone_spin(1000000);
		after = cpu0_timer_interrupts();
		clock_gettime(CLOCK_MONOTONIC, &t1);
	} while (after - before < 2000 && t1.tv_sec - t0.tv_sec < 20);
	TH_LOG("%lu timer interrupts during the check", after - before);
	ASSERT_EQ(0, bad);
	ASSERT_GE(after - before, 2000);
}

/*
 * Paging: map a disk larger than RAM and read it all through the mapping,
 * so that page cache pages must be reclaimed and faulted in again while
 * the process runs.  The host attaches an empty disk; markers written
 * every MiB prove the data read back is the data on the disk.
 */
FIXTURE(paging) {
};

FIXTURE_SETUP(paging)
{
}

FIXTURE_TEARDOWN(paging)
{
}

/*
 * Reading 768 MiB through the page cache takes 20-40 s on the debug
 * kernel under TCG, beyond the harness's default of 30 s: allow 300.
 */
TEST_F_TIMEOUT(paging, file_mapping_larger_than_ram, 300)
{
	unsigned long long size, off, magic = 0x6b6d6c00ULL + kml_cpl();
	long ram = sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGESIZE);
	unsigned long long bad = 0, pages = 0;
	volatile unsigned char sink = 0;
	unsigned char *p;
	int fd = open("/dev/vda", O_RDWR);

	if (fd < 0)
		SKIP(return, "no /dev/vda: boot with ./kml run --disk MIB");
	ASSERT_EQ(0, ioctl(fd, BLKGETSIZE64, &size));
	TH_LOG("disk %llu MiB, RAM %ld MiB", size >> 20, ram >> 20);
	ASSERT_GT(size, (unsigned long long)ram);
	for (off = 0; off < size; off += 1 << 20) {
		unsigned long long v = off ^ magic;

		ASSERT_EQ(8, pwrite(fd, &v, 8, off));
	}
	ASSERT_EQ(0, fsync(fd));
	p = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
	ASSERT_NE(MAP_FAILED, p);
	for (off = 0; off < size; off += 4096, pages++) {
		if (!(off & ((1 << 20) - 1)))
			bad += *(unsigned long long *)(p + off) != (off ^ magic);
		else
			sink += p[off];
	}
	ASSERT_EQ(0, munmap(p, size));
	close(fd);
	ASSERT_EQ(0, bad);
	ASSERT_EQ(0, sink);
	ASSERT_EQ(size / 4096, pages);
}

/* A seccomp filter applies to every path a system call can take. */
TEST(seccomp_filter_applies)
{
	struct sock_filter insns[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_getppid, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | 77),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = 4, .filter = insns };

	ASSERT_LT(0, syscall(SYS_getppid));
	ASSERT_EQ(0, prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0));
	ASSERT_EQ(0, syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog));
	ASSERT_EQ(-1, syscall(SYS_getppid));
	ASSERT_EQ(77, errno);
	ASSERT_LT(0, syscall(SYS_getpid));
}

TEST(setjmp_longjmp)
{
	jmp_buf env;
	volatile int round = 0;

	if (setjmp(env) < 3) {
		round++;
		longjmp(env, round + 1);
	}
	ASSERT_EQ(2, round);
}

TEST(syscall_results_and_errors)
{
	char buf[8];

	ASSERT_EQ(getppid(), syscall(SYS_getppid));
	ASSERT_EQ(-1, syscall(100000));
	ASSERT_EQ(ENOSYS, errno);
	ASSERT_EQ(-1, read(0x7fff, buf, 1));
	ASSERT_EQ(EBADF, errno);
	ASSERT_EQ(-1, syscall(SYS_read, open("/dev/zero", O_RDONLY), (void *)8, 1));
	ASSERT_EQ(EFAULT, errno);
}

TEST_HARNESS_MAIN
