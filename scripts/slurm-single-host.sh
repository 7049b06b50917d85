#!/usr/bin/env bash
# slurm-single-host.sh — a one-machine Slurm cluster (slurmctld + slurmd from Debian's slurm-wlm,
# no systemd, no munge: auth/none), for trying sharded renders under a real scheduler and for the
# tests that do. Everything lives in one folder; nothing is installed or configured system-wide.
#
#   scripts/slurm-single-host.sh start DIR    # writes DIR/slurm.conf, starts both daemons, waits
#                                             # until the node is idle; prints: export SLURM_CONF=...
#   scripts/slurm-single-host.sh wait DIR JOB # waits for a job (polling every 0.2 s: sbatch --wait
#                                             # polls at growing intervals, up to half a minute
#                                             # late); exit 0 if it COMPLETED, else prints its state
#   scripts/slurm-single-host.sh stop DIR     # stops both daemons
#
# Then: SLURM_CONF=DIR/slurm.conf sbatch --array=1-8 ...  (see the recipes in docs/shards.md).
# auth/none trusts every local user: for a test machine, never for a shared one (use munge there).
set -euo pipefail

command=${1:-}
dir=${2:-}
if [[ -z "$command" || -z "$dir" ]]; then
    echo "usage: $0 start|stop DIR" >&2
    exit 2
fi
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
conf="$dir/slurm.conf"

stop() {
    for daemon in slurmd slurmctld; do
        if [[ -f "$dir/$daemon.pid" ]]; then
            pid=$(cat "$dir/$daemon.pid")
            kill "$pid" 2>/dev/null || true
            for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
            kill -9 "$pid" 2>/dev/null || true
            rm -f "$dir/$daemon.pid"
        fi
    done
}

case "$command" in
start)
    command -v slurmctld >/dev/null || { echo "$0: slurmctld not found: apt-get install slurm-wlm" >&2; exit 1; }
    stop
    host=$(hostname -s)
    cpus=$(nproc)
    memory=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 512 ))
    mkdir -p "$dir/state" "$dir/spool"
    cat > "$conf" <<CONF
ClusterName=tessera
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/none
CredType=cred/none
SlurmctldPort=${SLURMCTLD_PORT:-6817}
SlurmdPort=${SLURMD_PORT:-6818}
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
# Start tasks as soon as resources free up (defaults wait up to 3 s between batch starts).
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
SwitchType=switch/none
NodeName=$host CPUs=$cpus RealMemory=$memory State=UNKNOWN
PartitionName=main Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
    export SLURM_CONF="$conf"
    slurmctld -f "$conf"
    slurmd -f "$conf"
    for _ in $(seq 100); do
        if sinfo -h -o %t 2>/dev/null | grep -qE '^idle'; then
            echo "export SLURM_CONF=$conf"
            exit 0
        fi
        sleep 0.2
    done
    echo "$0: the node did not become idle; see $dir/slurmctld.log and $dir/slurmd.log" >&2
    sinfo >&2 || true
    tail -5 "$dir/slurmctld.log" "$dir/slurmd.log" >&2 || true
    stop
    exit 1
    ;;
wait)
    job=${3:?usage: $0 wait DIR JOBID}
    export SLURM_CONF="$conf"
    while squeue -h -j "$job" 2>/dev/null | grep -q .; do sleep 0.2; done
    state=$(scontrol show job "$job" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | head -1)
    if [[ "$state" == "JobState=COMPLETED" ]]; then exit 0; fi
    echo "job $job: ${state:-unknown state}" >&2
    exit 1
    ;;
stop)
    stop
    ;;
*)
    echo "usage: $0 start|stop DIR, or $0 wait DIR JOBID" >&2
    exit 2
    ;;
esac
