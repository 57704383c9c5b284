// SPDX-License-Identifier: GPL-2.0
/*
 * A dynamically linked glibc program: proves that ld.so, libc.so and the
 * libraries ./kml copies into the guest work.  Prints the glibc version and
 * the program's arguments.
 */
#include <gnu/libc-version.h>
#include <stdio.h>

int main(int argc, char **argv)
{
	printf("hello from glibc %s", gnu_get_libc_version());
	for (int i = 1; i < argc; i++)
		printf(" %s", argv[i]);
	printf("\n");
	return 0;
}
