# expect: privileged

        .include "kml.inc"
        KBEGIN
        .globl _start
_start:
        nop
bad:    mov     %rax, %cr3
        KEXIT   $0
        KEND
