// SPDX-License-Identifier: GPL-2.0
/* libkml: kml_syscall(), the syscall(2)-like wrapper that sets errno. */
#include <errno.h>
#include <stdarg.h>

#include "kml.h"

long kml_syscall(long nr, ...)
{
	long a[6], ret;
	va_list ap;
	int i;

	/* like syscall(2): always six arguments, whatever the caller passed */
	va_start(ap, nr);
	for (i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	ret = kml_syscall6(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
	if (ret < 0 && ret > -4096) {
		errno = (int)-ret;
		return -1;
	}
	return ret;
}
