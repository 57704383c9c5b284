# expect: memory

        .include "kml.inc"
        KBEGIN
        .globl _start
_start:
        nop
bad:    mov     0xffffffff81000000, %rax
        KEXIT   $0
        KEND
