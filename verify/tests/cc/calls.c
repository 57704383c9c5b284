// SPDX-License-Identifier: GPL-2.0
/* Direct, indirect and recursive calls, a switch, tail calls. */
typedef long (*op_fn)(long, long);

static long add(long a, long b) { return a + b; }
static long mul(long a, long b) { return a * b; }
static long sub_(long a, long b) { return a - b; }

static const op_fn ops[] = { add, mul, sub_ };

static long fib(long n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

static __attribute__((noinline)) long classify(long v)
{
	switch (v % 7) {
	case 0: return 10;
	case 1: return 21;
	case 2: return 32;
	case 3: return 43;
	case 4: return 54;
	case 5: return 65;
	default: return 76;
	}
}

static __attribute__((noinline)) long apply(op_fn f, long a, long b)
{
	return f(a, b);		/* may become an indirect tail call */
}

int main(int argc, char **argv)
{
	long acc = 0;

	for (long i = 0; i < 30; i++)
		acc += apply(ops[i % 3], i, acc & 0xff) + classify(i * argc);
	printf("fib(20) = %ld, acc = %ld\n", fib(20), acc);
	return (int)(acc & 0x7f);
}
