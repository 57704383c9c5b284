/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Included first in every C file kmlcc compiles: the program's data stays
 * below 4 GiB (rewrite.py addresses memory with 32-bit registers), so
 * anonymous mappings -- nolibc's malloc() among them -- ask for MAP_32BIT.
 * Then nolibc, the C library kmlcc links.
 */
#ifndef KMLCC_H
#define KMLCC_H

#include <asm/mman.h>
#undef MAP_ANONYMOUS
#define MAP_ANONYMOUS (0x20 | MAP_32BIT)

#include "nolibc.h"

#endif
