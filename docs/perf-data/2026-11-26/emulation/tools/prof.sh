#!/bin/bash
# usage: prof.sh TAG ROW MODE(user|kernel) SMP RUNS RUNMS [perf]
tag=$1 row=$2 mode=$3 smp=$4 runs=$5 runms=$6 perf=$7
d=/tmp/emu/r/$tag; mkdir -p $d
rm -f /tmp/emu/mon.sock
python3 /tmp/emu/mon.py /tmp/emu/mon.sock $d/mon.txt ${KMLQ_PERIOD:-1} &
mp=$!
km=(); [ $mode = kernel ] && km=(--kernel-mode)
export PATH=/tmp/emu/bin:$PATH
[ -n "$perf" ] && export KMLQ_PERF=$d/perf.data
cd "$(git rev-parse --show-toplevel)" && timeout 300 ./kml run --accel tcg --smp $smp "${km[@]}" -- /usr/bin/kml-bench --only $row --runs $runs --run-ms $runms --expect-mode $mode -v 2>&1 | python3 /tmp/emu/ts.py > $d/out.txt
wait $mp
grep -E "^[0-9.]+ \| [A-Z]" $d/out.txt | grep -v "n/a" | head -5
