# expect: entry
# ld: -e bad
        .include "kml.inc"
        KBEGIN
        .globl _start
_start:
        nop
        .globl bad
bad:    nop
        KEXIT   $0
        KEND
