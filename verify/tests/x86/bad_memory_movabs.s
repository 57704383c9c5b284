# expect: memory

        .include "kml.inc"
        KBEGIN
        .globl _start
_start:
        nop
bad:    movabs  0xffffffff81000000, %eax
        KEXIT   $0
        KEND
