/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers shared by the guest benchmarks (kml-bench, kml-iobench): the
 * system description printed with every table, Markdown and JSON text,
 * the clock.
 */
#ifndef KML_BENCH_UTIL_H
#define KML_BENCH_UTIL_H

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "kml.h"

/* What the tables say about the machine they were measured on. */
struct bench_sysinfo {
	char cpu[256];
	long ncpus;
	char kernel[128];
	char cmdline[4096];
	int have_cmdline;
	char accel[64];		/* kml.accel= on the command line: tcg, kvm */
	int emulated;		/* accel is tcg */
};

static inline void strip_nl(char *s)
{
	size_t n = strlen(s);

	while (n && (s[n - 1] == '\n' || s[n - 1] == ' '))
		s[--n] = 0;
}

static inline void gather_sysinfo(struct bench_sysinfo *si)
{
	struct utsname u;
	char line[512], *p, *tok, *save;
	char copy[sizeof(si->cmdline)];
	FILE *f;

	strcpy(si->cpu, "unknown");
	f = fopen("/proc/cpuinfo", "r");
	if (f) {
		while (fgets(line, sizeof(line), f)) {
			if (strncmp(line, "model name", 10))
				continue;
			p = strchr(line, ':');
			if (!p)
				continue;
			p += 1 + strspn(p + 1, " \t");
			strip_nl(p);
			snprintf(si->cpu, sizeof(si->cpu), "%s", p);
			break;
		}
		fclose(f);
	}
	si->ncpus = sysconf(_SC_NPROCESSORS_ONLN);
	strcpy(si->kernel, "unknown");
	if (!uname(&u))
		snprintf(si->kernel, sizeof(si->kernel), "%s", u.release);

	strcpy(si->accel, "unknown");
	f = fopen("/proc/cmdline", "r");
	if (f) {
		if (fgets(si->cmdline, sizeof(si->cmdline), f)) {
			si->have_cmdline = 1;
			strip_nl(si->cmdline);
		}
		fclose(f);
	}
	if (si->have_cmdline) {
		strcpy(copy, si->cmdline);
		for (tok = strtok_r(copy, " \t", &save); tok;
		     tok = strtok_r(NULL, " \t", &save)) {
			if (!strncmp(tok, "kml.accel=", 10) && tok[10])
				snprintf(si->accel, sizeof(si->accel), "%s",
					 tok + 10);
		}
	}
	si->emulated = !strcmp(si->accel, "tcg");
}

/* Table cell text: '|' would end the cell. */
static inline void md_text(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '|')
			fputc('\\', f);
		fputc(*s == '\n' ? ' ' : *s, f);
	}
}

/* Length of the valid UTF-8 sequence at s, or 0. */
static inline int utf8_len(const unsigned char *s)
{
	int n, i;

	if (*s < 0x80)
		return 1;
	if (*s >= 0xc2 && *s <= 0xdf)
		n = 2;
	else if (*s >= 0xe0 && *s <= 0xef)
		n = 3;
	else if (*s >= 0xf0 && *s <= 0xf4)
		n = 4;
	else
		return 0;
	for (i = 1; i < n; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	return n;
}

static inline void json_str(FILE *f, const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	int n;

	if (!str) {
		fputs("null", f);
		return;
	}
	fputc('"', f);
	while (*s) {
		if (*s == '"' || *s == '\\') {
			fprintf(f, "\\%c", *s++);
		} else if (*s == '\n') {
			fputs("\\n", f);
			s++;
		} else if (*s == '\t') {
			fputs("\\t", f);
			s++;
		} else if (*s < 0x20 || *s == 0x7f) {
			fprintf(f, "\\u%04x", *s++);
		} else if ((n = utf8_len(s)) > 0) {
			fwrite(s, 1, n, f);
			s += n;
		} else {
			fputs("\\ufffd", f);	/* invalid UTF-8 byte */
			s++;
		}
	}
	fputc('"', f);
}

static inline double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static inline int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The program's name in messages; main() sets it from argv[0]. */
static const char *prog = "kml-bench";

/* A usage error: the message, a hint, exit status 2. */
static inline void __attribute__((noreturn, format(printf, 1, 2)))
usage_error(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry '%s --help'.\n", prog);
	exit(2);
}

/* The integer value of option opt_name, in lo..hi, or a usage error. */
static inline long parse_long(const char *opt_name, const char *s, long lo,
			      long hi)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		usage_error("invalid %s value '%s' (an integer %ld..%ld)",
			    opt_name, s, lo, hi);
	return v;
}

/* --expect-mode user|kernel: 0 or 1, or a usage error. */
static inline int parse_expect_mode(const char *s)
{
	if (!strcmp(s, "user"))
		return 0;
	if (!strcmp(s, "kernel"))
		return 1;
	usage_error("invalid --expect-mode value '%s' ('user' or 'kernel')", s);
}

/*
 * Does this process run in the mode --expect-mode asked for (-1: none)?
 * Says why not on stderr (the caller exits with status 3).
 */
static inline int in_expected_mode(int expect_kernel)
{
	if (expect_kernel < 0 || expect_kernel == kml_kernel_mode())
		return 1;
	fprintf(stderr, "%s: expected to run in %s mode, but this process "
		"runs at CPL %d\n", prog, expect_kernel ? "kernel" : "user",
		kml_kernel_mode() ? 0 : 3);
	return 0;
}

#endif /* KML_BENCH_UTIL_H */
