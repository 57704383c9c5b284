# expect: instruction

        .include "kml.inc"
        KBEGIN
        .globl _start
_start:
        nop
bad:    enter   $16, $0
        KEXIT   $0
        KEND
