# expect: instruction
# An instruction off the list is refused as such whatever its length:
# this vaddps crosses a bundle boundary, and the verdict does not depend
# on where a decoder ends it.
        .include "kml.inc"
        KBEGIN
        .globl _start
_start:
        .bundle_align_mode 0
        .fill   30, 1, 0x90
bad:    vaddps  %ymm2, %ymm1, %ymm0
        .bundle_align_mode 5
        KEXIT   $0
        KEND
