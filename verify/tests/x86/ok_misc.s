# expect: ok
# A mixture the rules allow: TLS through %fs with a non-negative offset,
# SSE, cmpxchg16b on the stack, cpuid/rdtsc, the alloca sequence (compute,
# mask, probe, move to RSP), masked stores through a copied stack pointer.
        .include "kml.inc"
        KBEGIN
        .globl _start
_start:
        mov     %fs:0x28, %rax
        pxor    %xmm0, %xmm0
        movups  %xmm0, -16(%rsp)
        addsd   %xmm1, %xmm0
        cvttsd2si %xmm0, %eax
        cpuid
        rdtsc
        lfence
        .bundle_lock
        sub     $0x20, %rsp
        cmpxchg16b (%rsp)
        .bundle_unlock
        .bundle_lock
        mov     %rsp, %r11
        sub     %rdx, %r11
        btr     $63, %r11
        testb   $0, (%r11)
        mov     %r11, %rsp
        .bundle_unlock
        .bundle_lock
        mov     %rsp, %rdi
        movl    $1, 4(%rdi)
        .bundle_unlock
        lock addl $1, (%rsp)
        movabs  $0x401000, %rax
        .bundle_lock
        shr     $1, %rax
        mov     (%rax), %bl
        .bundle_unlock
        KEXIT   $0
        KEND
