#!/bin/bash
# investigation wrapper: self-built QEMU 7.2 (Debian source, with counters), monitor socket, optional perf
Q=${KMLQ_BIN:-/tmp/qsrc/qemu-7.2+dfsg/b/qemu-system-x86_64}
extra=(-L /usr/share/seabios -L /usr/share/qemu -monitor "unix:${KMLQ_MON:-/tmp/emu/mon.sock},server,nowait")
[ "$Q" = /usr/bin/qemu-system-x86_64 ] && extra=(-monitor "unix:${KMLQ_MON:-/tmp/emu/mon.sock},server,nowait")
if [ -n "$KMLQ_PERF" ]; then
  exec perf record -q -e cpu-clock -F ${KMLQ_FREQ:-1999} -g -o "$KMLQ_PERF" -- "$Q" "$@" "${extra[@]}"
fi
exec "$Q" "$@" "${extra[@]}"
