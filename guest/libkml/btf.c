// SPDX-License-Identifier: GPL-2.0
/*
 * libkml klib: kernel struct layouts from BTF, through libbpf's BTF API.
 *
 * The kernel exports its own type information (CONFIG_DEBUG_INFO_BTF) at
 * /sys/kernel/btf/vmlinux.  Offsets and sizes come from there, so a
 * program that reads kernel structures follows the running kernel's
 * configuration instead of hand-written offsets.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/btf.h>

#include "kml_klib.h"
#include "klib_int.h"

#define VMLINUX_BTF	"/sys/kernel/btf/vmlinux"
#define MAX_PATH_LEN	256

struct btf *kml_btf_load(const char *path)
{
	struct btf *btf = btf__parse(path, NULL);
	int err = errno;

	if (!btf) {
		if (!err)
			err = EINVAL;
		if (!strcmp(path, VMLINUX_BTF) && err == ENOENT)
			kml__fail(err, "BTF: %s: %s (the kernel needs "
				  "CONFIG_DEBUG_INFO_BTF, and sysfs must be "
				  "mounted)", path, strerror(err));
		else
			kml__fail(err, "BTF: cannot parse %s: %s", path,
				  strerror(err));
		return NULL;
	}
	return btf;
}

static pthread_once_t once = PTHREAD_ONCE_INIT;
static struct btf *vmlinux;
static char load_error[512];
static int load_errno;

static void load_vmlinux(void)
{
	vmlinux = kml_btf_load(VMLINUX_BTF);
	if (!vmlinux) {
		load_errno = errno;
		snprintf(load_error, sizeof(load_error), "%s", kml_klib_error());
	}
}

struct btf *kml_btf(void)
{
	pthread_once(&once, load_vmlinux);
	if (!vmlinux)
		kml__set_error(load_error, load_errno);
	return vmlinux;
}

static const struct btf *the_btf(const struct btf *btf)
{
	return btf ? btf : kml_btf();
}

static const char *kind_word(int kind)
{
	switch (kind) {
	case BTF_KIND_STRUCT:	return "struct";
	case BTF_KIND_UNION:	return "union";
	case BTF_KIND_ENUM:
	case BTF_KIND_ENUM64:	return "enum";
	case BTF_KIND_TYPEDEF:	return "typedef";
	case BTF_KIND_INT:	return "base type";
	case BTF_KIND_PTR:	return "pointer";
	case BTF_KIND_ARRAY:	return "array";
	case BTF_KIND_FWD:	return "forward declaration";
	case BTF_KIND_FUNC_PROTO: return "function type";
	default:		return "type";
	}
}

/*
 * The id of the type `name` of kind `kind`.  Several types of the same
 * name and kind but different sizes (distinct definitions in different
 * compilation units) make the name ambiguous: -ENOTUNIQ.
 */
static int find_kind(const struct btf *btf, const char *name, int kind)
{
	__u32 n = btf__type_cnt(btf), id;
	int found = -ENOENT;
	__s64 size = 0;

	for (id = 1; id < n; id++) {
		const struct btf_type *t = btf__type_by_id(btf, id);
		int k = btf_kind(t);

		if (k != kind && !(kind == BTF_KIND_ENUM && k == BTF_KIND_ENUM64))
			continue;
		if (strcmp(btf__name_by_offset(btf, t->name_off), name))
			continue;
		if (found < 0) {
			found = (int)id;
			size = btf__resolve_size(btf, id);
		} else if (btf__resolve_size(btf, id) != size) {
			return -ENOTUNIQ;
		}
	}
	return found;
}

/* The id of a named type ("struct x", "union x", "enum x", "x"), or -errno. */
static int find_type(const struct btf *btf, const char *spec)
{
	static const struct { const char *prefix; int kind; } prefixed[] = {
		{ "struct ", BTF_KIND_STRUCT },
		{ "union ", BTF_KIND_UNION },
		{ "enum ", BTF_KIND_ENUM },
	};
	static const int bare[] = { BTF_KIND_STRUCT, BTF_KIND_UNION,
				    BTF_KIND_TYPEDEF, BTF_KIND_ENUM,
				    BTF_KIND_INT };
	size_t i;
	int id;

	if (!spec || !*spec)
		return kml__fail(EINVAL, "BTF: empty type name");
	for (i = 0; i < sizeof(prefixed) / sizeof(prefixed[0]); i++) {
		size_t l = strlen(prefixed[i].prefix);

		if (strncmp(spec, prefixed[i].prefix, l))
			continue;
		id = find_kind(btf, spec + l, prefixed[i].kind);
		if (id == -ENOTUNIQ)
			return kml__fail(ENOTUNIQ, "BTF: '%s' is ambiguous: "
					 "several definitions of different "
					 "sizes", spec);
		if (id < 0) {
			if (find_kind(btf, spec + l, BTF_KIND_FWD) > 0)
				return kml__fail(ENOENT, "BTF: '%s' is only "
						 "declared, never defined, in "
						 "the kernel's BTF", spec);
			return kml__fail(ENOENT, "BTF: no type '%s' in the "
					 "kernel's BTF", spec);
		}
		return id;
	}
	for (i = 0; i < sizeof(bare) / sizeof(bare[0]); i++) {
		id = find_kind(btf, spec, bare[i]);
		if (id == -ENOTUNIQ)
			return kml__fail(ENOTUNIQ, "BTF: %s '%s' is ambiguous: "
					 "several definitions of different "
					 "sizes", kind_word(bare[i]), spec);
		if (id > 0)
			return id;
	}
	return kml__fail(ENOENT, "BTF: no type named '%s' (struct, union, "
			 "typedef, enum or base type) in the kernel's BTF", spec);
}

/* Skip typedefs and qualifiers. */
static const struct btf_type *resolved(const struct btf *btf, __u32 id,
				       __u32 *rid)
{
	int r = btf__resolve_type(btf, id);

	if (r < 0)
		return NULL;
	if (rid)
		*rid = (__u32)r;
	return btf__type_by_id(btf, (__u32)r);
}

/*
 * Find member `name` in the struct/union `t`, also inside its anonymous
 * members.  On success: *bits = bit offset from the start of t, *mtype =
 * the member's type id, *bitfield = its bitfield size (0: not a bitfield).
 */
static int find_member(const struct btf *btf, const struct btf_type *t,
		       const char *name, __u64 *bits, __u32 *mtype,
		       __u32 *bitfield, int depth)
{
	const struct btf_member *m = btf_members(t);
	__u16 i, n = btf_vlen(t);

	if (depth > 32)
		return -ELOOP;
	for (i = 0; i < n; i++, m++) {
		const char *mname = btf__name_by_offset(btf, m->name_off);

		if (mname && *mname && !strcmp(mname, name)) {
			*bits = btf_member_bit_offset(t, i);
			*mtype = m->type;
			*bitfield = btf_member_bitfield_size(t, i);
			return 0;
		}
	}
	m = btf_members(t);
	for (i = 0; i < n; i++, m++) {
		const char *mname = btf__name_by_offset(btf, m->name_off);
		const struct btf_type *mt;
		__u64 inner;

		if (mname && *mname)
			continue;
		mt = resolved(btf, m->type, NULL);
		if (!mt || !btf_is_composite(mt))
			continue;
		if (!find_member(btf, mt, name, &inner, mtype, bitfield,
				 depth + 1)) {
			*bits = btf_member_bit_offset(t, i) + inner;
			return 0;
		}
	}
	return -ENOENT;
}

long kml_btf_sizeof(const struct btf *btf, const char *type)
{
	__s64 size;
	int id;

	btf = the_btf(btf);
	if (!btf)
		return -errno;
	id = find_type(btf, type);
	if (id < 0)
		return id;
	size = btf__resolve_size(btf, (__u32)id);
	if (size < 0)
		return kml__fail((int)-size, "BTF: '%s' has no size: %s", type,
				 strerror((int)-size));
	return (long)size;
}

/* "struct foo" for messages; "an anonymous struct" when it has no name. */
static const char *type_words(const struct btf *btf, const struct btf_type *t,
			      char *buf, size_t size)
{
	const char *name = btf__name_by_offset(btf, t->name_off);

	if (name && *name)
		snprintf(buf, size, "%s %s", kind_word(btf_kind(t)), name);
	else
		snprintf(buf, size, "an anonymous %s", kind_word(btf_kind(t)));
	return buf;
}

int kml_btf_member(const struct btf *btf, const char *type,
		   const char *member, struct kml_btf_member *out)
{
	char path[MAX_PATH_LEN], words[128], *comp, *next;
	const struct btf_type *t;
	__u64 total = 0;
	__u32 mtype = 0;
	__s64 size;
	int id;

	btf = the_btf(btf);
	if (!btf)
		return -errno;
	if (!type)
		type = "(null)";
	if (!member || !*member)
		return kml__fail(EINVAL, "BTF: %s: empty member name", type);
	if (strlen(member) >= sizeof(path))
		return kml__fail(ENAMETOOLONG, "BTF: %s.%s: member path too "
				 "long", type, member);
	id = find_type(btf, type);
	if (id < 0)
		return id;
	t = resolved(btf, (__u32)id, NULL);
	if (!t || !btf_is_composite(t))
		return kml__fail(EINVAL, "BTF: '%s' is a %s, not a struct or "
				 "union", type, t ? kind_word(btf_kind(t)) : "type");
	strcpy(path, member);
	for (comp = path; comp; comp = next) {
		__u64 bits;
		__u32 bitfield;
		int r;

		next = strchr(comp, '.');
		if (next)
			*next++ = '\0';
		if (!*comp)
			return kml__fail(EINVAL, "BTF: %s: bad member path '%s'",
					 type, member);
		if (!t || !btf_is_composite(t))
			return kml__fail(EINVAL, "BTF: %s.%s: the member before "
					 "'%s' is a %s, not a struct or union%s",
					 type, member, comp,
					 t ? kind_word(btf_kind(t)) : "type",
					 t && btf_is_ptr(t) ? " (read the pointer "
					 "and look the member up in its target)" : "");
		r = find_member(btf, t, comp, &bits, &mtype, &bitfield, 0);
		if (r && comp == path)
			return kml__fail(-r, "BTF: %s has no member '%s'", type,
					 comp);
		if (r)
			return kml__fail(-r, "BTF: %s.%s: %s has no member '%s'",
					 type, member,
					 type_words(btf, t, words, sizeof(words)),
					 comp);
		if (bitfield)
			return kml__fail(EINVAL, "BTF: %s.%s is a bitfield (%u-bit, "
					 "at bit offset %llu): it has no "
					 "byte offset", type, member, bitfield,
					 (unsigned long long)(total + bits));
		if (bits % 8)
			return kml__fail(EINVAL, "BTF: %s.%s is not byte aligned "
					 "(bit offset %llu)", type, member,
					 (unsigned long long)(total + bits));
		total += bits;
		t = resolved(btf, mtype, NULL);
	}
	size = btf__resolve_size(btf, mtype);
	if (size < 0) {
		if (t && btf_is_array(t) && btf_array(t)->nelems == 0)
			size = 0;	/* flexible array member */
		else
			return kml__fail((int)-size, "BTF: %s.%s has no size: %s",
					 type, member, strerror((int)-size));
	}
	if (out) {
		out->offset = (size_t)(total / 8);
		out->size = (size_t)size;
		out->type_id = mtype;
	}
	return 0;
}

long kml_btf_offsetof(const struct btf *btf, const char *type,
		      const char *member)
{
	struct kml_btf_member m;
	int r = kml_btf_member(btf, type, member, &m);

	return r ? r : (long)m.offset;
}
