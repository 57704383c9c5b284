# expect: ok
# exit: 45
# Sum a 10-element array through a pointer loaded from memory (untyped,
# so masked with btr $63) and a 32-bit index (zero-extended by mov %ecx,%ecx).
        .include "kml.inc"
        KBEGIN
        .globl _start
_start:
        lea     arr(%rip), %rax
        mov     %rax, ptr(%rip)
        xor     %ecx, %ecx
        xor     %edx, %edx
loop:
        .bundle_lock
        mov     ptr(%rip), %rsi
        btr     $63, %rsi
        mov     %ecx, %ecx
        add     (%rsi,%rcx,4), %edx
        .bundle_unlock
        inc     %ecx
        cmp     $10, %ecx
        jb      loop
        KEXIT   %edx
        KEND

        .data
        .p2align 3
arr:    .long   0, 1, 2, 3, 4, 5, 6, 7, 8, 9
ptr:    .quad   0
