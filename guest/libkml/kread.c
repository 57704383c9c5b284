// SPDX-License-Identifier: GPL-2.0
/*
 * libkml klib: kml_kread(), a read of kernel memory that cannot fault,
 * through a handle to copy_from_kernel_nofault().
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "kml_klib.h"
#include "klib_int.h"

/* The handle of copy_from_kernel_nofault, plus one; 0: not opened yet */
static int copy_nofault;

int kml_kread(void *dst, const void *ksrc, size_t n)
{
	int h = __atomic_load_n(&copy_nofault, __ATOMIC_ACQUIRE) - 1;
	unsigned long r;
	int err;

	if (h < 0) {
		/* a race opens it twice: the same function, the same handle */
		h = kml_kfunc_open("copy_from_kernel_nofault");
		if (h < 0)
			return kml__fail(-h, "kml_kread: copy_from_kernel_nofault: %s",
					 kml_kfunc_strerror(h));
		__atomic_store_n(&copy_nofault, h + 1, __ATOMIC_RELEASE);
	}
	/* the kernel stores into dst with plain stores: make it present */
	memset(dst, 0, n);
	err = kml_kfunc_call(h, &r, dst, ksrc, n);
	if (err)
		return kml__fail(-err, "kml_kread(%p, %zu bytes): %s", ksrc, n,
				 kml_kfunc_strerror(err));
	if ((long)r < 0)
		return kml__fail((int)-(long)r,
				 "kml_kread(%p, %zu bytes): copy_from_kernel_nofault: %s",
				 ksrc, n, strerror((int)-(long)r));
	return 0;
}
