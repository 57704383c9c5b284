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
 * C prototype of each: long pl_OP_PATH(long a1, long a2, long a3).  The C
 * argument registers rdi, rsi, rdx are the system call's first three; the
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

/* One system call `nr` with up to three arguments (r10 = 0: futex timeout) */
.macro ONE op, nr, path
FUNC	pl_\op\()_\path
	movl	$\nr, %eax
	xorl	%r10d, %r10d
	ENTER	\path, pl_\op\()_\path\()_at
END	pl_\op\()_\path
	ret
	.size	pl_\op\()_\path, . - pl_\op\()_\path
.endm

/*
 * Pipe round trip: write(a1, a3, 1), then read(a2, a3, 1).  Returns the
 * read's result, or the write's when that was not 1.
 */
.macro RTT path
FUNC	pl_pipe_rtt_\path
	movq	%rsi, %r8		/* the read end */
	movq	%rdx, %rsi		/* the buffer */
	movl	$1, %edx
	movl	$1, %eax		/* write */
	ENTER	\path, pl_pipe_rtt_\path\()_at
	movq	%rax, %r9
	movq	%r8, %rdi
	xorl	%eax, %eax		/* read */
	ENTER	\path
END	pl_pipe_rtt_\path
	cmpq	$1, %r9
	cmovneq	%r9, %rax
	ret
	.size	pl_pipe_rtt_\path, . - pl_pipe_rtt_\path
.endm

.irp path, syscall, call
	ONE	getppid, 110, \path
	ONE	read, 0, \path
	ONE	write, 1, \path
	ONE	futex_wake, 202, \path
	RTT	\path
.endr

	.section .note.GNU-stack, "", @progbits
