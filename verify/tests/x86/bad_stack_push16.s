# expect: stack
# A 16-bit push moves RSP by 2: the type rules assume 8.
        .include "kml.inc"
        KBEGIN
        .globl _start
_start:
        nop
bad:    push    %ax
        KEXIT   $0
        KEND
