# expect: memory

        .include "kml.inc"
        KBEGIN
        .globl _start
_start:
        nop
bad:    mov     %fs:-8, %rax
        KEXIT   $0
        KEND
