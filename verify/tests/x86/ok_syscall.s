# expect: ok
# exit: 0
# write(1, msg, 3) and exit(0) with SYSCALL.
        .include "kml.inc"
        KBEGIN
        .globl _start
_start:
        mov     $1, %eax
        mov     $1, %edi
        lea     msg(%rip), %rsi
        mov     $3, %edx
        syscall
        KEXIT   $0
        KEND

        .section .rodata
msg:    .ascii  "ok\n"
