// SPDX-License-Identifier: GPL-2.0
/*
 * No kernel address reaches an ordinary process.  The scanner reads
 * everything a process can map or read about itself without privilege:
 * every page of its vvar area (pages it may not have are skipped on
 * SIGBUS/SIGSEGV), the data sections of its vDSO, its auxiliary vector,
 * and every file of /proc/self; it reports each 8-byte word and each
 * number written as
 * text that falls in the kernel's randomized ranges (text and modules,
 * the direct map, vmalloc, vmemmap).  The fixed addresses of the
 * vsyscall page and the cpu entry area are not secrets.
 *
 * The tests run the scanner as nobody and as root in user mode, where
 * it must find nothing, and -- the control that shows it can find an
 * address -- from /trusted in kernel mode, where the vDSO call path's
 * entry (a kernel text address) is mapped for the process.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "kml_util.h"

#define SCAN_ARG	"--scan-for-kernel-addresses"
#define NOBODY		65534

/* The randomized parts of the kernel half (x86-64, 4-level paging) */
static int kernel_address(uint64_t v)
{
	/* text, modules (up to the fixmap/vsyscall area) */
	if (v >= 0xffffffff80000000ULL && v < 0xffffffffff000000ULL)
		return 1;
	/* direct map, vmalloc, vmemmap (below the cpu entry area) */
	return v >= 0xffff888000000000ULL && v < 0xfffffe0000000000ULL;
}

static int hits;

static void report(const char *where, size_t off, uint64_t v)
{
	if (hits++ < 20)
		printf("kernel address 0x%016llx in %s+%#zx\n",
		       (unsigned long long)v, where, off);
}

static void scan_words(const char *where, const void *buf, size_t len)
{
	for (size_t off = 0; off + 8 <= len; off += 8) {
		uint64_t v;

		memcpy(&v, (const char *)buf + off, 8);
		if (kernel_address(v))
			report(where, off, v);
	}
}

/* Numbers written as text: decimal, 0x-hex, and bare 16-digit hex */
static void scan_text(const char *where, const char *buf, size_t len)
{
	size_t i = 0;

	while (i < len) {
		size_t j = i;
		uint64_t v;
		char tok[32];
		int hex;

		while (j < len && isxdigit((unsigned char)buf[j]))
			j++;
		if (j == i) {
			i++;
			continue;
		}
		if (j - i < sizeof(tok)) {
			memcpy(tok, buf + i, j - i);
			tok[j - i] = '\0';
			hex = j - i == 16 ||
			      (i >= 2 && buf[i - 1] == 'x' && buf[i - 2] == '0');
			errno = 0;
			v = strtoull(tok, NULL, hex ? 16 : 10);
			if (!errno && kernel_address(v))
				report(where, i, v);
		}
		i = j;
	}
}

static sigjmp_buf fault_jmp;

static void on_fault(int sig)
{
	siglongjmp(fault_jmp, sig);
}

/* Every page of a mapping, skipping those that cannot be read. */
static void scan_mapping(const char *name, uintptr_t start, uintptr_t end)
{
	static char page[4096];

	for (uintptr_t p = start; p < end; p += sizeof(page)) {
		char where[64];

		if (sigsetjmp(fault_jmp, 1))
			continue;
		memcpy(page, (const void *)p, sizeof(page));
		snprintf(where, sizeof(where), "%s page %zu", name,
			 (size_t)(p - start) / sizeof(page));
		scan_words(where, page, sizeof(page));
	}
}

/*
 * The vDSO is an ELF image built with the kernel: its code is the same
 * bytes at every boot, and random instruction bytes look like addresses,
 * so only the sections that hold data are scanned, but for tables of
 * code offsets (alternatives, unwind data), whose negative 32-bit
 * offsets look like addresses too.
 */
static void scan_vdso_data(uintptr_t start, uintptr_t end)
{
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)start;
	const Elf64_Shdr *sh;
	const char *names;
	int scanned = 0;

	if (end - start < sizeof(*eh) || memcmp(eh->e_ident, ELFMAG, SELFMAG) ||
	    eh->e_shoff + (uint64_t)eh->e_shnum * sizeof(*sh) > end - start) {
		printf("[vdso]: no section headers, not scanned\n");
		hits++;
		return;
	}
	sh = (const Elf64_Shdr *)(start + eh->e_shoff);
	if (eh->e_shstrndx >= eh->e_shnum ||
	    sh[eh->e_shstrndx].sh_offset >= end - start) {
		printf("[vdso]: no section names, not scanned\n");
		hits++;
		return;
	}
	names = (const char *)(start + sh[eh->e_shstrndx].sh_offset);
	for (int i = 0; i < eh->e_shnum; i++) {
		const char *name = names + sh[i].sh_name;
		char where[64];

		/* Tables of code offsets (alternatives, unwind data) */
		if (!strncmp(name, ".alt", 4) || !strncmp(name, ".eh_frame", 9))
			continue;
		if (!(sh[i].sh_flags & SHF_ALLOC) ||
		    (sh[i].sh_flags & SHF_EXECINSTR) ||
		    sh[i].sh_type == SHT_NOBITS ||
		    sh[i].sh_offset + sh[i].sh_size > end - start)
			continue;
		snprintf(where, sizeof(where), "[vdso] %s", name);
		scan_words(where, (const void *)(start + sh[i].sh_offset),
			   sh[i].sh_size & ~7UL);
		scanned++;
	}
	if (!scanned) {
		printf("[vdso]: no data sections found\n");
		hits++;
	}
}

static void scan_special_mappings(void)
{
	char line[512];
	FILE *f = fopen("/proc/self/maps", "r");

	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		unsigned long start, end;

		if (sscanf(line, "%lx-%lx", &start, &end) != 2)
			continue;
		if (strstr(line, "[vvar]"))
			scan_mapping("[vvar]", start, end);
		else if (strstr(line, "[vdso]"))
			scan_vdso_data(start, end);
	}
	fclose(f);
}

/* Files of /proc/self that are not worth or not safe to read whole */
static int skip_proc_file(const char *name)
{
	static const char *const skip[] = {
		"mem", "pagemap", "clear_refs", "kpageflags", NULL,
	};

	for (int i = 0; skip[i]; i++)
		if (!strcmp(name, skip[i]))
			return 1;
	return 0;
}

static void scan_proc_self(void)
{
	static char buf[1 << 20];
	DIR *d = opendir("/proc/self");
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d))) {
		char path[300], where[300];
		struct stat st;
		ssize_t n, len = 0;
		int fd;

		snprintf(path, sizeof(path), "/proc/self/%s", e->d_name);
		if (skip_proc_file(e->d_name) || lstat(path, &st) ||
		    !S_ISREG(st.st_mode))
			continue;
		fd = open(path, O_RDONLY | O_NONBLOCK);
		if (fd < 0)
			continue;
		while (len < (ssize_t)sizeof(buf) &&
		       (n = read(fd, buf + len, sizeof(buf) - len)) > 0)
			len += n;
		close(fd);
		snprintf(where, sizeof(where), "/proc/self/%s", e->d_name);
		scan_words(where, buf, len);
		scan_text(where, buf, len);
	}
	closedir(d);
}

static void scan_auxv(void)
{
	for (unsigned long type = 1; type < 64; type++) {
		uint64_t v;

		errno = 0;
		v = getauxval(type);
		if (!errno && kernel_address(v))
			report("auxv", type, v);
	}
}

/* The scanner: runs before the test harness when given SCAN_ARG. */
__attribute__((constructor))
static void scanner(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_fault };

	if (argc < 2 || strcmp(argv[1], SCAN_ARG))
		return;
	sigaction(SIGBUS, &sa, NULL);
	sigaction(SIGSEGV, &sa, NULL);
	scan_special_mappings();
	scan_auxv();
	scan_proc_self();
	printf("cpl=%d uid=%d hits=%d\n", kml_cpl(), getuid(), hits);
	fflush(stdout);
	_exit(0);
}

static int become_uid(const void *arg)
{
	uid_t uid = *(const uid_t *)arg;

	return setgroups(0, NULL) || setresgid(uid, uid, uid) ||
	       setresuid(uid, uid, uid);
}

/* Run prog SCAN_ARG as uid; its output into out. */
static int run_scan(const char *prog, uid_t uid, char *out, size_t size)
{
	char *argv[] = { (char *)prog, SCAN_ARG, NULL };

	return kml_run_capture_setup(argv, NULL, uid ? become_uid : NULL, &uid,
				     out, size, NULL);
}

static const char *self_exe(void)
{
	static char path[256];
	ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);

	if (n < 0)
		return NULL;
	path[n] = '\0';
	return path;
}

TEST(unprivileged_process_finds_no_kernel_address)
{
	char out[4096];

	ASSERT_EQ(0, run_scan(self_exe(), NOBODY, out, sizeof(out)));
	TH_LOG("%s", out);
	ASSERT_NE(NULL, strstr(out, "cpl=3 uid=65534 hits=0\n"));
}

TEST(root_in_user_mode_finds_no_kernel_address)
{
	char out[4096];

	ASSERT_EQ(0, run_scan(self_exe(), 0, out, sizeof(out)));
	ASSERT_NE(NULL, strstr(out, "cpl=3 uid=0 hits=0\n")) TH_LOG("%s", out);
}

/* Control: the scanner does find the entry mapped for kernel mode */
TEST(kernel_mode_process_finds_its_entry)
{
	const char *copy = "/trusted/leak-scan";
	char cmd[512], out[4096];

	snprintf(cmd, sizeof(cmd), "cp %s %s && chmod 755 %s", self_exe(),
		 copy, copy);
	ASSERT_EQ(0, system(cmd));
	ASSERT_EQ(0, run_scan(copy, 0, out, sizeof(out)));
	unlink(copy);
	TH_LOG("%s", out);
	ASSERT_NE(NULL, strstr(out, "cpl=0 uid=0 hits="));
	ASSERT_EQ(NULL, strstr(out, "hits=0\n"));
	ASSERT_NE(NULL, strstr(out, "in [vvar] page"));
}

TEST_HARNESS_MAIN
