// SPDX-License-Identifier: GPL-2.0
/*
 * The guest kernel as a KVM host.  With dynamic kernel stacks every IDT
 * gate enters through a stub on an IST stack; a hypervisor that hands
 * host interrupts to the IDT by hand would break that.  On AMD SVM (which
 * QEMU's TCG emulates for -cpu max) an interrupt during guest execution
 * is a VM exit after which the host takes it through its IDT as usual:
 * run a real-mode guest long enough for the host to take timer
 * interrupts in the middle of it, and check that the guest computed what
 * it should and that KVM counted those exits.  Intel VMX, which calls
 * the IDT gate's target itself, refuses to load with dynamic_kstacks=on
 * (not testable here: TCG does not emulate VMX).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "kml_util.h"

#define GUEST_MEM	0x10000
#define GUEST_CODE	0x1000
#define LOOPS		20000000u
#define IRQ_EXITS	"/sys/kernel/debug/kvm/irq_exits"

/*
 * 16-bit real mode:
 *	1: dec %ebx
 *	   jnz 1b
 *	   hlt
 */
static const unsigned char guest_code[] = {
	0x66, 0x4b,		/* dec %ebx */
	0x75, 0xfc,		/* jnz -4 */
	0xf4,			/* hlt */
};

static int cpu_has_svm(void)
{
	static char info[1 << 16];

	if (kml_read_file("/proc/cpuinfo", info, sizeof(info)) < 0)
		return 0;
	return strstr(info, " svm") != NULL;
}

static long irq_exits(void)
{
	char buf[32];

	if (kml_read_file(IRQ_EXITS, buf, sizeof(buf)) < 0)
		return -1;
	return strtol(buf, NULL, 10);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

TEST(svm_guest_runs_while_the_host_takes_interrupts)
{
	struct kvm_userspace_memory_region region = { 0 };
	struct kvm_sregs sregs;
	struct kvm_regs regs;
	struct kvm_run *run;
	int kvm, vm, vcpu, size, entries = 0;
	long exits_before, exits_after;
	double t0, t1;
	void *mem;

	kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (kvm < 0 && !cpu_has_svm())
		SKIP(return, "no /dev/kvm and no SVM on this CPU");
	/* The CPU offers SVM: kvm_amd must have come up, with any stack mode */
	ASSERT_LE(0, kvm) {
		TH_LOG("/dev/kvm: %s", strerror(errno));
	}
	ASSERT_EQ(KVM_API_VERSION, ioctl(kvm, KVM_GET_API_VERSION, 0));
	vm = ioctl(kvm, KVM_CREATE_VM, 0);
	ASSERT_LE(0, vm);
	mem = mmap(NULL, GUEST_MEM, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, mem);
	memcpy((char *)mem + GUEST_CODE, guest_code, sizeof(guest_code));
	region.memory_size = GUEST_MEM;
	region.userspace_addr = (unsigned long)mem;
	ASSERT_EQ(0, ioctl(vm, KVM_SET_USER_MEMORY_REGION, &region));
	vcpu = ioctl(vm, KVM_CREATE_VCPU, 0);
	ASSERT_LE(0, vcpu);
	size = ioctl(kvm, KVM_GET_VCPU_MMAP_SIZE, 0);
	ASSERT_LT(0, size);
	run = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, vcpu, 0);
	ASSERT_NE(MAP_FAILED, run);

	ASSERT_EQ(0, ioctl(vcpu, KVM_GET_SREGS, &sregs));
	sregs.cs.base = 0;
	sregs.cs.selector = 0;
	ASSERT_EQ(0, ioctl(vcpu, KVM_SET_SREGS, &sregs));
	memset(&regs, 0, sizeof(regs));
	regs.rip = GUEST_CODE;
	regs.rflags = 2;
	regs.rbx = LOOPS;
	ASSERT_EQ(0, ioctl(vcpu, KVM_SET_REGS, &regs));

	exits_before = irq_exits();
	t0 = now();
	do {
		ASSERT_EQ(0, ioctl(vcpu, KVM_RUN, 0)) {
			TH_LOG("KVM_RUN: %s", strerror(errno));
		}
		entries++;
	} while (run->exit_reason == KVM_EXIT_INTR);
	t1 = now();
	exits_after = irq_exits();

	ASSERT_EQ(KVM_EXIT_HLT, run->exit_reason) {
		TH_LOG("exit reason %u", run->exit_reason);
	}
	ASSERT_EQ(0, ioctl(vcpu, KVM_GET_REGS, &regs));
	printf("# %u loops in %.0f ms, %ld interrupt exits, %d KVM_RUN calls\n",
	       LOOPS, (t1 - t0) * 1e3, exits_after - exits_before, entries);
	/* The guest ran to the end with its own register intact */
	EXPECT_EQ(0, regs.rbx);
	EXPECT_EQ(GUEST_CODE + sizeof(guest_code), regs.rip);
	/* The host took interrupts while the guest ran */
	ASSERT_LE(0, exits_before);
	EXPECT_LT(exits_before, exits_after);
	munmap(run, size);
	close(vcpu);
	close(vm);
	munmap(mem, GUEST_MEM);
	close(kvm);
}

TEST_HARNESS_MAIN
