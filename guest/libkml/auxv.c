// SPDX-License-Identifier: GPL-2.0
/*
 * libkml: the vDSO address from the C library's auxiliary vector.  A
 * separate archive member, so that a program without a C library (see
 * kml_nolibc.h) can define kml__sysinfo_ehdr() itself and never link this.
 */
#include <sys/auxv.h>

#include "kml.h"

unsigned long kml__sysinfo_ehdr(void)
{
	return getauxval(AT_SYSINFO_EHDR);
}
