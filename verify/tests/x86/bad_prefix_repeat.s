# expect: prefix

        .include "kml.inc"
        KBEGIN
        .globl _start
_start:
        mov     %rsp, %rax
bad:    .byte 0xf0, 0xf0, 0x48, 0x01, 0x04, 0x24
        KEXIT   $0
        KEND
