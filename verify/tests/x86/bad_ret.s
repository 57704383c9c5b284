# expect: ret

        .include "kml.inc"
        KBEGIN
        .globl _start
_start:
        nop
bad:    ret
        KEXIT   $0
        KEND
