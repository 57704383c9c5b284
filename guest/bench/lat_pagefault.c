// SPDX-License-Identifier: GPL-2.0
/*
 * kml-bench's page fault row (lmbench's lat_pagefault, on anonymous
 * memory): the first touch of an anonymous page, PF_CHUNK pages per mmap.
 */
#define _GNU_SOURCE
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "kml.h"
#include "lat.h"

#define PF_CHUNK	256UL		/* pages per mmap */

static int setup_page_fault(struct lat_ctx *c)
{
	c->pagesz = sysconf(_SC_PAGESIZE);
	return 0;
}

static int run_page_fault(struct lat_ctx *c, unsigned long n)
{
	unsigned long k, i;
	size_t len;
	volatile char *p;

	while (n) {
		k = n < PF_CHUNK ? n : PF_CHUNK;
		len = k * c->pagesz;
		p = mmap(NULL, len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			return lat_fail(c, "mmap");
		for (i = 0; i < k; i++)
			p[i * c->pagesz] = 1;
		if (munmap((void *)p, len))
			return lat_fail(c, "munmap");
		n -= k;
	}
	return 0;
}

static int run_page_fault_call(struct lat_ctx *c, unsigned long n)
{
	unsigned long k, i;
	size_t len;
	volatile char *p;
	long r;

	while (n) {
		k = n < PF_CHUNK ? n : PF_CHUNK;
		len = k * c->pagesz;
		r = kml_syscall6(SYS_mmap, 0, len, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (lat_kerr(r))
			return lat_kfail(c, "mmap", r);
		p = (volatile char *)r;
		for (i = 0; i < k; i++)
			p[i * c->pagesz] = 1;
		r = kml_syscall2(SYS_munmap, (long)p, len);
		if (r)
			return lat_kfail(c, "munmap", r);
		n -= k;
	}
	return 0;
}

static const struct lat_row rows[] = {
	{ .name = "page_fault",
	  .label = "Page fault, first touch of anonymous page",
	  .unit = "page", .setup = setup_page_fault, .run = run_page_fault,
	  .run_call = run_page_fault_call, .quantum = PF_CHUNK },
};

LAT_FAMILY(lat_pagefault, rows);
