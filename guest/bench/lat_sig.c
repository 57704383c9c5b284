// SPDX-License-Identifier: GPL-2.0
/*
 * kml-bench's signal rows (lmbench's lat_sig): handler installation,
 * delivery of kill(self), and a protection fault whose SIGSEGV handler
 * steps over the faulting store.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "kml.h"
#include "lat.h"

static volatile unsigned long sig_count;

static void usr1_handler(int sig)
{
	(void)sig;
	sig_count++;
}

static int setup_usr1(struct lat_ctx *c)
{
	memset(&c->sa, 0, sizeof(c->sa));
	c->sa.sa_handler = usr1_handler;
	sigemptyset(&c->sa.sa_mask);
	if (sigaction(SIGUSR1, &c->sa, &c->old_sa))
		return lat_fail(c, "sigaction SIGUSR1");
	c->saved_sig = SIGUSR1;
	c->self = getpid();
	/* what glibc made of it (SA_RESTORER and its restorer), for libkml */
	if (syscall(SYS_rt_sigaction, SIGUSR1, NULL, &c->ksa,
		    sizeof(c->ksa.mask)))
		return lat_fail(c, "rt_sigaction SIGUSR1 (read back)");
	return 0;
}

static int run_sigaction(struct lat_ctx *c, unsigned long n)
{
	while (n--)
		if (sigaction(SIGUSR1, &c->sa, NULL))
			return lat_fail(c, "sigaction SIGUSR1");
	return 0;
}

static int run_sigaction_call(struct lat_ctx *c, unsigned long n)
{
	long r;

	while (n--) {
		r = kml_syscall4(SYS_rt_sigaction, SIGUSR1, (long)&c->ksa, 0,
				 sizeof(c->ksa.mask));
		if (r)
			return lat_kfail(c, "rt_sigaction SIGUSR1", r);
	}
	return 0;
}

static int run_sig_deliver(struct lat_ctx *c, unsigned long n)
{
	unsigned long i;

	sig_count = 0;
	for (i = 0; i < n; i++)
		if (kill(c->self, SIGUSR1))
			return lat_fail(c, "kill SIGUSR1");
	if (sig_count != n)
		return lat_failx(c, "%lu signals sent, %lu handled", n,
				 sig_count);
	return 0;
}

/*
 * The faulting store is one instruction at a known address: the SIGSEGV
 * handler moves the interrupted RIP to prot_resume, so each iteration is
 * exactly fault + signal delivery + handler + rt_sigreturn.
 */
void kb_prot_store(volatile char *p);
extern const char kb_prot_resume[];

asm(".text\n"
    ".globl kb_prot_store\n"
    ".type kb_prot_store, @function\n"
    "kb_prot_store:\n"
    "	movb $1, (%rdi)\n"
    ".globl kb_prot_resume\n"
    "kb_prot_resume:\n"
    "	ret\n"
    ".size kb_prot_store, . - kb_prot_store\n");

static char *volatile prot_page;
static volatile unsigned long prot_faults;

static void segv_handler(int sig, siginfo_t *si, void *ucv)
{
	static const char msg[] = "kml-bench: unexpected SIGSEGV\n";
	ucontext_t *uc = ucv;
	greg_t *rip = &uc->uc_mcontext.gregs[REG_RIP];
	struct sigaction dfl;

	if (si->si_addr == prot_page &&
	    *rip == (greg_t)(uintptr_t)kb_prot_store) {
		*rip = (greg_t)(uintptr_t)kb_prot_resume;
		prot_faults++;
		return;
	}
	/* not ours: die of the fault, loudly */
	if (write(STDERR_FILENO, msg, sizeof(msg) - 1) < 0)
		sig = SIGSEGV;
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	sigaction(sig, &dfl, NULL);
}

static int setup_prot(struct lat_ctx *c)
{
	c->pagesz = sysconf(_SC_PAGESIZE);
	c->page = mmap(NULL, c->pagesz, PROT_READ,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (c->page == MAP_FAILED) {
		c->page = NULL;
		return lat_fail(c, "mmap");
	}
	prot_page = c->page;
	memset(&c->sa, 0, sizeof(c->sa));
	c->sa.sa_sigaction = segv_handler;
	c->sa.sa_flags = SA_SIGINFO;
	sigemptyset(&c->sa.sa_mask);
	if (sigaction(SIGSEGV, &c->sa, &c->old_sa))
		return lat_fail(c, "sigaction SIGSEGV");
	c->saved_sig = SIGSEGV;
	return 0;
}

static int run_prot(struct lat_ctx *c, unsigned long n)
{
	unsigned long i;

	prot_faults = 0;
	for (i = 0; i < n; i++)
		kb_prot_store(c->page);
	if (prot_faults != n)
		return lat_failx(c, "%lu stores to a read-only page, %lu faults",
				 n, prot_faults);
	return 0;
}

#define NO_CALL_SIGRETURN "the signal return (rt_sigreturn) is made by " \
	"glibc's restorer with the syscall instruction"

static const struct lat_row rows[] = {
	{ .name = "sigaction", .label = "Signal handler installation",
	  .unit = "op", .setup = setup_usr1, .run = run_sigaction,
	  .run_call = run_sigaction_call },
	{ .name = "sig_deliver",
	  .label = "Signal delivery (kill self, SIGUSR1)",
	  .unit = "op", .setup = setup_usr1, .run = run_sig_deliver,
	  .no_call = NO_CALL_SIGRETURN },
	{ .name = "prot_fault",
	  .label = "Protection fault + SIGSEGV handler",
	  .unit = "op", .setup = setup_prot, .run = run_prot,
	  .no_call = NO_CALL_SIGRETURN },
};

LAT_FAMILY(lat_sig, rows);
