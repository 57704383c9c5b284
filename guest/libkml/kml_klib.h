/* SPDX-License-Identifier: GPL-2.0 */
/*
 * libkml's kernel library ("klib"): a kernel-mode process calls kernel
 * functions and reads kernel data.  See docs/kernel-library.md.
 *
 * A program that runs from /trusted at CPL 0 on a kml kernel runs on the
 * kernel page tables with SMAP/SMEP off: it can read kernel memory with
 * ordinary loads, and call kernel functions through handles: the kernel
 * validates a function once, by name (arch_prctl(ARCH_KML_KFUNC_OPEN)),
 * and the vDSO's __vdso_kml_kcall calls it without a system call.  This
 * header offers
 *
 *   kml_kfunc_open()                a handle to a kernel function, by name
 *   kml_kfunc_call(), _call6()      call it (0..6 integer or pointer
 *                                   arguments) and get its value
 *   kml_kread()                     read kernel memory without faulting
 *   kml_ksym(), kml_ksym_lookup()   kernel symbols by name (/proc/kallsyms)
 *   kml_btf_sizeof(), _offsetof()   struct layouts from the kernel's BTF
 *                                   (/sys/kernel/btf/vmlinux, via libbpf)
 *
 * Safety contract of a kernel call.  The kernel checks, when a function
 * is opened, that
 *   - the caller is a kernel-mode process, else -EPERM (calls through a
 *     handle are refused at CPL 3 too);
 *   - the name is exactly one symbol of the core kernel (-ENOENT,
 *     -ENOTUNIQ), the entry of a C function (it has a BTF description)
 *     in the kernel text outside the entry and noinstr code, not init
 *     text, else -EINVAL (data, assembly entry points, modules);
 *   - the function has at most six parameters, else -E2BIG.
 * Nothing else is checked: that is the caller's responsibility, exactly
 * as for kernel code.  The function must be callable from a system call
 * (process context, may sleep, no locks held), the arguments must be
 * what it expects, and memory of this process passed to it must be
 * present (touched and better mlock()ed) -- kernel code does not expect
 * a fault on it.  A fault inside the called function is a kernel oops,
 * not a signal to this process.
 *
 * The return value is the function's raw 64-bit RAX.  For a function that
 * returns a narrower type only the low bits are defined: cast the value to
 * the function's return type, e.g. (int)ret.
 *
 * Errors: the lookups (kallsyms, BTF) and kml_kread() return NULL or a
 * negative errno value, set errno, and leave a message naming what was
 * missing or refused in kml_klib_error() (per thread).  kml_kfunc_open()
 * and kml_kfunc_call6() return -errno and touch neither;
 * kml_kfunc_strerror() explains it.
 *
 * Linking: libkml.a.  The kernel calls, kml_kread() and the kallsyms
 * parser need only the C library; the BTF functions need libbpf:
 *   cc -static prog.c libkml.a -lbpf -lelf -lz
 * A program that uses no kml_btf_*() function links without libbpf.
 */
#ifndef KML_KLIB_H
#define KML_KLIB_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* arch_prctl code (the kernel's uapi asm/prctl.h) and table size (asm/kml.h) */
#ifndef ARCH_KML_KFUNC_OPEN
#define ARCH_KML_KFUNC_OPEN	0x6001
#endif
#ifndef KML_KFUNC_MAX
#define KML_KFUNC_MAX		64	/* handles per process */
#endif

/* ---- calling kernel functions: handles ------------------------------ */

/*
 * Open the kernel function called name: the kernel checks once that it
 * is exactly one symbol, the entry of a C function (BTF) in the core
 * kernel text outside the entry code, with at most six parameters, and
 * returns a handle (>= 0), the same one for the same function.  Handles
 * belong to the process: threads share them, fork copies them, execve
 * drops them; they are never closed; at most KML_KFUNC_MAX (kml_kread()
 * uses one).  Errors: -EPERM (not in kernel mode), -ENOENT (no such
 * symbol), -ENOTUNIQ (several symbols of that name), -EINVAL (not a
 * callable C function: data, an assembly entry point, entry or noinstr
 * code, init text, a module), -E2BIG (more than six parameters), -ENOSPC
 * (table full), -EOPNOTSUPP (kernel without BTF), -ENAMETOOLONG, -EFAULT.
 * Never touches errno.
 */
int kml_kfunc_open(const char *name);

/*
 * Call the function behind handle h with six arguments, without a system
 * call (the vDSO's __vdso_kml_kcall enters the kernel directly).  Returns
 * 0 and stores the function's value in *ret (if ret is not NULL), or
 * -EBADF (no such handle in this process), -EPERM (not in kernel mode),
 * -ENOSYS (kernel without __vdso_kml_kcall); *ret is not touched then.
 * Never touches errno; the result and the error cannot be confused.
 */
int kml_kfunc_call6(int h, unsigned long *ret, unsigned long a1,
		    unsigned long a2, unsigned long a3, unsigned long a4,
		    unsigned long a5, unsigned long a6);

/*
 * Variadic front end for 0..6 arguments, each converted to unsigned long
 * (integers and pointers; more than six arguments is a compile error):
 *
 *	unsigned long n;
 *	int h = kml_kfunc_open("strlen");
 *	int err = h < 0 ? h : kml_kfunc_call(h, &n, buf);
 */
#define kml_kfunc_call(h, ret, ...) \
	KML__CAT(KML__KF, KML__NARGS(__VA_ARGS__))(h, ret, ##__VA_ARGS__)

/* What a kml_kfunc_open() or kml_kfunc_call() error means. */
const char *kml_kfunc_strerror(int err);

/*
 * Copy n bytes of kernel memory at ksrc to dst through the kernel's
 * copy_from_kernel_nofault() (a handle, opened on first use): 0, or
 * -EFAULT when ksrc is not mapped, -ERANGE when it is not a kernel
 * address, -EPERM in user mode, or an error of kml_kfunc_open().  Use it
 * where a direct load could fault (memory that may be freed concurrently:
 * a direct load of an unmapped kernel address is a SIGSEGV for this
 * process).  dst is written before the call so that it is present.
 */
int kml_kread(void *dst, const void *ksrc, size_t n);

/* ---- kernel symbols (/proc/kallsyms) -------------------------------- */

struct kml_ksym {
	unsigned long addr;
	unsigned long size;	/* distance to the next symbol (kallsyms' notion) */
	char type;		/* nm type: T/t text, D/d data, R/r rodata, B/b bss... */
	const char *name;	/* valid while the table lives */
};

/*
 * Look a symbol up in this kernel's /proc/kallsyms (read and cached on
 * first use; needs root: addresses are hidden otherwise).  Global symbols
 * win over local ones; a name that remains ambiguous (several local
 * symbols at different addresses) is an error, as is a missing one.
 * Module symbols are ignored.  Returns 0 or -errno (ENOENT: no such
 * symbol; ENOTUNIQ: ambiguous; EACCES: addresses hidden).
 */
int kml_ksym_lookup(const char *name, struct kml_ksym *out);

/* The symbol's address, or NULL (errno and kml_klib_error() set). */
void *kml_ksym(const char *name);

/* Any file in /proc/kallsyms format (tests, System.map-like files). */
struct kml_ksyms;
struct kml_ksyms *kml_ksyms_load(const char *path);
int kml_ksyms_find(const struct kml_ksyms *tab, const char *name,
		   struct kml_ksym *out);
size_t kml_ksyms_count(const struct kml_ksyms *tab);
void kml_ksyms_free(struct kml_ksyms *tab);

/* ---- kernel types (BTF, through libbpf) ----------------------------- */

struct btf;			/* libbpf's */

/*
 * The running kernel's BTF, /sys/kernel/btf/vmlinux, parsed once; NULL
 * with a message when it is missing (CONFIG_DEBUG_INFO_BTF, sysfs).
 */
struct btf *kml_btf(void);

/* Any BTF file (raw or ELF); free with btf__free(). */
struct btf *kml_btf_load(const char *path);

/*
 * Type names: "struct task_struct", "union thread_union", "enum
 * pid_type", or a bare name, tried as struct, union, typedef, enum and
 * base type in that order.  A btf argument of NULL means kml_btf().
 */

/* sizeof(type), or -errno. */
long kml_btf_sizeof(const struct btf *btf, const char *type);

struct kml_btf_member {
	size_t offset;		/* bytes from the start of the outer type */
	size_t size;		/* sizeof the member (0: flexible array) */
	uint32_t type_id;	/* BTF id of the member's type */
};

/*
 * Offset and size of a member.  member is a path of member names
 * separated by dots ("tasks.next", "__sk_common.skc_daddr"); members of
 * anonymous structs and unions are found as in C.  Bitfields are refused
 * (-EINVAL: they have no byte offset), as is a path through a pointer or
 * a non-struct member.  Returns 0 or -errno (ENOENT: no such type or
 * member).
 */
int kml_btf_member(const struct btf *btf, const char *type,
		   const char *member, struct kml_btf_member *out);

/* offsetof(type, member), or -errno. */
long kml_btf_offsetof(const struct btf *btf, const char *type,
		      const char *member);

/* ---- errors ---------------------------------------------------------- */

/* The last klib error message of this thread ("" if none). */
const char *kml_klib_error(void);

/* ---- implementation of the front ends -------------------------------- */

#define KML__CAT_(a, b)	a##b
#define KML__CAT(a, b)	KML__CAT_(a, b)
#define KML__NARGS(...) \
	KML__NARGS_(_, ##__VA_ARGS__, 7, 6, 5, 4, 3, 2, 1, 0)
#define KML__NARGS_(_, a1, a2, a3, a4, a5, a6, a7, n, ...) n
#define KML__A(x)	((unsigned long)(x))

#define KML__KF0(h, r) kml_kfunc_call6(h, r, 0, 0, 0, 0, 0, 0)
#define KML__KF1(h, r, a) kml_kfunc_call6(h, r, KML__A(a), 0, 0, 0, 0, 0)
#define KML__KF2(h, r, a, b) \
	kml_kfunc_call6(h, r, KML__A(a), KML__A(b), 0, 0, 0, 0)
#define KML__KF3(h, r, a, b, c) \
	kml_kfunc_call6(h, r, KML__A(a), KML__A(b), KML__A(c), 0, 0, 0)
#define KML__KF4(h, r, a, b, c, d) \
	kml_kfunc_call6(h, r, KML__A(a), KML__A(b), KML__A(c), \
			KML__A(d), 0, 0)
#define KML__KF5(h, r, a, b, c, d, e) \
	kml_kfunc_call6(h, r, KML__A(a), KML__A(b), KML__A(c), \
			KML__A(d), KML__A(e), 0)
#define KML__KF6(h, r, a, b, c, d, e, g) \
	kml_kfunc_call6(h, r, KML__A(a), KML__A(b), KML__A(c), \
			KML__A(d), KML__A(e), KML__A(g))

#ifdef __cplusplus
}
#endif

#endif /* KML_KLIB_H */
