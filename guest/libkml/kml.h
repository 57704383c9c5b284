/* SPDX-License-Identifier: GPL-2.0 */
/*
 * libkml: system calls as function calls for kernel-mode processes.
 *
 * A program that runs from /trusted at CPL 0 ("kernel mode") on a kml
 * kernel can enter the kernel with a plain `call` of the vDSO function
 * __vdso_kml_syscall instead of the `syscall` instruction (the "call
 * path").  libkml finds that function in the vDSO with its own small ELF
 * parser (once, lazily and thread-safely, on the first call) and issues
 * system calls through it when the caller runs in kernel mode.  In every
 * other case -- user mode (CPL 3), a kernel without the symbol, no vDSO --
 * it falls back silently to the `syscall` instruction, so the same binary
 * works everywhere.
 *
 * Calling convention of __vdso_kml_syscall (the kernel's interface): rax =
 * system-call number, arguments in rdi, rsi, rdx, r10, r8, r9 (as for the
 * `syscall` instruction), result in rax (-errno on error); it clobbers
 * rcx, r11 and the flags and preserves every other register.  Because it
 * is a `call`, it writes a return address below the caller's stack
 * pointer: never call it from inline assembly in a function that may keep
 * data in its red zone.  kml_syscall6() is an out-of-line assembly
 * function for that reason.
 *
 * Like syscall(2), these functions cannot be used for the few calls whose
 * semantics depend on the caller's stack: vfork, clone with a new stack,
 * clone3, rt_sigreturn.  Use the libc wrappers (or your own assembly).
 *
 * Linking: libkml.a.  The core (kml_syscall6, kml_call_path, the vDSO
 * parser) uses no C library; kml_syscall() needs errno from the C library.
 * The vDSO address comes from getauxval(AT_SYSINFO_EHDR) (C library); a
 * freestanding program supplies it through kml__sysinfo_ehdr(), as
 * kml_nolibc.h does for the kernel's nolibc.
 *
 * This header includes no other header, so it can be used with any libc
 * or none.
 */
#ifndef KML_H
#define KML_H

#ifdef __cplusplus
extern "C" {
#endif

/* 1 when the caller runs at CPL 0 (the low bits of CS are 0), else 0. */
int kml_kernel_mode(void);

/*
 * 1 when kml_syscall*() go through __vdso_kml_syscall (the symbol is in
 * the vDSO AND the caller runs in kernel mode), 0 when they fall back to
 * the `syscall` instruction.  Resolves the vDSO on first use.
 */
int kml_call_path(void);

/*
 * Raw system call: returns the kernel's result, -errno on error (errno is
 * not touched).  Goes through the call path when kml_call_path() is 1.
 */
long kml_syscall6(long nr, long a1, long a2, long a3, long a4, long a5,
		  long a6);

static inline long kml_syscall0(long nr)
{
	return kml_syscall6(nr, 0, 0, 0, 0, 0, 0);
}

static inline long kml_syscall1(long nr, long a1)
{
	return kml_syscall6(nr, a1, 0, 0, 0, 0, 0);
}

static inline long kml_syscall2(long nr, long a1, long a2)
{
	return kml_syscall6(nr, a1, a2, 0, 0, 0, 0);
}

static inline long kml_syscall3(long nr, long a1, long a2, long a3)
{
	return kml_syscall6(nr, a1, a2, a3, 0, 0, 0);
}

static inline long kml_syscall4(long nr, long a1, long a2, long a3, long a4)
{
	return kml_syscall6(nr, a1, a2, a3, a4, 0, 0);
}

static inline long kml_syscall5(long nr, long a1, long a2, long a3, long a4,
				long a5)
{
	return kml_syscall6(nr, a1, a2, a3, a4, a5, 0);
}

/*
 * syscall(2) semantics: up to six long arguments; on a result in
 * [-4095, -1] sets errno and returns -1.  Needs the C library's errno.
 */
long kml_syscall(long nr, ...);

/* The vDSO's ELF header (AT_SYSINFO_EHDR), or NULL when there is none. */
const void *kml_vdso_base(void);

/*
 * Address of __vdso_kml_syscall (version LINUX_2.6) in this process's
 * vDSO, or NULL when the kernel does not export it.  Non-NULL in user
 * mode too (there the function executes `syscall` itself).
 */
void *kml_vdso_entry(void);

/* How kml_vdso_sym() searches the dynamic symbol table. */
enum kml_lookup {
	KML_LOOKUP_AUTO,	/* GNU hash, else SysV hash, else linear */
	KML_LOOKUP_GNU_HASH,	/* DT_GNU_HASH only */
	KML_LOOKUP_SYSV_HASH,	/* DT_HASH only */
	KML_LOOKUP_LINEAR,	/* every symbol in turn */
};

/*
 * The address of the defined global function or object `name` in the
 * vDSO image at `base` (an ELF header in memory, as mapped by the kernel),
 * or NULL.  With a non-NULL `version`, the symbol's version (DT_VERSYM /
 * DT_VERDEF) must be that name.  NULL for a NULL base, an image that is
 * not a 64-bit x86-64 ELF with a dynamic section, or an unusable `how`.
 */
void *kml_vdso_sym(const void *base, const char *name, const char *version,
		   enum kml_lookup how);

/*
 * Library internals, visible for kml_nolibc.h.  kml__sysinfo_ehdr()
 * returns the vDSO address (0: no vDSO), or KML_VDSO_UNKNOWN when it cannot
 * be known yet (libkml then uses the `syscall` instruction and asks again
 * on the next call).  libkml.a defines it with getauxval(); a program that
 * defines its own wins, because the archive member is then not linked.
 */
#define KML_VDSO_UNKNOWN	(~0UL)
unsigned long kml__sysinfo_ehdr(void);

#ifdef __cplusplus
}
#endif

#endif /* KML_H */
