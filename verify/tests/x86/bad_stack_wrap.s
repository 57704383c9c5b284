# expect: stack

        .include "kml.inc"
        KBEGIN
        .globl _start
_start:
        nop
bad:    sub     $0x20000, %rsp
        KEXIT   $0
        KEND
