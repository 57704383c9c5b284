// SPDX-License-Identifier: GPL-2.0
/* The heap (nolibc's malloc: mmap), string functions, a large frame. */
struct node { struct node *next; long v; char name[24]; };

static __attribute__((noinline)) unsigned long frame(int seed)
{
	volatile unsigned char buf[40000];
	unsigned long sum = 0;

	for (unsigned int i = 0; i < sizeof(buf); i++)
		buf[i] = (unsigned char)(i * seed);
	for (unsigned int i = 0; i < sizeof(buf); i += 97)
		sum += buf[i];
	return sum;
}

int main(void)
{
	struct node *head = NULL;
	char line[64];
	long total = 0;

	for (int i = 0; i < 100; i++) {
		struct node *n = malloc(sizeof(*n));

		if (!n)
			return 99;
		n->v = i * i;
		strcpy(n->name, "node-");
		itoa_r(i, n->name + 5);
		n->next = head;
		head = n;
	}
	for (struct node *n = head; n; n = n->next)
		total += n->v + (long)strlen(n->name);
	char *big = malloc(1 << 20);
	if (!big)
		return 98;
	memset(big, 'x', 1 << 20);
	memcpy(line, big + 12345, 10);
	line[10] = '\0';
	while (head) {
		struct node *n = head->next;

		free(head);
		head = n;
	}
	free(big);
	printf("total %ld, line %s, frame %lu, strcmp %d\n", total, line, frame(7),
	       strcmp("abc", "abd") < 0);
	return 0;
}
