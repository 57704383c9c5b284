# expect: privileged

        .include "kml.inc"
        KBEGIN
        .globl _start
_start:
        pushq   $0x200
bad:    popfq
        KEXIT   $0
        KEND
