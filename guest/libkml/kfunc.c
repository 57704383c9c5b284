// SPDX-License-Identifier: GPL-2.0
/*
 * libkml klib: handles to kernel functions.
 *
 * arch_prctl(ARCH_KML_KFUNC_OPEN, name) validates a kernel function once
 * (one symbol of that name, the entry of a C function in the core kernel
 * text, at most six parameters) and returns a handle; kml_kfcall6()
 * (kfcall.S) then calls it through the vDSO's __vdso_kml_kcall, which
 * enters the kernel without a system call.
 */
#include <errno.h>
#include <sys/syscall.h>

#include "kml.h"
#include "kml_klib.h"
#include "klib_int.h"

#define KML_KCALL_NAME		"__vdso_kml_kcall"
#define KML_KCALL_VERSION	"LINUX_2.6"

/* Address of __vdso_kml_kcall; 0: not looked up yet, 1: none */
__attribute__((visibility("hidden"))) unsigned long kml__kcall;

static unsigned long kml_kcall_entry(void)
{
	unsigned long e = __atomic_load_n(&kml__kcall, __ATOMIC_ACQUIRE);
	const void *base;
	void *sym = NULL;

	if (e)
		return e;
	base = kml_vdso_base();
	if (base)
		sym = kml_vdso_sym(base, KML_KCALL_NAME, KML_KCALL_VERSION,
				   KML_LOOKUP_AUTO);
	e = sym ? (unsigned long)sym : 1;
	__atomic_store_n(&kml__kcall, e, __ATOMIC_RELEASE);
	return e;
}

int kml_kfunc_open(const char *name)
{
	long r;

	if (!name)
		return -EFAULT;
	r = kml_syscall2(SYS_arch_prctl, ARCH_KML_KFUNC_OPEN, (long)name);
	if (r >= 0)
		kml_kcall_entry();
	return (int)r;
}

/* kml_kfcall6() before the vDSO function was looked up, or without one */
__attribute__((visibility("hidden")))
int kml__kfcall_slow(int h, unsigned long *ret, unsigned long a1,
		     unsigned long a2, unsigned long a3, unsigned long a4,
		     unsigned long a5, unsigned long a6)
{
	if (kml_kcall_entry() == 1)
		return kml_kernel_mode() ? -ENOSYS : -EPERM;
	return kml_kfcall6(h, ret, a1, a2, a3, a4, a5, a6);
}
