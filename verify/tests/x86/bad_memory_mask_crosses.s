# expect: memory

        .include "kml.inc"
        KBEGIN
        .globl _start
_start:
        .bundle_align_mode 0
        .p2align 5
        .fill   27, 1, 0x90
        btr     $63, %rdi
bad:    mov     (%rdi), %rax
        .bundle_align_mode 5
        KEXIT   $0
        KEND
