# expect: decode
# The text ends inside an instruction: its last two bytes begin a movabs
# (48 b8 + an 8-byte immediate) whose immediate lies past the segment.
        .include "kml.inc"
        KBEGIN
        .globl _start
_start:
        nop
        KEXIT   $0
        .bundle_align_mode 0
        .fill   (0x1000 - ((. - kml_text_start) & 0xfff)) & 0xfff - 2, 1, 0x90
bad:    .byte   0x48, 0xb8
        .bundle_align_mode 5

        .section .rodata
        .quad   0
