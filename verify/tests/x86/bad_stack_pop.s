# expect: stack

        .include "kml.inc"
        KBEGIN
        .globl _start
_start:
        nop
bad:    pop     %rsp
        KEXIT   $0
        KEND
