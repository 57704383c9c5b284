# expect: instruction

        .include "kml.inc"
        KBEGIN
        .globl _start
_start:
        lea     msg(%rip), %rax
bad:    push    (%rax)
        KEXIT   $0
        KEND
        .section .rodata
msg:    .quad 0
