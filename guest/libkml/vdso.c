// SPDX-License-Identifier: GPL-2.0
/*
 * libkml: find __vdso_kml_syscall in the vDSO and decide, once per
 * process, how kml_syscall6() enters the kernel.
 *
 * No C library here (the object is linked into nolibc programs too): the
 * ELF types come from <elf.h>, which is only declarations.
 *
 * The vDSO is an ordinary ELF shared object that the kernel maps complete
 * (headers included) at AT_SYSINFO_EHDR and never relocates: every address
 * in its dynamic section is a link-time address, so the load bias is the
 * mapping address minus the link address of the segment at file offset 0.
 */
#include <elf.h>
#include <stddef.h>
#include <stdint.h>

#include "kml.h"

#define KML_ENTRY_NAME		"__vdso_kml_syscall"
#define KML_ENTRY_VERSION	"LINUX_2.6"

/*
 * What kml_syscall6() (syscall.S) does: 0 = not decided yet (resolve
 * first), 1 = `syscall` instruction, otherwise the address to call.
 * Written once with release semantics; a plain load reads it (x86-64
 * loads are acquire loads).
 */
#define ENTRY_UNRESOLVED	0UL
#define ENTRY_SYSCALL		1UL

__attribute__((visibility("hidden"))) unsigned long kml__entry;
static const void *vdso_base;	/* published before kml__entry */
static void *vdso_entry;

int kml_kernel_mode(void)
{
	unsigned short cs;

	asm volatile("mov %%cs, %0" : "=r"(cs));
	return (cs & 3) == 0;
}

static int str_eq(const char *a, const char *b)
{
	while (*a && *a == *b) {
		a++;
		b++;
	}
	return *a == *b;
}

/* The parts of a vDSO image a lookup needs. */
struct image {
	uintptr_t bias;
	const Elf64_Sym *sym;
	const char *str;
	const uint32_t *sysv_hash;
	const uint32_t *gnu_hash;
	const Elf64_Versym *versym;
	const Elf64_Verdef *verdef;
	size_t nsyms;		/* 0 when unknown */
};

/* Number of dynamic symbols, from the section headers (if any). */
static size_t dynsym_count_from_sections(const Elf64_Ehdr *eh)
{
	const Elf64_Shdr *sh;
	int i;

	if (!eh->e_shoff || eh->e_shentsize != sizeof(Elf64_Shdr))
		return 0;
	sh = (const Elf64_Shdr *)((const char *)eh + eh->e_shoff);
	for (i = 0; i < eh->e_shnum; i++)
		if (sh[i].sh_type == SHT_DYNSYM &&
		    sh[i].sh_entsize == sizeof(Elf64_Sym))
			return sh[i].sh_size / sizeof(Elf64_Sym);
	return 0;
}

/* One past the highest symbol index a GNU hash table covers. */
static size_t dynsym_count_from_gnu_hash(const uint32_t *h)
{
	uint32_t nbuckets = h[0], symoffset = h[1], bloom_size = h[2];
	const uint32_t *buckets = h + 4 + 2 * (size_t)bloom_size;
	const uint32_t *chain = buckets + nbuckets;
	uint32_t i, last = 0;

	for (i = 0; i < nbuckets; i++)
		if (buckets[i] > last)
			last = buckets[i];
	if (last < symoffset)
		return symoffset;
	while (!(chain[last - symoffset] & 1))
		last++;
	return (size_t)last + 1;
}

static int image_init(struct image *im, const void *base)
{
	const Elf64_Ehdr *eh = base;
	const Elf64_Phdr *ph;
	const Elf64_Dyn *dyn = NULL, *d;
	int have_load = 0, i;

	if (!eh || eh->e_ident[EI_MAG0] != ELFMAG0 ||
	    eh->e_ident[EI_MAG1] != ELFMAG1 || eh->e_ident[EI_MAG2] != ELFMAG2 ||
	    eh->e_ident[EI_MAG3] != ELFMAG3 ||
	    eh->e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh->e_ident[EI_DATA] != ELFDATA2LSB ||
	    eh->e_machine != EM_X86_64 ||
	    eh->e_phentsize != sizeof(Elf64_Phdr))
		return -1;

	im->bias = 0;
	ph = (const Elf64_Phdr *)((const char *)base + eh->e_phoff);
	for (i = 0; i < eh->e_phnum; i++) {
		if (ph[i].p_type == PT_LOAD && !have_load) {
			im->bias = (uintptr_t)base + ph[i].p_offset -
				   ph[i].p_vaddr;
			have_load = 1;
		} else if (ph[i].p_type == PT_DYNAMIC) {
			dyn = (const Elf64_Dyn *)((const char *)base +
						  ph[i].p_offset);
		}
	}
	if (!have_load || !dyn)
		return -1;

	im->sym = NULL;
	im->str = NULL;
	im->sysv_hash = NULL;
	im->gnu_hash = NULL;
	im->versym = NULL;
	im->verdef = NULL;
	for (d = dyn; d->d_tag != DT_NULL; d++) {
		uintptr_t p = im->bias + d->d_un.d_ptr;

		switch (d->d_tag) {
		case DT_SYMTAB:
			im->sym = (const Elf64_Sym *)p;
			break;
		case DT_STRTAB:
			im->str = (const char *)p;
			break;
		case DT_HASH:
			im->sysv_hash = (const uint32_t *)p;
			break;
		case DT_GNU_HASH:
			im->gnu_hash = (const uint32_t *)p;
			break;
		case DT_VERSYM:
			im->versym = (const Elf64_Versym *)p;
			break;
		case DT_VERDEF:
			im->verdef = (const Elf64_Verdef *)p;
			break;
		}
	}
	if (!im->sym || !im->str)
		return -1;
	if (im->sysv_hash)
		im->nsyms = im->sysv_hash[1];	/* nchain */
	else if (im->gnu_hash)
		im->nsyms = dynsym_count_from_gnu_hash(im->gnu_hash);
	else
		im->nsyms = dynsym_count_from_sections(eh);
	return 0;
}

/* Does symbol i have version `version` (DT_VERSYM index -> DT_VERDEF)? */
static int version_matches(const struct image *im, size_t i,
			   const char *version)
{
	const Elf64_Verdef *vd = im->verdef;
	unsigned int ndx;

	if (!version || !im->versym)
		return 1;	/* unversioned image: any version will do */
	if (!vd)
		return 0;
	ndx = im->versym[i] & 0x7fff;	/* the hidden bit off */
	for (;;) {
		if (!(vd->vd_flags & VER_FLG_BASE) && vd->vd_ndx == ndx) {
			const Elf64_Verdaux *aux = (const Elf64_Verdaux *)
				((const char *)vd + vd->vd_aux);

			return str_eq(im->str + aux->vda_name, version);
		}
		if (!vd->vd_next)
			return 0;
		vd = (const Elf64_Verdef *)((const char *)vd + vd->vd_next);
	}
}

/* Is symbol i the defined global function/object `name`, version ok? */
static int sym_matches(const struct image *im, size_t i, const char *name,
		       const char *version)
{
	const Elf64_Sym *s = &im->sym[i];
	unsigned int type = ELF64_ST_TYPE(s->st_info);
	unsigned int bind = ELF64_ST_BIND(s->st_info);

	if (s->st_shndx == SHN_UNDEF || !s->st_name)
		return 0;
	if (type != STT_FUNC && type != STT_OBJECT && type != STT_NOTYPE)
		return 0;
	if (bind != STB_GLOBAL && bind != STB_WEAK)
		return 0;
	return str_eq(im->str + s->st_name, name) &&
	       version_matches(im, i, version);
}

static uint32_t gnu_hash(const char *s)
{
	uint32_t h = 5381;

	for (; *s; s++)
		h = h * 33 + (unsigned char)*s;
	return h;
}

static uint32_t sysv_hash(const char *s)
{
	uint32_t h = 0, g;

	for (; *s; s++) {
		h = (h << 4) + (unsigned char)*s;
		g = h & 0xf0000000;
		if (g)
			h ^= g >> 24;
		h &= ~g;
	}
	return h;
}

static long find_gnu(const struct image *im, const char *name,
		     const char *version)
{
	const uint32_t *h = im->gnu_hash;
	uint32_t nbuckets = h[0], symoffset = h[1];
	uint32_t bloom_size = h[2], bloom_shift = h[3];
	const uint64_t *bloom = (const uint64_t *)(h + 4);
	const uint32_t *buckets = h + 4 + 2 * (size_t)bloom_size;
	const uint32_t *chain = buckets + nbuckets;
	uint32_t hash = gnu_hash(name), i, ch;
	uint64_t word, mask;

	if (!nbuckets || !bloom_size)
		return -1;
	word = bloom[(hash / 64) % bloom_size];
	mask = (1ULL << (hash % 64)) | (1ULL << ((hash >> bloom_shift) % 64));
	if ((word & mask) != mask)
		return -1;
	i = buckets[hash % nbuckets];
	if (i < symoffset)
		return -1;
	for (;; i++) {
		ch = chain[i - symoffset];
		if ((ch | 1) == (hash | 1) && sym_matches(im, i, name, version))
			return i;
		if (ch & 1)
			return -1;
	}
}

static long find_sysv(const struct image *im, const char *name,
		      const char *version)
{
	uint32_t nbucket = im->sysv_hash[0], nchain = im->sysv_hash[1];
	const uint32_t *bucket = im->sysv_hash + 2;
	const uint32_t *chain = bucket + nbucket;
	uint32_t i, steps = 0;

	if (!nbucket)
		return -1;
	for (i = bucket[sysv_hash(name) % nbucket]; i && i < nchain;
	     i = chain[i]) {
		if (sym_matches(im, i, name, version))
			return i;
		if (++steps > nchain)	/* a cycle: a corrupt table */
			break;
	}
	return -1;
}

static long find_linear(const struct image *im, const char *name,
			const char *version)
{
	size_t i;

	for (i = 1; i < im->nsyms; i++)
		if (sym_matches(im, i, name, version))
			return (long)i;
	return -1;
}

void *kml_vdso_sym(const void *base, const char *name, const char *version,
		   enum kml_lookup how)
{
	struct image im;
	long i = -1;

	if (!name || image_init(&im, base))
		return NULL;
	switch (how) {
	case KML_LOOKUP_AUTO:
		if (im.gnu_hash)
			i = find_gnu(&im, name, version);
		else if (im.sysv_hash)
			i = find_sysv(&im, name, version);
		else
			i = find_linear(&im, name, version);
		break;
	case KML_LOOKUP_GNU_HASH:
		if (im.gnu_hash)
			i = find_gnu(&im, name, version);
		break;
	case KML_LOOKUP_SYSV_HASH:
		if (im.sysv_hash)
			i = find_sysv(&im, name, version);
		break;
	case KML_LOOKUP_LINEAR:
		i = find_linear(&im, name, version);
		break;
	}
	if (i < 0)
		return NULL;
	return (void *)(im.bias + im.sym[i].st_value);
}

/*
 * Decides how kml_syscall6() enters the kernel; called by it (syscall.S)
 * while kml__entry is still 0.  Returns the entry to use for this call.
 * Threads that race here compute the same answer; the first store wins
 * nothing, every store is the same value.
 */
__attribute__((visibility("hidden"))) unsigned long kml__resolve(void)
{
	unsigned long e = __atomic_load_n(&kml__entry, __ATOMIC_ACQUIRE);
	unsigned long base;
	void *sym = NULL;

	if (e != ENTRY_UNRESOLVED)
		return e;
	base = kml__sysinfo_ehdr();
	if (base == KML_VDSO_UNKNOWN)
		return ENTRY_SYSCALL;	/* too early: ask again next time */
	if (base)
		sym = kml_vdso_sym((const void *)base, KML_ENTRY_NAME,
				   KML_ENTRY_VERSION, KML_LOOKUP_AUTO);
	__atomic_store_n(&vdso_base, (const void *)base, __ATOMIC_RELAXED);
	__atomic_store_n(&vdso_entry, sym, __ATOMIC_RELAXED);
	/*
	 * The mode cannot change while this address space exists: it is
	 * decided at execve, and fork keeps it.
	 */
	e = sym && kml_kernel_mode() ? (unsigned long)sym : ENTRY_SYSCALL;
	__atomic_store_n(&kml__entry, e, __ATOMIC_RELEASE);
	return e;
}

int kml_call_path(void)
{
	return kml__resolve() != ENTRY_SYSCALL;
}

const void *kml_vdso_base(void)
{
	kml__resolve();
	return __atomic_load_n(&vdso_base, __ATOMIC_RELAXED);
}

void *kml_vdso_entry(void)
{
	kml__resolve();
	return __atomic_load_n(&vdso_entry, __ATOMIC_RELAXED);
}
