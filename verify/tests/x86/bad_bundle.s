# expect: bundle

        .include "kml.inc"
        KBEGIN
        .globl _start
_start:
        .bundle_align_mode 0
        .p2align 5
        .fill   30, 1, 0x90
bad:    movabs  $0x1234567890, %rax
        .bundle_align_mode 5
        KEXIT   $0
        KEND
