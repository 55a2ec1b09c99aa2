#!/usr/bin/env bash
# A real single-node SLURM (munge + slurmctld + slurmd) for the JobQueueExecutor tests.
#
# Idempotent: installs only what is missing, rewrites the config only when it changed, starts
# only the daemons that are not running (a stale pid file from a dead daemon is ignored), and
# waits until the node accepts jobs. Prints `export SLURM_CONF=...` and writes the same line
# to $STATE/env: CI runs `bash .ci/slurm.sh && . /var/tmp/abo-slurm/env` (tests also find it there).
#
# Recipe: docs/hpc.md, "Testing against a real SLURM" (Debian 12, root, no systemd, no cgroups).
set -euo pipefail

STATE=${ABO_SLURM_STATE:-/var/tmp/abo-slurm}
log() { echo "slurm.sh: $*" >&2; }

if [ "$(id -u)" -ne 0 ]; then
  log "must run as root (it installs packages and starts daemons)"
  exit 1
fi

# -- install ---------------------------------------------------------------------------------
PKGS="slurmctld slurmd slurm-client munge"
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null \
  || ! command -v sinfo >/dev/null || ! command -v munged >/dev/null; then
  install() {
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $PKGS >&2
  }
  if ! install; then
    log "apt-get install failed; updating the package lists and retrying"
    apt-get update -q >&2
    install
  fi
fi

# -- files -----------------------------------------------------------------------------------
mkdir -p "$STATE/spool" "$STATE/ctld" "$STATE/logs"
chmod 1777 "$STATE/logs" # job output of any user
chown munge:munge "$STATE"
if [ ! -s /etc/munge/munge.key ]; then
  log "creating a munge key"
  if command -v mungekey >/dev/null; then
    mungekey --create --force >&2
  else
    dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null
  fi
  chown munge:munge /etc/munge/munge.key
  chmod 400 /etc/munge/munge.key
fi

HOST=$(hostname -s)
CPUS=$(nproc)
# jobs ask for --mem: declare 90% of this machine's memory (more than slurmd finds drains it)
MEM=$(awk '/MemTotal/ {printf "%d", $2 / 1024 * 0.9}' /proc/meminfo)
CONF="$STATE/slurm.conf"
NEW=$(mktemp)
cat >"$NEW" <<CONF
# written by .ci/slurm.sh: a single-node test cluster
ClusterName=abo
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket=$STATE/munge.sock
CryptoType=crypto/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
# a node that was down (daemons died) comes back by itself
ReturnToService=2
# walltime kills are prompt: SIGTERM at the limit, SIGKILL 5 s later, no grace minutes
OverTimeLimit=0
KillWait=5
InactiveLimit=0
MinJobAge=60
SlurmctldTimeout=30
SlurmdTimeout=30
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/spool
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$STATE/slurmctld.log
SlurmdLogFile=$STATE/slurmd.log
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEM State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=7-00:00:00 DefaultTime=01:00:00 State=UP
CONF
changed=0
if ! cmp -s "$NEW" "$CONF"; then
  mv "$NEW" "$CONF"
  chmod 644 "$CONF"
  changed=1
else
  rm -f "$NEW"
fi
export SLURM_CONF=$CONF

# -- daemons ---------------------------------------------------------------------------------
# alive NAME PIDFILE: the pid in the file is a live (not zombie) process running NAME.
alive() {
  local pid st
  pid=$(cat "$2" 2>/dev/null) || return 1
  [ -n "$pid" ] && grep -q "$1" "/proc/$pid/comm" 2>/dev/null || return 1
  st=$(ps -o stat= -p "$pid" 2>/dev/null) || return 1
  case "$st" in Z* | "") return 1 ;; esac
}

if ! alive munged "$STATE/munged.pid"; then
  log "starting munged"
  runuser -u munge -- munged --force --socket="$STATE/munge.sock" --pid-file="$STATE/munged.pid"
fi
for _ in $(seq 1 50); do [ -S "$STATE/munge.sock" ] && break; sleep 0.1; done

if [ "$changed" = 1 ]; then
  # node definitions (CPUs, memory) only take effect on a restart, not on `scontrol reconfigure`
  for d in slurmd slurmctld; do
    if alive $d "$STATE/$d.pid"; then
      log "config changed: stopping $d"
      kill "$(cat "$STATE/$d.pid")"
      for _ in $(seq 1 50); do alive $d "$STATE/$d.pid" || break; sleep 0.2; done
    fi
  done
fi
if ! alive slurmctld "$STATE/slurmctld.pid"; then
  log "starting slurmctld"
  slurmctld
fi
for _ in $(seq 1 50); do timeout 5 scontrol ping >/dev/null 2>&1 && break; sleep 0.2; done
if ! alive slurmd "$STATE/slurmd.pid"; then
  log "starting slurmd"
  slurmd
fi

# -- wait for the node -----------------------------------------------------------------------
state=""
deadline=$((SECONDS + 90))
i=0
while [ $SECONDS -lt $deadline ]; do
  i=$((i + 1))
  state=$(timeout 5 sinfo -h -n "$HOST" -o "%T" 2>/dev/null | head -n1 || true)
  case "$state" in
    idle | mixed | allocated | completing) break ;;
    down* | drain* | fail*)
      # left down by an earlier run whose slurmd died: put it back
      [ $((i % 10)) = 1 ] && timeout 5 scontrol update NodeName="$HOST" State=RESUME >/dev/null 2>&1 || true
      ;;
  esac
  sleep 0.5
done
case "$state" in
  idle | mixed | allocated | completing) ;;
  *)
    log "node $HOST is not ready (state '${state:-none}'); see $STATE/slurmctld.log, $STATE/slurmd.log"
    exit 1
    ;;
esac
log "node $HOST is $state ($CPUS CPUs, $MEM MB), partition debug"

echo "export SLURM_CONF=$CONF" >"$STATE/env"
echo "export SLURM_CONF=$CONF"
