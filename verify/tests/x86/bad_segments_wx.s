# expect: segments
# ld: -N
# offset: phdr:0
        .include "kml.inc"
        KBEGIN
        .globl _start
_start:
        nop
        KEXIT   $0
        KEND
