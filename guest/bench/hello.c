// SPDX-License-Identifier: GPL-2.0
/* hello: the exec target of kml-bench's fork_exec row; it only exits 0. */
int main(void)
{
	return 0;
}
