# expect: direct-target

        .include "kml.inc"
        KBEGIN
        .globl _start
_start:
        nop
bad:    jmp     0x500000
        KEXIT   $0
        KEND
