# expect: indirect

        .include "kml.inc"
        KBEGIN
        .globl _start
_start:
        .bundle_lock
        and     $-32, %r11d
2:
bad:    jmp     *%r11
        .bundle_unlock
        jmp     2b
        KEXIT   $0
        KEND
