// SPDX-License-Identifier: GPL-2.0
/*
 * Interrupt-level events around kernel-mode processes: NMIs, CPU hotplug
 * and the IPIs of membarrier().
 *
 *  - The CLI watchdog's NMI goes to the NMI handlers first; only an NMI
 *    that no handler claims and that finds CD 02 (INT $2) before RIP is
 *    the program's INT $2.  A program that spins with interrupts off
 *    right after the bytes 41 C1 CD 02 (ror $2,%r13d) is killed with
 *    SIGKILL, and the CPU still takes NMIs afterwards.
 *  - The watchdog's per-CPU timers follow CPU hotplug: after a CPU went
 *    offline and came back, a CLI spin on either CPU is killed.
 *  - membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE) works for a
 *    kernel-mode process whose other thread runs on another CPU.
 *
 * This program runs as root in user mode.  The kernel-mode parts run in
 * a copy of it in the trusted directory ("--peer CMD ARGS"), which says
 * at which CPL it runs before it does anything else.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "kml_util.h"

#define PEER_NAME	"kml-events-peer"
#define KILL_SECS	30	/* the watchdog acts after 2 s; TCG is slow */
#define CPU_ONLINE	"/sys/devices/system/cpu/cpu1/online"

/*
 * Interrupts off for ever.  The watchdog on another CPU must end it with
 * an NMI and SIGKILL.  In cli_spin_after_cd02 the loop's jump target
 * follows ror $2,%r13d, whose last two bytes, CD 02, are INT $2: every
 * NMI finds RIP there (QEMU's TCG takes interrupts only at jump targets,
 * the hardware at the loop's only instruction).
 */
asm(".pushsection .text\n"
    "cli_spin:\n"
    "  cli\n"
    "1: jmp 1b\n"
    "cli_spin_after_cd02:\n"
    "  cli\n"
    "cli_spin_ror:\n"
    "  ror $2, %r13d\n"
    "2: jmp 2b\n"
    ".popsection\n");
extern void cli_spin(void) __attribute__((noreturn));
extern void cli_spin_after_cd02(void) __attribute__((noreturn));
extern const unsigned char cli_spin_ror[];

/* ------------------------------------------------------------------ */
/* The kernel-mode peer                                                */

static int pin_to(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof(set), &set);
}

/* spin CPU plain|cd02: report where it runs, then spin with IF clear */
static int peer_spin(int cpu, const char *how)
{
	if (pin_to(cpu))
		return 1;
	printf("cpu %d\n", sched_getcpu());
	if (!strcmp(how, "cd02"))
		cli_spin_after_cd02();
	cli_spin();
}

static volatile int spinning, stop;
static volatile unsigned long spins;

static void *spinner(void *arg)
{
	if (pin_to(*(int *)arg))
		return NULL;
	spinning = sched_getcpu() + 1;
	while (!stop)
		spins++;
	return NULL;
}

/*
 * Register for and issue the core-serializing membarrier while the
 * other thread spins on CPU 1 (this one runs on CPU 0): the kernel
 * interrupts that CPU and serializes it before it goes back to the
 * program.  The serialization itself cannot be seen from the program;
 * the test is that both calls succeed for a kernel-mode process and that
 * the spinning thread lives on.
 */
static int peer_membarrier(void)
{
	int cpu = 1, ret = 0;
	unsigned long before;
	pthread_t t;

	if (pin_to(0) || pthread_create(&t, NULL, spinner, &cpu))
		return 1;
	while (!spinning)
		sched_yield();
	printf("spinner on cpu %d\n", spinning - 1);
	if (spinning - 1 != cpu)
		ret = 1;
	if (syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE,
		    0, 0)) {
		printf("register: %s\n", strerror(errno));
		ret = 1;
	}
	before = spins;
	for (int i = 0; i < 100 && !ret; i++)
		if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE,
			    0, 0)) {
			printf("sync core %d: %s\n", i, strerror(errno));
			ret = 1;
		}
	while (spins == before)
		sched_yield();
	stop = 1;
	pthread_join(t, NULL);
	printf("membarrier %s\n", ret ? "failed" : "ok");
	return ret;
}

static volatile unsigned long int2s;

static void skip_int2(int sig, siginfo_t *si, void *uc_)
{
	ucontext_t *uc = uc_;

	(void)sig;
	(void)si;
	int2s++;
	uc->uc_mcontext.gregs[REG_RIP] += 2;
}

/*
 * int2 CPU SECONDS: INT $2 in a loop for SECONDS, each the SIGSEGV of an
 * ordinary process, stepped over by the handler.  INT $2 does not block
 * NMIs; the other side sends real ones meanwhile.
 */
static int peer_int2(int cpu, int secs)
{
	struct sigaction sa = { .sa_sigaction = skip_int2, .sa_flags = SA_SIGINFO };
	unsigned long n = 0;
	time_t end;

	if (pin_to(cpu) || sigaction(SIGSEGV, &sa, NULL))
		return 1;
	printf("cpu %d\n", sched_getcpu());
	end = time(NULL) + secs;
	do {
		for (int i = 0; i < 100; i++, n++)
			asm volatile("int $2" ::: "memory");
	} while (time(NULL) < end);
	printf("int2 %lu signals for %lu INT $2\n", int2s, n);
	return 0;
}

static int peer(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("cpl %d\n", kml_cpl());
	if (kml_cpl() != 0)
		return 2;
	if (argc >= 1 && !strcmp(argv[0], "cpl"))
		return 0;
	if (argc >= 3 && !strcmp(argv[0], "spin"))
		return peer_spin(atoi(argv[1]), argv[2]);
	if (argc >= 1 && !strcmp(argv[0], "membarrier"))
		return peer_membarrier();
	if (argc >= 3 && !strcmp(argv[0], "int2"))
		return peer_int2(atoi(argv[1]), atoi(argv[2]));
	printf("unknown peer command\n");
	return 2;
}

/* ------------------------------------------------------------------ */
/* The ordinary side                                                   */

/* /trusted/kml-events-peer: this program, installed root-owned 0755 */
static const char *peer_path(void)
{
	return kml_install_self(PEER_NAME);
}

struct peer {
	pid_t pid;
	FILE *out;	/* its stdout and stderr */
	char cpl[32];	/* its first line */
};

/* Start the peer with args; 0 once it said "cpl 0" */
static int peer_start(struct peer *p, const char *const *args)
{
	const char *path = peer_path();
	char *argv[8];
	int out[2], n = 0;

	if (!path || pipe2(out, O_CLOEXEC))
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
		dup2(out[1], 1);
		dup2(out[1], 2);
		execv(path, argv);
		_exit(127);
	}
	close(out[1]);
	p->out = fdopen(out[0], "r");
	p->cpl[0] = '\0';
	if (!p->out || !fgets(p->cpl, sizeof(p->cpl), p->out))
		return -1;
	printf("# peer: %s", p->cpl);
	return strcmp(p->cpl, "cpl 0\n") ? -1 : 0;
}

/* Echo the peer's output up to the end; its exit status (128 + signal) */
static int peer_finish(struct peer *p)
{
	char buf[256];
	int status;

	while (fgets(buf, sizeof(buf), p->out))
		printf("# peer: %s", buf);
	fclose(p->out);
	if (waitpid(p->pid, &status, 0) != p->pid)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/*
 * Wait up to @secs for the peer to end: its exit status (128 + signal),
 * and the seconds it took in @took; -1 if it still runs (it is sent
 * SIGKILL then, which reaches it only if its CPU takes interrupts).
 */
static int peer_wait(struct peer *p, int secs, long *took)
{
	struct timespec t0, t1;
	int status;
	pid_t r;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		r = waitpid(p->pid, &status, WNOHANG);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		*took = t1.tv_sec - t0.tv_sec;
		if (r == 0)
			usleep(100000);
	} while (r == 0 && *took < secs);
	if (r != p->pid) {
		kill(p->pid, SIGKILL);
		return -1;
	}
	fclose(p->out);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/*
 * A kernel-mode CLI spin (@how: plain or cd02) on @cpu, this process on
 * @other: its exit status (128 + signal), the seconds it ran in @took.
 */
static int spin_on(struct __test_metadata *_metadata, int cpu, int other,
		   const char *how, long *took)
{
	char arg[16], line[64];
	const char *args[] = { "spin", arg, how, NULL };
	struct peer p;

	*took = 0;
	snprintf(arg, sizeof(arg), "%d", cpu);
	if (pin_to(other))
		return -1;
	if (peer_start(&p, args))
		return -1;
	if (!fgets(line, sizeof(line), p.out))
		return -1;
	printf("# peer: %s", line);
	EXPECT_EQ(cpu, atoi(line + 4));
	return peer_wait(&p, KILL_SECS, took);
}

/* /proc/interrupts: the count of @row (e.g. "NMI:") on @cpu, or -1 */
static long interrupts_on(const char *row, int cpu)
{
	static char buf[1 << 16];
	char name[16], *line, *p, *end;
	int col = 0;
	long v = -1;

	if (kml_read_file("/proc/interrupts", buf, sizeof(buf)) < 0)
		return -1;
	/* The header names the online CPUs' columns */
	snprintf(name, sizeof(name), "CPU%d", cpu);
	for (p = strtok_r(buf, " \n", &end); p && strcmp(p, name);
	     p = strtok_r(NULL, " \n", &end))
		col++;
	if (!p)
		return -1;
	line = strstr(end, row);
	if (!line)
		return -1;
	p = line + strlen(row);
	for (int i = 0; i <= col; i++) {
		v = strtol(p, &end, 10);
		if (end == p)
			return -1;
		p = end;
	}
	return v;
}

static int write_file(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = write(fd, s, strlen(s));
	close(fd);
	return n == (ssize_t)strlen(s) ? 0 : -1;
}

/*
 * SysRq-l: an NMI to every other online CPU, each of which prints its
 * backtrace.  The stack dumps are wanted here, not problems, so the
 * console's log level is lowered for them (they stay in the kernel log)
 * and set back once they are printed: an NMI's messages go out from an
 * irq_work after it, and a message from a task flushes what is left.
 */
static int nmi_backtrace_all(void)
{
	char levels[64];
	int ret;

	if (kml_read_file("/proc/sys/kernel/printk", levels, sizeof(levels)) < 0 ||
	    write_file("/proc/sys/kernel/printk", "1"))
		return -1;
	ret = write_file("/proc/sysrq-trigger", "l");
	sleep(1);
	write_file("/dev/kmsg", "kml-events: NMI backtrace done\n");
	levels[strcspn(levels, " \t")] = '\0';
	if (write_file("/proc/sys/kernel/printk", levels))
		return -1;
	return ret;
}

FIXTURE(kernel_mode) {
};

FIXTURE_SETUP(kernel_mode)
{
	if (!kml_kernel())
		SKIP(return, "not a kml kernel");
	if (kml_all_mode())
		SKIP(return, "kml=all: there is no ordinary process");
	if (kml_cpl() != 3)
		SKIP(return, "this side must be an ordinary process");
	if (getuid())
		SKIP(return, "root installs the peer in the trusted directory");
	ASSERT_NE(NULL, peer_path()) {
		TH_LOG("cannot install the peer: %s", strerror(errno));
	}
}

FIXTURE_TEARDOWN(kernel_mode)
{
}

/*
 * The watchdog's NMI finds CD 02 before RIP: the NMI handlers claim it,
 * so it is no INT $2 and the program dies of SIGKILL, not SIGSEGV (which
 * the #GP of INT $2 would give).  Twice, then an NMI backtrace must
 * still reach CPU 1.
 */
TEST_F_TIMEOUT(kernel_mode, cli_spin_after_cd_02_is_killed_by_the_watchdog, 200)
{
	long took, before, after = -1;

	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		SKIP(return, "the watchdog needs a second CPU");
	/* ror $2,%r13d; then jmp to itself: the loop's target follows CD 02 */
	ASSERT_EQ(0, memcmp(cli_spin_ror, "\x41\xc1\xcd\x02\xeb\xfe", 6));
	for (int round = 0; round < 2; round++) {
		int rc = spin_on(_metadata, 1, 0, "cd02", &took);

		TH_LOG("round %d: exit %d after %ld s", round, rc, took);
		ASSERT_EQ(128 + SIGKILL, rc) {
			if (rc == 128 + SIGSEGV)
				TH_LOG("the watchdog's NMI was taken for INT $2");
		}
		EXPECT_GT(KILL_SECS, took);
	}

	/* This process runs on CPU 0: SysRq-l sends CPU 1 an NMI */
	before = interrupts_on("NMI:", 1);
	ASSERT_LE(0, before);
	ASSERT_EQ(0, nmi_backtrace_all());
	for (int i = 0; i < 100 && (after = interrupts_on("NMI:", 1)) == before; i++)
		usleep(100000);
	TH_LOG("NMIs on CPU 1: %ld before SysRq-l, %ld after", before, after);
	EXPECT_LT(before, after);
}

/*
 * A program's INT $2 runs the NMI gate without blocking NMIs.  While it
 * loops on INT $2 on CPU 1, this side sends NMI backtraces (SysRq-l) to
 * CPU 1: every NMI is handled (CPU 1's count grows), the machine goes on,
 * and the program ends as it would (each INT $2 a SIGSEGV, unless an NMI
 * coincides with it: then it may go unsignalled, or, if the NMI lands
 * while the INT's frame is still on the KML NMI stack, the program is
 * killed).  Before the NMI had a stack of its own, CPU 1 ended in a page
 * fault loop and the machine stopped.
 */
TEST_F_TIMEOUT(kernel_mode, int2_loop_under_nmi_backtraces, 200)
{
	const char *args[] = { "int2", "1", "10", NULL };
	char levels[64], line[64];
	long took, before, after;
	int rc, sent = 0;
	struct peer p;

	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		SKIP(return, "the NMIs come from a second CPU");
	ASSERT_EQ(0, pin_to(0));
	ASSERT_EQ(0, peer_start(&p, args));
	ASSERT_NE(NULL, fgets(line, sizeof(line), p.out));
	printf("# peer: %s", line);
	before = interrupts_on("NMI:", 1);
	ASSERT_LE(0, before);
	/* the backtraces go to the kernel log only */
	ASSERT_LE(0, kml_read_file("/proc/sys/kernel/printk", levels, sizeof(levels)));
	ASSERT_EQ(0, write_file("/proc/sys/kernel/printk", "1"));
	/* the peer loops for 10 s; these take about 3 s under TCG */
	for (int i = 0; i < 150; i++) {
		if (!write_file("/proc/sysrq-trigger", "l"))
			sent++;
		usleep(20000);
	}
	sleep(1);	/* the last backtraces go out from an irq_work */
	write_file("/dev/kmsg", "kml-events: NMI backtraces done\n");
	levels[strcspn(levels, " \t")] = '\0';
	write_file("/proc/sys/kernel/printk", levels);
	after = interrupts_on("NMI:", 1);
	while (fgets(line, sizeof(line), p.out))
		printf("# peer: %s", line);
	rc = peer_wait(&p, 60, &took);
	TH_LOG("%d SysRq-l, NMIs on CPU 1: %ld -> %ld; peer exit %d", sent, before,
	       after, rc);
	EXPECT_TRUE(rc == 0 || rc == 128 + SIGKILL);
	EXPECT_LT(before + sent / 2, after);
}

/*
 * The watchdog's timers are per CPU: after CPU 1 went offline and came
 * back, each CPU is watched by a timer on another CPU again.  A
 * kernel-mode program has already run, so the timers were running
 * before the hotplug.
 */
TEST_F_TIMEOUT(kernel_mode, watchdog_watches_every_cpu_after_hotplug, 200)
{
	const char *args[] = { "cpl", NULL };
	long took;
	struct peer p;

	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		SKIP(return, "the watchdog needs a second CPU");
	if (access(CPU_ONLINE, W_OK))
		SKIP(return, "CPU 1 cannot be taken offline");
	ASSERT_EQ(0, peer_start(&p, args));
	ASSERT_EQ(0, peer_finish(&p));

	ASSERT_EQ(0, write_file(CPU_ONLINE, "0"));
	ASSERT_EQ(0, write_file(CPU_ONLINE, "1")) {
		TH_LOG("CPU 1 does not come back online");
	}
	for (int cpu = 0; cpu < 2; cpu++) {
		int rc = spin_on(_metadata, cpu, !cpu, "plain", &took);

		TH_LOG("CLI spin on CPU %d: exit %d after %ld s", cpu, rc, took);
		EXPECT_EQ(128 + SIGKILL, rc) {
			TH_LOG("CPU %d is not watched after the hotplug", cpu);
		}
		EXPECT_GT(KILL_SECS, took);
		if (rc == -1)	/* the spin keeps the CPU the next one needs */
			break;
	}
}

/*
 * A functional test (see peer_membarrier()): whether the other CPU was
 * serialized cannot be observed from the program.
 */
TEST_F(kernel_mode, membarrier_sync_core_with_a_thread_on_another_cpu)
{
	const char *args[] = { "membarrier", NULL };
	int cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
	struct peer p;

	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		SKIP(return, "the other thread needs a second CPU");
	ASSERT_LE(0, cmds);
	if (!(cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE))
		SKIP(return, "this kernel does not offer the core-serializing membarrier");
	ASSERT_EQ(0, peer_start(&p, args));
	EXPECT_EQ(0, peer_finish(&p));
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "--peer"))
		return peer(argc - 2, argv + 2);
	return test_harness_run(argc, argv);
}
