#!/usr/bin/env bash
# A one-node SLURM on this machine, to try parbench's SLURM path on a laptop or in CI:
#   bash launch/slurm-local.sh start    # install (Debian/Ubuntu packages) if missing, configure, start
#   bash launch/slurm-local.sh status   # daemons, sinfo, squeue; exit 1 when the cluster is not up
#   bash launch/slurm-local.sh stop     # end slurmd, slurmctld and munged
# slurm-wlm (slurmctld, slurmd, client) and munge; no systemd and no cgroups needed
# (proctrack/linuxproc, task/none), no accounting database (sacct is off; squeue works).
# Runs as root, or through sudo. Idempotent: `start` on a running cluster only checks it.
set -euo pipefail

PARTITION=${SLURM_LOCAL_PARTITION:-debug}
CONF=/etc/slurm/slurm.conf
LOGDIR=/var/log/slurm
SUDO=""

die() { echo "slurm-local: $*" >&2; exit 1; }
say() { echo "slurm-local: $*"; }

need_root() {
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || die "run as root or install sudo: installing and starting SLURM needs root"
    SUDO="sudo"
  fi
}

running() {  # running <pidfile>: the daemon in it is alive
  [ -f "$1" ] && $SUDO kill -0 "$($SUDO cat "$1")" 2>/dev/null
}

install_packages() {
  if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v sinfo >/dev/null \
     && command -v munged >/dev/null; then
    return
  fi
  command -v apt-get >/dev/null || die "SLURM is not installed and apt-get is missing: install slurmctld, slurmd, slurm-client and munge with your package manager"
  say "installing slurmctld slurmd slurm-client munge (apt-get, about a minute)"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq || die "apt-get update failed (no network or no package mirror?)"
  # policy-rc.d 101: the packages' scripts must not start daemons with their default config.
  local policy=/usr/sbin/policy-rc.d created=""
  if [ ! -e $policy ]; then
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee $policy >/dev/null && $SUDO chmod +x $policy && created=1
  fi
  $SUDO apt-get install -y -qq --no-install-recommends slurmctld slurmd slurm-client munge >/dev/null \
    || { [ -n "$created" ] && $SUDO rm -f $policy; die "apt-get install of slurm-wlm/munge failed"; }
  [ -n "$created" ] && $SUDO rm -f $policy
  return 0
}

start_munge() {
  if running /run/munge/munged.pid; then return; fi
  $SUDO mkdir -p /etc/munge /var/log/munge /run/munge /var/lib/munge
  if [ ! -s /etc/munge/munge.key ]; then
    $SUDO dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
  fi
  $SUDO chown -R munge:munge /etc/munge /var/log/munge /run/munge /var/lib/munge
  $SUDO chmod 400 /etc/munge/munge.key
  $SUDO chmod 700 /etc/munge
  $SUDO runuser -u munge -- /usr/sbin/munged --force
  munge -n | unmunge >/dev/null || die "munged started but munge -n | unmunge fails: see /var/log/munge/munged.log"
}

write_conf() {  # prints "changed" when slurm.conf was (re)written
  local host cpus mem_mb
  host=$(hostname -s)
  cpus=$(nproc --all)
  # slurmd refuses a node that claims more memory than it has: stay 5 % under MemTotal.
  mem_mb=$(awk '/MemTotal/ {printf "%d", $2 / 1024 * 0.95}' /proc/meminfo)
  local want
  want=$(cat <<EOF
# Written by parbench launch/slurm-local.sh: one node, no cgroups, no accounting.
ClusterName=parbench-local
SlurmctldHost=$host
AuthType=auth/munge
SlurmUser=slurm
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
MpiDefault=none
ReturnToService=2
# Short waits: a cancelled or timed-out job ends within seconds, and a finished one stays
# visible to squeue/scontrol for MinJobAge seconds.
KillWait=10
MinJobAge=600
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldLogFile=$LOGDIR/slurmctld.log
SlurmdLogFile=$LOGDIR/slurmd.log
NodeName=$host CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
PartitionName=$PARTITION Nodes=$host Default=YES MaxTime=INFINITE State=UP DefMemPerCPU=$((mem_mb / cpus))
EOF
)
  if [ -f $CONF ] && [ "$($SUDO cat $CONF)" = "$want" ]; then return; fi
  $SUDO mkdir -p /etc/slurm
  echo "$want" | $SUDO tee $CONF >/dev/null
  echo changed
}

prepare_dirs() {
  $SUDO mkdir -p /var/spool/slurmctld /var/spool/slurmd $LOGDIR
  $SUDO chown slurm:slurm /var/spool/slurmctld $LOGDIR
}

wait_for_node() {
  local host state i
  host=$(hostname -s)
  for i in $(seq 1 60); do
    state=$(sinfo -h -N -n "$host" -o %T 2>/dev/null | head -1 || true)
    case "$state" in
      idle*|mixed*|allocated*) say "node $host is $state (partition $PARTITION, $(nproc --all) CPUs)"; return ;;
      down*|drain*|inval*) $SUDO scontrol update nodename="$host" state=resume 2>/dev/null || true ;;
    esac
    sleep 1
  done
  die "the node did not become idle in 60 s (state: ${state:-none}): see $LOGDIR/slurmctld.log and $LOGDIR/slurmd.log"
}

start() {
  need_root
  install_packages
  start_munge
  local changed
  changed=$(write_conf)
  prepare_dirs
  if [ -n "$changed" ] && { running /run/slurmctld.pid || running /run/slurmd.pid; }; then
    say "slurm.conf changed: restarting the daemons"
    stop_daemons
  fi
  running /run/slurmctld.pid || $SUDO slurmctld || die "slurmctld did not start: see $LOGDIR/slurmctld.log"
  running /run/slurmd.pid || $SUDO slurmd || die "slurmd did not start: see $LOGDIR/slurmd.log"
  wait_for_node
}

stop_one() {  # stop_one <name> <pidfile>
  running "$2" || return 0
  local pid
  pid=$($SUDO cat "$2")
  $SUDO kill "$pid"
  for _ in $(seq 1 30); do $SUDO kill -0 "$pid" 2>/dev/null || { say "stopped $1"; return; }; sleep 0.5; done
  $SUDO kill -9 "$pid" 2>/dev/null || true
  say "killed $1 (it ignored SIGTERM for 15 s)"
}

stop_daemons() {
  stop_one slurmd /run/slurmd.pid
  stop_one slurmctld /run/slurmctld.pid
}

stop() {
  need_root
  stop_daemons
  stop_one munged /run/munge/munged.pid
}

status() {
  local up=0
  for d in munged:/run/munge/munged.pid slurmctld:/run/slurmctld.pid slurmd:/run/slurmd.pid; do
    if running "${d#*:}"; then say "${d%%:*} running (pid $(cat "${d#*:}" 2>/dev/null || echo '?'))"
    else say "${d%%:*} not running"; up=1; fi
  done
  if [ $up -eq 0 ]; then sinfo; squeue; fi
  return $up
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
