#!/bin/bash
# The RSS of a kcp server before and after a burst of large lists (issue 17: back within 20 %).
# Also the peak RSS during the burst: what concurrent large lists hold at once (VmHWM, reset just
# before the burst by writing 5 to /proc/<pid>/clear_refs, Linux 4.0 and later).
# Usage: list-burst-memory.sh <kcp binary>. Needs curl and python3; uses port 18443.
set -e
BIN=$1; DIR=$(mktemp -d /tmp/burst.XXXX); PORT=18443
$BIN start --root-directory $DIR/root --secure-port $PORT --bind-address 127.0.0.1 > $DIR/kcp.log 2>&1 &
PID=$!
sleep 3
C="--cacert $DIR/root/ca.crt --cert $DIR/root/admin.crt --key $DIR/root/admin.key -s"
U=https://127.0.0.1:$PORT/clusters/root/api/v1
rss() { grep VmRSS /proc/$PID/status | awk '{print $2}'; }
peak() { grep VmHWM /proc/$PID/status | awk '{print $2}'; }
curl $C -X POST -H 'Content-Type: application/json' $U/namespaces -d '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"burst"}}' > /dev/null
DATA=$(python3 -c 'print("x"*300)')
seq 1 5000 | xargs -P 16 -I{} curl $C -o /dev/null -X POST -H 'Content-Type: application/json' $U/namespaces/burst/configmaps -d "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"cm-{}\"},\"data\":{\"v\":\"$DATA\"}}"
for i in 1 2 3; do curl $C -o /dev/null $U/namespaces/burst/configmaps; done
sleep 15
echo "pre-burst RSS KiB: $(rss)"
echo 5 > /proc/$PID/clear_refs
seq 1 100 | xargs -P 20 -I{} curl $C -o /dev/null $U/namespaces/burst/configmaps
echo "right after 100 lists (20 at a time) RSS KiB: $(rss)"
echo "peak RSS during the 100 lists KiB: $(peak)"
sleep 25
echo "25 s later RSS KiB: $(rss)"
curl $C https://127.0.0.1:$PORT/metrics | grep -E "^kcp_watch_cache_(objects|object_bytes)\{group=\"core\",resource=\"configmaps\"" || true
kill $PID; wait $PID 2>/dev/null || true
rm -rf $DIR
