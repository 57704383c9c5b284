/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers shared by the guest benchmarks (kml-bench, kml-iobench,
 * kml-ubench): the system description printed with every table, Markdown
 * and JSON text, the clock, option parsing, the JSON output file.
 */
#ifndef KML_BENCH_UTIL_H
#define KML_BENCH_UTIL_H

#include <errno.h>
#include <getopt.h>
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

/*
 * The value of the kernel parameter NAME=VALUE on the command line (the
 * last one, as the kernel takes it) into val; 1 if it is there, 0 if not
 * (also when the command line could not be read).  A bare NAME counts as
 * an empty value.
 */
static inline int cmdline_param(const struct bench_sysinfo *si,
				const char *name, char *val, size_t valsz)
{
	char copy[sizeof(si->cmdline)], *tok, *save;
	size_t n = strlen(name);
	int found = 0;

	if (!si->have_cmdline)
		return 0;
	strcpy(copy, si->cmdline);
	for (tok = strtok_r(copy, " \t", &save); tok;
	     tok = strtok_r(NULL, " \t", &save)) {
		if (strncmp(tok, name, n) || (tok[n] && tok[n] != '='))
			continue;
		snprintf(val, valsz, "%s", tok[n] ? tok + n + 1 : "");
		found = 1;
	}
	return found;
}

static inline void gather_sysinfo(struct bench_sysinfo *si)
{
	struct utsname u;
	char line[512], *p;
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
	if (!cmdline_param(si, "kml.accel", si->accel, sizeof(si->accel)) ||
	    !si->accel[0])
		strcpy(si->accel, "unknown");
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

/* prog: the last component of argv[0] (if there is one). */
static inline void bench_set_prog(const char *argv0)
{
	if (argv0 && argv0[0])
		prog = strrchr(argv0, '/') ? strrchr(argv0, '/') + 1 : argv0;
}

/* After getopt_long()'s loop: no operands, or a usage error. */
static inline void bench_no_operands(int argc, char **argv)
{
	if (optind < argc)
		usage_error("unexpected argument '%s'", argv[optind]);
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

/*
 * The options every benchmark has: --runs N, --quick, --json PATH,
 * --label TEXT, -v, -h.  BENCH_COMMON_OPTIONS goes into the table for
 * getopt_long(); bench_common_option() in the default case of the loop
 * handles them, and getopt_long()'s errors.
 */
enum { BENCH_O_RUNS = 0x1000, BENCH_O_QUICK, BENCH_O_JSON, BENCH_O_LABEL };
#define BENCH_COMMON_OPTIONS \
	{ "runs", required_argument, NULL, BENCH_O_RUNS }, \
	{ "quick", no_argument, NULL, BENCH_O_QUICK }, \
	{ "json", required_argument, NULL, BENCH_O_JSON }, \
	{ "label", required_argument, NULL, BENCH_O_LABEL }, \
	{ "verbose", no_argument, NULL, 'v' }, \
	{ "help", no_argument, NULL, 'h' }

struct bench_common {
	int runs;		/* --runs N (1..1000); -1: not given */
	int quick;		/* --quick */
	int verbose;		/* -v */
	const char *json;	/* --json PATH */
	const char *label;	/* --label TEXT */
	void (*usage)(FILE *);	/* -h: prints the help text */
};

static inline void bench_common_option(int ch, struct bench_common *c)
{
	switch (ch) {
	case BENCH_O_RUNS:
		c->runs = (int)parse_long("--runs", optarg, 1, 1000);
		return;
	case BENCH_O_QUICK:
		c->quick = 1;
		return;
	case BENCH_O_JSON:
		if (!*optarg)
			usage_error("--json needs a path or '-'");
		c->json = optarg;
		return;
	case BENCH_O_LABEL:
		c->label = optarg;
		return;
	case 'v':
		c->verbose = 1;
		return;
	case 'h':
		c->usage(stdout);
		exit(0);
	}
	/* getopt_long() has said what is wrong */
	fprintf(stderr, "Try '%s --help'.\n", prog);
	exit(2);
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

/* ---- the common parts of every benchmark's output ----------------- */

#define BENCH_EMULATED_NOTE	"EMULATED (QEMU TCG software emulation; " \
				"not hardware timings; compare ratios only)"

/* "# title" (marked EMULATED under TCG) and the system description. */
static inline void bench_md_header(FILE *f, const struct bench_sysinfo *si,
				   const char *title, const char *label)
{
	fprintf(f, "# %s%s%s\n\n", title, si->emulated ? " — " : "",
		si->emulated ? BENCH_EMULATED_NOTE : "");
	fprintf(f, "- label: %s\n", label ? label : "(none)");
	fprintf(f, "- accel: %s%s\n", si->accel,
		si->emulated ? " (QEMU TCG software emulation)" : "");
	fprintf(f, "- cpu: %s\n", si->cpu);
	fprintf(f, "- online cpus: %ld\n", si->ncpus);
	fprintf(f, "- kernel: %s\n", si->kernel);
	fprintf(f, "- cmdline: %s\n",
		si->have_cmdline ? si->cmdline : "(unreadable)");
}

/* The start of the JSON object: schema, label, the system description;
 * the caller adds its own members and the closing brace. */
static inline void bench_json_head(FILE *f, const char *schema,
				   const char *label,
				   const struct bench_sysinfo *si)
{
	fputs("{\"schema\": ", f);
	json_str(f, schema);
	fputs(", \"label\": ", f);
	json_str(f, label);
	fputs(", \"accel\": ", f);
	json_str(f, si->accel);
	fprintf(f, ", \"emulated\": %s, \"cpu\": ",
		si->emulated ? "true" : "false");
	json_str(f, si->cpu);
	fprintf(f, ", \"ncpus\": %ld, \"kernel\": ", si->ncpus);
	json_str(f, si->kernel);
	fputs(", \"cmdline\": ", f);
	json_str(f, si->have_cmdline ? si->cmdline : NULL);
}

/* ', "key": v' with three decimals, or ', "key": null' when !ok. */
static inline void bench_json_num(FILE *f, const char *key, double v, int ok)
{
	if (ok)
		fprintf(f, ", \"%s\": %.3f", key, v);
	else
		fprintf(f, ", \"%s\": null", key);
}

/*
 * The file for --json PATH, opened before the measurements so that a bad
 * path fails at once (exit status 1): NULL for no --json; for '-' stdout,
 * and *md (where the Markdown goes) becomes stderr.
 */
static inline FILE *bench_json_open(const char *path, FILE **md)
{
	FILE *jf;

	if (!path)
		return NULL;
	if (!strcmp(path, "-")) {
		*md = stderr;
		return stdout;
	}
	jf = fopen(path, "w");
	if (!jf) {
		fprintf(stderr, "%s: %s: %s\n", prog, path, strerror(errno));
		exit(1);
	}
	return jf;
}

/* Flush and close the --json file: 0, or 1 with a message. */
static inline int bench_json_close(FILE *jf, const char *path)
{
	if (fflush(jf) || ferror(jf) || (jf != stdout && fclose(jf))) {
		fprintf(stderr, "%s: writing %s failed\n", prog, path);
		return 1;
	}
	return 0;
}

/* The median of v[0..n-1] (n > 0), which it sorts. */
static inline double bench_median(double *v, int n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#endif /* KML_BENCH_UTIL_H */
