#!/bin/bash
# sample the stoa server: listen queues, threads, netstat overflow, every 5 s, bounded
for i in $(seq 1 200); do
  pid=$(pgrep -f "stoa serve --config /tmp/stoa-bench-mail" | head -1)
  if [ -n "$pid" ]; then
    t=$(date +%s)
    thr=$(ls /proc/$pid/task 2>/dev/null | wc -l)
    est=$(ss -Htn state established '( sport = :'"$POP"' )' 2>/dev/null | wc -l)
    lq=$(ss -Hltn | awk -v p=":$POP" '$4 ~ p"$" {print $2"/"$3}' | tr '\n' ' ')
    ovf=$(nstat -az TcpExtListenOverflows TcpExtListenDrops 2>/dev/null | awk 'NR>1{printf "%s=%s ",$1,$2}')
    tops=$(top -H -b -n1 -p $pid | awk 'NR>7 && $9>5 {print $12":"$9}' | sort | uniq -c | tr '\n' ' ' | head -c 300)
    echo "$t threads=$thr popconns=$est listenq=$lq $ovf | $tops"
  fi
  sleep 5
done
