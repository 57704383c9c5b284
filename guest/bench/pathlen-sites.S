/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The measured instructions of kml-pathlen: one function per operation
 * and system-call path, each entering the kernel at a global label
 * pl_OP_PATH_at (the `syscall` instruction, or the `call` of
 * __vdso_kml_syscall) and resuming at pl_OP_PATH_end.  The host sets its
 * breakpoint at _at and counts the instructions executed until the CPU
 * reaches _end; every site has its own address, so a breakpoint hit says
 * which operation it is.
 *
 * C prototype of each: long pl_OP_PATH(long a1, long a2, long a3, long a4).
 * The C argument registers rdi, rsi, rdx are the system call's first
 * three (ONE moves a4, in rcx, to r10, the fourth); the
 * function returns the kernel's result (-errno on error).  The call path
 * jumps to pathlen_entry (the address of __vdso_kml_syscall, set by
 * kml-pathlen.c); `syscall` and that function preserve every register but
 * rax, rcx and r11.
 */
	.text

/* Enter the kernel (path: syscall or call), at global label `at` if given */
.macro ENTER path, at
	.ifc \path, call
	movq	pathlen_entry(%rip), %r11
	.endif
	.ifnb \at
	.globl	\at
\at\():
	.endif
	.ifc \path, call
	call	*%r11
	.else
	syscall
	.endif
.endm

.macro FUNC name
	.globl	\name
	.type	\name, @function
	.p2align 6
\name\():
.endm

.macro END name
	.globl	\name\()_end
\name\()_end:
.endm

/* One system call `nr` with up to four arguments (the fourth, a4 in rcx, goes to r10) */
.macro ONE op, nr, path
FUNC	pl_\op\()_\path
	movl	$\nr, %eax
	movq	%rcx, %r10
	ENTER	\path, pl_\op\()_\path\()_at
END	pl_\op\()_\path
	ret
	.size	pl_\op\()_\path, . - pl_\op\()_\path
.endm

/*
 * Pipe round trip: write(a1, a3, 1), then read(a2, a3, 1).  Returns the
 * read's result, or the write's when that was not 1.
 */
.macro RTT path, op=pipe_rtt
FUNC	pl_\op\()_\path
	movq	%rsi, %r8		/* the read end */
	movq	%rdx, %rsi		/* the buffer */
	movl	$1, %edx
	movl	$1, %eax		/* write */
	ENTER	\path, pl_\op\()_\path\()_at
	movq	%rax, %r9
	movq	%r8, %rdi
	xorl	%eax, %eax		/* read */
	ENTER	\path
END	pl_\op\()_\path
	cmpq	$1, %r9
	cmovneq	%r9, %rax
	ret
	.size	pl_\op\()_\path, . - pl_\op\()_\path
.endm

/*
 * First touch of a fresh anonymous page: one store to a1 (kml-pathlen.c
 * hands each call a page not touched since its mmap or MADV_DONTNEED).
 * The path is the same for both paths (no system call); each has a site
 * of its own all the same.  Returns 0.
 */
.macro FAULT path, op=fault
FUNC	pl_\op\()_\path
	.globl	pl_\op\()_\path\()_at
pl_\op\()_\path\()_at:
	movb	$1, (%rdi)
END	pl_\op\()_\path
	xorl	%eax, %eax
	ret
	.size	pl_\op\()_\path, . - pl_\op\()_\path
.endm

/*
 * open + close: openat(a1, a2, a3) (mode 0), then close() of what it
 * returned.  Returns close's result (0; -EBADF when openat failed).
 */
.macro OPENCLOSE path
FUNC	pl_open_close_\path
	xorl	%r10d, %r10d
	movl	$257, %eax		/* openat */
	ENTER	\path, pl_open_close_\path\()_at
	movq	%rax, %rdi
	movl	$3, %eax		/* close */
	ENTER	\path
END	pl_open_close_\path
	ret
	.size	pl_open_close_\path, . - pl_open_close_\path
.endm

/*
 * select as glibc 2.36 makes it: pselect6(a1, readfds a2, NULL, NULL,
 * timeout a3, NULL sigmask).  Returns the number of ready fds.
 */
.macro SEL op, path
FUNC	pl_\op\()_\path
	movq	%rdx, %r8		/* the timeout (zero) */
	xorl	%edx, %edx
	xorl	%r10d, %r10d
	xorl	%r9d, %r9d
	movl	$270, %eax		/* pselect6 */
	ENTER	\path, pl_\op\()_\path\()_at
END	pl_\op\()_\path
	ret
	.size	pl_\op\()_\path, . - pl_\op\()_\path
.endm

/*
 * fork + _exit + wait, or fork + execve + wait: clone(SIGCHLD) as glibc's
 * fork() makes it (without glibc's bookkeeping), then in the parent
 * wait4(pid, a1, 0, NULL); the path ends after wait4 returns.  The child
 * makes exit_group(0) at once (fork_exit) or execve(a2[0], a2, a2 + 1)
 * (a2: {path, NULL}; exit_group(127) if that fails).  Returns the wait
 * status (0: the child exited with 0), or the clone's or wait4's result
 * when that was not the child's pid.
 */
.macro FORK op, path, exec
FUNC	pl_\op\()_\path
	pushq	%rbx
	pushq	%r12
	pushq	%r13
	movq	%rdi, %r12		/* where the status goes */
	movq	%rsi, %r13		/* exec: {path, NULL} */
	movl	$17, %edi		/* SIGCHLD */
	xorl	%esi, %esi
	xorl	%edx, %edx
	xorl	%r10d, %r10d
	xorl	%r8d, %r8d
	movl	$56, %eax		/* clone */
	ENTER	\path, pl_\op\()_\path\()_at
	testq	%rax, %rax
	jz	2f
	js	3f
	movq	%rax, %rbx
	movq	%rax, %rdi
	movq	%r12, %rsi
	xorl	%edx, %edx
	xorl	%r10d, %r10d
	movl	$61, %eax		/* wait4 */
	ENTER	\path
END	pl_\op\()_\path
	cmpq	%rax, %rbx
	jne	3f
	movl	(%r12), %eax
3:	popq	%r13
	popq	%r12
	popq	%rbx
	ret
2:	/* the child */
	.ifnb	\exec
	movq	(%r13), %rdi
	movq	%r13, %rsi
	leaq	8(%r13), %rdx
	movl	$59, %eax		/* execve */
	ENTER	\path
	movl	$127, %edi
	.else
	xorl	%edi, %edi
	.endif
	movl	$231, %eax		/* exit_group */
	ENTER	\path
	ud2
	.size	pl_\op\()_\path, . - pl_\op\()_\path
.endm

.irp path, syscall, call
	ONE	getppid, 110, \path
	ONE	read, 0, \path
	ONE	write, 1, \path
	ONE	futex_wake, 202, \path
	RTT	\path
	RTT	\path, xpipe_rtt	/* blocking pipes, a partner of the other mode echoes */
	FAULT	\path
	ONE	stat, 262, \path		/* newfstatat(AT_FDCWD, path, buf, 0) */
	ONE	fstat, 262, \path		/* newfstatat(fd, "", buf, AT_EMPTY_PATH) */
	OPENCLOSE \path
	SEL	select_file_10, \path
	SEL	select_file_100, \path
	SEL	select_tcp_10, \path
	SEL	select_tcp_100, \path
	ONE	sig_install, 13, \path	/* rt_sigaction(SIGUSR2, act, NULL, 8) */
	ONE	sig_deliver, 62, \path	/* kill(self, SIGUSR1): handler, rt_sigreturn */
	FAULT	\path, prot_fault		/* store to a read-only page: SIGSEGV handler */
	RTT	\path, unix_rtt		/* AF_UNIX socketpair, non-blocking */
	FORK	fork_exit, \path
	FORK	fork_exec, \path, exec
.endr

/*
 * --path kfunc: the kernel function behind a handle, called through
 * __vdso_kml_kcall (address in pathlen_kentry): handle in eax (pl_h_OP,
 * opened by kml-pathlen.c), arguments in rdi, rsi, rdx, r10.  That
 * function clobbers the C ABI's caller-saved registers and returns a
 * status in rdx, returned here instead of the value when it is not 0.
 * getppid calls __do_sys_getppid, read and write ksys_read and
 * ksys_write, futex_wake futex_wake(uaddr, FLAGS_SIZE_32, 1,
 * FUTEX_BITSET_MATCH_ANY): the same work as the system calls.
 */
.macro KENTER op, at
	movl	pl_h_\op(%rip), %eax
	movq	pathlen_kentry(%rip), %r11
	.ifnb \at
	.globl	\at
\at\():
	.endif
	call	*%r11
.endm

.macro KONE op
FUNC	pl_\op\()_kfunc
	movl	$-1, %r10d
	KENTER	\op, pl_\op\()_kfunc_at
END	pl_\op\()_kfunc
	testq	%rdx, %rdx
	cmovnzq	%rdx, %rax
	ret
	.size	pl_\op\()_kfunc, . - pl_\op\()_kfunc
.endm

	KONE	getppid
	KONE	read
	KONE	write
	KONE	futex_wake

/* The round trip, the values kept in callee-saved registers */
FUNC	pl_pipe_rtt_kfunc
	pushq	%rbx
	pushq	%r12
	pushq	%r13
	movq	%rsi, %rbx		/* the read end */
	movq	%rdx, %r12		/* the buffer */
	movq	%rdx, %rsi
	movl	$1, %edx
	KENTER	write, pl_pipe_rtt_kfunc_at
	movq	%rax, %r13
	movq	%rbx, %rdi
	movq	%r12, %rsi
	movl	$1, %edx
	KENTER	read
END	pl_pipe_rtt_kfunc
	cmpq	$1, %r13
	cmovneq	%r13, %rax
	popq	%r13
	popq	%r12
	popq	%rbx
	ret
	.size	pl_pipe_rtt_kfunc, . - pl_pipe_rtt_kfunc

	.section .note.GNU-stack, "", @progbits
