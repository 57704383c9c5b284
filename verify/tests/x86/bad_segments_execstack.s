# expect: segments
# ld: -z execstack
# offset: phdr:last
        .include "kml.inc"
        KBEGIN
        .globl _start
_start:
        nop
        KEXIT   $0
        KEND
