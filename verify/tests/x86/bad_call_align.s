# expect: call-align

        .include "kml.inc"
        KBEGIN
        .globl _start
_start:
        nop
bad:    call    _start
        KEXIT   $0
        KEND
