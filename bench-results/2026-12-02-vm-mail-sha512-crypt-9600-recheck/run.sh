#!/usr/bin/env bash
# Diagnostic (outside the repo): stoa at 9,600 msgs/min, 100k sha512-crypt accounts,
# 300 s warm-up, as the failed knee re-runs, with one server setting changed; samples
# the queue depth, dirty pages and CPU/iowait every 10 s.
set -u
name="$1"; shift
out=/work/qexp/$name
mkdir -p "$out"
/work/main/target/release/stoa bench mail --store-users 100000 --password-scheme sha512-crypt --levels 100 \
  --rate 9600 --profile quick --run-time 120s --warmup 300s --seed 2002 --no-archive --out "$out" "$@" \
  > "$out/run.txt" 2> "$out/run.log" &
h=$!
: > "$out/samples.txt"
for ((i = 0; i < 400; i++)); do
  kill -0 $h 2>/dev/null || break
  q=$(find /tmp/stoa-bench-mail-*/mail/queue -maxdepth 2 -name '*.env' 2>/dev/null | wc -l)
  d=$(awk '/^Dirty:/ {print $2}' /proc/meminfo)
  w=$(awk '/^Writeback:/ {print $2}' /proc/meminfo)
  c=$(awk '/^cpu / {print $2+$3+$4, $6, $2+$3+$4+$5+$6+$7+$8}' /proc/stat)
  echo "$(date +%H:%M:%S) queue_env=$q dirty_kb=$d writeback_kb=$w cpu(busy iowait total)=$c" >> "$out/samples.txt"
  sleep 10
done
wait $h
echo "rc=$?" >> "$out/samples.txt"
