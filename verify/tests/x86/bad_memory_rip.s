# expect: memory

        .include "kml.inc"
        KBEGIN
        .globl _start
_start:
        nop
bad:    mov     -0x500000(%rip), %rax
        KEXIT   $0
        KEND
