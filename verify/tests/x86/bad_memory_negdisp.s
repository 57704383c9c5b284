# expect: memory

        .include "kml.inc"
        KBEGIN
        .globl _start
_start:
        .bundle_lock
        btr     $63, %rsi
bad:    mov     -8(%rsi), %rax
        .bundle_unlock
        KEXIT   $0
        KEND
