# expect: memory

        .include "kml.inc"
        KBEGIN
        .globl _start
_start:
        nop
bad:    mov     (%rsp,%rax,8), %rbx
        KEXIT   $0
        KEND
