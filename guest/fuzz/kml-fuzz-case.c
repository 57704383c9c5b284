// SPDX-License-Identifier: GPL-2.0
/*
 * kml-fuzz-case SEED [OPS] [--avoid LIST]: one program of the differential
 * fuzzer (kml-fuzz runs it as an ordinary process and from /trusted, at
 * CPL 0, and compares how both end).
 *
 * From SEED alone (splitmix64, never rand()) it writes OPS random
 * operations of x86-64 machine code into an RWX buffer at a fixed address
 * and calls it.  Operations load, store, jump, call and return to
 * addresses of fixed classes (mapped data, unmapped, PROT_NONE, read-only,
 * non-executable, NULL, non-canonical, the upper-half holes that no x86-64
 * Linux maps), play with the stack pointer, raise exceptions (INT n, INT3,
 * ICEBP, UD2, #DE, x87 and SSE faults) and make harmless system calls.
 * Every fixed address is below 2 GiB and mapped with MAP_FIXED_NOREPLACE,
 * so that the program, its faults and its output do not depend on ASLR.
 *
 * A signal handler (most seeds) prints one line per signal --
 *   sig SIGNO code SI_CODE op OPINDEX [addr A trap T err E]
 * (the address, trap number and error code only for a fault inside the
 * buffer: a RIP outside it may be where kernel mode legitimately differs)
 * and then, as the seed decides, resumes at the next operation, changes
 * RIP, RSP or EFLAGS (TF, DF, AC) in the context, or _exit()s.  After
 * MAX_SIGNALS signals it _exit()s 99.  At the end it prints
 *   end sum S regs R
 * (a digest of the system calls' deterministic results and of the
 * registers) and exits 0.  Nothing printed depends on addresses chosen
 * at run time, the pid or the time.
 *
 * Some seeds run a second program (lane 1) in a second thread at the same
 * time, with pages of its own; its lines ("t1 sig ...", "t1 end ...") are
 * kept and printed after it is joined, since the interleaving of two
 * threads is not deterministic.  Its handler never ends the process.
 *
 * Left out, because they legitimately differ at CPL 0: privileged
 * instructions (admission rules them out), INT $0xff (the APIC spurious
 * vector: in kernel mode the hardware event wins), accesses to mapped
 * kernel memory, and misaligned accesses (EFLAGS.AC checks alignment at
 * CPL 3 only).
 *
 * kml-fuzz-case --cpl prints "cpl N", the privilege level it runs at;
 * --list prints each operation (kind, address classes, bytes) instead of
 * running the program; --regs prints every register at the end.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

/* ---- the fixed layout ------------------------------------------------ */

#define PAGE		4096UL
#define MAX_OP_BYTES	160		/* no operation encodes longer */
/* shared by both lanes, never changed */
#define RO_BASE		0x60030000UL	/* PROT_READ: constants, then a pattern */
#define NX_BASE		0x60040000UL	/* PROT_READ, "the NX page" */

/*
 * A lane: one generated program with its own buffer and pages.  Lane 0
 * runs in the main thread; some seeds add lane 1, run by a second thread
 * at the same time (its pages are its own, so what one thread maps or
 * unmaps never changes what the other does).  L is the lane the current
 * thread generates or runs.
 */
struct fixup {
	size_t at;		/* where the target goes */
	int op;			/* the operation it targets */
	int rel;		/* rel32 from at + 4, else an absolute imm64 */
};

struct lane {
	uint64_t code;		/* the program, RWX; its NX neighbour follows */
	uint64_t grp;		/* its pages (below) */
	size_t code_size;
	size_t pc;		/* generating: the next byte */
	size_t *op_start;	/* op_start[i]: offset of operation i; [nops]: the end */
	int nops;
	struct fixup *fixups;
	int nfixups;
	int thread;		/* lane 1: never exits the process, logs to buf */
	uint64_t hrng;		/* the handler's choices: a stream of their own */
	int nsignals;
	char log[8192];		/* lane 1's lines, printed after the join */
	size_t loglen;
};
static struct lane lanes[2];
static __thread struct lane *L;

#define CODE_BASE	(L->code)
#define CODE		((uint8_t *)L->code)
#define DATA_BASE	(L->grp)		/* 4 pages RW: loads, stores, stacks */
#define DATA_SIZE	0x4000UL
#define SYSOUT_BASE	(L->grp + 0x10000)	/* RW: what system calls write (never loaded) */
#define SYSOUT_TIME	(SYSOUT_BASE + 0xc00)	/* clock_gettime's: read by nothing */
#define GUARD_BASE	(L->grp + 0x20000)	/* PROT_NONE */
#define UNMAPPED_BASE	(L->grp + 0x50000)	/* 64 KiB never mapped */
#define CTRL_BASE	(L->grp + 0x60000)	/* RW: the generated code's own slots */
#define ALT_BASE	(L->grp + 0x100000)	/* the alternate signal stack */
#define ALT_SIZE	0x10000UL

/* constants in the read-only page (fldcw, ldmxcsr, nanosleep) */
#define RO_FCW_ZE	(RO_BASE + 0x10)	/* x87: zero-divide unmasked */
#define RO_FCW_IE	(RO_BASE + 0x12)	/* x87: invalid unmasked */
#define RO_MXCSR_ZE	(RO_BASE + 0x14)	/* SSE: zero-divide unmasked */
#define RO_MXCSR_IE	(RO_BASE + 0x18)	/* SSE: invalid unmasked */
#define RO_MXCSR_DEF	(RO_BASE + 0x1c)	/* SSE: the default */
#define RO_ZERO		(RO_BASE + 0x20)	/* 64 zero bytes (timespec, sigset) */
#define RO_PATTERN	(RO_BASE + 0x60)

/* the control page: the generated code addresses it absolutely */
struct ctrl {
	uint64_t saved_rsp;	/* RSP at the program's start */
	int64_t last_op;	/* the last operation that may leave the buffer */
	uint64_t sum;		/* digest of deterministic system-call results */
	uint64_t regs[16];	/* the GPRs at the end */
	uint64_t ret;		/* where the program returns to in run_code() */
};
#define CTRL		((volatile struct ctrl *)CTRL_BASE)
#define CTRL_SAVED_RSP	(CTRL_BASE + 0)
#define CTRL_LAST_OP	(CTRL_BASE + 8)
#define CTRL_SUM	(CTRL_BASE + 16)
#define CTRL_REGS	(CTRL_BASE + 24)
#define CTRL_RET	(CTRL_BASE + 24 + 16 * 8)

#define MAX_SIGNALS	64
#define EXIT_TOO_MANY	99
#define DEFAULT_OPS	48
#define MAX_OPS		20000

/* ---- the random stream ----------------------------------------------- */

static __thread uint64_t rng_state;	/* the handlers swap it: per thread */

static uint64_t splitmix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static uint64_t rnd(void) { return splitmix64(&rng_state); }
static uint64_t below(uint64_t n) { return n ? rnd() % n : 0; }
static int chance(int percent) { return below(100) < (uint64_t)percent; }

/* pick an index from a table of weights */
static int weighted(const int *w, int n)
{
	int total = 0, i;

	for (i = 0; i < n; i++)
		total += w[i];
	if (total <= 0)
		return -1;
	int r = below(total);
	for (i = 0; i < n; i++) {
		if (r < w[i])
			return i;
		r -= w[i];
	}
	return n - 1;
}

/* ---- address classes -------------------------------------------------- */

enum cls {
	C_DATA, C_UNMAPPED, C_GUARD, C_RO, C_NX, C_NULL, C_NONCANON47,
	C_NONCANON63, C_HOLE, C_TOPHOLE, C_CODENX, C_CODE, NCLS
};
static const char *const cls_name[NCLS] = {
	"data", "unmapped", "guard", "ro", "nx", "null", "noncanon47",
	"noncanon63", "hole", "tophole", "codenx", "code",
};

/* Operation kinds; "ctx" is the handler's change of RIP/RSP/EFLAGS. */
enum kind {
	K_ARITH, K_LOAD, K_STORE, K_STACK, K_BRANCH, K_INT, K_TRAP, K_DIV,
	K_X87, K_SSE, K_SYSCALL, K_INT80, K_CTX, K_THREAD, K_SLOT, NKIND
};
static const char *const kind_name[NKIND] = {
	"arith", "load", "store", "stack", "branch", "int", "trap", "div",
	"x87", "sse", "syscall", "int80", "ctx", "thread", "slot",
};
static const int kind_weight[NKIND] = {
	[K_ARITH] = 20, [K_LOAD] = 10, [K_STORE] = 10, [K_STACK] = 6,
	[K_BRANCH] = 10, [K_INT] = 6, [K_TRAP] = 4, [K_DIV] = 4, [K_X87] = 2,
	[K_SSE] = 2, [K_SYSCALL] = 8, [K_INT80] = 1,
	/* K_CTX: the handler's; K_THREAD: lane 1 (the seed decides);
	 * K_SLOT: where jmp/call *(mem) read their target */
};

/* --avoid: avoid_kind[k] drops a kind, avoid_cls[k][c] a class for kind k */
static int avoid_kind[NKIND];
static int avoid_cls[NKIND][NCLS];
static int la57;		/* 5-level paging: the guard hole moves */

static uint64_t cls_base(enum cls c)
{
	switch (c) {
	case C_DATA: return DATA_BASE;
	case C_UNMAPPED: return UNMAPPED_BASE;
	case C_GUARD: return GUARD_BASE;
	case C_RO: return RO_BASE;
	case C_NX: return NX_BASE;
	case C_NULL: return 0;
	case C_NONCANON47: return 0x0000800000000000ULL;
	case C_NONCANON63: return 0x8000000000000000ULL;
	/* the hypervisor guard hole: 4-level and 5-level paging differ */
	case C_HOLE: return la57 ? 0xff00000000000000ULL : 0xffff800000000000ULL;
	case C_TOPHOLE: return 0xffffffffff800000ULL;
	case C_CODENX: return CODE_BASE + L->code_size;
	case C_CODE: return CODE_BASE;
	default: return 0;
	}
}

/* an 8-byte aligned address of class c, for an access of up to 16 bytes */
static uint64_t cls_addr(enum cls c)
{
	uint64_t span;

	switch (c) {
	case C_DATA: span = DATA_SIZE; break;
	case C_UNMAPPED: span = 0x10000; break;
	case C_NONCANON47: case C_NONCANON63: case C_HOLE: span = 1ULL << 40; break;
	case C_TOPHOLE: span = 0x800000; break;
	default: span = PAGE; break;
	}
	return cls_base(c) + (below(span - 16) & ~7ULL);
}

/* a class for kind k, from weights w (0: never) */
/* --list: what each operation was made of, printed instead of running */
static int listing;
static char note_buf[256];

static void note(const char *fmt, ...)
{
	size_t n = strlen(note_buf);
	va_list ap;

	if (!listing || n >= sizeof(note_buf) - 1)
		return;
	va_start(ap, fmt);
	vsnprintf(note_buf + n, sizeof(note_buf) - n, fmt, ap);
	va_end(ap);
}

static int pick_cls(enum kind k, const int *w)
{
	int ww[NCLS], c;

	for (c = 0; c < NCLS; c++)
		ww[c] = avoid_cls[k][c] ? 0 : w[c];
	c = weighted(ww, NCLS);
	note(" %s", c < 0 ? "-" : cls_name[c]);
	return c;
}

/* where loads may go: every class is readable or faults */
static const int load_w[NCLS] = {
	[C_DATA] = 30, [C_UNMAPPED] = 6, [C_GUARD] = 6, [C_RO] = 8, [C_NX] = 6,
	[C_NULL] = 5, [C_NONCANON47] = 4, [C_NONCANON63] = 4, [C_HOLE] = 4,
	[C_TOPHOLE] = 4, [C_CODENX] = 3, [C_CODE] = 3,
};
/* stores: never into the code (the program would rewrite itself
 * depending on what it stored) */
static const int store_w[NCLS] = {
	[C_DATA] = 30, [C_UNMAPPED] = 6, [C_GUARD] = 6, [C_RO] = 8, [C_NX] = 6,
	[C_NULL] = 5, [C_NONCANON47] = 4, [C_NONCANON63] = 4, [C_HOLE] = 4,
	[C_TOPHOLE] = 4, [C_CODENX] = 3,
};
/* stack pointers: DATA is the working one */
static const int stack_w[NCLS] = {
	[C_DATA] = 20, [C_UNMAPPED] = 5, [C_GUARD] = 5, [C_RO] = 5, [C_NX] = 3,
	[C_NULL] = 3, [C_NONCANON47] = 3, [C_NONCANON63] = 3, [C_HOLE] = 3,
	[C_TOPHOLE] = 3, [C_CODENX] = 2,
};
/* control transfers: C_CODE is a later operation of the buffer */
static const int branch_w[NCLS] = {
	[C_DATA] = 3, [C_UNMAPPED] = 3, [C_GUARD] = 3, [C_RO] = 2, [C_NX] = 3,
	[C_NULL] = 3, [C_NONCANON47] = 3, [C_NONCANON63] = 3, [C_HOLE] = 3,
	[C_TOPHOLE] = 3, [C_CODENX] = 3, [C_CODE] = 30,
};
/* syscall pointers */
static const int ptr_w[NCLS] = {
	[C_DATA] = 0, [C_UNMAPPED] = 4, [C_GUARD] = 4, [C_RO] = 4, [C_NX] = 2,
	[C_NULL] = 4, [C_NONCANON47] = 3, [C_NONCANON63] = 3, [C_HOLE] = 3,
	[C_TOPHOLE] = 3, [C_CODENX] = 2,
};

/* ---- the encoder -------------------------------------------------------- */

enum { RAX, RCX, RDX, RBX, RSP, RBP, RSI, RDI, R8, R9, R10, R11, R12, R13, R14, R15 };

static void b(uint8_t x) { CODE[L->pc++] = x; }
static void d32(uint32_t x) { memcpy(CODE + L->pc, &x, 4); L->pc += 4; }
static void q64(uint64_t x) { memcpy(CODE + L->pc, &x, 8); L->pc += 8; }

static void rex(int w, int r, int bb)
{
	b(0x40 | (w << 3) | ((r >> 3) & 1) << 2 | ((bb >> 3) & 1));
}

/* ModRM (+SIB) for [base + disp32] */
static void mem_base(int reg, int base, int32_t disp)
{
	b(0x80 | (reg & 7) << 3 | (base & 7));
	if ((base & 7) == 4)
		b(0x24);
	d32(disp);
}

/* ModRM + SIB for an absolute address below 2 GiB */
static void mem_abs(int reg, uint32_t addr)
{
	b(0x04 | (reg & 7) << 3);
	b(0x25);
	d32(addr);
}

static void mov_ri64(int r, uint64_t imm) { rex(1, 0, r); b(0xb8 + (r & 7)); q64(imm); }

static void mov_ri32(int r, uint32_t imm)
{
	if (r >= 8)
		b(0x41);
	b(0xb8 + (r & 7));
	d32(imm);
}

static void modrm_rr(int reg, int rm) { b(0xc0 | (reg & 7) << 3 | (rm & 7)); }

static void push_r(int r) { if (r >= 8) b(0x41); b(0x50 + (r & 7)); }
static void pop_r(int r) { if (r >= 8) b(0x41); b(0x58 + (r & 7)); }

/*
 * cmp %rax, %rax: every arithmetic flag defined (ZF, PF set; CF, OF, SF,
 * AF clear).  After an instruction that leaves flags undefined (imul,
 * shifts and rotates, logic ops' AF, div), which real CPUs and TCG fill
 * in differently, even from run to run on one host; the flags reach the
 * output through R11 after SYSCALL and saved contexts.
 */
static void define_flags(void) { b(0x48); b(0x39); b(0xc0); }

/* movq $imm32, abs */
static void store_abs_imm(uint32_t addr, int32_t imm) { rex(1, 0, 0); b(0xc7); mem_abs(0, addr); d32(imm); }

/* movq %reg, abs / movq abs, %reg */
static void store_abs(uint32_t addr, int reg) { rex(1, reg, 0); b(0x89); mem_abs(reg, addr); }
static void load_abs(int reg, uint32_t addr) { rex(1, reg, 0); b(0x8b); mem_abs(reg, addr); }

static void fixup(int op, int rel)
{
	L->fixups[L->nfixups++] = (struct fixup){ .at = L->pc, .op = op, .rel = rel };
	if (rel)
		d32(0);
	else
		q64(0);
}

/* ---- operations ------------------------------------------------------- */

/* a general register other than RSP */
static int gpr(void)
{
	int r;

	do
		r = below(16);
	while (r == RSP);
	return r;
}

/* the operation may leave the buffer: a handler resumes after it */
static void mark_last(int i) { store_abs_imm(CTRL_LAST_OP, i); }

static void op_arith(void)
{
	static const uint8_t rr[] = { 0x01, 0x09, 0x21, 0x29, 0x31 };	/* add or and sub xor */
	static const uint8_t alu_digit[] = { 0, 1, 4, 5, 6 };
	static const uint8_t shift_digit[] = { 0, 1, 4, 5, 7 };	/* rol ror shl shr sar */
	int d = gpr(), s = gpr();

	switch (below(6)) {
	case 0:
		mov_ri64(d, rnd());
		break;
	case 1:		/* op reg, reg */
		rex(1, s, d); b(rr[below(sizeof(rr))]); modrm_rr(s, d);
		define_flags();		/* or/and/xor: AF */
		break;
	case 2:		/* op $imm32, reg */
		rex(1, 0, d); b(0x81); modrm_rr(alu_digit[below(sizeof(alu_digit))], d); d32(rnd());
		define_flags();
		break;
	case 3:		/* imul $imm32, src, dst */
		rex(1, d, s); b(0x69); modrm_rr(d, s); d32(rnd());
		define_flags();
		break;
	case 4:		/* shift/rotate $imm8 */
		rex(1, 0, d); b(0xc1); modrm_rr(shift_digit[below(sizeof(shift_digit))], d); b(below(64));
		define_flags();
		break;
	default:	/* not, neg */
		rex(1, 0, d); b(0xf7); modrm_rr(2 + below(2), d);
		break;
	}
}

/* mov $addr, %base; then a 64- or 32-bit access through it */
static void op_mem(int store)
{
	int c = pick_cls(store ? K_STORE : K_LOAD, store ? store_w : load_w);
	int base = gpr(), reg = gpr();
	int32_t disp = below(2) ? 0 : (int32_t)(below(16) * 8) - 64;
	uint64_t addr;

	if (c < 0)
		return;
	/* C_CODE: the bytes generated so far */
	addr = c == C_CODE ? CODE_BASE + (below(L->pc + 1) & ~7ULL) : cls_addr(c);
	mov_ri64(base, addr - disp);
	if (below(4))
		rex(1, reg, base);
	else if (reg >= 8 || base >= 8)
		rex(0, reg, base);
	b(store ? 0x89 : 0x8b);
	mem_base(reg, base, disp);
}

/* RSP to an address of a class, a few pushes, pops and calls there, then
 * (mostly) RSP back.  A signal on such a stack needs the alternate one. */
static void op_stack(int i)
{
	int c = pick_cls(K_STACK, stack_w);
	int n = 1 + below(4);

	if (c < 0)
		return;
	mark_last(i);
	if (c == C_DATA)	/* room below for pushes and a signal frame */
		mov_ri64(RSP, DATA_BASE + 0x2000 + (below(0x1f00) & ~15ULL));
	else
		mov_ri64(RSP, (cls_addr(c) + 0x40) & ~15ULL);
	while (n--) {
		switch (below(4)) {
		case 0: push_r(gpr()); break;
		case 1: pop_r(gpr()); break;
		case 2: b(0x68); d32(rnd()); break;		/* push $imm32 */
		default: b(0xe8); d32(0); break;		/* call the next instruction */
		}
	}
	if (chance(80))
		load_abs(RSP, CTRL_SAVED_RSP);
}

/* a target: a later operation (or the end), or an address of a class */
static int branch_target(int i, uint64_t *addr)
{
	int c = pick_cls(K_BRANCH, branch_w);

	if (c == C_CODE)
		return i + 1 + below(L->nops - i < 16 ? L->nops - i : 16);
	*addr = c < 0 ? UNMAPPED_BASE : cls_addr(c);
	return -1;
}

static void op_branch(int i)
{
	uint64_t addr = 0;
	int t = branch_target(i, &addr), r = gpr();
	int how = below(7);

	mark_last(i);
	if (t >= 0 && how < 2) {		/* jmp/call rel32 */
		b(how ? 0xe8 : 0xe9);
		fixup(t, 1);
		return;
	}
	/* the target into r */
	if (t >= 0) {
		rex(1, 0, r); b(0xb8 + (r & 7)); fixup(t, 0);
	} else {
		mov_ri64(r, addr);
	}
	switch (how) {
	case 0: case 1: case 2:			/* jmp/call *%r */
		if (r >= 8)
			b(0x41);
		b(0xff); modrm_rr(how == 1 ? 2 : 4, r);
		break;
	case 3: case 4:				/* push %r; ret [$imm16] */
		push_r(r);
		if (how == 3) {
			b(0xc3);
		} else {
			b(0xc2); b(8 * below(3)); b(0);
		}
		break;
	default: {				/* jmp/call *(slot) */
		int c = pick_cls(K_SLOT, load_w);
		int base = gpr();
		uint64_t slot = c < 0 ? DATA_BASE : cls_addr(c);

		while (base == r)
			base = gpr();
		mov_ri64(base, slot);
		if (c == C_CODE)	/* code bytes as a target */
			slot = CODE_BASE + (below(L->pc + 1) & ~7ULL);
		if (c == C_DATA) {	/* the slot holds the target */
			rex(1, r, base); b(0x89); mem_base(r, base, 0);
		}
		if (base >= 8)
			b(0x41);
		b(0xff); mem_base(how == 5 ? 4 : 2, base, 0);
		break;
	}
	}
}

static void op_int(void)
{
	int n;

	do
		n = below(256);
	while (n == 0xff || n == 0x80);	/* 0xff: the spurious vector; 0x80: op_int80 */
	note(" $%#x", n);
	b(0xcd); b(n);
	/*
	 * For #DE, #UD, #NM, #MF and #XM kml tells INT n from the fault by RF
	 * in the frame, which QEMU's TCG does not set; there it looks at the
	 * instruction after the CD n, and one that can raise the exception
	 * itself (the next operation's DIV, UD2, FWAIT, DIVSS...) makes the
	 * INT n a fault of that instruction (docs/kernel-mode.md, residual).
	 * A NOP after it keeps the oracle exact under TCG too.
	 */
	if (n == 0 || n == 6 || n == 7 || n == 16 || n == 19)
		b(0x90);
}

static void op_trap(void)
{
	switch (below(4)) {
	case 0: b(0xcc); break;			/* int3 */
	case 1: b(0xf1); break;			/* int1 (icebp) */
	case 2: b(0x0f); b(0x0b); break;	/* ud2 */
	default: b(0xce); break;		/* into: #UD in 64-bit mode */
	}
}

static void op_div(void)
{
	int r = gpr();

	while (r == RAX || r == RDX)
		r = gpr();
	switch (below(3)) {
	case 0:		/* by zero */
		rex(1, r, r); b(0x31); modrm_rr(r, r);
		break;
	case 1:		/* INT64_MIN / -1 */
		mov_ri64(RAX, 0x8000000000000000ULL);
		rex(1, 0, 0); b(0x99);			/* cqo */
		mov_ri64(r, (uint64_t)-1);
		rex(1, 0, r); b(0xf7); modrm_rr(7, r);	/* idiv */
		define_flags();
		return;
	default:	/* whatever the registers hold */
		break;
	}
	rex(1, 0, r); b(0xf7); modrm_rr(6 + below(2), r);	/* div, idiv */
	define_flags();
}

/* x87: unmask zero-divide (1/0) or invalid (sqrt(-1)), then fwait: #MF */
static void op_x87(void)
{
	int inv = below(2);

	b(0xdb); b(0xe3);				/* fninit */
	b(0xd9); mem_abs(5, inv ? RO_FCW_IE : RO_FCW_ZE);	/* fldcw */
	b(0xd9); b(0xe8);				/* fld1 */
	if (inv) {
		b(0xd9); b(0xe0);			/* fchs */
		b(0xd9); b(0xfa);			/* fsqrt */
	} else {
		b(0xd9); b(0xee);			/* fldz */
		b(0xde); b(0xf9);			/* fdivp */
	}
	b(0x9b);					/* fwait */
}

/* SSE: unmask zero-divide (1/0) or invalid (sqrt(-1)): #XM */
static void op_sse(void)
{
	int inv = below(2);

	b(0x0f); b(0xae); mem_abs(2, inv ? RO_MXCSR_IE : RO_MXCSR_ZE);	/* ldmxcsr */
	mov_ri32(RAX, inv ? 0xbf800000 : 0x3f800000);			/* -1.0f / 1.0f */
	b(0x66); b(0x0f); b(0x6e); modrm_rr(1, RAX);			/* movd %eax, %xmm1 */
	if (inv) {
		b(0xf3); b(0x0f); b(0x51); modrm_rr(1, 1);		/* sqrtss %xmm1, %xmm1 */
	} else {
		b(0x0f); b(0x57); modrm_rr(0, 0);			/* xorps %xmm0, %xmm0 */
		b(0xf3); b(0x0f); b(0x5e); modrm_rr(1, 0);		/* divss %xmm0, %xmm1 */
	}
}

/* a pointer argument: mostly invalid, sometimes the syscall output page */
static uint64_t ptr_arg(void)
{
	if (chance(40))
		return SYSOUT_BASE + (below(PAGE / 2) & ~7ULL);
	int c = pick_cls(K_SYSCALL, ptr_w);
	return c < 0 ? 0 : cls_addr(c);
}

/* a page the system call may change: one of the data pages or the guard */
static uint64_t victim_page(void)
{
	return below(3) ? DATA_BASE + PAGE * below(DATA_SIZE / PAGE) : GUARD_BASE;
}

/*
 * SYSCALL from a harmless set.  Results that do not depend on the pid or
 * the time go into the digest; RAX is then overwritten, so that the pid
 * never reaches a register.
 */
static void op_syscall(void)
{
	uint64_t a[6] = { rnd(), rnd(), rnd(), rnd(), rnd(), rnd() };
	static const int argreg[6] = { RDI, RSI, RDX, R10, R8, R9 };
	int nr, digest = 1, nargs = 6;

	switch (below(14)) {
	case 0: nr = 39; digest = 0; break;		/* getpid */
	case 1: nr = 110; digest = 0; break;		/* getppid */
	case 2: nr = 186; digest = 0; break;		/* gettid */
	case 3: nr = 102; break;			/* getuid */
	case 4: nr = 63; a[0] = chance(50) ? SYSOUT_BASE : ptr_arg(); break;	/* uname */
	case 5: nr = below(2); a[0] = -1; a[1] = ptr_arg(); a[2] = below(64); break; /* read/write(-1) */
	case 6: nr = 3; a[0] = -1; break;		/* close(-1) */
	case 7: nr = 10; a[0] = victim_page(); a[1] = PAGE; a[2] = below(4); break; /* mprotect: NONE, R, W, RW */
	case 8: nr = 11; a[0] = victim_page(); a[1] = PAGE; break;			/* munmap */
	case 9: nr = 28; a[0] = victim_page(); a[1] = PAGE;				/* madvise */
		a[2] = below(2) ? 4 /* DONTNEED */ : below(5); break;
	case 10: nr = 35; a[0] = RO_ZERO; a[1] = chance(50) ? 0 : ptr_arg(); break;	/* nanosleep(0) */
	case 11: nr = below(2) ? 24 : 14;	/* sched_yield; rt_sigprocmask */
		a[0] = below(4);
		a[1] = chance(50) ? RO_ZERO : ptr_arg();
		a[2] = chance(50) ? 0 : ptr_arg();
		a[3] = chance(80) ? 8 : below(16);
		break;
	case 12: nr = 228; a[0] = below(12); digest = 0;	/* clock_gettime */
		/* the time must reach nothing the program reads (a sigset) */
		a[1] = chance(50) ? SYSOUT_TIME + (below(0x3f0) & ~7ULL) : ptr_arg();
		if (a[1] >= SYSOUT_BASE && a[1] < SYSOUT_BASE + PAGE)
			a[1] = SYSOUT_TIME;
		break;
	default: nr = 1000 + below(100000); break;	/* ENOSYS */
	}
	if (nr == 14 && L->thread)	/* a blocked fault signal would kill the */
		nr = 24;		/* process at a time the main thread decides */
	if (nr == 10 && (a[2] & 2))		/* PROT_WRITE alone is RW; never EXEC */
		a[2] |= 1;
	for (int k = 0; k < nargs; k++)
		mov_ri64(argreg[k], a[k]);
	mov_ri64(RAX, nr);
	b(0x0f); b(0x05);				/* syscall */
	if (digest) {
		rex(1, RAX, 0); b(0x01); mem_abs(RAX, CTRL_SUM);	/* add %rax, sum */
		rex(1, 0, 0); b(0xc1); mem_abs(0, CTRL_SUM); b(13);	/* rolq $13, sum */
	}
	mov_ri64(RAX, rnd());
}

/* INT $0x80: the 32-bit getpid() with IA32 emulation, #GP without */
static void op_int80(void)
{
	mov_ri32(RAX, 20);
	b(0xcd); b(0x80);
	mov_ri64(RAX, rnd());
}

static void gen_op(int i)
{
	int w[NKIND], k;

	for (k = 0; k < NKIND; k++)
		w[k] = avoid_kind[k] ? 0 : kind_weight[k];
	k = weighted(w, NKIND);
	note("%s", k < 0 ? "nop" : kind_name[k]);
	switch (k) {
	case K_ARITH: op_arith(); break;
	case K_LOAD: op_mem(0); break;
	case K_STORE: op_mem(1); break;
	case K_STACK: op_stack(i); break;
	case K_BRANCH: op_branch(i); break;
	case K_INT: op_int(); break;
	case K_TRAP: op_trap(); break;
	case K_DIV: op_div(); break;
	case K_X87: op_x87(); break;
	case K_SSE: op_sse(); break;
	case K_SYSCALL: op_syscall(); break;
	case K_INT80: op_int80(); break;
	default: b(0x90); break;	/* every kind avoided: nop */
	}
}

static void list_op(int i)
{
	printf("%sop %d %s:", L->thread ? "t1 " : "", i, note_buf);
	for (size_t k = L->op_start[i]; k < L->pc; k++)
		printf(" %02x", CODE[k]);
	printf("\n");
}

/*
 * The program: save RSP, set every register, the operations, then the
 * end: registers to the control page, RSP back, DF/AC/TF clear, the x87
 * and SSE state reset, return to run_code().
 */
static void generate(void)
{
	int i;

	L->pc = 0;
	store_abs(CTRL_SAVED_RSP, RSP);
	/* the return address too: "ret $16" leaves RSP above the saved one,
	 * and a call there overwrites it */
	rex(1, RAX, RSP); b(0x8b); b(0x04); b(0x24);		/* mov (%rsp), %rax */
	store_abs(CTRL_RET, RAX);
	define_flags();		/* not the flags run_code() was called with */
	for (i = 0; i < 16; i++)
		if (i != RSP)
			mov_ri64(i, rnd());
	for (i = 0; i < L->nops; i++) {
		L->op_start[i] = L->pc;
		note_buf[0] = 0;
		gen_op(i);
		if (listing)	/* the bytes before the fixups: targets are 0 */
			list_op(i);
	}
	L->op_start[L->nops] = L->pc;
	for (i = 0; i < 16; i++)
		if (i != RSP)
			store_abs(CTRL_REGS + 8 * i, i);
	load_abs(RSP, CTRL_SAVED_RSP);
	b(0xfc);						/* cld */
	b(0x9c);						/* pushfq */
	rex(1, 0, RSP); b(0x81); b(0x24); b(0x24);		/* andq $~(AC|TF), (%rsp) */
	d32(~((1u << 18) | (1u << 8)));
	b(0x9d);						/* popfq */
	b(0xdb); b(0xe3);					/* fninit */
	b(0x0f); b(0xae); mem_abs(2, RO_MXCSR_DEF);		/* ldmxcsr */
	rex(1, RSP, RSP); b(0x8d); b(0x64); b(0x24); b(8);	/* lea 8(%rsp), %rsp */
	b(0xff); mem_abs(4, CTRL_RET);				/* jmp *ret */
	for (i = 0; i < L->nfixups; i++) {
		struct fixup *f = &L->fixups[i];
		uint64_t target = L->op_start[f->op];

		if (f->rel) {
			int32_t rel = target - (f->at + 4);
			memcpy(CODE + f->at, &rel, 4);
		} else {
			target += CODE_BASE;
			memcpy(CODE + f->at, &target, 8);
		}
	}
}

/* call the program with the callee-saved registers saved around it, and
 * 64 KiB of stack between them and the program (whose "ret $16" and
 * pushes may go above the RSP it started with) */
void run_code(uint64_t entry);
asm(".text\n"
    ".globl run_code\n"
    "run_code:\n"
    "  push %rbx; push %rbp; push %r12; push %r13; push %r14; push %r15\n"
    "  sub $0x10008, %rsp\n"
    "  call *%rdi\n"
    "  add $0x10008, %rsp\n"
    "  pop %r15; pop %r14; pop %r13; pop %r12; pop %rbp; pop %rbx\n"
    "  ret\n");

/* ---- output ----------------------------------------------------------- */

/* async-signal-safe formatting into a line buffer */
struct line { char buf[256]; size_t n; };

static void put_s(struct line *l, const char *s)
{
	while (*s && l->n < sizeof(l->buf) - 1)
		l->buf[l->n++] = *s++;
}

static void put_d(struct line *l, long v)
{
	char tmp[24];
	int k = 0;
	unsigned long u = v < 0 ? -(unsigned long)v : (unsigned long)v;

	if (v < 0)
		put_s(l, "-");
	do
		tmp[k++] = '0' + u % 10;
	while (u /= 10);
	while (k--) {
		char c[2] = { tmp[k], 0 };
		put_s(l, c);
	}
}

static void put_x(struct line *l, unsigned long v)
{
	char tmp[17];
	int k = 16;

	tmp[16] = 0;
	do
		tmp[--k] = "0123456789abcdef"[v & 15];
	while (v >>= 4);
	put_s(l, "0x");
	put_s(l, tmp + k);
}

static void write_all(const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(1, p, n);
		if (w <= 0)
			break;
		p += w;
		n -= w;
	}
}

/* the line to standard output; lane 1's into its log (printed after the
 * join: the order of two threads' lines is not deterministic) */
static void emit(struct line *l)
{
	put_s(l, "\n");
	if (!L->thread) {
		write_all(l->buf, l->n);
	} else if (L->loglen + l->n <= sizeof(L->log)) {
		memcpy(L->log + L->loglen, l->buf, l->n);
		L->loglen += l->n;
	}
}

static int show_regs;	/* --regs: every register, not only their digest */

/* the end line of a lane */
static void emit_end(const char *prefix)
{
	struct line l = { .n = 0 };
	uint64_t h = 0xcbf29ce484222325ULL;

	for (int i = 0; show_regs && i < 16; i++) {
		struct line r = { .n = 0 };

		put_s(&r, prefix); put_s(&r, "reg "); put_d(&r, i);
		put_s(&r, " "); put_x(&r, CTRL->regs[i]);
		emit(&r);
	}
	for (int i = 0; i < 16; i++)
		h = (h ^ CTRL->regs[i]) * 0x100000001b3ULL;
	put_s(&l, prefix);
	put_s(&l, "end sum "); put_x(&l, CTRL->sum);
	put_s(&l, " regs "); put_x(&l, h);
	emit(&l);
}

/* ---- the signal handler ----------------------------------------------- */

static int handler_exit_code;

/* the operation whose bytes hold RIP; -1 outside the buffer */
static int op_of(uint64_t rip)
{
	if (rip < CODE_BASE || rip >= CODE_BASE + L->op_start[L->nops] + 64)
		return -1;
	size_t off = rip - CODE_BASE;
	int lo = 0, hi = L->nops;

	if (off >= L->op_start[L->nops])
		return L->nops;		/* the end */
	while (lo < hi) {		/* the last start <= off */
		int mid = (lo + hi + 1) / 2;
		if (L->op_start[mid] <= off)
			lo = mid;
		else
			hi = mid - 1;
	}
	return lo;
}

static uint64_t hrnd(void) { return splitmix64(&L->hrng); }

/*
 * The error code.  A #GP from "int $n" through a gate of DPL 0 has the
 * IDT flag and the vector: (n << 3) | 2 on hardware and from kml, but
 * (n << 4) | 2 from QEMU's TCG before 8.x (do_interrupt64() used the
 * 16-byte gate offset): both are printed as "idt(n)" when RIP is on that
 * INT n, so that the oracle still checks the vector.
 */
static void put_err(struct line *l, long trapno, unsigned long err, uint64_t rip)
{
	const uint8_t *insn = (const uint8_t *)rip;
	unsigned long n = insn[1];

	if (trapno == 13 && (err & 3) == 2 && insn[0] == 0xcd &&
	    (err == (n << 3 | 2) || err == (n << 4 | 2))) {
		put_s(l, "idt(");
		put_d(l, n);
		put_s(l, ")");
	} else {
		put_x(l, err);
	}
}

static void handler(int sig, siginfo_t *si, void *uc_)
{
	ucontext_t *uc = uc_;
	greg_t *g = uc->uc_mcontext.gregs;
	int op = op_of(g[REG_RIP]);
	struct line l = { .n = 0 };

	if (L->thread)
		put_s(&l, "t1 ");
	put_s(&l, "sig "); put_d(&l, sig);
	put_s(&l, " code "); put_d(&l, si->si_code);
	put_s(&l, " op "); put_d(&l, op);
	if (op >= 0) {
		put_s(&l, " addr "); put_x(&l, (unsigned long)si->si_addr);
		put_s(&l, " trap "); put_d(&l, g[REG_TRAPNO]);
		put_s(&l, " err ");
		put_err(&l, g[REG_TRAPNO], g[REG_ERR], g[REG_RIP]);
	}
	emit(&l);

	/* where to go on: after the operation, or after the last one that
	 * may have left the buffer */
	int next = op >= 0 ? op + 1 : (int)CTRL->last_op + 1;
	if (next > L->nops || next < 0)
		next = L->nops;
	g[REG_RIP] = CODE_BASE + L->op_start[next];
	g[REG_RSP] = CTRL->saved_rsp;

	if (++L->nsignals >= MAX_SIGNALS) {
		if (!L->thread)
			_exit(EXIT_TOO_MANY);
		/* lane 1 must not end the process: to its end, TF clear */
		g[REG_RIP] = CODE_BASE + L->op_start[L->nops];
		g[REG_EFL] &= ~(1 << 8);
		return;
	}

	uint64_t r = hrnd() % 100;
	if (r < 85 || avoid_kind[K_CTX]) {			/* resume */
		return;
	} else if (r < 98 || L->thread) {			/* change the context */
		uint64_t save = rng_state;
		int c;

		rng_state = hrnd();
		switch (hrnd() % 4) {
		case 0:		/* RIP to a class (C_CODE: any operation) */
			c = pick_cls(K_CTX, branch_w);
			if (c == C_CODE)
				g[REG_RIP] = CODE_BASE + L->op_start[below(L->nops + 1)];
			else if (c >= 0)
				g[REG_RIP] = cls_addr(c);
			break;
		case 1:		/* RSP to a class */
			c = pick_cls(K_CTX, stack_w);
			if (c >= 0)
				g[REG_RSP] = (cls_addr(c) + 0x40) & ~15ULL;
			break;
		default:	/* EFLAGS: TF, DF, AC */
			g[REG_EFL] |= (below(2) ? 1 << 8 : 0) | (below(2) ? 1 << 10 : 0) |
				      (below(2) ? 1 << 18 : 0);
			break;
		}
		rng_state = save;
	} else {
		_exit(handler_exit_code);
	}
}

/* the calling thread's alternate signal stack: its lane's */
static int alt_stack(void)
{
	stack_t ss = { .ss_sp = (void *)ALT_BASE, .ss_size = ALT_SIZE };

	return sigaltstack(&ss, NULL);
}

static void install_handler(int onstack)
{
	static const int sigs[] = { SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP };
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = handler;
	sa.sa_flags = SA_SIGINFO | (onstack ? SA_ONSTACK : 0);
	sigemptyset(&sa.sa_mask);
	for (unsigned int k = 0; k < sizeof(sigs) / sizeof(sigs[0]); k++)
		sigaction(sigs[k], &sa, NULL);
}

/* lane 1: a second thread, on its alternate stack for every signal (a
 * signal it could not take would end the process at a time of its own) */
static void *lane1(void *arg)
{
	L = arg;
	if (alt_stack()) {
		perror("kml-fuzz-case: sigaltstack");
		exit(2);
	}
	run_code(L->code);
	return NULL;
}

/* ---- setup ------------------------------------------------------------ */

static void *map_at(uint64_t addr, size_t len, int prot)
{
	void *p = mmap((void *)addr, len, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
		       -1, 0);

	if (p != (void *)addr) {
		fprintf(stderr, "kml-fuzz-case: cannot map %#lx: %s\n", (unsigned long)addr,
			strerror(errno));
		exit(2);
	}
	return p;
}

/* 5-level paging: user addresses reach above 47 bits */
static int probe_la57(void)
{
	void *want = (void *)(1UL << 47);
	void *p = mmap(want, PAGE, PROT_NONE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);

	if (p == MAP_FAILED)
		return 0;
	munmap(p, PAGE);
	return p == want;
}

/* the pages both lanes read: constants and a pattern */
static void setup_shared(void)
{
	uint64_t *q;
	size_t k;

	q = map_at(RO_BASE, PAGE, PROT_READ | PROT_WRITE);
	*(uint16_t *)RO_FCW_ZE = 0x037f & ~(1 << 2);
	*(uint16_t *)RO_FCW_IE = 0x037f & ~(1 << 0);
	*(uint32_t *)RO_MXCSR_ZE = 0x1f80 & ~(1 << 9);
	*(uint32_t *)RO_MXCSR_IE = 0x1f80 & ~(1 << 7);
	*(uint32_t *)RO_MXCSR_DEF = 0x1f80;
	for (k = (RO_PATTERN - RO_BASE) / 8; k < PAGE / 8; k++)
		q[k] = rnd();
	mprotect(q, PAGE, PROT_READ);
	q = map_at(NX_BASE, PAGE, PROT_READ | PROT_WRITE);
	for (k = 0; k < PAGE / 8; k++)
		q[k] = rnd();
	mprotect(q, PAGE, PROT_READ);
}

/* lane L's buffer and pages */
static void setup_lane(void)
{
	uint64_t *q;
	size_t k;

	L->op_start = calloc(L->nops + 1, sizeof(*L->op_start));
	L->fixups = calloc(L->nops + 1, sizeof(*L->fixups));
	L->code_size = ((size_t)L->nops * MAX_OP_BYTES + 2 * PAGE + 0xffff) & ~0xffffUL;
	map_at(CODE_BASE, L->code_size, PROT_READ | PROT_WRITE | PROT_EXEC);
	memset(CODE, 0xcc, L->code_size);			/* stray RIP: int3 */
	q = map_at(CODE_BASE + L->code_size, PAGE, PROT_READ | PROT_WRITE);	/* NX neighbour */
	for (k = 0; k < PAGE / 8; k++)
		q[k] = 0xcccccccccccccccc;
	mprotect(q, PAGE, PROT_READ);

	q = map_at(DATA_BASE, DATA_SIZE, PROT_READ | PROT_WRITE);
	for (k = 0; k < DATA_SIZE / 8; k++)
		q[k] = rnd();
	map_at(SYSOUT_BASE, PAGE, PROT_READ | PROT_WRITE);
	map_at(GUARD_BASE, PAGE, PROT_NONE);
	map_at(CTRL_BASE, PAGE, PROT_READ | PROT_WRITE);
	map_at(ALT_BASE, ALT_SIZE, PROT_READ | PROT_WRITE);
	/* UNMAPPED_BASE stays free: nothing else maps at fixed low addresses */
}

/*
 * --avoid upper-rip: everything that puts RIP in the upper half or at a
 * non-canonical address with bit 63 set (a target of those classes, or a
 * jmp/call *(mem) reading an arbitrary target from a slot).
 */
static const char UPPER_RIP[] =
	"branch@hole,branch@tophole,branch@noncanon63,ctx@hole,ctx@tophole,ctx@noncanon63,"
	"slot@ro,slot@nx,slot@codenx,slot@code";

static int parse_avoid(const char *list)
{
	char *copy = strdup(list), *save = NULL, *tok;

	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *at = strchr(tok, '@');
		int k = -1, c = -1, i;

		if (!strcmp(tok, "upper-rip")) {
			if (parse_avoid(UPPER_RIP))
				return -1;
			continue;
		}
		if (at)
			*at++ = 0;
		for (i = 0; i < NKIND; i++)
			if (!strcmp(tok, kind_name[i]))
				k = i;
		for (i = 0; i < NCLS; i++)
			if (!strcmp(at ? at : tok, cls_name[i]))
				c = i;
		if (at && k >= 0 && c >= 0)
			avoid_cls[k][c] = 1;
		else if (!at && k >= 0)
			avoid_kind[k] = 1;
		else if (!at && c >= 0)
			for (i = 0; i < NKIND; i++)
				avoid_cls[i][c] = 1;
		else {
			fprintf(stderr, "kml-fuzz-case: --avoid %s%s%s: not a kind, a class or "
				"KIND@CLASS\n", tok, at ? "@" : "", at ? at : "");
			return -1;
		}
	}
	free(copy);
	return 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: kml-fuzz-case SEED [OPS] [--avoid CLASS|KIND|KIND@CLASS[,...]] "
		"[--list] [--regs]\n"
		"       kml-fuzz-case --cpl\n  kinds:");
	for (int i = 0; i < NKIND; i++)
		fprintf(stderr, " %s", kind_name[i]);
	fprintf(stderr, "\n  classes:");
	for (int i = 0; i < NCLS; i++)
		fprintf(stderr, " %s", cls_name[i]);
	fprintf(stderr, "\n  upper-rip: %s\n", UPPER_RIP);
	exit(2);
}

int main(int argc, char **argv)
{
	const char *pos[2] = { NULL, NULL };
	int npos = 0;
	uint64_t seed;
	char *end;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--cpl")) {
			unsigned short cs;

			asm volatile("mov %%cs, %0" : "=r"(cs));
			printf("cpl %d\n", cs & 3);
			return 0;
		} else if (!strcmp(argv[i], "--regs")) {
			show_regs = 1;
		} else if (!strcmp(argv[i], "--list")) {
			listing = 1;
		} else if (!strcmp(argv[i], "--avoid") && i + 1 < argc) {
			if (parse_avoid(argv[++i]))
				return 2;
		} else if (!strncmp(argv[i], "--avoid=", 8)) {
			if (parse_avoid(argv[i] + 8))
				return 2;
		} else if (argv[i][0] == '-' || npos == 2) {
			usage();
		} else {
			pos[npos++] = argv[i];
		}
	}
	if (!npos)
		usage();
	seed = strtoull(pos[0], &end, 0);
	if (*end)
		usage();
	int nops = pos[1] ? atoi(pos[1]) : DEFAULT_OPS;
	if (nops < 1 || nops > MAX_OPS)
		usage();

	rng_state = seed;
	lanes[0] = (struct lane){ .code = 0x50000000, .grp = 0x60000000, .nops = nops };
	lanes[0].hrng = rnd();
	handler_exit_code = 10 + below(80);
	uint64_t flags = rnd();
	/* most seeds catch the signals, the others die of the first one; some
	 * use the alternate stack; some of those run a second lane in a thread */
	int catch = flags % 5 != 0, onstack = catch && (flags >> 8) % 2;
	int threaded = catch && (flags >> 9) % 4 == 0 && !avoid_kind[K_THREAD];

	la57 = probe_la57();
	L = &lanes[0];
	setup_shared();
	setup_lane();
	generate();
	if (threaded) {
		lanes[1] = (struct lane){ .code = 0x58000000, .grp = 0x68000000,
					  .nops = nops, .thread = 1 };
		lanes[1].hrng = rnd();
		L = &lanes[1];
		setup_lane();
		generate();
		L = &lanes[0];
		onstack = 1;		/* lane 1 needs it; lane 0 only if it has one */
	}
	if (listing) {
		printf("handler %s, alternate stack %s, thread %s, 5-level paging %s\n",
		       catch ? "yes" : "no", onstack && (flags >> 8) % 2 ? "yes" : "no",
		       threaded ? "yes" : "no", la57 ? "yes" : "no");
		return 0;
	}
	if (catch)
		install_handler(onstack);
	if (onstack && (flags >> 8) % 2 && alt_stack()) {
		perror("kml-fuzz-case: sigaltstack");
		return 2;
	}

	pthread_t t;
	if (threaded && pthread_create(&t, NULL, lane1, &lanes[1])) {
		fprintf(stderr, "kml-fuzz-case: pthread_create failed\n");
		return 2;
	}
	run_code(lanes[0].code);
	emit_end("");
	if (threaded) {
		pthread_join(t, NULL);
		write_all(lanes[1].log, lanes[1].loglen);
		L = &lanes[1];		/* its thread is done: the line goes out now */
		L->thread = 0;
		emit_end("t1 ");
		L = &lanes[0];
	}
	return 0;
}
