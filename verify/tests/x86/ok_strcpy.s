# expect: ok
# exit: 5
# A string copy loop through untyped pointers (masked in the bundle of
# each access), then the same copy with rep movsb (masked rsi/rdi) and
# with the address-size prefix (32-bit addresses need no mask).
        .include "kml.inc"
        KBEGIN
        .globl _start
_start:
        lea     src(%rip), %rsi
        lea     dst(%rip), %rdi
copy:
        .bundle_lock
        btr     $63, %rsi
        movzbl  (%rsi), %eax
        btr     $63, %rdi
        mov     %al, (%rdi)
        .bundle_unlock
        inc     %rsi
        inc     %rdi
        test    %al, %al
        jne     copy
        lea     src(%rip), %rsi
        lea     dst2(%rip), %rdi
        mov     $6, %ecx
        .bundle_lock
        btr     $63, %rsi
        btr     $63, %rdi
        rep movsb
        .bundle_unlock
        lea     src(%rip), %esi
        lea     dst3(%rip), %edi
        mov     $6, %ecx
        addr32 rep movsb
        .bundle_lock
        lea     dst(%rip), %rdx
        mov     %rdx, %rcx
        .bundle_unlock
        xor     %ebx, %ebx
count:
        .bundle_lock
        btr     $63, %rcx
        cmpb    $0, (%rcx)
        .bundle_unlock
        je      out
        inc     %rcx
        inc     %ebx
        jmp     count
out:
        KEXIT   %ebx
        KEND

        .data
src:    .asciz  "hello"
dst:    .zero   16
dst2:   .zero   16
dst3:   .zero   16
