# expect: direct-target
# The walk's first pass stops at the first instruction off the allow-list
# (here hlt): a jump over it to what would be an instruction start is
# refused at the jump, before the walk reaches the hlt.
        .include "kml.inc"
        KBEGIN
        .globl _start
_start:
bad:    jmp     after
        hlt
after:  KEXIT   $0
        KEND
