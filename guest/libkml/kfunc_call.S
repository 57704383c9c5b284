/* SPDX-License-Identifier: GPL-2.0 */
/*
 * int kml_kfunc_call6(int h, unsigned long *ret, unsigned long a1, ...,
 *		       unsigned long a6);
 *
 * Calls the kernel function behind handle h (kml_kfunc_open()) through
 * the vDSO's __vdso_kml_kcall.  C arguments: edi = h, rsi = ret, rdx =
 * a1, rcx = a2, r8 = a3, r9 = a4, 8(%rsp) = a5, 16(%rsp) = a6.  The vDSO
 * function takes the system-call registers (rax = handle, rdi, rsi, rdx,
 * r10, r8, r9) and returns the value in rax, the status in rdx.
 * kml__kcall (kfunc.c) holds its address, or 0 (not looked up yet) or 1
 * (no such vDSO function): then kml__kfunc_call_slow(), which has this
 * function's signature, decides with the arguments untouched.
 */
	.text
	.globl	kml_kfunc_call6
	.type	kml_kfunc_call6, @function
	.p2align 4
kml_kfunc_call6:
	.cfi_startproc
#ifdef __CET__
	endbr64
#endif
	movq	kml__kcall(%rip), %r11
	cmpq	$1, %r11
	jbe	kml__kfunc_call_slow
	pushq	%rbx				/* keeps ret; aligns the stack */
	.cfi_adjust_cfa_offset 8
	.cfi_rel_offset rbx, 0
	movq	%rsi, %rbx
	movslq	%edi, %rax			/* a negative handle stays invalid */
	movq	%rdx, %rdi
	movq	%rcx, %rsi
	movq	%r8, %rdx
	movq	%r9, %r10
	movq	16(%rsp), %r8
	movq	24(%rsp), %r9
	call	*%r11
	testl	%edx, %edx
	jnz	1f
	testq	%rbx, %rbx
	jz	1f
	movq	%rax, (%rbx)
1:	movl	%edx, %eax
	popq	%rbx
	.cfi_adjust_cfa_offset -8
	.cfi_restore rbx
	ret
	.cfi_endproc
	.size	kml_kfunc_call6, .-kml_kfunc_call6

	.section .note.GNU-stack, "", @progbits
