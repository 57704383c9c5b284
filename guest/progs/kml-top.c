// SPDX-License-Identifier: GPL-2.0
/*
 * kml-top: a kernel-library monitor that refreshes like top(1).
 *
 * Every interval it lists the tasks that used the most CPU time since the
 * last refresh, with what only the kernel knows about them: the wait
 * channel (the kernel function a sleeping task is blocked in), how deep
 * its kernel stack is right now (the stack pointer saved at its last
 * switch) and, with dynamic kernel stacks, how many of the stack's pages
 * are mapped.  It is a kernel-mode process (installed in /trusted) and
 * gets all of it by calling kernel functions through handles
 * (kml_kfunc_open()/kml_kfunc_call(), the cheap kernel calls) and by reading
 * task_struct fields directly, with the offsets from the kernel's BTF:
 *
 *   find_get_task_by_vpid(pid)	the task, with a reference held
 *   get_wchan(task)			its wait channel (0 while running)
 *   sprint_symbol_no_offset(buf, a)	the channel's function name
 *   __put_task_struct(task)		put_task_struct() is inline: the
 *					reference is dropped here with an
 *					atomic decrement of task->usage, and
 *					__put_task_struct() called if that
 *					was the last one, as the inline does
 *
 * The tasks come from /proc (every thread group's leader).  Fields that
 * live outside the task_struct (the stack's vm_struct, which is freed
 * when the task exits even while the reference is held) are read with
 * kml_kread(), which cannot fault.
 *
 * Usage: kml-top [-n REFRESHES] [-d SECONDS] [-m LINES] [-b]
 *   -n  refreshes before exiting (default: until interrupted)
 *   -d  seconds between refreshes (default 1.0)
 *   -m  tasks listed per refresh (default 20)
 *   -b  batch mode: no screen clearing (the default when stdout is not
 *       a terminal)
 * Exit status: 0, 1 when a kernel call was refused or a layout is
 * missing, 2 for a usage error or when not in kernel mode.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "kml.h"
#include "kml_klib.h"

#define MAX_TASKS	4096
#define PAGE_BYTES	4096UL
/* task states, include/linux/sched.h (Linux 6.12) */
#define TASK_INTERRUPTIBLE	0x001
#define TASK_UNINTERRUPTIBLE	0x002
#define TASK_STOPPED_BITS	0x004
#define TASK_TRACED_BITS	0x008
#define TASK_NOLOAD		0x400
#define TASK_IDLE		(TASK_UNINTERRUPTIBLE | TASK_NOLOAD)

static struct {
	long pid, comm, state, usage, runtime, stack, sp, stack_vm_area,
	     vm_size, vm_nr_pages;
	size_t comm_size;
} L;

static int h_find, h_wchan, h_symbol, h_put;

struct sample {
	int pid;
	unsigned int state;
	uint64_t runtime;		/* se.sum_exec_runtime, ns */
	uint64_t delta;			/* since the last refresh */
	long depth;			/* kernel stack bytes in use, -1: unknown */
	long mapped, size;		/* stack pages mapped, stack bytes */
	char comm[64];
	char wchan[128];
};

static struct sample now[MAX_TASKS], before[MAX_TASKS];
static size_t n_now, n_before;

static void die(int code, const char *fmt, ...)
	__attribute__((format(printf, 2, 3), noreturn));
static void die(int code, const char *fmt, ...)
{
	va_list ap;

	fputs("kml-top: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(code);
}

static long member(const char *type, const char *name, size_t size)
{
	struct kml_btf_member m;

	if (kml_btf_member(NULL, type, name, &m))
		die(1, "%s", kml_klib_error());
	if (size && m.size != size)
		die(1, "BTF: %s.%s is %zu bytes, expected %zu", type, name,
		    m.size, size);
	if (!strcmp(name, "comm"))
		L.comm_size = m.size;
	return (long)m.offset;
}

static int kfopen(const char *name)
{
	int h = kml_kfunc_open(name);

	if (h < 0)
		die(1, "kml_kfunc_open(%s): %s", name, kml_kfunc_strerror(h));
	return h;
}

static unsigned long kcall(int h, const char *what, unsigned long a1,
			   unsigned long a2)
{
	unsigned long r = 0;
	int e = kml_kfunc_call(h, &r, a1, a2);

	if (e)
		die(1, "kernel call of %s: %s", what, kml_kfunc_strerror(e));
	return r;
}

static void setup(void)
{
	L.pid = member("task_struct", "pid", 4);
	L.comm = member("task_struct", "comm", 0);
	L.state = member("task_struct", "__state", 4);
	L.usage = member("task_struct", "usage", 4);
	L.runtime = member("task_struct", "se.sum_exec_runtime", 8);
	L.stack = member("task_struct", "stack", 8);
	L.sp = member("task_struct", "thread.sp", 8);
	L.stack_vm_area = member("task_struct", "stack_vm_area", 8);
	L.vm_size = member("vm_struct", "size", 8);
	L.vm_nr_pages = member("vm_struct", "nr_pages", 4);
	if (L.comm_size < 2 || L.comm_size > sizeof(now->comm))
		die(1, "BTF: task_struct.comm has an unexpected size %zu",
		    L.comm_size);
	h_find = kfopen("find_get_task_by_vpid");
	h_wchan = kfopen("get_wchan");
	h_symbol = kfopen("sprint_symbol_no_offset");
	h_put = kfopen("__put_task_struct");
}

static uint64_t rd(uintptr_t addr, size_t size)
{
	switch (size) {
	case 4: return *(volatile uint32_t *)addr;
	default: return *(volatile uint64_t *)addr;
	}
}

/* put_task_struct(), which is inline: refcount_dec_and_test() + free */
static void put_task(uintptr_t task)
{
	int *usage = (int *)(task + (uintptr_t)L.usage);

	if (__atomic_sub_fetch(usage, 1, __ATOMIC_RELEASE) == 0) {
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		kcall(h_put, "__put_task_struct", task, 0);
	}
}

/* The kernel's view of one pid into s; 0, or -1 if it is gone. */
static int sample_task(int pid, struct sample *s)
{
	uintptr_t task, vm, stack;
	unsigned long wchan, sp;
	unsigned int nr_pages;
	unsigned long size;

	task = kcall(h_find, "find_get_task_by_vpid", (unsigned long)pid, 0);
	if (!task)
		return -1;
	memset(s, 0, sizeof(*s));
	s->pid = (int)rd(task + L.pid, 4);
	s->state = (unsigned int)rd(task + L.state, 4);
	s->runtime = rd(task + L.runtime, 8);
	memcpy(s->comm, (const void *)(task + L.comm), L.comm_size);
	s->comm[L.comm_size - 1] = '\0';
	s->depth = s->mapped = s->size = -1;

	stack = (uintptr_t)rd(task + L.stack, 8);
	vm = (uintptr_t)rd(task + L.stack_vm_area, 8);
	sp = (unsigned long)rd(task + L.sp, 8);
	/* the stack and its vm_struct go when the task exits: kml_kread */
	if (stack && vm && !kml_kread(&size, (void *)(vm + L.vm_size), sizeof(size)) &&
	    !kml_kread(&nr_pages, (void *)(vm + L.vm_nr_pages), sizeof(nr_pages)) &&
	    size > PAGE_BYTES) {
		s->size = (long)(size - PAGE_BYTES);	/* without the guard page */
		s->mapped = nr_pages;
		/* the saved RSP of a task that is not running now */
		if (s->state && sp > stack && sp <= stack + (unsigned long)s->size)
			s->depth = (long)(stack + (unsigned long)s->size - sp);
	}

	wchan = kcall(h_wchan, "get_wchan", task, 0);
	if (wchan)
		kcall(h_symbol, "sprint_symbol_no_offset", (unsigned long)s->wchan,
		      wchan);
	else
		strcpy(s->wchan, "-");
	put_task(task);
	return 0;
}

static void take_samples(void)
{
	DIR *d = opendir("/proc");
	struct dirent *e;

	if (!d)
		die(1, "/proc: %s", strerror(errno));
	n_now = 0;
	while ((e = readdir(d)) && n_now < MAX_TASKS) {
		char *end;
		long pid = strtol(e->d_name, &end, 10);

		if (!isdigit((unsigned char)e->d_name[0]) || *end || pid <= 0)
			continue;
		if (sample_task((int)pid, &now[n_now]) == 0)
			n_now++;
	}
	closedir(d);
}

static void deltas(void)
{
	size_t i, j;

	for (i = 0; i < n_now; i++) {
		now[i].delta = now[i].runtime;	/* new since the last refresh */
		for (j = 0; j < n_before; j++)
			if (before[j].pid == now[i].pid) {
				now[i].delta = now[i].runtime - before[j].runtime;
				break;
			}
	}
}

static int by_delta(const void *a, const void *b)
{
	const struct sample *x = a, *y = b;

	if (x->delta != y->delta)
		return x->delta < y->delta ? 1 : -1;
	return x->pid - y->pid;
}

static char state_letter(unsigned int st)
{
	if (st == 0)
		return 'R';
	if ((st & TASK_IDLE) == TASK_IDLE)
		return 'I';
	if (st & TASK_INTERRUPTIBLE)
		return 'S';
	if (st & TASK_UNINTERRUPTIBLE)
		return 'D';
	if (st & (TASK_STOPPED_BITS | TASK_TRACED_BITS))
		return 'T';
	return '?';
}

static void print(double interval_ns, int lines, int clear, int refresh)
{
	size_t i;

	if (clear)
		fputs("\033[H\033[2J", stdout);
	printf("kml-top: refresh %d, %zu tasks, pid %d (CPL %d); CPU%% of %.1f s\n",
	       refresh, n_now, getpid(), kml_kernel_mode() ? 0 : 3,
	       interval_ns / 1e9);
	printf("%7s %-16s %s %6s %8s %10s  %s\n", "PID", "COMMAND", "S", "CPU%",
	       "KSTACK", "MAPPED", "WCHAN");
	for (i = 0; i < n_now && (int)i < lines; i++) {
		const struct sample *s = &now[i];
		char depth[24] = "-", mapped[48] = "-";

		if (s->depth >= 0)
			snprintf(depth, sizeof(depth), "%ld", s->depth);
		if (s->mapped >= 0)
			snprintf(mapped, sizeof(mapped), "%ld/%ldK",
				 s->mapped * (long)(PAGE_BYTES / 1024), s->size / 1024);
		printf("%7d %-16s %c %6.1f %8s %10s  %s\n", s->pid, s->comm,
		       state_letter(s->state),
		       interval_ns > 0 ? 100.0 * (double)s->delta / interval_ns : 0.0,
		       depth, mapped, s->wchan);
	}
	fflush(stdout);
}

static double mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	int refreshes = -1, lines = 20, batch = !isatty(STDOUT_FILENO), ch, r;
	double delay = 1.0, t0, t1;
	char *end;

	while ((ch = getopt(argc, argv, "n:d:m:bh")) != -1) {
		switch (ch) {
		case 'n':
			refreshes = (int)strtol(optarg, &end, 10);
			if (*end || refreshes < 1)
				die(2, "-n: a number of refreshes >= 1, not '%s'", optarg);
			break;
		case 'd':
			delay = strtod(optarg, &end);
			if (*end || !(delay >= 0.01 && delay <= 3600))
				die(2, "-d: seconds in [0.01, 3600], not '%s'", optarg);
			break;
		case 'm':
			lines = (int)strtol(optarg, &end, 10);
			if (*end || lines < 1)
				die(2, "-m: a number of lines >= 1, not '%s'", optarg);
			break;
		case 'b':
			batch = 1;
			break;
		default:
			fprintf(stderr, "usage: %s [-n REFRESHES] [-d SECONDS] "
				"[-m LINES] [-b]\n", argv[0]);
			return 2;
		}
	}
	if (optind < argc)
		die(2, "unexpected argument '%s'", argv[optind]);
	if (!kml_kernel_mode())
		die(2, "not running in kernel mode (CPL 3): the kernel functions "
		    "can only be called by a kernel-mode process; run it from "
		    "/trusted as root");
	/* kernel functions write into this process's memory (the names) */
	if (mlockall(MCL_CURRENT | MCL_FUTURE))
		die(1, "mlockall: %s", strerror(errno));
	setup();

	take_samples();
	t0 = mono_ns();
	for (r = 1; refreshes < 0 || r <= refreshes; r++) {
		struct timespec ts = { (time_t)delay,
				       (long)((delay - (time_t)delay) * 1e9) };

		memcpy(before, now, n_now * sizeof(now[0]));
		n_before = n_now;
		nanosleep(&ts, NULL);
		take_samples();
		t1 = mono_ns();
		deltas();
		qsort(now, n_now, sizeof(now[0]), by_delta);
		print(t1 - t0, lines, !batch, r);
		t0 = t1;
	}
	return 0;
}
