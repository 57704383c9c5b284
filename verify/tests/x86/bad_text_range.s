# expect: text-range
# ld: -Ttext=0x100000000 -z noseparate-code
# offset: phdr:text
        .include "kml.inc"
        KBEGIN
        .globl _start
_start:
        nop
        KEXIT   $0
        KEND
