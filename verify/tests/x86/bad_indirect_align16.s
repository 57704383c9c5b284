# expect: indirect

        .include "kml.inc"
        KBEGIN
        .globl _start
_start:
        .bundle_lock
        and     $-16, %eax
bad:    jmp     *%rax
        .bundle_unlock
        KEXIT   $0
        KEND
