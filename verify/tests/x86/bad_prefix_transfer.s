# expect: prefix

        .include "kml.inc"
        KBEGIN
        .globl _start
_start:
        .p2align 5
bad:    .byte 0x66, 0xe9, 0x00, 0x00
        nop
        nop
        KEXIT   $0
        KEND
