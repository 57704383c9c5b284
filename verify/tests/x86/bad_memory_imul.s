# expect: memory
# One-operand imul writes rdx:rax and leaves its operand alone: after
# `imul %ecx`, rcx is still whatever it was (here a value from the stack),
# not a 32-bit result.
        .include "kml.inc"
        KBEGIN
        .globl _start
_start:
        mov     (%rsp), %rcx
        imul    %ecx
bad:    mov     (%rcx), %rax
        KEXIT   $0
        KEND
