/* SPDX-License-Identifier: GPL-2.0 */
/*
 * long kml_syscall6(long nr, long a1, long a2, long a3, long a4, long a5,
 *		     long a6);
 *
 * C arguments: rdi = nr, rsi = a1, rdx = a2, rcx = a3, r8 = a4, r9 = a5,
 * 8(%rsp) = a6.  System-call registers: rax = nr, rdi, rsi, rdx, r10, r8,
 * r9.  kml__entry (vdso.c) says how to enter the kernel: 0 = undecided,
 * 1 = `syscall` instruction, else the address of __vdso_kml_syscall.
 *
 * This is an ordinary called function, so everything below its return
 * address is free: the `call` of the vDSO function (which pushes its own
 * return address there) cannot touch a caller's red zone.
 */
	.text
	.globl	kml_syscall6
	.type	kml_syscall6, @function
	.p2align 4
kml_syscall6:
	.cfi_startproc
#ifdef __CET__
	endbr64
#endif
	movq	kml__entry(%rip), %r11
	testq	%r11, %r11
	jz	.Lresolve
.Ldispatch:
	movq	%rdi, %rax
	movq	%rsi, %rdi
	movq	%rdx, %rsi
	movq	%rcx, %rdx
	movq	%r8, %r10
	movq	%r9, %r8
	movq	8(%rsp), %r9
	cmpq	$1, %r11
	je	.Lsyscall
	/* the call path; keep the stack 16-byte aligned at the call */
	subq	$8, %rsp
	.cfi_adjust_cfa_offset 8
	call	*%r11
	addq	$8, %rsp
	.cfi_adjust_cfa_offset -8
	ret
.Lsyscall:
	syscall
	ret

.Lresolve:
	/* first call: save the arguments, decide, go on with the entry */
	pushq	%rdi
	.cfi_adjust_cfa_offset 8
	pushq	%rsi
	.cfi_adjust_cfa_offset 8
	pushq	%rdx
	.cfi_adjust_cfa_offset 8
	pushq	%rcx
	.cfi_adjust_cfa_offset 8
	pushq	%r8
	.cfi_adjust_cfa_offset 8
	pushq	%r9
	.cfi_adjust_cfa_offset 8
	subq	$8, %rsp
	.cfi_adjust_cfa_offset 8
	call	kml__resolve
	addq	$8, %rsp
	.cfi_adjust_cfa_offset -8
	popq	%r9
	.cfi_adjust_cfa_offset -8
	popq	%r8
	.cfi_adjust_cfa_offset -8
	popq	%rcx
	.cfi_adjust_cfa_offset -8
	popq	%rdx
	.cfi_adjust_cfa_offset -8
	popq	%rsi
	.cfi_adjust_cfa_offset -8
	popq	%rdi
	.cfi_adjust_cfa_offset -8
	movq	%rax, %r11
	jmp	.Ldispatch
	.cfi_endproc
	.size	kml_syscall6, . - kml_syscall6

	.section .note.GNU-stack, "", @progbits
