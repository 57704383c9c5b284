// SPDX-License-Identifier: GPL-2.0
/*
 * libkml klib: calling kernel functions, arch_prctl(ARCH_KML_KERNELCALL).
 *
 * The kernel does the call from the system call: on this thread's kernel
 * stack, with the kernel GS base, preemptible, with this thread as
 * current.  The system call itself goes through kml_syscall6(), i.e. the
 * call path (__vdso_kml_syscall) in kernel mode.
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/syscall.h>

#include "kml.h"
#include "kml_klib.h"
#include "klib_int.h"

_Static_assert(sizeof(struct kml_kcall_block) == 8 * 8,
	       "struct kml_kcall_block must match struct kml_kernelcall");
_Static_assert(offsetof(struct kml_kcall_block, ret) == 7 * 8,
	       "struct kml_kcall_block must match struct kml_kernelcall");

int kml_kcall6(unsigned long *ret, const void *fn, unsigned long a1,
	       unsigned long a2, unsigned long a3, unsigned long a4,
	       unsigned long a5, unsigned long a6)
{
	struct kml_kcall_block b = {
		.fn = (uintptr_t)fn,
		.args = { a1, a2, a3, a4, a5, a6 },
	};
	long r;

	r = kml_syscall2(SYS_arch_prctl, ARCH_KML_KERNELCALL, (long)&b);
	if (r < 0)
		return (int)r;
	if (r != 0)		/* the interface returns 0 or -errno */
		return -EPROTO;
	if (ret)
		*ret = b.ret;
	return 0;
}

long kml_kernelcall6(const void *fn, unsigned long a1, unsigned long a2,
		     unsigned long a3, unsigned long a4, unsigned long a5,
		     unsigned long a6)
{
	unsigned long v;
	int err = kml_kcall6(&v, fn, a1, a2, a3, a4, a5, a6);

	if (err) {
		errno = -err;
		return -1;
	}
	errno = 0;
	return (long)v;
}

const char *kml_kcall_strerror(int err)
{
	if (err < 0)
		err = -err;
	switch (err) {
	case 0:
		return "success";
	case EPERM:
		return "refused: the caller is not a kernel-mode process "
		       "(run it from /trusted, as root)";
	case EINVAL:
		return "refused: the target is not the entry of a function in "
		       "the core kernel text (or the kernel has no "
		       "ARCH_KML_KERNELCALL)";
	case EFAULT:
		return "bad argument block: it could not be read, or the "
		       "result could not be stored (then the function ran)";
	case EPROTO:
		return "unexpected result from arch_prctl(ARCH_KML_KERNELCALL)";
	case ENOENT:
		return "no kernel symbol of that name";
	case ENOTUNIQ:
		return "several kernel symbols of that name: ambiguous";
	case E2BIG:
		return "the function has more than six parameters";
	case ENOSPC:
		return "this process has opened the most handles it may";
	case EBADF:
		return "no such handle in this process";
	case ENOSYS:
		return "this kernel has no __vdso_kml_kcall";
	case EOPNOTSUPP:
		return "this kernel has no BTF to check functions against";
	default:
		return strerror(err);
	}
}

int kml_kread(void *dst, const void *ksrc, size_t n)
{
	static void *copy_nofault;
	unsigned long r;
	void *fn = __atomic_load_n(&copy_nofault, __ATOMIC_ACQUIRE);
	int err;

	if (!fn) {
		fn = kml_kfunc("copy_from_kernel_nofault");
		if (!fn)
			return -errno;
		__atomic_store_n(&copy_nofault, fn, __ATOMIC_RELEASE);
	}
	/* the kernel stores into dst with plain stores: make it present */
	memset(dst, 0, n);
	err = kml_kcall(&r, fn, dst, ksrc, n);
	if (err)
		return kml__fail(-err, "kml_kread(%p, %zu bytes): %s", ksrc, n,
				 kml_kcall_strerror(err));
	if ((long)r < 0)
		return kml__fail((int)-(long)r,
				 "kml_kread(%p, %zu bytes): copy_from_kernel_nofault: %s",
				 ksrc, n, strerror((int)-(long)r));
	return 0;
}
