# expect: elf
# patch: 16 03
# offset: 16
        .include "kml.inc"
        KBEGIN
        .globl _start
_start:
        nop
        KEXIT   $0
        KEND
