# expect: stack

        .include "kml.inc"
        KBEGIN
        .globl _start
_start:
        nop
bad:    xchg    %rax, %rsp
        KEXIT   $0
        KEND
