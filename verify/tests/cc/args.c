// SPDX-License-Identifier: GPL-2.0
/* argv and envp after crt0 moved them below 4 GiB. */
int main(int argc, char **argv, char **envp)
{
	int n = 0;

	for (int i = 0; i < argc; i++)
		printf("argv[%d] = %s\n", i, argv[i]);
	for (char **e = envp; *e; e++)
		n++;
	printf("%d environment strings; KMLCC_TEST=%s\n", n, getenv("KMLCC_TEST") ?: "(unset)");
	return argc;
}
