/* SPDX-License-Identifier: GPL-2.0 */
/*
 * kml_nolibc.h: every system call of a nolibc program through libkml.
 *
 * The kernel tree's nolibc (tools/include/nolibc) funnels all its system
 * calls through the macros my_syscall0..6 of its arch header.  This header
 * redefines them as calls of kml_syscall6(), so that a freestanding static
 * program makes ALL its calls through __vdso_kml_syscall when it runs in
 * kernel mode (and through the `syscall` instruction otherwise):
 *
 *	#include "std.h"		(nolibc: size_t etc. for arch.h)
 *	#include "arch.h"		(nolibc: my_syscall*, _start)
 *	#include "kml_nolibc.h"
 *	#include "nolibc.h"
 *
 *	cc -static -nostdlib -ffreestanding -fno-stack-protector \
 *	   -I<tree>/tools/include/nolibc -I<libkml> prog.c libkml.a -lgcc
 *
 * It also gives libkml the vDSO address: nolibc's start code stores the
 * auxiliary vector in _auxv before it runs constructors and main().  Calls
 * made before that (none unless the stack protector is on) use the
 * `syscall` instruction.
 *
 * Do not use it for code that needs vfork or rt_sigreturn through these
 * macros (nolibc uses neither).
 */
#ifndef KML_NOLIBC_H
#define KML_NOLIBC_H

#ifndef _NOLIBC_ARCH_H
#error "include nolibc's arch.h before kml_nolibc.h"
#endif
#ifndef __x86_64__
#error "libkml is x86-64 only"
#endif

#include <linux/auxvec.h>

#include "kml.h"

#undef my_syscall0
#undef my_syscall1
#undef my_syscall2
#undef my_syscall3
#undef my_syscall4
#undef my_syscall5
#undef my_syscall6

#define my_syscall0(num) \
	kml_syscall6((long)(num), 0, 0, 0, 0, 0, 0)
#define my_syscall1(num, a1) \
	kml_syscall6((long)(num), (long)(a1), 0, 0, 0, 0, 0)
#define my_syscall2(num, a1, a2) \
	kml_syscall6((long)(num), (long)(a1), (long)(a2), 0, 0, 0, 0)
#define my_syscall3(num, a1, a2, a3) \
	kml_syscall6((long)(num), (long)(a1), (long)(a2), (long)(a3), \
		     0, 0, 0)
#define my_syscall4(num, a1, a2, a3, a4) \
	kml_syscall6((long)(num), (long)(a1), (long)(a2), (long)(a3), \
		     (long)(a4), 0, 0)
#define my_syscall5(num, a1, a2, a3, a4, a5) \
	kml_syscall6((long)(num), (long)(a1), (long)(a2), (long)(a3), \
		     (long)(a4), (long)(a5), 0)
#define my_syscall6(num, a1, a2, a3, a4, a5, a6) \
	kml_syscall6((long)(num), (long)(a1), (long)(a2), (long)(a3), \
		     (long)(a4), (long)(a5), (long)(a6))

/*
 * The vDSO address for libkml, from nolibc's _auxv (crt.h).  Weak, so that
 * several files of one program may include this header; being defined at
 * all keeps libkml's getauxval() member (which needs a C library) out.
 */
__attribute__((weak)) unsigned long kml__sysinfo_ehdr(void)
{
	const unsigned long *av = _auxv;

	if (!av)
		return KML_VDSO_UNKNOWN;
	for (; av[0]; av += 2)
		if (av[0] == AT_SYSINFO_EHDR)
			return av[1];
	return 0;
}

#endif /* KML_NOLIBC_H */
