# expect: stack

        .include "kml.inc"
        KBEGIN
        .globl _start
_start:
        .p2align 5
        .fill   25, 1, 0x90
bad:    sub     $0x100, %rsp
        nop
        KEXIT   $0
        KEND
