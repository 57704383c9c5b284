// SPDX-License-Identifier: GPL-2.0
/* libkml klib: the per-thread error message behind kml_klib_error(). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include "kml_klib.h"
#include "klib_int.h"

static __thread char errbuf[512];

const char *kml_klib_error(void)
{
	return errbuf;
}

int kml__fail(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(errbuf, sizeof(errbuf), fmt, ap);
	va_end(ap);
	errno = err;
	return -err;
}

void kml__set_error(const char *msg, int err)
{
	snprintf(errbuf, sizeof(errbuf), "%s", msg);
	errno = err;
}
