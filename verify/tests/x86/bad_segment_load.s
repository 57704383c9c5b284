# expect: segment

        .include "kml.inc"
        KBEGIN
        .globl _start
_start:
        mov     $0x2b, %eax
bad:    mov     %eax, %ds
        KEXIT   $0
        KEND
