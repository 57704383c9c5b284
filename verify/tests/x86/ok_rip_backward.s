# expect: ok
# exit: 144
# A RIP-relative load from before the instruction (a negative displacement,
# which objdump prints as [rip+0xffff...]): the first byte of _start, a nop.
        .include "kml.inc"
        KBEGIN
        .globl _start
_start:
        nop
        movzbl  _start(%rip), %edi
        mov     $60, %eax
        syscall
        KEND
