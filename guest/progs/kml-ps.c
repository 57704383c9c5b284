// SPDX-License-Identifier: GPL-2.0
/*
 * kml-ps: the kernel's task list, read directly from kernel memory.
 *
 * A kernel-mode process (installed in /trusted) runs on the kernel page
 * tables with SMAP off, so it can follow the kernel's own data structures
 * with ordinary loads: from init_task along task_struct.tasks (one entry
 * per process) and, for each process, along signal->thread_head /
 * task_struct.thread_node (its threads); the idle tasks of the other CPUs,
 * which are on no list, come from the per-CPU idle_threads pointers.  For every task it prints the
 * pid, the thread-group id, the state letter, the kernel stack used so far
 * and the command name.  Seed 001, section 5.4.1, re-done for Linux 6.12.
 *
 * Nothing about the layout is hand-written: addresses come from
 * /proc/kallsyms, offsets and sizes from the kernel's BTF (libkml's klib).
 * The few constants are documented where they are used:
 *   - THREAD_SIZE is __end_init_stack - __start_init_stack (the linker
 *     script places them THREAD_SIZE apart), checked against
 *     sizeof(union thread_union) when the BTF has that type;
 *   - the state letter is the first character of the kernel's own
 *     task_state_array[] entry, indexed as the kernel's task_state_index()
 *     does (its bit values, from include/linux/sched.h, are below);
 *   - STACK_END_MAGIC comes from <linux/magic.h>.
 *
 * Stack use: kernel stacks are zeroed when they are allocated (vmalloc'ed
 * with __GFP_ZERO, or memset when taken from the per-CPU cache) and the
 * lowest word holds STACK_END_MAGIC; the first non-zero word above it is
 * the deepest point the stack has ever reached.  A dynamic (demand-paged)
 * stack (vm_struct.flags has VM_DYNAMIC_STACK) has no magic and only its
 * top vm_struct.nr_pages pages are mapped: the scan starts there.  STACK is THREAD_SIZE
 * minus the zero bytes below that point (the high-water mark, as the
 * kernel's stack_not_used() computes it); "-" for a task whose stack is
 * already freed (a zombie), "?" when it could not be read.
 *
 * Races.  The walk runs without the kernel's locks (RCU or tasklist_lock
 * cannot be held across a return to this process), so a task can exit
 * and be freed while it is being read:
 *   - every link is checked before it is followed (a canonical kernel
 *     address, and the next entry's prev pointer must point back to the
 *     entry we came from -- list_del_rcu() breaks exactly that); pids
 *     must be in range;
 *   - a load from freed memory that is no longer mapped (a vfree'd stack,
 *     a slab page returned to the page allocator is still mapped) is a
 *     page fault of THIS process, not of the kernel: the kernel delivers
 *     SIGSEGV, and a handler here turns it into "retry";
 *   - on any inconsistency the whole walk starts again (at most
 *     MAX_ATTEMPTS times); the result is a snapshot that was consistent
 *     while it was taken.  Stacks are scanned after the walk, each under
 *     the same SIGSEGV guard: a stack freed meanwhile shows "?", one
 *     freed and reused shows its new owner's use.
 * A task_struct that was freed and immediately reused by a new task can
 * still pass the checks; the entry then describes the new task.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <linux/magic.h>

#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kml.h"
#include "kml_klib.h"

#define MAX_ATTEMPTS	20
#define MAX_TASKS	(1 << 22)	/* PID_MAX_LIMIT on 64-bit */
#define MAX_PID		(1 << 22)

/* task states, include/linux/sched.h (Linux 6.12) */
#define TASK_REPORT		0x7f	/* RUNNING .. PARKED, with exit_state */
#define TASK_UNINTERRUPTIBLE	0x002
#define TASK_NOLOAD		0x400
#define TASK_IDLE		(TASK_UNINTERRUPTIBLE | TASK_NOLOAD)
#define TASK_REPORT_IDLE	(TASK_REPORT + 1)
#define TASK_RTLOCK_WAIT	0x1000
#define TASK_FROZEN		0x8000
#define N_STATES		9	/* 1 + ilog2(TASK_REPORT_IDLE) */

struct field {
	const char *type, *member;
	size_t size;		/* required size, 0: any */
	long *off;
};

/* include/linux/vmalloc.h, with dynamic kernel stacks */
#define VM_DYNAMIC_STACK	0x00002000
#define PAGE_BYTES		4096UL

static struct {
	long tasks, pid, tgid, comm, state, exit_state, stack, signal,
	     thread_node, thread_head, next, prev, stack_vm_area, vm_flags,
	     vm_nr_pages;
	size_t comm_size;
} L;

struct task {
	uintptr_t addr, stack, stack_vm_area;
	int pid, tgid;
	unsigned int state, exit_state;
	char comm[64];
	long used;		/* stack bytes used; -1 none, -2 unreadable */
	int magic_ok;
};

static struct task *tasks;
static size_t ntasks, cap;
static uintptr_t init_task;
static unsigned long thread_size;
static char letters[N_STATES];

static sigjmp_buf fault_jmp;
static volatile sig_atomic_t fault_armed;
static volatile uintptr_t fault_addr;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;

	fputs("kml-ps: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static void on_segv(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	if (!fault_armed) {
		signal(sig, SIG_DFL);
		raise(sig);
		return;
	}
	fault_addr = (uintptr_t)si->si_addr;
	fault_armed = 0;
	siglongjmp(fault_jmp, 1);
}

/* ---- direct reads of kernel memory ----------------------------------- */

/*
 * An aligned upper-half address: with 5-level paging (LA57, which QEMU's
 * -cpu max has) the kernel half starts at 0xff00000000000000, the direct
 * map at 0xff11000000000000.  A non-canonical value that passes (4-level
 * paging) faults with SIGSEGV like any other bad load.
 */
static int kernel_ptr(uintptr_t p)
{
	return p >= 0xff00000000000000UL && !(p & 7);
}

static uint64_t rd(uintptr_t addr, size_t size)
{
	switch (size) {
	case 1: return *(volatile uint8_t *)addr;
	case 2: return *(volatile uint16_t *)addr;
	case 4: return *(volatile uint32_t *)addr;
	default: return *(volatile uint64_t *)addr;
	}
}

static uintptr_t rdp(uintptr_t addr)
{
	return (uintptr_t)rd(addr, 8);
}

/* ---- layout, from kallsyms and BTF ------------------------------------ */

static void resolve_layout(void)
{
	const struct field fields[] = {
		{ "task_struct", "tasks", 0, &L.tasks },
		{ "task_struct", "pid", 4, &L.pid },
		{ "task_struct", "tgid", 4, &L.tgid },
		{ "task_struct", "comm", 0, &L.comm },
		{ "task_struct", "__state", 4, &L.state },
		{ "task_struct", "exit_state", 4, &L.exit_state },
		{ "task_struct", "stack", 8, &L.stack },
		{ "task_struct", "signal", 8, &L.signal },
		{ "task_struct", "thread_node", 0, &L.thread_node },
		{ "signal_struct", "thread_head", 0, &L.thread_head },
		{ "list_head", "next", 8, &L.next },
		{ "list_head", "prev", 8, &L.prev },
		{ "task_struct", "stack_vm_area", 8, &L.stack_vm_area },
		{ "vm_struct", "flags", 8, &L.vm_flags },
		{ "vm_struct", "nr_pages", 4, &L.vm_nr_pages },
	};
	struct kml_btf_member m;
	struct kml_ksym start, end;
	long tu;
	size_t i;

	for (i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		if (kml_btf_member(NULL, fields[i].type, fields[i].member, &m))
			die("%s", kml_klib_error());
		if (fields[i].size && m.size != fields[i].size)
			die("BTF: %s.%s is %zu bytes, expected %zu",
			    fields[i].type, fields[i].member, m.size,
			    fields[i].size);
		*fields[i].off = (long)m.offset;
		if (!strcmp(fields[i].member, "comm"))
			L.comm_size = m.size;
	}
	if (L.comm_size < 2 || L.comm_size >= sizeof(tasks->comm))
		die("BTF: task_struct.comm has an unexpected size %zu",
		    L.comm_size);

	init_task = (uintptr_t)kml_ksym("init_task");
	if (!init_task)
		die("%s", kml_klib_error());
	if (kml_ksym_lookup("__start_init_stack", &start) ||
	    kml_ksym_lookup("__end_init_stack", &end))
		die("%s (needed for THREAD_SIZE)", kml_klib_error());
	if (end.addr <= start.addr || (end.addr - start.addr) % 4096)
		die("kallsyms: __end_init_stack - __start_init_stack = %ld is "
		    "not a stack size", (long)(end.addr - start.addr));
	thread_size = end.addr - start.addr;
	tu = kml_btf_sizeof(NULL, "union thread_union");
	if (tu > 0 && (unsigned long)tu != thread_size)
		die("THREAD_SIZE: kallsyms says %lu, BTF sizeof(union "
		    "thread_union) %ld", thread_size, tu);
}

/* The kernel's own state names: task_state_array[i][0]. */
static void resolve_letters(void)
{
	uintptr_t arr = (uintptr_t)kml_ksym("task_state_array");
	int i;

	if (!arr)
		die("%s", kml_klib_error());
	for (i = 0; i < N_STATES; i++) {
		uintptr_t s = rdp(arr + 8 * (uintptr_t)i);
		char c, sp, par;

		if (!kernel_ptr(s & ~7UL))
			die("task_state_array[%d] = %#lx is not a kernel "
			    "pointer", i, (unsigned long)s);
		c = (char)rd(s, 1);
		sp = (char)rd(s + 1, 1);
		par = (char)rd(s + 2, 1);
		if (!isalpha((unsigned char)c) || sp != ' ' || par != '(')
			die("task_state_array[%d] is not \"X (name)\"", i);
		letters[i] = c;
	}
}

/* task_state_index() of include/linux/sched.h */
static char state_letter(unsigned int state, unsigned int exit_state)
{
	unsigned int s = (state | exit_state) & TASK_REPORT;
	int idx = 0;

	if ((state & TASK_IDLE) == TASK_IDLE)
		s = TASK_REPORT_IDLE;
	if ((state & TASK_RTLOCK_WAIT) || (state & TASK_FROZEN))
		s = TASK_UNINTERRUPTIBLE;
	while (s) {		/* fls() */
		idx++;
		s >>= 1;
	}
	return idx < N_STATES ? letters[idx] : '?';
}

/* ---- the walk ---------------------------------------------------------- */

static const char *snapshot(uintptr_t t)
{
	struct task *e;
	size_t i;

	if (ntasks == cap) {
		size_t ncap = cap ? cap * 2 : 256;
		struct task *n;

		if (ncap > MAX_TASKS)
			return "more tasks than PID_MAX_LIMIT (a loop?)";
		n = realloc(tasks, ncap * sizeof(*n));
		if (!n)
			die("out of memory");
		tasks = n;
		cap = ncap;
	}
	e = &tasks[ntasks];
	memset(e, 0, sizeof(*e));
	e->addr = t;
	e->pid = (int)rd(t + L.pid, 4);
	e->tgid = (int)rd(t + L.tgid, 4);
	e->state = (unsigned int)rd(t + L.state, 4);
	e->exit_state = (unsigned int)rd(t + L.exit_state, 4);
	e->stack = rdp(t + L.stack);
	e->stack_vm_area = rdp(t + L.stack_vm_area);
	for (i = 0; i < L.comm_size; i++)
		e->comm[i] = (char)rd(t + L.comm + i, 1);
	e->comm[L.comm_size - 1] = '\0';
	if (e->pid < 0 || e->pid >= MAX_PID || e->tgid < 0 || e->tgid >= MAX_PID)
		return "pid out of range";
	if (e->stack && !kernel_ptr(e->stack))
		return "task_struct.stack is not a kernel pointer";
	ntasks++;
	return NULL;
}

/*
 * Follow one circular list from head; visit(entry) for each entry (the
 * list_head address minus off).  NULL or what went wrong.
 */
static const char *walk_list(uintptr_t head, long off,
			     const char *(*visit)(uintptr_t))
{
	uintptr_t prev = head, node;
	size_t n = 0;
	const char *why;

	if (!kernel_ptr(head))
		return "list head is not a kernel pointer";
	for (node = rdp(head + L.next); node != head; node = rdp(node + L.next)) {
		if (!kernel_ptr(node))
			return "list link is not a kernel pointer";
		if (rdp(node + L.prev) != prev)
			return "list changed under the walk (an entry was removed)";
		why = visit(node - off);
		if (why)
			return why;
		if (++n > MAX_TASKS)
			return "list does not return to its head (a loop?)";
		prev = node;
	}
	return NULL;
}

static const char *visit_process(uintptr_t p)
{
	uintptr_t sig = rdp(p + L.signal);

	if (!kernel_ptr(sig))
		return "task_struct.signal is not a kernel pointer";
	return walk_list(sig + L.thread_head, L.thread_node, snapshot);
}

/*
 * The idle tasks of the other CPUs (pid 0, "swapper/N") are on no list:
 * they come from the per-CPU pointer idle_threads (kernel/smpboot.c).  A
 * per-CPU symbol's kallsyms address is its offset in the per-CPU area;
 * CPU n's copy is at __per_cpu_offset[n] + that offset.
 */
static uintptr_t idle_threads, per_cpu_offset, nr_cpu_ids;

static void resolve_idle(void)
{
	idle_threads = (uintptr_t)kml_ksym("idle_threads");
	per_cpu_offset = (uintptr_t)kml_ksym("__per_cpu_offset");
	nr_cpu_ids = (uintptr_t)kml_ksym("nr_cpu_ids");
	if (!idle_threads || !per_cpu_offset || !nr_cpu_ids)
		die("%s (needed for the idle tasks)", kml_klib_error());
}

static const char *visit_idle(void)
{
	unsigned int cpus = (unsigned int)rd(nr_cpu_ids, 4), cpu;
	const char *why;

	if (cpus > 8192)
		return "nr_cpu_ids out of range";
	for (cpu = 0; cpu < cpus; cpu++) {
		uintptr_t t = rdp(rdp(per_cpu_offset + 8 * cpu) + idle_threads);

		if (!t || t == init_task)	/* not booted; CPU 0's is init_task */
			continue;
		if (!kernel_ptr(t))
			return "idle_threads entry is not a kernel pointer";
		why = snapshot(t);
		if (why)
			return why;
	}
	return NULL;
}

static const char *walk_once(void)
{
	const char *why;

	ntasks = 0;
	/* init_task heads the process list and is not an entry of it */
	why = visit_process(init_task);
	if (!why)
		why = visit_idle();
	if (why)
		return why;
	return walk_list(init_task + L.tasks, L.tasks, visit_process);
}

static void walk(void)
{
	static char why[160];
	volatile int attempt;

	for (attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
		const char *r;

		if (sigsetjmp(fault_jmp, 1)) {
			snprintf(why, sizeof(why), "page fault at %#lx",
				 (unsigned long)fault_addr);
			continue;
		}
		fault_armed = 1;
		r = walk_once();
		fault_armed = 0;
		if (!r)
			return;
		snprintf(why, sizeof(why), "%s", r);
		sched_yield();
	}
	die("the task list kept changing: %d attempts, the last failed with: "
	    "%s", MAX_ATTEMPTS, why);
}

/* High-water mark of one kernel stack (see the top of the file). */
static void scan_stack(struct task *t)
{
	volatile uintptr_t base = t->stack;
	size_t words = thread_size / 8, i;

	t->used = -1;
	if (!base)
		return;
	if (sigsetjmp(fault_jmp, 1)) {
		t->used = -2;
		return;
	}
	fault_armed = 1;
	if (t->stack_vm_area &&
	    (rd(t->stack_vm_area + L.vm_flags, 8) & VM_DYNAMIC_STACK)) {
		/* Only the top vm_struct.nr_pages pages are mapped, no magic */
		i = (thread_size - rd(t->stack_vm_area + L.vm_nr_pages, 4) *
		     PAGE_BYTES) / 8;
		t->magic_ok = 1;
	} else {
		t->magic_ok = rd(base, 8) == STACK_END_MAGIC;
		i = 1;
	}
	for (; i < words && !rd(base + 8 * i, 8); i++)
		;
	fault_armed = 0;
	t->used = (long)(thread_size - 8 * i);
}

static void print_comm(const char *c)
{
	for (; *c; c++)
		putchar(isprint((unsigned char)*c) ? *c : '?');
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_sigaction = on_segv, .sa_flags = SA_SIGINFO };
	size_t i, idle = 0, procs = 0;

	if (argc > 1) {
		fprintf(stderr, "usage: %s\n"
			"Prints every task of the kernel's task list, read "
			"directly from kernel memory:\n"
			"PID, TGID, state, kernel stack bytes used, command.  "
			"Runs in kernel mode only (from /trusted, as root).\n",
			argv[0]);
		return 2;
	}
	if (!kml_kernel_mode()) {
		fprintf(stderr, "kml-ps: not running in kernel mode (CPL 3): it "
			"reads kernel memory directly, which only a kernel-mode "
			"process can do; run it from /trusted as root\n");
		return 2;
	}
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGSEGV, &sa, NULL) || sigaction(SIGBUS, &sa, NULL))
		die("sigaction: %s", strerror(errno));

	resolve_layout();
	resolve_letters();
	resolve_idle();
	walk();
	for (i = 0; i < ntasks; i++) {
		scan_stack(&tasks[i]);
		idle += tasks[i].pid == 0;
		procs += tasks[i].pid && tasks[i].pid == tasks[i].tgid;
	}

	printf("kml-ps: %zu tasks (%zu idle, %zu processes, %zu other threads) "
	       "from init_task at %#lx; kernel stacks of %lu bytes (THREAD_SIZE "
	       "= __end_init_stack - __start_init_stack)\n", ntasks, idle, procs,
	       ntasks - idle - procs, (unsigned long)init_task, thread_size);
	printf("%7s %7s %s %6s %s\n", "PID", "TGID", "S", "STACK", "COMM");
	for (i = 0; i < ntasks; i++) {
		const struct task *t = &tasks[i];

		printf("%7d %7d %c ", t->pid, t->tgid,
		       state_letter(t->state, t->exit_state));
		if (t->used == -1)
			printf("%6s ", "-");
		else if (t->used == -2)
			printf("%6s ", "?");
		else
			printf("%6ld%s", t->used, t->magic_ok ? " " : "!");
		print_comm(t->comm);
		putchar('\n');
	}
	for (i = 0; i < ntasks; i++)
		if (tasks[i].used >= 0 && !tasks[i].magic_ok) {
			printf("!: the lowest word of the stack is not "
			       "STACK_END_MAGIC (overflowed, or reused)\n");
			break;
		}
	return 0;
}
