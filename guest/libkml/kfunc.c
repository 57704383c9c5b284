// SPDX-License-Identifier: GPL-2.0
/*
 * libkml klib: handles to kernel functions.
 *
 * arch_prctl(ARCH_KML_KFUNC_OPEN, name) validates a kernel function once
 * (one symbol of that name, the entry of a C function in the core kernel
 * text, at most six parameters) and returns a handle; kml_kfunc_call6()
 * (kfunc_call.S) then calls it through the vDSO's __vdso_kml_kcall, which
 * enters the kernel without a system call.
 */
#include <errno.h>
#include <string.h>
#include <sys/syscall.h>

#include "kml.h"
#include "kml_klib.h"
#include "klib_int.h"

#define KML_KCALL_NAME		"__vdso_kml_kcall"
#define KML_KCALL_VERSION	"LINUX_2.6"

/* Address of __vdso_kml_kcall; 0: not looked up yet, 1: none */
KML__HIDDEN unsigned long kml__kcall;

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

/* kml_kfunc_call6() before the vDSO function was looked up, or without one */
KML__HIDDEN
int kml__kfunc_call_slow(int h, unsigned long *ret, unsigned long a1,
			 unsigned long a2, unsigned long a3, unsigned long a4,
			 unsigned long a5, unsigned long a6)
{
	if (kml_kcall_entry() == 1)
		return kml_kernel_mode() ? -ENOSYS : -EPERM;
	return kml_kfunc_call6(h, ret, a1, a2, a3, a4, a5, a6);
}

const char *kml_kfunc_strerror(int err)
{
	if (err < 0)
		err = -err;
	switch (err) {
	case 0:
		return "success";
	case EPERM:
		return "refused: the caller is not a kernel-mode process "
		       "(run it from /trusted, as root)";
	case ENOENT:
		return "no kernel symbol of that name";
	case ENOTUNIQ:
		return "several kernel symbols of that name: ambiguous";
	case EINVAL:
		return "refused: not the entry of a C function in the core "
		       "kernel text outside the entry code (data, an assembly "
		       "entry point, noinstr or init text, a module), or the "
		       "kernel has no ARCH_KML_KFUNC_OPEN";
	case E2BIG:
		return "the function has more than six parameters";
	case ENOSPC:
		return "this process has opened the most handles it may";
	case EOPNOTSUPP:
		return "this kernel has no BTF to check functions against";
	case ENAMETOOLONG:
		return "the name is longer than any kernel symbol's";
	case EFAULT:
		return "the name could not be read";
	case EBADF:
		return "no such handle in this process";
	case ENOSYS:
		return "this kernel has no __vdso_kml_kcall";
	default:
		return strerror(err);
	}
}
