/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers shared by the guest benchmarks (kml-bench, kml-iobench,
 * kml-ubench): the system description printed with every table, Markdown
 * and JSON text, the clock, option parsing, the JSON output file.
 * Compiled once (bench_util.c); every name starts with bench_ or BENCH_.
 */
#ifndef KML_BENCH_UTIL_H
#define KML_BENCH_UTIL_H

#include <getopt.h>
#include <stddef.h>
#include <stdio.h>

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

void bench_strip_nl(char *s);

/*
 * The value of the kernel parameter NAME=VALUE on the command line (the
 * last one, as the kernel takes it) into val; 1 if it is there, 0 if not
 * (also when the command line could not be read).  A bare NAME counts as
 * an empty value.
 */
int bench_cmdline_param(const struct bench_sysinfo *si,
			const char *name, char *val, size_t valsz);

void bench_gather_sysinfo(struct bench_sysinfo *si);

/* Table cell text: '|' would end the cell. */
void bench_md_text(FILE *f, const char *s);

void bench_json_str(FILE *f, const char *str);

double bench_now_ns(void);

int bench_cmp_double(const void *a, const void *b);

/* The program's name in messages; main() sets it from argv[0]. */
extern const char *bench_prog;

/* A usage error: the message, a hint, exit status 2. */
void __attribute__((noreturn, format(printf, 1, 2)))
bench_usage_error(const char *fmt, ...);

/* bench_prog: the last component of argv[0] (if there is one). */
void bench_set_prog(const char *argv0);

/* After getopt_long()'s loop: no operands, or a usage error. */
void bench_no_operands(int argc, char **argv);

/* The integer value of option opt_name, in lo..hi, or a usage error. */
long bench_parse_long(const char *opt_name, const char *s, long lo,
		      long hi);

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

void bench_common_option(int ch, struct bench_common *c);

/* --expect-mode user|kernel: 0 or 1, or a usage error. */
int bench_parse_expect_mode(const char *s);

/*
 * Does this process run in the mode --expect-mode asked for (-1: none)?
 * Says why not on stderr (the caller exits with status 3).
 */
int bench_in_expected_mode(int expect_kernel);

/* ---- the common parts of every benchmark's output ----------------- */

#define BENCH_EMULATED_NOTE	"EMULATED (QEMU TCG software emulation; " \
				"not hardware timings; compare ratios only)"

/* "# title" (marked EMULATED under TCG) and the system description. */
void bench_md_header(FILE *f, const struct bench_sysinfo *si,
		     const char *title, const char *label);

/* The start of the JSON object: schema, label, the system description;
 * the caller adds its own members and the closing brace. */
void bench_json_head(FILE *f, const char *schema,
		     const char *label,
		     const struct bench_sysinfo *si);

/* ', "key": v' with three decimals, or ', "key": null' when !ok. */
void bench_json_num(FILE *f, const char *key, double v, int ok);

/*
 * The file for --json PATH, opened before the measurements so that a bad
 * path fails at once (exit status 1): NULL for no --json; for '-' stdout,
 * and *md (where the Markdown goes) becomes stderr.
 */
FILE *bench_json_open(const char *path, FILE **md);

/* Flush and close the --json file: 0, or 1 with a message. */
int bench_json_close(FILE *jf, const char *path);

/* The median of v[0..n-1] (n > 0), which it sorts. */
double bench_median(double *v, int n);

/* Write "V\n" to a /proc or /sys file: 0, or -1 with errno set. */
int bench_write_int(const char *path, int v);

/* ---- timing a loop ------------------------------------------------- */

#define BENCH_MIN_ITERS	3UL
#define BENCH_MAX_ITERS	1000000000UL
#define BENCH_MAX_RUNS	1000		/* --runs is 1..1000 */

/* The runs of one loop: per iteration, ns and TSC cycles. */
struct bench_timing {
	double ns_med, ns_min, ns_max;
	double cyc_med, cyc_min, cyc_max;
	unsigned long iters;	/* iterations per run */
};

/*
 * Time run(arg, n), a loop of n iterations (0 ok, else failed), with
 * CLOCK_MONOTONIC and lfence+rdtsc: a warm-up of quantum iterations
 * (0: 1), then n calibrated by growing it until one loop takes at least
 * 1/8 of run_ms and scaled so that one run takes about run_ms (at least
 * BENCH_MIN_ITERS, a multiple of quantum), then `runs` runs.  The median,
 * min and max of the runs' mean per iteration go into *t.  0, or the
 * loop's failure.
 */
int bench_measure(int (*run)(void *arg, unsigned long n), void *arg,
		  unsigned long quantum, int runs, int run_ms,
		  struct bench_timing *t);

/* TSC cycles per ns over every timed run so far (0: nothing timed). */
double bench_tsc_ghz(void);

#endif /* KML_BENCH_UTIL_H */
