# crt0 of kmlcc programs, written to the rules of verified programs.
#
# kmlcc addresses all data with 32-bit registers (rewrite.py), so the
# program's data must lie below 4 GiB.  The kernel starts it with the
# stack near the top of the lower half; _start moves that stack -- argc,
# argv, envp, auxv and the strings they point to -- into an 8 MiB
# MAP_32BIT mapping, relocates the pointers that point into it, and calls
# nolibc's _start_c with the new stack pointer.
#
# Registers: rbx old sp, r13 old top, r14 size, r12 new sp, r9 old - new.
# Every load and store through a register other than rsp is masked
# (btr $63) in its bundle: the types of the rules reset at bundle starts
# and branch targets.

        .bundle_align_mode 5
        .text
        .globl  _start
        .type   _start, @function
        .p2align 5
_start:
        mov     %rsp, %rbx
        mov     (%rsp), %rcx                    # argc
        lea     16(%rsp,%rcx,8), %rdx           # &envp[0]
1:      .bundle_lock
        btr     $63, %rdx
        mov     (%rdx), %rax
        .bundle_unlock
        add     $8, %rdx
        test    %rax, %rax
        jnz     1b
        xor     %r8d, %r8d                      # AT_EXECFN's string
2:      .bundle_lock
        btr     $63, %rdx
        mov     (%rdx), %rax
        mov     8(%rdx), %rsi
        .bundle_unlock
        add     $16, %rdx
        cmp     $31, %rax                       # AT_EXECFN
        cmove   %rsi, %r8
        test    %rax, %rax
        jnz     2b
        test    %r8, %r8
        jz      .Lfail
        mov     %r8, %rdi                       # the top: past its NUL
3:      .bundle_lock
        btr     $63, %rdi
        movzbl  (%rdi), %eax
        .bundle_unlock
        inc     %rdi
        test    %eax, %eax
        jnz     3b
        add     $15, %rdi
        and     $-16, %rdi
        mov     %rdi, %r13
        mov     %rdi, %r14
        sub     %rbx, %r14                      # size of the area
        cmp     $0x100000, %r14
        ja      .Lfail                          # more than 1 MiB of args
        mov     $9, %eax                        # mmap
        xor     %edi, %edi
        mov     $0x800000, %esi
        mov     $3, %edx                        # PROT_READ | PROT_WRITE
        mov     $0x62, %r10d                    # MAP_PRIVATE|ANONYMOUS|32BIT
        mov     $-1, %r8
        xor     %r9d, %r9d
        syscall
        cmp     $-4096, %rax
        ja      .Lfail
        lea     0x800000(%rax), %rdi            # the new top
        sub     %r14, %rdi
        and     $-16, %rdi                      # the new sp
        mov     %rdi, %r12
        mov     %rbx, %r9
        sub     %r12, %r9                       # old - new
        mov     %rbx, %rsi
        mov     %r14, %rcx
        .bundle_lock
        btr     $63, %rsi
        btr     $63, %rdi
        rep movsb
        .bundle_unlock
        lea     8(%r12), %rdx                   # argv, then envp
        mov     $2, %r10d
4:      .bundle_lock
        btr     $63, %rdx
        mov     (%rdx), %rax
        .bundle_unlock
        test    %rax, %rax
        jz      5f
        sub     %r9, %rax
        .bundle_lock
        btr     $63, %rdx
        mov     %rax, (%rdx)
        .bundle_unlock
        add     $8, %rdx
        jmp     4b
5:      add     $8, %rdx
        dec     %r10d
        jnz     4b
6:      .bundle_lock                            # auxv: values into the area
        btr     $63, %rdx
        mov     (%rdx), %rax
        mov     8(%rdx), %rsi
        .bundle_unlock
        test    %rax, %rax
        jz      7f
        mov     %rsi, %rax
        sub     %rbx, %rax
        cmp     %r14, %rax
        jae     8f
        sub     %r9, %rsi
        .bundle_lock
        btr     $63, %rdx
        mov     %rsi, 8(%rdx)
        .bundle_unlock
8:      add     $16, %rdx
        jmp     6b
7:      .bundle_lock                            # the switch (alloca's shape)
        mov     %r12, %r11
        btr     $63, %r11
        testb   $0, (%r11)
        mov     %r11, %rsp
        .bundle_unlock
        mov     %rsp, %rdi
        xor     %ebp, %ebp
        .p2align 5
        .nops   27
        call    _start_c
.Lfail:
        mov     $60, %eax
        mov     $127, %edi
        syscall
        .size   _start, .-_start
        .p2align 5

# The ELF note that asks the kernel to check the program at exec and run
# it at CPL 0 if it conforms (kernel.kml_verified): name "KML", type 1.
        .section .note.kml, "a", @note
        .balign 4
        .long   4, 0, 1
        .asciz  "KML"
        .section .note.GNU-stack,"",@progbits
