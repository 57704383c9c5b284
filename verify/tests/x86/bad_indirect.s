# expect: indirect

        .include "kml.inc"
        KBEGIN
        .globl _start
_start:
        mov     %rdi, %rax
bad:    jmp     *%rax
        KEXIT   $0
        KEND
