# expect: privileged

        .include "kml.inc"
        KBEGIN
        .globl _start
_start:
        nop
bad:    cli
        KEXIT   $0
        KEND
