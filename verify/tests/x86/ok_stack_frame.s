# expect: ok
# exit: 7
# A stack frame with locals: push/pop, sub with a probe, RSP-relative
# locals with positive and small negative displacements, a large frame
# probed page by page, and stack realignment.
        .include "kml.inc"
        KBEGIN
        .globl _start
_start:
        KCALL   frame
        mov     %eax, %ebx
        KEXIT   %ebx

        .p2align 5
frame:
        push    %rbp
        push    %rbx
        .bundle_lock
        sub     $0x40, %rsp
        movq    $3, (%rsp)
        .bundle_unlock
        movq    $4, 8(%rsp)
        mov     -8(%rsp), %rax
        mov     (%rsp), %rax
        add     8(%rsp), %rax
        mov     %rax, 0x38(%rsp)
        .bundle_lock
        sub     $0x1000, %rsp
        testb   $0, (%rsp)
        .bundle_unlock
        .bundle_lock
        sub     $0x1000, %rsp
        testb   $0, (%rsp)
        .bundle_unlock
        .bundle_lock
        add     $0x2000, %rsp
        mov     0x38(%rsp), %rax
        .bundle_unlock
        .bundle_lock
        mov     %rsp, %rbp
        and     $-16, %rsp
        .bundle_unlock
        .bundle_lock
        mov     %rbp, %rsp
        add     $0x40, %rsp
        pop     %rbx
        .bundle_unlock
        pop     %rbp
        KRET
        KEND
