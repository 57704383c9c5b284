# expect: stack

        .include "kml.inc"
        KBEGIN
        .globl _start
_start:
        nop
bad:    mov     %eax, %esp
        KEXIT   $0
        KEND
