// SPDX-License-Identifier: GPL-2.0
/*
 * The guest benchmarks' shared helpers (bench_util.h), compiled once and
 * linked into kml-bench, kml-iobench and kml-ubench.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <x86intrin.h>

#include "bench_util.h"
#include "kml.h"

void bench_strip_nl(char *s)
{
	size_t n = strlen(s);

	while (n && (s[n - 1] == '\n' || s[n - 1] == ' '))
		s[--n] = 0;
}

int bench_cmdline_param(const struct bench_sysinfo *si,
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

void bench_gather_sysinfo(struct bench_sysinfo *si)
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
			bench_strip_nl(p);
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
			bench_strip_nl(si->cmdline);
		}
		fclose(f);
	}
	if (!bench_cmdline_param(si, "kml.accel", si->accel, sizeof(si->accel)) ||
	    !si->accel[0])
		strcpy(si->accel, "unknown");
	si->emulated = !strcmp(si->accel, "tcg");
}

void bench_md_text(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '|')
			fputc('\\', f);
		fputc(*s == '\n' ? ' ' : *s, f);
	}
}

/* Length of the valid UTF-8 sequence at s, or 0. */
static int bench_utf8_len(const unsigned char *s)
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

void bench_json_str(FILE *f, const char *str)
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
		} else if ((n = bench_utf8_len(s)) > 0) {
			fwrite(s, 1, n, f);
			s += n;
		} else {
			fputs("\\ufffd", f);	/* invalid UTF-8 byte */
			s++;
		}
	}
	fputc('"', f);
}

double bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int bench_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

const char *bench_prog = "kml-bench";

void __attribute__((noreturn, format(printf, 1, 2)))
bench_usage_error(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", bench_prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry '%s --help'.\n", bench_prog);
	exit(2);
}

void bench_set_prog(const char *argv0)
{
	if (argv0 && argv0[0])
		bench_prog = strrchr(argv0, '/') ? strrchr(argv0, '/') + 1 : argv0;
}

void bench_no_operands(int argc, char **argv)
{
	if (optind < argc)
		bench_usage_error("unexpected argument '%s'", argv[optind]);
}

long bench_parse_long(const char *opt_name, const char *s, long lo,
		      long hi)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		bench_usage_error("invalid %s value '%s' (an integer %ld..%ld)",
			    opt_name, s, lo, hi);
	return v;
}

void bench_common_option(int ch, struct bench_common *c)
{
	switch (ch) {
	case BENCH_O_RUNS:
		c->runs = (int)bench_parse_long("--runs", optarg, 1, 1000);
		return;
	case BENCH_O_QUICK:
		c->quick = 1;
		return;
	case BENCH_O_JSON:
		if (!*optarg)
			bench_usage_error("--json needs a path or '-'");
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
	fprintf(stderr, "Try '%s --help'.\n", bench_prog);
	exit(2);
}

int bench_parse_expect_mode(const char *s)
{
	if (!strcmp(s, "user"))
		return 0;
	if (!strcmp(s, "kernel"))
		return 1;
	bench_usage_error("invalid --expect-mode value '%s' ('user' or 'kernel')", s);
}

int bench_in_expected_mode(int expect_kernel)
{
	if (expect_kernel < 0 || expect_kernel == kml_kernel_mode())
		return 1;
	fprintf(stderr, "%s: expected to run in %s mode, but this process "
		"runs at CPL %d\n", bench_prog, expect_kernel ? "kernel" : "user",
		kml_kernel_mode() ? 0 : 3);
	return 0;
}

void bench_md_header(FILE *f, const struct bench_sysinfo *si,
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

void bench_json_head(FILE *f, const char *schema,
		     const char *label,
		     const struct bench_sysinfo *si)
{
	fputs("{\"schema\": ", f);
	bench_json_str(f, schema);
	fputs(", \"label\": ", f);
	bench_json_str(f, label);
	fputs(", \"accel\": ", f);
	bench_json_str(f, si->accel);
	fprintf(f, ", \"emulated\": %s, \"cpu\": ",
		si->emulated ? "true" : "false");
	bench_json_str(f, si->cpu);
	fprintf(f, ", \"ncpus\": %ld, \"kernel\": ", si->ncpus);
	bench_json_str(f, si->kernel);
	fputs(", \"cmdline\": ", f);
	bench_json_str(f, si->have_cmdline ? si->cmdline : NULL);
}

void bench_json_num(FILE *f, const char *key, double v, int ok)
{
	if (ok)
		fprintf(f, ", \"%s\": %.3f", key, v);
	else
		fprintf(f, ", \"%s\": null", key);
}

FILE *bench_json_open(const char *path, FILE **md)
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
		fprintf(stderr, "%s: %s: %s\n", bench_prog, path, strerror(errno));
		exit(1);
	}
	return jf;
}

int bench_json_close(FILE *jf, const char *path)
{
	if (fflush(jf) || ferror(jf) || (jf != stdout && fclose(jf))) {
		fprintf(stderr, "%s: writing %s failed\n", bench_prog, path);
		return 1;
	}
	return 0;
}

double bench_median(double *v, int n)
{
	qsort(v, n, sizeof(*v), bench_cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int bench_write_int(const char *path, int v)
{
	FILE *f = fopen(path, "w");
	int bad;

	if (!f)
		return -1;
	bad = fprintf(f, "%d\n", v) < 0;
	return fclose(f) || bad ? -1 : 0;
}

/* ---- timing a loop ------------------------------------------------- */

static double tsc_ns_total, tsc_cyc_total;

static inline uint64_t bench_tsc(void)
{
	_mm_lfence();
	return __rdtsc();
}

/* Runs n iterations; total elapsed ns and cycles. */
static int timed(int (*run)(void *arg, unsigned long n), void *arg,
		 unsigned long n, double *ns, double *cyc)
{
	double t0, t1;
	uint64_t c0, c1;
	int r;

	t0 = bench_now_ns();
	c0 = bench_tsc();
	r = run(arg, n);
	c1 = bench_tsc();
	t1 = bench_now_ns();
	*ns = t1 - t0;
	*cyc = (double)(c1 - c0);
	return r;
}

static unsigned long round_up(unsigned long n, unsigned long q)
{
	return (n + q - 1) / q * q;
}

int bench_measure(int (*run)(void *arg, unsigned long n), void *arg,
		  unsigned long quantum, int runs, int run_ms,
		  struct bench_timing *t)
{
	unsigned long q = quantum ? quantum : 1;
	double target = run_ms * 1e6;
	double ns, cyc, want;
	static double vns[BENCH_MAX_RUNS], vcyc[BENCH_MAX_RUNS];
	unsigned long n;
	int i, r;

	if (runs < 1 || runs > BENCH_MAX_RUNS)
		runs = runs < 1 ? 1 : BENCH_MAX_RUNS;
	/* warm-up (also starts children, faults in code and data) */
	r = timed(run, arg, q, &ns, &cyc);
	if (r)
		return r;
	/* calibrate: grow n until a loop takes >= 1/8 of a run */
	n = q;
	for (;;) {
		r = timed(run, arg, n, &ns, &cyc);
		if (r)
			return r;
		if (ns >= target / 8 || n >= BENCH_MAX_ITERS)
			break;
		n *= ns < target / 1000 ? 10 : 2;
	}
	want = ns > 0 ? n * (target / ns) : BENCH_MAX_ITERS;
	if (want > BENCH_MAX_ITERS)
		want = BENCH_MAX_ITERS;
	n = (unsigned long)want;
	if (n < BENCH_MIN_ITERS)
		n = BENCH_MIN_ITERS;
	n = round_up(n, q);

	for (i = 0; i < runs; i++) {
		r = timed(run, arg, n, &ns, &cyc);
		if (r)
			return r;
		tsc_ns_total += ns;
		tsc_cyc_total += cyc;
		vns[i] = ns / n;
		vcyc[i] = cyc / n;
	}
	t->iters = n;
	t->ns_med = bench_median(vns, runs);	/* sorts */
	t->ns_min = vns[0];
	t->ns_max = vns[runs - 1];
	t->cyc_med = bench_median(vcyc, runs);
	t->cyc_min = vcyc[0];
	t->cyc_max = vcyc[runs - 1];
	return 0;
}

double bench_tsc_ghz(void)
{
	return tsc_ns_total > 0 ? tsc_cyc_total / tsc_ns_total : 0;
}
