/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The kml guest tests' helpers: those of the series' selftests
 * (tools/testing/selftests/x86/kml_util.h, found through -I$(KSFT)), and
 * three only the project's tests use: CPU flags, "is this one of ./kml's
 * kernels" by its release, and kml_run_capture() without a setup hook.
 */
#ifndef KML_GUEST_UTIL_H
#define KML_GUEST_UTIL_H

#include <sys/utsname.h>

#include "x86/kml_util.h"

/* Does the "flags" line of /proc/cpuinfo list flag? */
static inline int kml_cpu_flag(const char *flag)
{
	static char info[1 << 16];
	char *line, *save, *tok;

	if (kml_read_file("/proc/cpuinfo", info, sizeof(info)) < 0)
		return -1;
	line = strstr(info, "\nflags");
	if (!line)
		return -1;
	line = strchr(line, ':');
	if (!line)
		return -1;
	line[strcspn(line, "\n")] = '\0';
	for (tok = strtok_r(line + 1, " ", &save); tok;
	     tok = strtok_r(NULL, " ", &save))
		if (!strcmp(tok, flag))
			return 1;
	return 0;
}

/*
 * Is this a kml kernel?  ./kml builds them with a release that ends in
 * -kml, or in -kml-debug and -kml-defconfig for the other two kernels:
 * "-kml" after the version, then nothing or one more "-" word.
 */
static inline int kml_kernel(void)
{
	struct utsname u;
	const char *k;

	if (uname(&u))
		return 0;
	k = strstr(u.release, "-kml");
	return k && (!k[4] || (k[4] == '-' && k[5] && !strchr(k + 5, '-')));
}

/* Run argv with stdout+stderr into out; exit status, or -1. */
static inline int kml_run_capture(char *const argv[], char *const envp[],
				  char *out, size_t size, pid_t *pidp)
{
	return kml_run_capture_setup(argv, envp, NULL, NULL, out, size, pidp);
}

#endif /* KML_GUEST_UTIL_H */
