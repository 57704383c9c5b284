# expect: memory

        .include "kml.inc"
        KBEGIN
        .globl _start
_start:
        mov     $8, %ecx
bad:    rep stosb
        KEXIT   $0
        KEND
