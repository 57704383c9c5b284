# expect: ok
# exit: 42
# Direct and indirect calls that end at bundle ends, returns by
# pop/mask/jmp, and an indirect jump through a masked register.
        .include "kml.inc"
        KBEGIN
        .globl _start
_start:
        mov     $40, %edi
        KCALL   add_one
        mov     %eax, %edi
        lea     add_one(%rip), %r12
        KCALLR  %r12, %r12d
        mov     %eax, %ebx
        lea     done(%rip), %r13
        .bundle_lock
        and     $-32, %r13d
        jmp     *%r13
        .bundle_unlock
        ud2
        .p2align 5
done:
        KEXIT   %ebx

        .p2align 5
add_one:
        lea     1(%rdi), %eax
        KRET
        KEND
