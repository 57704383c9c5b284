// SPDX-License-Identifier: GPL-2.0
/*
 * libkml klib: kernel symbols by name, from /proc/kallsyms.
 *
 * Format, one symbol a line: "ADDRESS TYPE NAME" with an optional
 * "\t[MODULE]" suffix for module symbols (ignored: the kernel call only
 * accepts core kernel text).  The kernel prints the addresses only to
 * readers with CAP_SYSLOG (kernel.kptr_restrict); otherwise they are all
 * zero, which is reported as an error rather than as NULL symbols.
 *
 * The table is read once (the whole file, into one buffer whose lines
 * become the NUL-terminated names) and sorted by name for lookups.  A
 * symbol's size is the distance to the next higher address, as the
 * kernel's kallsyms_lookup_size_offset() computes it (found at lookup).
 */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kml_klib.h"
#include "klib_int.h"

#define KALLSYMS	"/proc/kallsyms"

struct entry {
	unsigned long addr;
	const char *name;
	char type;
};

struct kml_ksyms {
	char *text;		/* the file; names point into it */
	struct entry *sym;	/* sorted by name, then address */
	size_t n;
	char path[256];
};

static int by_name(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	if (c)
		return c;
	return (x->addr > y->addr) - (x->addr < y->addr);
}

/* The whole file (procfs files have no size), NUL-terminated. */
static char *slurp(const char *path, size_t *len)
{
	size_t cap = 1 << 20, n = 0, r;
	char *buf = malloc(cap), *nb;
	FILE *f = fopen(path, "r");

	if (!f || !buf) {
		int e = f ? ENOMEM : errno;

		free(buf);
		if (f)
			fclose(f);
		errno = e;
		return NULL;
	}
	for (;;) {
		if (cap - n < 2) {
			nb = realloc(buf, cap * 2);
			if (!nb) {
				free(buf);
				fclose(f);
				errno = ENOMEM;
				return NULL;
			}
			buf = nb;
			cap *= 2;
		}
		r = fread(buf + n, 1, cap - n - 1, f);
		if (!r)
			break;
		n += r;
	}
	if (ferror(f)) {
		int e = errno ? errno : EIO;

		free(buf);
		fclose(f);
		errno = e;
		return NULL;
	}
	fclose(f);
	buf[n] = '\0';
	*len = n;
	return buf;
}

/* Parse one line in place; 1 = a core kernel symbol, 0 = skip, -1 = bad. */
static int parse_line(char *line, struct entry *e)
{
	char *p = line, *end;

	e->addr = strtoul(p, &end, 16);
	if (end == p || (*end != ' ' && *end != '\t'))
		return -1;
	p = end;
	while (*p == ' ' || *p == '\t')
		p++;
	if (!isgraph((unsigned char)*p) || (p[1] != ' ' && p[1] != '\t'))
		return -1;
	e->type = *p;
	p += 2;
	while (*p == ' ' || *p == '\t')
		p++;
	if (!*p)
		return -1;
	e->name = p;
	while (*p && *p != ' ' && *p != '\t')
		p++;
	if (*p) {			/* "\t[module]" follows */
		*p++ = '\0';
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p == '[')
			return 0;
		if (*p)
			return -1;
	}
	return 1;
}

struct kml_ksyms *kml_ksyms_load(const char *path)
{
	struct kml_ksyms *t = calloc(1, sizeof(*t));
	size_t len, lines = 0, i, lineno = 0;
	char *line, *nl;
	int nonzero = 0;

	if (!t) {
		kml__fail(ENOMEM, "kallsyms: out of memory");
		return NULL;
	}
	snprintf(t->path, sizeof(t->path), "%s", path);
	t->text = slurp(path, &len);
	if (!t->text) {
		kml__fail(errno, "kallsyms: cannot read %s: %s", path,
			  strerror(errno));
		goto fail;
	}
	for (i = 0; i < len; i++)
		lines += t->text[i] == '\n';
	t->sym = malloc((lines + 1) * sizeof(*t->sym));
	if (!t->sym) {
		kml__fail(ENOMEM, "kallsyms: out of memory");
		goto fail;
	}
	for (line = t->text; *line; line = nl) {
		struct entry e;
		int r;

		lineno++;
		nl = strchr(line, '\n');
		if (nl)
			*nl++ = '\0';
		else
			nl = line + strlen(line);
		if (!*line)
			continue;
		r = parse_line(line, &e);
		if (r < 0) {
			kml__fail(EINVAL, "kallsyms: %s:%zu: not a kallsyms line",
				  path, lineno);
			goto fail;
		}
		if (!r)
			continue;
		nonzero |= e.addr != 0;
		t->sym[t->n++] = e;
	}
	if (!t->n) {
		kml__fail(ENOENT, "kallsyms: %s lists no symbols", path);
		goto fail;
	}
	if (!nonzero) {
		kml__fail(EACCES, "kallsyms: the addresses in %s are hidden "
			  "(all zero): run as root (CAP_SYSLOG) with "
			  "kernel.kptr_restrict < 2", path);
		goto fail;
	}
	qsort(t->sym, t->n, sizeof(*t->sym), by_name);
	return t;
fail:
	kml_ksyms_free(t);
	return NULL;
}

void kml_ksyms_free(struct kml_ksyms *t)
{
	if (!t)
		return;
	free(t->sym);
	free(t->text);
	free(t);
}

size_t kml_ksyms_count(const struct kml_ksyms *t)
{
	return t ? t->n : 0;
}

static int is_global(char type)
{
	return isupper((unsigned char)type);
}

int kml_ksyms_find(const struct kml_ksyms *t, const char *name,
		   struct kml_ksym *out)
{
	size_t lo = 0, hi = t->n, first, end, i, globals = 0, pick = 0;
	int same = 1;

	if (!name || !*name)
		return kml__fail(EINVAL, "kallsyms: empty symbol name");
	while (lo < hi) {		/* first entry >= name */
		size_t mid = lo + (hi - lo) / 2;

		if (strcmp(t->sym[mid].name, name) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	first = lo;
	for (end = first; end < t->n && !strcmp(t->sym[end].name, name); end++)
		;
	if (end == first)
		return kml__fail(ENOENT, "kallsyms: no symbol '%s' in %s "
				 "(not in this kernel, or not in kallsyms: "
				 "data symbols need CONFIG_KALLSYMS_ALL)",
				 name, t->path);
	for (i = first; i < end; i++) {
		if (is_global(t->sym[i].type)) {
			if (!globals++)
				pick = i;
		}
		same &= t->sym[i].addr == t->sym[first].addr;
	}
	if (!globals)
		pick = first;
	if (!same && globals != 1) {
		char types[64];
		size_t k = 0;

		for (i = first; i < end && k + 2 < sizeof(types); i++) {
			types[k++] = t->sym[i].type;
			types[k++] = ' ';
		}
		types[k ? k - 1 : 0] = '\0';
		return kml__fail(ENOTUNIQ, "kallsyms: symbol '%s' is ambiguous: "
				 "%zu symbols at different addresses (types %s)",
				 name, end - first, types);
	}
	if (out) {
		unsigned long next = ~0UL, a = t->sym[pick].addr;

		for (i = 0; i < t->n; i++)
			if (t->sym[i].addr > a && t->sym[i].addr < next)
				next = t->sym[i].addr;
		out->addr = a;
		out->size = next == ~0UL ? 0 : next - a;
		out->type = t->sym[pick].type;
		out->name = t->sym[pick].name;
	}
	return 0;
}

/* ---- the running kernel's table ------------------------------------- */

static pthread_once_t once = PTHREAD_ONCE_INIT;
static struct kml_ksyms *kernel;
static char load_error[512];
static int load_errno;

static void load_kernel(void)
{
	kernel = kml_ksyms_load(KALLSYMS);
	if (!kernel) {
		load_errno = errno;
		snprintf(load_error, sizeof(load_error), "%s", kml_klib_error());
	}
}

int kml_ksym_lookup(const char *name, struct kml_ksym *out)
{
	pthread_once(&once, load_kernel);
	if (!kernel) {
		kml__set_error(load_error, load_errno);
		return -load_errno;
	}
	return kml_ksyms_find(kernel, name, out);
}

void *kml_ksym(const char *name)
{
	struct kml_ksym s;

	if (kml_ksym_lookup(name, &s))
		return NULL;
	return (void *)s.addr;
}
