#!/bin/bash
# usage: rows.sh TAG MODE SMP ROWS RUNS RUNMS   (stock QEMU, timing only)
tag=$1 mode=$2 smp=$3 rows=$4 runs=$5 runms=$6
d=/tmp/emu/t/$tag; mkdir -p $d
km=(); [ $mode = kernel ] && km=(--kernel-mode)
export PATH=/tmp/emu/bin:$PATH KMLQ_BIN=/usr/bin/qemu-system-x86_64 KMLQ_MON=/tmp/emu/mon-t.sock
cd "$(git rev-parse --show-toplevel)" && timeout 400 ./kml run --accel tcg --smp $smp "${km[@]}" -- /usr/bin/kml-bench --only $rows --runs $runs --run-ms $runms --expect-mode $mode --json - 2>/dev/null > $d/out.json
