# expect: memory

        .include "kml.inc"
        KBEGIN
        .globl _start
_start:
        mov     %rdi, %rax
bad:    mov     (%rax), %rbx
        KEXIT   $0
        KEND
