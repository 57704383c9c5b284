# expect: direct-target

        .include "kml.inc"
        KBEGIN
        .globl _start
_start:
        nop
bad:    jmp     1f+1
1:      movabs  $0x1234567890, %rax
        KEXIT   $0
        KEND
