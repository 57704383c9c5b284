# expect: decode

        .include "kml.inc"
        KBEGIN
        .globl _start
_start:
        nop
bad:    .byte 0x06
        KEXIT   $0
        KEND
