// SPDX-License-Identifier: GPL-2.0
/* An LD_PRELOAD library that announces itself: must never load into a
 * kernel-mode (secure-exec) process. */
#include <unistd.h>

__attribute__((constructor)) static void announce(void)
{
	static const char msg[] = "PRELOADED\n";

	write(1, msg, sizeof(msg) - 1);
}
