# expect: instruction
# VEX, EVEX and XOP encodings are off the allow-list: here a gather, whose
# vector of addresses no register type describes.
        .include "kml.inc"
        KBEGIN
        .globl _start
_start:
        .bundle_lock
        btr     $63, %rax
bad:    vpgatherdd %ymm2, (%rax,%ymm1,4), %ymm0
        .bundle_unlock
        KEXIT   $0
        KEND
