// SPDX-License-Identifier: GPL-2.0
/*
 * What a program sees of its own mode: KernelMode in /proc/self/status,
 * whether it got a vDSO, whether it may map memory executable after its
 * exec, and a system call's result.  A verified program at CPL 0 prints
 * "KernelMode: 1", "vdso 0", "exec-mapping EPERM"; in user mode "0", "1",
 * "ok".
 */
/* nolibc has no strstr() */
static char *find(char *s, const char *what)
{
	size_t n = strlen(what);

	for (; *s; s++)
		if (!strncmp(s, what, n))
			return s;
	return NULL;
}

static void kernel_mode(void)
{
	static char buf[4096];
	int fd = open("/proc/self/status", O_RDONLY);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
	char *p;

	if (n <= 0) {
		printf("KernelMode: ?\n");
		return;
	}
	buf[n] = '\0';
	p = find(buf, "KernelMode:");
	if (!p) {
		printf("KernelMode: absent\n");
		return;
	}
	for (n = 0; p[n] && p[n] != '\n'; n++)
		;
	p[n] = '\0';
	printf("%s\n", p);
	close(fd);
}

int main(void)
{
	void *m;

	kernel_mode();
	printf("vdso %d\n", getauxval(AT_SYSINFO_EHDR) != 0);
	m = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	printf("exec-mapping %s\n", m != MAP_FAILED ? "ok" : errno == EPERM ? "EPERM" : "error");
	printf("getppid > 0: %d\n", getppid() > 0);
	return 0;
}
