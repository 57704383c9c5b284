// SPDX-License-Identifier: GPL-2.0
/*
 * Kernel mode is a property of the address space.  The mm of a
 * kernel-mode process has supervisor top-level page-table entries
 * (U/S = 0), so every page of the process is a supervisor page: it runs
 * at CPL 0 with CR4.SMEP and CR4.SMAP on, and kml leaves no CPU state
 * that another task could inherit or record (CR4, MSR_LSTAR).  Its PTEs
 * are those of any process, so memory it shares with ordinary processes
 * works as between two ordinary ones.
 *
 * This program runs as an ordinary process.  Each test starts a copy of
 * it from the trusted directory as a kernel-mode peer ("--peer CMD
 * ARGS"), which prints what it finds and exits with 0 when it agrees.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/futex.h>
#include <linux/kvm.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "kml_util.h"

#define X86_CR4_SMEP	(1UL << 20)
#define X86_CR4_SMAP	(1UL << 21)
#define MSR_LSTAR	0xc0000082
#define PEER_NAME	"kml-addrspace-peer"
#define SHARED_SIZE	4096
#define BUF_SIZE	(64 * 1024)
#define SPLICE_SIZE	(16 * 1024)

/* ------------------------------------------------------------------ */
/* The kernel-mode peer                                                */

static unsigned long read_cr4(void)
{
	unsigned long v;

	asm volatile("mov %%cr4, %0" : "=r"(v));
	return v;
}

static unsigned long rdmsr(unsigned int msr)
{
	unsigned int lo, hi;

	asm volatile("rdmsr" : "=a"(lo), "=d"(hi) : "c"(msr));
	return lo | (unsigned long)hi << 32;
}

static int pin_to(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof(set), &set);
}

static void fill(unsigned char *p, size_t n, unsigned int seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)(i * 131 + seed);
}

static int check(const unsigned char *p, size_t n, unsigned int seed)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != (unsigned char)(i * 131 + seed))
			return -1;
	return 0;
}

static long futex(uint32_t *word, int op, uint32_t val, long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	return syscall(SYS_futex, word, op, val, ms ? &ts : NULL, NULL, 0);
}

/* Wait up to @ms while *word == val; 0 once it differs */
static int futex_wait_change(uint32_t *word, uint32_t val, long ms)
{
	for (long t = 0; t < ms; t += 100) {
		if (__atomic_load_n(word, __ATOMIC_ACQUIRE) != val)
			return 0;
		futex(word, FUTEX_WAIT, val, 100);
	}
	return __atomic_load_n(word, __ATOMIC_ACQUIRE) != val ? 0 : -1;
}

/*
 * Wake the waiter on @word, which waits while it is 0: retry until the
 * wake finds it in FUTEX_WAIT (the value still 0, so it cannot have
 * left without a wake-up), then set @val and wake again so that it
 * leaves its loop.  0 if a waiter was woken.
 */
static int futex_wake_waiter(uint32_t *word, uint32_t val, long ms)
{
	int ret = -1;

	for (long t = 0; t < ms; t += 10) {
		if (futex(word, FUTEX_WAKE, 1, 0) == 1) {
			ret = 0;
			break;
		}
		usleep(10000);
	}
	__atomic_store_n(word, val, __ATOMIC_RELEASE);
	futex(word, FUTEX_WAKE, 1, 0);
	return ret;
}

/*
 * The shared page: the ordinary side writes at 0, the peer at 64; futex
 * words at 128 (the peer waits), 132 (the peer is about to wait), 136
 * (the ordinary side waits) and 140 (the ordinary side is about to wait).
 */
#define SH_ORD		0
#define SH_PEER		64
#define SH_WORD		128
#define SH_READY	132
#define SH_BACK		136
#define SH_BACK_READY	140

static int peer_shared(int fd)
{
	char *p = mmap(NULL, SHARED_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	uint32_t *word, *ready, *back, *back_ready;

	if (p == MAP_FAILED) {
		printf("mmap: %s\n", strerror(errno));
		return 1;
	}
	word = (uint32_t *)(p + SH_WORD);
	ready = (uint32_t *)(p + SH_READY);
	back = (uint32_t *)(p + SH_BACK);
	back_ready = (uint32_t *)(p + SH_BACK_READY);
	if (strcmp(p + SH_ORD, "written by the ordinary process")) {
		printf("shared page: %.40s\n", p + SH_ORD);
		return 1;
	}
	strcpy(p + SH_PEER, "written by the kernel-mode process");
	/* Woken by the ordinary process */
	__atomic_store_n(ready, 1, __ATOMIC_RELEASE);
	if (futex_wait_change(word, 0, 10000)) {
		printf("futex: not woken\n");
		return 1;
	}
	/* Wake the ordinary process */
	if (futex_wait_change(back_ready, 0, 10000) ||
	    futex_wake_waiter(back, 1, 10000)) {
		printf("futex: nobody to wake\n");
		return 1;
	}
	printf("shared ok\n");
	return 0;
}

/* A buffer for the ordinary side to read and write; exits at EOF on stdin */
static int peer_hold(void)
{
	unsigned char *buf = aligned_alloc(4096, BUF_SIZE);
	char c;

	if (!buf)
		return 1;
	fill(buf, BUF_SIZE, 7);
	printf("addr %p\n", buf);
	fflush(stdout);
	while (read(0, &c, 1) > 0)
		;
	/* The ordinary side wrote its mark through /proc/PID/mem */
	if (memcmp(buf, "poked", 5)) {
		printf("no mark at %p\n", buf);
		return 1;
	}
	printf("hold ok\n");
	return 0;
}

/* Read the ordinary side's buffer with process_vm_readv */
static int peer_readv(pid_t pid, unsigned long addr)
{
	static unsigned char buf[BUF_SIZE];
	struct iovec local = { buf, BUF_SIZE }, remote = { (void *)addr, BUF_SIZE };
	ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);

	if (n != BUF_SIZE || check(buf, BUF_SIZE, 11)) {
		printf("process_vm_readv: %zd (%s)\n", n, n < 0 ? strerror(errno) : "data");
		return 1;
	}
	printf("readv ok\n");
	return 0;
}

/* O_DIRECT write and read of an aligned buffer at @off of @dev */
static int peer_odirect(const char *dev, long long off)
{
	unsigned char *w = aligned_alloc(4096, BUF_SIZE);
	unsigned char *r = aligned_alloc(4096, BUF_SIZE);
	int fd = open(dev, O_RDWR | O_DIRECT);

	if (fd < 0 || !w || !r) {
		printf("open %s: %s\n", dev, strerror(errno));
		return 1;
	}
	fill(w, BUF_SIZE, 23);
	memset(r, 0, BUF_SIZE);
	if (pwrite(fd, w, BUF_SIZE, off) != BUF_SIZE ||
	    pread(fd, r, BUF_SIZE, off) != BUF_SIZE) {
		printf("O_DIRECT I/O: %s\n", strerror(errno));
		return 1;
	}
	if (check(r, BUF_SIZE, 23)) {
		printf("O_DIRECT read back other data\n");
		return 1;
	}
	printf("odirect ok\n");
	return 0;
}

/* vmsplice a buffer into the pipe on fd 3; exits at EOF on stdin */
static int peer_vmsplice(void)
{
	unsigned char *buf = aligned_alloc(4096, SPLICE_SIZE);
	struct iovec iov = { buf, SPLICE_SIZE };
	ssize_t n;
	char c;

	if (!buf)
		return 1;
	fill(buf, SPLICE_SIZE, 31);
	n = vmsplice(3, &iov, 1, 0);
	if (n != SPLICE_SIZE) {
		printf("vmsplice: %zd (%s)\n", n, strerror(errno));
		return 1;
	}
	close(3);
	while (read(0, &c, 1) > 0)
		;
	printf("vmsplice ok\n");
	return 0;
}

static int peer_kvm(void)
{
	int kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC), vm;

	if (kvm < 0) {
		printf("kvm none\n");
		return 0;
	}
	vm = ioctl(kvm, KVM_CREATE_VM, 0);
	printf("kvm create %d errno %d\n", vm, vm < 0 ? errno : 0);
	return 0;
}

/*
 * Memory in top-level page-table entries the process did not have at
 * exec (fresh 512 GiB slots; above 128 TiB with 5-level paging): data
 * written and read, and code executed there, at CPL 0 with SMAP and
 * SMEP on -- in this process and in a child it forks.
 */
static int touch_new_slots(void)
{
	static const unsigned long hints[] = {
		3UL << 39, 5UL << 39, 1UL << 48, 3UL << 48,
	};
	int bad = 0;

	for (unsigned int i = 0; i < sizeof(hints) / sizeof(hints[0]); i++) {
		unsigned char *p = mmap((void *)hints[i], 2 * 4096,
					PROT_READ | PROT_WRITE | PROT_EXEC,
					MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
					-1, 0);
		int (*fn)(void);

		if (p == MAP_FAILED)	/* above 47 bits without 5-level paging */
			continue;
		p[4096] = 0x5a;
		/* mov $42, %eax; ret */
		memcpy(p, "\xb8\x2a\x00\x00\x00\xc3", 6);
		__builtin___clear_cache((char *)p, (char *)p + 6);
		fn = (int (*)(void))p;
		if (fn() != 42 || p[4096] != 0x5a)
			bad++;
		munmap(p, 2 * 4096);
	}
	return bad;
}

static int peer_slots(void)
{
	int status, bad = touch_new_slots();
	pid_t pid = fork();

	if (pid == 0)
		_exit(touch_new_slots() ? 1 : 0);
	if (pid < 0 || waitpid(pid, &status, 0) != pid ||
	    !WIFEXITED(status) || WEXITSTATUS(status))
		bad++;
	printf("slots %s\n", bad ? "bad" : "ok");
	return bad ? 1 : 0;
}

static int peer(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("cpl %d\n", kml_cpl());
	if (kml_cpl() != 0)
		return 2;
	if (argc >= 1 && !strcmp(argv[0], "cr4")) {
		printf("cr4 %#lx\n", read_cr4());
		return 0;
	}
	if (argc >= 2 && !strcmp(argv[0], "lstar")) {
		if (pin_to(atoi(argv[1])))
			return 1;
		printf("lstar %#lx cr4 %#lx\n", rdmsr(MSR_LSTAR), read_cr4());
		return 0;
	}
	if (argc >= 1 && !strcmp(argv[0], "shared"))
		return peer_shared(3);
	if (argc >= 1 && !strcmp(argv[0], "hold"))
		return peer_hold();
	if (argc >= 3 && !strcmp(argv[0], "readv"))
		return peer_readv(atoi(argv[1]), strtoul(argv[2], NULL, 0));
	if (argc >= 3 && !strcmp(argv[0], "odirect"))
		return peer_odirect(argv[1], atoll(argv[2]));
	if (argc >= 1 && !strcmp(argv[0], "vmsplice"))
		return peer_vmsplice();
	if (argc >= 1 && !strcmp(argv[0], "kvm"))
		return peer_kvm();
	if (argc >= 1 && !strcmp(argv[0], "slots"))
		return peer_slots();
	printf("unknown peer command\n");
	return 2;
}

/* ------------------------------------------------------------------ */
/* The ordinary side                                                   */

struct peer {
	pid_t pid;
	int in;		/* its stdin */
	FILE *out;	/* its stdout */
};

/* /trusted/kml-addrspace-peer: this program, installed root-owned 0755 */
static const char *peer_path(void)
{
	return kml_install_self(PEER_NAME);
}

/* Start the peer with @args; @fd3, if not -1, becomes its fd 3 */
static int peer_start(struct peer *p, int fd3, const char *const *args)
{
	const char *path = peer_path();
	char *argv[8];
	int in[2], out[2], n = 0;

	/* Close-on-exec: the peer must not hold its own stdin's write end */
	if (!path || pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC))
		return -1;
	argv[n++] = (char *)path;
	argv[n++] = "--peer";
	while (*args && n < 7)
		argv[n++] = (char *)*args++;
	argv[n] = NULL;
	p->pid = fork();
	if (p->pid < 0)
		return -1;
	if (!p->pid) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		dup2(out[1], 2);
		if (fd3 >= 0 && fd3 != 3)
			dup2(fd3, 3);
		execv(path, argv);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	p->in = in[1];
	p->out = fdopen(out[0], "r");
	return p->out ? 0 : -1;
}

/* The next line of the peer's output that starts with @key, or NULL */
static char *peer_line(struct peer *p, const char *key, char *buf, int size)
{
	while (fgets(buf, size, p->out)) {
		printf("# peer: %s", buf);
		if (!strncmp(buf, key, strlen(key)))
			return buf + strlen(key);
	}
	return NULL;
}

/* Close its stdin, echo the rest of its output; its exit status */
static int peer_finish(struct peer *p)
{
	char buf[256];
	int status;

	close(p->in);
	while (fgets(buf, sizeof(buf), p->out))
		printf("# peer: %s", buf);
	fclose(p->out);
	if (waitpid(p->pid, &status, 0) != p->pid)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Run the peer to the end; its exit status, its output in @out */
static int peer_run(int fd3, const char *const *args, char *out, int size)
{
	struct peer p;
	int n = 0;

	if (peer_start(&p, fd3, args))
		return -1;
	close(p.in);
	while (n < size - 1 && fgets(out + n, size - n, p.out))
		n += strlen(out + n);
	return peer_finish(&p);
}

static unsigned long kallsyms(const char *name)
{
	FILE *f = fopen("/proc/kallsyms", "r");
	char line[256], sym[128], type;
	unsigned long addr, found = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx %c %127s", &addr, &type, sym) == 3 &&
		    !strcmp(sym, name)) {
			found = addr;
			break;
		}
	fclose(f);
	return found;
}

static unsigned long msr_on(int cpu, unsigned int msr)
{
	char path[64];
	unsigned long v = 0;
	int fd;

	snprintf(path, sizeof(path), "/dev/cpu/%d/msr", cpu);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return 0;
	if (pread(fd, &v, 8, msr) != 8)
		v = 0;
	close(fd);
	return v;
}

FIXTURE(modes) {
	char out[4096];
};

FIXTURE_SETUP(modes)
{
	if (!kml_kernel())
		SKIP(return, "not a kml kernel");
	if (kml_all_mode())
		SKIP(return, "kml=all: there is no ordinary process");
	if (kml_cpl() != 3)
		SKIP(return, "this side must be an ordinary process");
	ASSERT_NE(NULL, peer_path()) {
		TH_LOG("cannot install the peer: %s", strerror(errno));
	}
}

FIXTURE_TEARDOWN(modes)
{
}

/* SMEP and SMAP are on while a kernel-mode process runs, on every CPU */
TEST_F(modes, smep_and_smap_stay_on_in_kernel_mode)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

	for (long cpu = 0; cpu < ncpu; cpu++) {
		char arg[24], *v;
		const char *args[] = { "lstar", arg, NULL };
		unsigned long cr4;

		snprintf(arg, sizeof(arg), "%ld", cpu);
		ASSERT_EQ(0, peer_run(-1, args, self->out, sizeof(self->out))) {
			TH_LOG("%s", kml_quoted(self->out));
		}
		v = strstr(self->out, " cr4 ");
		ASSERT_NE(NULL, v);
		cr4 = strtoul(v + 5, NULL, 0);
		EXPECT_EQ(X86_CR4_SMEP | X86_CR4_SMAP,
			  cr4 & (X86_CR4_SMEP | X86_CR4_SMAP)) {
			TH_LOG("cpu %ld: cr4 %#lx in kernel mode", cpu, cr4);
		}
	}
}

/*
 * MSR_LSTAR is entry_SYSCALL_64 on every CPU: read by a kernel-mode
 * process itself (rdmsr at CPL 0), and through /dev/cpu/N/msr after it
 * ended there, while that CPU idles -- what KVM's user-return MSR code
 * would record and restore.
 */
TEST_F(modes, lstar_is_the_regular_entry_everywhere)
{
	unsigned long entry = kallsyms("entry_SYSCALL_64");
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

	ASSERT_NE(0, entry) {
		TH_LOG("entry_SYSCALL_64 not in /proc/kallsyms");
	}
	if (access("/dev/cpu/0/msr", R_OK))
		SKIP(return, "no /dev/cpu/0/msr (CONFIG_X86_MSR)");
	for (long cpu = 0; cpu < ncpu; cpu++) {
		char arg[24], *v;
		const char *args[] = { "lstar", arg, NULL };

		snprintf(arg, sizeof(arg), "%ld", cpu);
		ASSERT_EQ(0, peer_run(-1, args, self->out, sizeof(self->out))) {
			TH_LOG("%s", kml_quoted(self->out));
		}
		v = strstr(self->out, "lstar ");
		ASSERT_NE(NULL, v);
		EXPECT_EQ(entry, strtoul(v + 6, NULL, 0)) {
			TH_LOG("cpu %ld: LSTAR in kernel mode %s", cpu, v);
		}
		/* The kernel-mode process is gone; the CPU idles or runs us */
		usleep(100000);
		EXPECT_EQ(entry, msr_on(cpu, MSR_LSTAR)) {
			TH_LOG("cpu %ld: LSTAR afterwards %#lx, entry_SYSCALL_64 %#lx",
			       cpu, msr_on(cpu, MSR_LSTAR), entry);
		}
	}
}

/* A MAP_SHARED memfd page written by both, futex wake-ups both ways */
TEST_F(modes, shared_memfd_and_futex_across_modes)
{
	const char *args[] = { "shared", NULL };
	int fd = memfd_create("kml-addrspace", 0);
	uint32_t *word, *ready, *back, *back_ready;
	struct peer p;
	char *sh;

	ASSERT_LE(0, fd);
	ASSERT_EQ(0, ftruncate(fd, SHARED_SIZE));
	sh = mmap(NULL, SHARED_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	ASSERT_NE(MAP_FAILED, sh);
	word = (uint32_t *)(sh + SH_WORD);
	ready = (uint32_t *)(sh + SH_READY);
	back = (uint32_t *)(sh + SH_BACK);
	back_ready = (uint32_t *)(sh + SH_BACK_READY);
	strcpy(sh + SH_ORD, "written by the ordinary process");

	ASSERT_EQ(0, peer_start(&p, fd, args));
	/* Wake the peer once it waits */
	ASSERT_EQ(0, futex_wait_change(ready, 0, 10000));
	EXPECT_EQ(0, futex_wake_waiter(word, 1, 10000)) {
		TH_LOG("the kernel-mode process never waited on the futex");
	}
	/* And be woken by it */
	__atomic_store_n(back_ready, 1, __ATOMIC_RELEASE);
	EXPECT_EQ(0, futex_wait_change(back, 0, 10000));
	EXPECT_EQ(0, peer_finish(&p));
	EXPECT_STREQ("written by the kernel-mode process", sh + SH_PEER);
	munmap(sh, SHARED_SIZE);
	close(fd);
}

/*
 * The kernel-mode process's memory through GUP from another process:
 * process_vm_readv and /proc/PID/mem (CAP_SYS_PTRACE: root); and the
 * other way round, the peer reading this process's memory.
 */
TEST_F(modes, process_vm_readv_and_proc_mem_across_modes)
{
	const char *hold[] = { "hold", NULL };
	static unsigned char buf[BUF_SIZE], mine[BUF_SIZE];
	char line[128], path[64], pidarg[16], addrarg[32], *v;
	const char *readv[] = { "readv", pidarg, addrarg, NULL };
	struct iovec local = { buf, BUF_SIZE }, remote;
	unsigned long addr;
	struct peer p;
	int mem;

	ASSERT_EQ(0, peer_start(&p, -1, hold));
	v = peer_line(&p, "addr ", line, sizeof(line));
	ASSERT_NE(NULL, v);
	addr = strtoul(v, NULL, 0);
	remote.iov_base = (void *)addr;
	remote.iov_len = BUF_SIZE;
	EXPECT_EQ(BUF_SIZE, process_vm_readv(p.pid, &local, 1, &remote, 1, 0));
	EXPECT_EQ(0, check(buf, BUF_SIZE, 7));

	snprintf(path, sizeof(path), "/proc/%d/mem", p.pid);
	mem = open(path, O_RDWR);
	ASSERT_LE(0, mem);
	memset(buf, 0, BUF_SIZE);
	EXPECT_EQ(BUF_SIZE, pread(mem, buf, BUF_SIZE, addr));
	EXPECT_EQ(0, check(buf, BUF_SIZE, 7));
	EXPECT_EQ(5, pwrite(mem, "poked", 5, addr));
	close(mem);
	EXPECT_EQ(0, peer_finish(&p));

	fill(mine, BUF_SIZE, 11);
	snprintf(pidarg, sizeof(pidarg), "%d", getpid());
	snprintf(addrarg, sizeof(addrarg), "%#lx", (unsigned long)mine);
	EXPECT_EQ(0, peer_run(-1, readv, line, sizeof(line))) {
		TH_LOG("%s", kml_quoted(line));
	}
}

/* O_DIRECT from and into the kernel-mode process's buffers (virtio-blk) */
TEST_F(modes, o_direct_io_from_a_kernel_mode_buffer)
{
	unsigned long long size, at;
	unsigned char *r;
	char off[32];
	const char *args[] = { "odirect", "/dev/vda", off, NULL };
	int fd = open("/dev/vda", O_RDWR | O_DIRECT), peer, ondisk;

	if (fd < 0)
		SKIP(return, "no /dev/vda: boot with ./kml run --disk MIB");
	ASSERT_EQ(0, ioctl(fd, BLKGETSIZE64, &size));
	ASSERT_LE(2 << 20, size);
	/*
	 * Inside the last MiB, away from its start: the paging test
	 * (kml_process.c, a kernel selftest) writes markers at MiB
	 * starts and wants every other page to begin with a zero, so the
	 * data is zeroed again below.
	 */
	at = size - (1 << 20) + 4096;
	snprintf(off, sizeof(off), "%llu", at);
	r = aligned_alloc(4096, BUF_SIZE);
	ASSERT_NE(NULL, r);
	peer = peer_run(-1, args, self->out, sizeof(self->out));
	/* What it wrote is on the disk */
	ASSERT_EQ(BUF_SIZE, pread(fd, r, BUF_SIZE, at));
	ondisk = check(r, BUF_SIZE, 23);
	memset(r, 0, BUF_SIZE);
	ASSERT_EQ(BUF_SIZE, pwrite(fd, r, BUF_SIZE, at));
	EXPECT_EQ(0, peer) {
		TH_LOG("%s", kml_quoted(self->out));
	}
	EXPECT_EQ(0, ondisk);
	free(r);
	close(fd);
}

/* vmsplice of the kernel-mode process's pages, read here from the pipe */
TEST_F(modes, vmsplice_from_a_kernel_mode_process)
{
	static unsigned char buf[SPLICE_SIZE];
	const char *args[] = { "vmsplice", NULL };
	struct peer p;
	size_t n = 0;
	ssize_t r;
	int pfd[2];

	ASSERT_EQ(0, pipe(pfd));
	ASSERT_LE(SPLICE_SIZE, fcntl(pfd[1], F_SETPIPE_SZ, SPLICE_SIZE));
	ASSERT_EQ(0, peer_start(&p, pfd[1], args));
	close(pfd[1]);
	while (n < SPLICE_SIZE && (r = read(pfd[0], buf + n, SPLICE_SIZE - n)) > 0)
		n += r;
	EXPECT_EQ(SPLICE_SIZE, n);
	EXPECT_EQ(0, check(buf, SPLICE_SIZE, 31));
	close(pfd[0]);
	EXPECT_EQ(0, peer_finish(&p));
}

/*
 * Top-level entries made after exec (and by fork's copy) are supervisor
 * entries: data and code there work at CPL 0 with SMAP and SMEP on.
 * A user entry would make the access fault for ever (or kill it).
 */
TEST_F(modes, new_top_level_entries_are_supervisor_entries)
{
	const char *args[] = { "slots", NULL };

	EXPECT_EQ(0, peer_run(-1, args, self->out, sizeof(self->out))) {
		TH_LOG("%s", kml_quoted(self->out));
	}
	EXPECT_NE(NULL, strstr(self->out, "slots ok"));
}

/*
 * A kernel-mode process runs no guest (a VMX VM exit would load the
 * regular IDT under it); an ordinary one still creates VMs afterwards.
 */
TEST_F(modes, kvm_refuses_a_kernel_mode_vmm)
{
	const char *args[] = { "kvm", NULL };
	int kvm, vm;

	ASSERT_EQ(0, peer_run(-1, args, self->out, sizeof(self->out))) {
		TH_LOG("%s", kml_quoted(self->out));
	}
	if (strstr(self->out, "kvm none"))
		SKIP(return, "no /dev/kvm");
	EXPECT_NE(NULL, strstr(self->out, "kvm create -1 errno 1\n")) {
		TH_LOG("%s", kml_quoted(self->out));
	}
	kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, kvm);
	vm = ioctl(kvm, KVM_CREATE_VM, 0);
	EXPECT_LE(0, vm) {
		TH_LOG("KVM_CREATE_VM as an ordinary process: %s", strerror(errno));
	}
	if (vm >= 0)
		close(vm);
	close(kvm);
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "--peer"))
		return peer(argc - 2, argv + 2);
	return test_harness_run(argc, argv);
}
