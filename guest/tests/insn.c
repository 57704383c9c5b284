// SPDX-License-Identifier: GPL-2.0
/*
 * Instructions whose behaviour depends on the privilege level, as a
 * kernel-mode process sees them (docs/kernel-mode.md, "Instructions").
 * The program runs twice, as installed (user mode) and from /trusted
 * (kernel mode), with the same expectations: where the kernel can tell,
 * a kernel-mode process gets exactly what an ordinary process gets --
 * the same signal, si_code, RIP, error code and trap number.
 */
#define _GNU_SOURCE
#include <cpuid.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <time.h>
#include <ucontext.h>
#include <asm/prctl.h>
#include <asm/processor-flags.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "kml_util.h"

/* int $0 ... int $255, 16 bytes apart: int_stubs + 16 * n is "int $n" */
asm(".pushsection .text\n"
    ".balign 16\n"
    ".globl int_stubs\n"
    "int_stubs:\n"
    "  .set v, 0\n"
    "  .rept 256\n"
    "  .byte 0xcd, v\n"
    "  ret\n"
    "  .balign 16, 0xcc\n"
    "  .set v, v + 1\n"
    "  .endr\n"
    ".popsection\n");
extern const char int_stubs[];

struct outcome {
	int sig, code;
	unsigned long ip, err, trapno;
};

static int report_fd = -1;

static void report_and_exit(int sig, siginfo_t *si, void *uc_)
{
	ucontext_t *uc = uc_;
	struct outcome o = {
		.sig = sig,
		.code = si->si_code,
		.ip = uc->uc_mcontext.gregs[REG_RIP],
		.err = uc->uc_mcontext.gregs[REG_ERR],
		.trapno = uc->uc_mcontext.gregs[REG_TRAPNO],
	};

	if (write(report_fd, &o, sizeof(o)) != sizeof(o))
		_exit(3);
	_exit(0);
}

static void catch_all(void (*handler)(int, siginfo_t *, void *))
{
	static const int sigs[] = { SIGSEGV, SIGTRAP, SIGBUS, SIGILL, SIGFPE };
	struct sigaction sa = { .sa_sigaction = handler, .sa_flags = SA_SIGINFO };

	for (unsigned int i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &sa, NULL);
}

/* Run fn in a child with every fault signal caught; its outcome into o. */
static int run_child(void (*fn)(void), struct outcome *o)
{
	int fds[2], status;
	pid_t pid;

	if (pipe(fds))
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		close(fds[0]);
		report_fd = fds[1];
		catch_all(report_and_exit);
		fn();
		_exit(2);		/* no signal */
	}
	close(fds[1]);
	memset(o, 0, sizeof(*o));
	if (read(fds[0], o, sizeof(*o)) != sizeof(*o))
		o->sig = -1;
	close(fds[0]);
	if (waitpid(pid, &status, 0) != pid)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static unsigned int int_vector;

static void do_int(void)
{
	((void (*)(void))(int_stubs + 16 * int_vector))();
}

/*
 * With IA32 emulation, INT $0x80 has a gate with DPL 3: the 32-bit
 * system call, for an ordinary 64-bit process too.  The kernel has it if
 * its int80 entry is in /proc/kallsyms and ia32_emulation= does not turn
 * it off.
 */
static int int80_is_a_system_call(void)
{
	static int known = -1;
	char line[256], val[16];
	FILE *f;

	if (known >= 0)
		return known;
	known = 0;
	if (kml_cmdline_param("ia32_emulation", val, sizeof(val)) == 0 &&
	    (!strcmp(val, "0") || !strcmp(val, "off") || !strcmp(val, "false") ||
	     !strcmp(val, "n")))
		return known;
	f = fopen("/proc/kallsyms", "r");
	if (!f)
		return known;
	while (fgets(line, sizeof(line), f))
		if (strstr(line, " asm_int80_emulation\n")) {
			known = 1;
			break;
		}
	fclose(f);
	return known;
}

#define IA32_SYSCALL_VECTOR	0x80	/* arch/x86/include/asm/irq_vectors.h */
#define IA32_NR_GETPID		20	/* arch/x86/entry/syscalls/syscall_32.tbl */

/* INT $0x80 as a 32-bit getpid(): exits 4 if it returned our pid */
static void do_int80_getpid(void)
{
	long ret;

	asm volatile("int $0x80"
		     : "=a"(ret) : "0"((long)IA32_NR_GETPID)
		     : "memory", "cc", "r8", "r9", "r10", "r11");
	_exit(ret == getpid() ? 4 : 5);
}

/*
 * QEMU's TCG reports the error code of an IDT #GP in long mode as
 * n * 16 + 2; hardware (and kml, which synthesizes it) as n * 8 + 2.
 */
static int idt_error_code(unsigned long err, unsigned int v)
{
	return err == v * 8 + 2 || err == v * 16 + 2;
}

/*
 * INT n for all 256 vectors.  At CPL 3 only the gates with DPL 3 may be
 * used: #BP and #OF (traps: RIP after the instruction) and, with IA32
 * emulation, the 32-bit system call; every other vector raises
 * #GP(n * 8 + 2) at the INT instruction, SIGSEGV with SI_KERNEL.
 * The one exception in kernel mode is INT $0xff: nothing tells it from
 * the local APIC's spurious interrupt, and the hardware event wins, so
 * the program goes on after it (docs/kernel-mode.md, "Events").
 */
#define SPURIOUS_VECTOR	0xff

TEST(int_n_gives_the_signal_of_an_ordinary_process)
{
	TH_LOG("CPL %d", kml_cpl());
	for (int_vector = 0; int_vector < 256; int_vector++) {
		unsigned long at = (unsigned long)int_stubs + 16 * int_vector;
		struct outcome o;

		if (int_vector == IA32_SYSCALL_VECTOR && int80_is_a_system_call()) {
			EXPECT_EQ(4, run_child(do_int80_getpid, &o))
				TH_LOG("int $0x80: not the 32-bit getpid()");
			EXPECT_EQ(-1, o.sig);
			continue;
		}
		if (int_vector == SPURIOUS_VECTOR && kml_cpl() == 0) {
			/* the spurious interrupt's handler: nothing happens */
			EXPECT_EQ(2, run_child(do_int, &o)) TH_LOG("int $0xff");
			continue;
		}
		ASSERT_EQ(0, run_child(do_int, &o)) TH_LOG("int $%u", int_vector);
		switch (int_vector) {
		case 3:		/* #BP */
			EXPECT_EQ(SIGTRAP, o.sig);
			EXPECT_EQ(SI_KERNEL, o.code);
			EXPECT_EQ(at + 2, o.ip);
			EXPECT_EQ(3, o.trapno);
			break;
		case 4:		/* #OF */
			EXPECT_EQ(SIGSEGV, o.sig);
			EXPECT_EQ(SI_KERNEL, o.code);
			EXPECT_EQ(at + 2, o.ip);
			EXPECT_EQ(4, o.trapno);
			break;
		default:	/* #GP(n * 8 + 2) */
			EXPECT_EQ(SIGSEGV, o.sig) TH_LOG("int $%u", int_vector);
			EXPECT_EQ(SI_KERNEL, o.code) TH_LOG("int $%u", int_vector);
			EXPECT_EQ(at, o.ip) TH_LOG("int $%u", int_vector);
			EXPECT_TRUE(idt_error_code(o.err, int_vector))
				TH_LOG("int $%u: error code %lu", int_vector, o.err);
			EXPECT_EQ(13, o.trapno) TH_LOG("int $%u", int_vector);
		}
		if (_metadata->exit_code)
			break;
	}
}

/*
 * A wild call, jump or return: to an upper-half address that nothing
 * maps (ERR_PTR(-16) or MAP_FAILED called as a function, the top 2 MiB
 * of the address space, the hypervisor's hole), to a non-canonical
 * address, or to an unmapped lower-half one.  An ordinary process gets
 * SIGSEGV -- a page fault at the target, or a #GP for a non-canonical
 * one -- and so must a kernel-mode process, whose CPU runs the target at
 * CPL 0: the event that follows is the program's, not kernel code's,
 * whatever RIP says.  Single-stepping the same jump to a canonical
 * target traps at the target first (SIGTRAP), in both modes.
 */
static const unsigned long wild_targets[] = {
	0xfffffffffffffff0UL, 0xffffffffffffffffUL, 0xffffffffffe00000UL,
	0xffff800000000000UL, 0xffff87fffffff000UL,
	0x8000000000000000UL, 0x0000800000000000UL, 0xfff0000000000000UL,
	0x1000UL,
};
static unsigned long wild_target;

/*
 * Canonical for this kernel's paging: 48 address bits, or 57 with 5-level
 * paging (QEMU's max CPU has LA57), where a mapping above 128 TiB can be
 * made.
 */
static int va_bits(void)
{
	static int bits;
	void *p;

	if (bits)
		return bits;
	p = mmap((void *)(1UL << 47), 4096, PROT_READ,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	bits = p == (void *)(1UL << 47) ? 57 : 48;
	if (p != MAP_FAILED)
		munmap(p, 4096);
	return bits;
}

static bool canonical(unsigned long a)
{
	int shift = 64 - va_bits();

	return (unsigned long)((long)(a << shift) >> shift) == a;
}

static void call_wild(void)
{
	((void (*)(void))wild_target)();
}

static void ret_wild(void)
{
	asm volatile("push %0\n\tret" : : "r"(wild_target) : "memory");
}

static void jmp_wild_stepping(void)
{
	asm volatile("pushfq\n\t"
		     "orq $0x100, (%%rsp)\n\t"	/* X86_EFLAGS_TF */
		     "popfq\n\t"
		     "jmp *%0" : : "r"(wild_target) : "memory");
}

static void expect_wild(struct __test_metadata *_metadata, void (*fn)(void),
			const char *how)
{
	for (unsigned int i = 0; i < sizeof(wild_targets) / sizeof(wild_targets[0]); i++) {
		struct outcome o;

		wild_target = wild_targets[i];
		/*
		 * A jump to a non-canonical address faults at the jump on
		 * hardware (no trap), at the target under QEMU TCG: not
		 * the same everywhere, so not single-stepped here.
		 */
		if (fn == jmp_wild_stepping && !canonical(wild_target))
			continue;
		ASSERT_EQ(0, run_child(fn, &o)) TH_LOG("%s %#lx", how, wild_target);
		if (fn == jmp_wild_stepping) {
			EXPECT_EQ(SIGTRAP, o.sig) TH_LOG("%s %#lx", how, wild_target);
			EXPECT_EQ(wild_target, o.ip) TH_LOG("%s %#lx", how, wild_target);
			continue;
		}
		EXPECT_EQ(SIGSEGV, o.sig) TH_LOG("%s %#lx", how, wild_target);
		if (canonical(wild_target)) {
			/*
			 * A page fault at the target, an instruction fetch
			 * (above 128 TiB with 5-level paging: a user address
			 * nothing maps)
			 */
			EXPECT_EQ(SEGV_MAPERR, o.code) TH_LOG("%s %#lx", how, wild_target);
			EXPECT_EQ(wild_target, o.ip) TH_LOG("%s %#lx", how, wild_target);
			EXPECT_EQ(14, o.trapno) TH_LOG("%s %#lx", how, wild_target);
			EXPECT_TRUE(o.err & 0x10) TH_LOG("%s %#lx: error code %#lx",
							  how, wild_target, o.err);
		} else {
			EXPECT_EQ(SI_KERNEL, o.code) TH_LOG("%s %#lx", how, wild_target);
			EXPECT_EQ(13, o.trapno) TH_LOG("%s %#lx", how, wild_target);
		}
	}
}

TEST(wild_call_gives_sigsegv)
{
	TH_LOG("CPL %d", kml_cpl());
	expect_wild(_metadata, call_wild, "call");
}

TEST(wild_return_gives_sigsegv)
{
	TH_LOG("CPL %d", kml_cpl());
	expect_wild(_metadata, ret_wild, "ret");
}

TEST(single_step_into_a_wild_jump_gives_sigtrap)
{
	TH_LOG("CPL %d", kml_cpl());
	expect_wild(_metadata, jmp_wild_stepping, "jmp with TF");
}

/*
 * A signal handler that sets a non-canonical RIP in its context: the
 * return from the handler cannot load it, and an ordinary process gets
 * SIGSEGV with SI_KERNEL (the #GP of IRET, delivered with the frame it
 * failed to load).  So must a kernel-mode process: its IRET faults the
 * same way (found by ./kml fuzz, where CPL 0 got SEGV_MAPERR).
 */
#define NONCANONICAL_RIP	0x8000000000001000UL

static void rip_to_noncanonical(int sig, siginfo_t *si, void *uc_)
{
	ucontext_t *uc = uc_;

	(void)sig;
	(void)si;
	uc->uc_mcontext.gregs[REG_RIP] = NONCANONICAL_RIP;
}

static void trap_then_noncanonical_rip(void)
{
	struct sigaction sa = { .sa_sigaction = rip_to_noncanonical,
				.sa_flags = SA_SIGINFO };

	sigaction(SIGTRAP, &sa, NULL);
	asm volatile("int3" ::: "memory");
}

TEST(sigreturn_to_a_noncanonical_rip_gives_sigsegv)
{
	struct outcome o;

	TH_LOG("CPL %d", kml_cpl());
	ASSERT_EQ(0, run_child(trap_then_noncanonical_rip, &o));
	EXPECT_EQ(SIGSEGV, o.sig);
	EXPECT_EQ(SI_KERNEL, o.code);
	EXPECT_EQ(13, o.trapno);
	EXPECT_EQ(NONCANONICAL_RIP, o.ip);
}

/*
 * Real faults right after an instruction whose last two bytes are CD n,
 * the encoding of INT n: the CPU raises the fault itself, at the faulting
 * instruction, and the program must get the fault's own signal -- not
 * the #GP of INT n, which would also leave RIP after CD n.
 *   ror $6,%ebp      C1 CD 06      then UD2                    #UD
 *   cmp $0xcd,%ax    66 3D CD 00   then DIV by zero            #DE
 *   ror $0x10,%ebp   C1 CD 10      then FWAIT, x87 #Z pending  #MF
 *   ror $0x13,%ebp   C1 CD 13      then DIVSS by zero          #XM
 * NAME_at labels the faulting instruction.  A routine returns only if
 * its instruction did not fault.
 */
asm(".pushsection .text\n"
    "ud2_after_cd06:\n"
    "  push %rbp\n"
    "  ror $6, %ebp\n"
    "ud2_after_cd06_at:\n"
    "  ud2\n"
    "  pop %rbp\n"
    "  ret\n"
    "div0_after_cd00:\n"
    "  xor %ecx, %ecx\n"
    "  xor %edx, %edx\n"
    "  cmp $0xcd, %ax\n"
    "div0_after_cd00_at:\n"
    "  div %ecx\n"
    "  ret\n"
    /* 1 / 0 with the x87 zero-divide exception unmasked: pending */
    "fwait_after_cd10:\n"
    "  push %rbp\n"
    "  fninit\n"
    "  fldcw x87_cw_zm_unmasked(%rip)\n"
    "  fldz\n"
    "  fld1\n"
    "  fdiv %st(1), %st\n"
    "  ror $0x10, %ebp\n"
    "fwait_after_cd10_at:\n"
    "  fwait\n"
    "  pop %rbp\n"
    "  ret\n"
    /* 1.0f / 0.0f with the SSE zero-divide exception unmasked */
    "divss_after_cd13:\n"
    "  push %rbp\n"
    "  ldmxcsr mxcsr_zm_unmasked(%rip)\n"
    "  mov $0x3f800000, %eax\n"
    "  movd %eax, %xmm0\n"
    "  xorps %xmm1, %xmm1\n"
    "  ror $0x13, %ebp\n"
    "divss_after_cd13_at:\n"
    "  divss %xmm1, %xmm0\n"
    "  pop %rbp\n"
    "  ret\n"
    "  .pushsection .rodata\n"
    "x87_cw_zm_unmasked: .short 0x037b\n"	/* default 0x037f less ZM */
    "  .balign 4\n"
    "mxcsr_zm_unmasked: .long 0x1d80\n"	/* default 0x1f80 less ZM */
    "  .popsection\n"
    ".popsection\n");
extern void ud2_after_cd06(void), div0_after_cd00(void);
extern void fwait_after_cd10(void), divss_after_cd13(void);
extern const unsigned char ud2_after_cd06_at[], div0_after_cd00_at[];
extern const unsigned char fwait_after_cd10_at[], divss_after_cd13_at[];

/*
 * fn's fault at @at follows the bytes CD @n: it gets the signal, si_code,
 * RIP and trap number an ordinary process gets for the fault.  Returns
 * run_child()'s status: 2 if nothing faulted.
 */
static int expect_fault_after_cd_n(struct __test_metadata *_metadata,
				   void (*fn)(void), const unsigned char *at,
				   unsigned int n, int sig, int code,
				   unsigned long trapno)
{
	struct outcome o;
	int rc;

	EXPECT_EQ(0xcd, at[-2]);
	EXPECT_EQ(n, at[-1]);
	TH_LOG("CPL %d", kml_cpl());
	rc = run_child(fn, &o);
	if (rc)
		return rc;
	EXPECT_EQ(sig, o.sig);
	EXPECT_EQ(code, o.code);
	EXPECT_EQ((unsigned long)at, o.ip);
	EXPECT_EQ(trapno, o.trapno);
	return 0;
}

TEST(ud2_after_cd_06_is_a_real_invalid_opcode)
{
	ASSERT_EQ(0, expect_fault_after_cd_n(_metadata, ud2_after_cd06,
					     ud2_after_cd06_at, 6, SIGILL,
					     ILL_ILLOPN, 6));
}

TEST(div_by_zero_after_cd_00_is_a_real_divide_error)
{
	ASSERT_EQ(0, expect_fault_after_cd_n(_metadata, div0_after_cd00,
					     div0_after_cd00_at, 0, SIGFPE,
					     FPE_INTDIV, 0));
}

TEST(fwait_after_cd_10_is_a_real_x87_error)
{
	ASSERT_EQ(0, expect_fault_after_cd_n(_metadata, fwait_after_cd10,
					     fwait_after_cd10_at, 0x10, SIGFPE,
					     FPE_FLTDIV, 16));
}

/*
 * QEMU's TCG (7.2) raises no SIMD floating-point exception: where the
 * CPU raises none, there is nothing to tell apart from INT $0x13.
 */
TEST(divss_after_cd_13_is_a_real_simd_error)
{
	int rc = expect_fault_after_cd_n(_metadata, divss_after_cd13,
					 divss_after_cd13_at, 0x13, SIGFPE,
					 FPE_FLTDIV, 19);

	if (rc == 2)
		SKIP(return, "the CPU raised no #XM for an unmasked SSE divide by zero");
	ASSERT_EQ(0, rc);
}

/* Per-CPU sum of a /proc/interrupts row, e.g. "LOC:" */
static long interrupts(const char *row)
{
	static char buf[1 << 16];
	long sum = 0;
	char *p, *end;

	if (kml_read_file("/proc/interrupts", buf, sizeof(buf)) < 0)
		return -1;
	p = strstr(buf, row);
	if (!p)
		return -1;
	p += strlen(row);
	for (;;) {
		long v = strtol(p, &end, 10);

		if (end == p)
			break;
		sum += v;
		p = end;
	}
	return sum;
}

static volatile long segvs;

static void skip_int(int sig, siginfo_t *si, void *uc_)
{
	ucontext_t *uc = uc_;

	(void)sig;
	(void)si;
	segvs++;
	uc->uc_mcontext.gregs[REG_RIP] += 2;
}

/*
 * INT n in a loop, over device, IPI and exception vectors, while the
 * machine goes on: every one is a SIGSEGV, the timer keeps ticking and
 * IPIs keep arriving (the other CPU's work reschedules this one).  8,000
 * signals: 32,000 took over the harness's 30 s on the debug kernel under
 * TCG while the host was busy.
 */
TEST(interrupts_still_arrive_while_a_program_issues_int_n)
{
	static const unsigned int vectors[] = {
		0x20, 0x30, 0x81, 0x88, 0xec, 0xf0, 0xfb, 0xfd, 1, 2, 8, 14,
		18, 22, 29, 31,
	};
	const long rounds = 500;
	long loc0, loc1, res0, res1;
	struct sigaction sa = { .sa_sigaction = skip_int, .sa_flags = SA_SIGINFO };
	struct sigaction old;

	ASSERT_EQ(0, sigaction(SIGSEGV, &sa, &old));
	loc0 = interrupts("LOC:");
	res0 = interrupts("RES:");
	ASSERT_LE(0, loc0);
	segvs = 0;
	for (long i = 0; i < rounds; i++) {
		for (unsigned int j = 0; j < sizeof(vectors) / sizeof(vectors[0]); j++) {
			int_vector = vectors[j];
			do_int();
		}
		if (i % 100 == 0)
			sched_yield();
	}
	loc1 = interrupts("LOC:");
	res1 = interrupts("RES:");
	sigaction(SIGSEGV, &old, NULL);
	TH_LOG("%ld INT n, LOC +%ld, RES +%ld", segvs, loc1 - loc0, res1 - res0);
	EXPECT_EQ(rounds * (long)(sizeof(vectors) / sizeof(vectors[0])), segvs);
	EXPECT_LT(10, loc1 - loc0);
}

/*
 * CR4.TSD and CPUID faulting stop RDTSC and CPUID only above CPL 0: a
 * kernel-mode process cannot have them, so the prctls are refused for
 * it (EINVAL); an ordinary process gets SIGSEGV from RDTSC.
 */
static void do_rdtsc(void)
{
	unsigned int lo, hi;

	if (prctl(PR_SET_TSC, PR_TSC_SIGSEGV, 0, 0, 0))
		_exit(10 + errno);
	asm volatile("rdtsc" : "=a"(lo), "=d"(hi));
}

TEST(rdtsc_with_the_tsc_disabled)
{
	struct outcome o;
	int rc = run_child(do_rdtsc, &o);

	if (kml_cpl() == 0) {
		ASSERT_EQ(10 + EINVAL, rc);
	} else {
		ASSERT_EQ(0, rc);
		EXPECT_EQ(SIGSEGV, o.sig);
		EXPECT_EQ(13, o.trapno);
	}
}

TEST(cpuid_faulting_is_refused_in_kernel_mode)
{
	long rc = syscall(SYS_arch_prctl, ARCH_SET_CPUID, 0);

	if (kml_cpl() == 0) {
		ASSERT_EQ(-1, rc);
		ASSERT_EQ(EINVAL, errno);
	} else if (rc == 0) {
		ASSERT_EQ(0, syscall(SYS_arch_prctl, ARCH_SET_CPUID, 1));
	} else {
		ASSERT_EQ(ENODEV, errno);	/* no CPUID faulting here */
	}
}

/*
 * CMPXCHG16B changes ZF only.  QEMU's TCG before 8.0 computed the other
 * flags from condition-code state left by an earlier block: after POPF
 * and an ADD it returns the ADD's source operand as RFLAGS, and an
 * interrupt then loads TF, DF, AC and IOPL from it on IRET.  ./kml hides
 * CX16 from such a TCG (host/kmltool/qemu.py); with CX16, the flags must
 * be right, in both modes.
 */
TEST(cmpxchg16b_changes_only_zf)
{
	static __int128 slot __attribute__((aligned(16)));
	unsigned int a, b, c, d;
	uint64_t flags, sum = 0, lo = 0, hi = 0;

	__cpuid(1, a, b, c, d);
	if (!(c & (1u << 13)))		/* CPUID.01H:ECX.CX16 */
		SKIP(return, "no CMPXCHG16B (hidden from a TCG that loses its flags)");
	/* a fault on the slot inside the instruction would hide the bug */
	*(volatile __int128 *)&slot = 0;
	asm volatile("pushq $0x202\n\tpopfq\n\t"
		     "add %[src], %[sum]\n\t"
		     "cmpxchg16b %[m]\n\t"
		     "pushfq\n\tpopq %[flags]"
		     : [flags] "=r"(flags), [sum] "+r"(sum), "+a"(lo), "+d"(hi),
		       [m] "+m"(slot)
		     : [src] "r"(0x1ffa8dc0UL), "b"(1UL), "c"(0UL) : "cc");
	/* 0 + 0x1ffa8dc0: PF, and ZF from the successful exchange */
	EXPECT_EQ(X86_EFLAGS_IF | X86_EFLAGS_FIXED | X86_EFLAGS_PF | X86_EFLAGS_ZF, flags);
	EXPECT_EQ(1, (uint64_t)slot);
}

/*
 * A task with the TSC disabled and a kernel-mode task switch on the same
 * CPU: CR4.TSD and CR4.SMEP/SMAP change together and CR4 pinning must
 * not complain (the console must stay clean).  The TSD task is a user-
 * mode program: this test binary from its installed place.
 */
#define TSD_ARG	"--tsc-disabled-yielder"

__attribute__((constructor))
static void tsd_yielder(int argc, char **argv)
{
	if (argc < 2 || strcmp(argv[1], TSD_ARG))
		return;
	if (prctl(PR_SET_TSC, PR_TSC_SIGSEGV, 0, 0, 0))
		_exit(1);
	for (int i = 0; i < 20000; i++)
		sched_yield();
	_exit(0);
}

/*
 * Pin the caller to CPU 0 and start this test binary from its installed
 * place (an ordinary process) with arg, on the same CPU; its pid.
 */
static pid_t spawn_ordinary_on_cpu0(struct __test_metadata *_metadata,
				    const char *arg)
{
	cpu_set_t one;
	pid_t pid;

	CPU_ZERO(&one);
	CPU_SET(0, &one);
	EXPECT_EQ(0, sched_setaffinity(0, sizeof(one), &one));
	pid = fork();
	if (pid == 0) {
		execl("/usr/lib/kml/tests/insn", "insn", arg, NULL);
		_exit(127);
	}
	return pid;
}

TEST(tsc_disabled_task_and_kernel_mode_task_share_a_cpu)
{
	int status;
	pid_t pid = spawn_ordinary_on_cpu0(_metadata, TSD_ARG);

	ASSERT_LE(0, pid);
	for (int i = 0; i < 20000; i++)
		sched_yield();
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	ASSERT_EQ(0, WEXITSTATUS(status));
}

/*
 * The kernel-mode CPU state (CR4 without SMEP/SMAP, the kernel-mode IDT,
 * MSR_LSTAR at kml's entry) is switched lazily: it stays loaded while
 * kernel threads and the idle task run after a kernel-mode task, and is
 * put back only when an ordinary task is switched in.  On one CPU, this
 * test (a kernel-mode task in the @kernel run) sleeps in short naps, so
 * that the CPU goes idle in between, while an ordinary process makes
 * system calls and checks after each that it still runs at CPL 3: a
 * SYSCALL through a stale MSR_LSTAR would come back at CPL 0.
 */
#define CPL3_ARG	"--cpl3-checker"
#define CPL3_CALLS	20000

__attribute__((constructor))
static void cpl3_checker(int argc, char **argv)
{
	unsigned short cs;

	if (argc < 2 || strcmp(argv[1], CPL3_ARG))
		return;
	for (int i = 0; i < CPL3_CALLS; i++) {
		syscall(SYS_getppid);
		asm volatile("mov %%cs, %0" : "=r" (cs));
		if ((cs & 3) != 3)
			_exit(2);
		if (i % 64 == 0)
			usleep(20);	/* let the CPU go idle */
		if (i % 4096 == 0)
			sync();		/* and wake a kworker */
	}
	_exit(0);
}

TEST(ordinary_task_after_kernel_mode_task_and_idle_runs_at_cpl3)
{
	int status;
	pid_t r, pid = spawn_ordinary_on_cpu0(_metadata, CPL3_ARG);

	ASSERT_LE(0, pid);
	while ((r = waitpid(pid, &status, WNOHANG)) == 0)
		usleep(30);
	ASSERT_EQ(pid, r);
	ASSERT_TRUE(WIFEXITED(status));
	ASSERT_EQ(0, WEXITSTATUS(status))
		TH_LOG("2: the ordinary process ran at CPL 0 after a system call");
}

/*
 * CLI: an ordinary process gets #GP (IOPL 0).  A kernel-mode process
 * really disables interrupts -- the hardware cannot be told otherwise --
 * and a watchdog on another CPU kills it with SIGKILL if it keeps them
 * disabled for two seconds.
 */
static void cli_forever(void)
{
	cpu_set_t one;

	CPU_ZERO(&one);
	CPU_SET(1, &one);
	sched_setaffinity(0, sizeof(one), &one);
	asm volatile("cli\n1: jmp 1b");
}

TEST(cli_forever_is_killed)
{
	struct timespec t0, t1;
	struct outcome o;
	int rc;

	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		SKIP(return, "the watchdog needs a second CPU");
	clock_gettime(CLOCK_MONOTONIC, &t0);
	rc = run_child(cli_forever, &o);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	TH_LOG("exit %d after %ld s", rc, (long)(t1.tv_sec - t0.tv_sec));
	if (kml_cpl() == 0) {
		EXPECT_EQ(128 + SIGKILL, rc);
		EXPECT_GT(30, t1.tv_sec - t0.tv_sec);
	} else {
		EXPECT_EQ(0, rc);
		EXPECT_EQ(SIGSEGV, o.sig);
		EXPECT_EQ(13, o.trapno);
	}
}

TEST_HARNESS_MAIN
