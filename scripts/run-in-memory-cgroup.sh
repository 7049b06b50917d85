#!/usr/bin/env bash
# Runs a command inside a cgroup-v1 memory controller with a hard limit (default 64 MiB), then
# prints the cgroup's peak usage and how often it hit the limit. Needs root.
#   scripts/run-in-memory-cgroup.sh [LIMIT_MIB] -- COMMAND...
set -euo pipefail
limit_mib=64
if [ "${1:-}" != "--" ]; then limit_mib=$1; shift; fi
[ "${1:-}" = "--" ] && shift
group=/sys/fs/cgroup/memory/tessera-$$
mkdir "$group"
trap 'rmdir "$group" 2>/dev/null || true' EXIT
echo $((limit_mib * 1024 * 1024)) > "$group/memory.limit_in_bytes"
set +e
sh -c 'echo $$ > "$1/cgroup.procs" && shift && exec "$@"' sh "$group" "$@"
status=$?
set -e
echo "cgroup: limit ${limit_mib} MiB, peak usage $(( $(cat "$group/memory.max_usage_in_bytes") / 1048576 )) MiB, limit hits $(cat "$group/memory.failcnt"), exit status $status" >&2
exit $status
