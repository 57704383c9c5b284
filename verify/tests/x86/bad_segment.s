# expect: segment

        .include "kml.inc"
        KBEGIN
        .globl _start
_start:
        nop
bad:    mov     %gs:0, %rax
        KEXIT   $0
        KEND
