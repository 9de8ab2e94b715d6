#!/usr/bin/env bash
# emucluster.sh — an emulated cluster of N nodes x G ranks on this one machine (toolchain.md),
# and an MPI command run on it.
#
# Each node is a network namespace with its own hostname (`unshare --uts`), so ranks of one node
# talk through shared memory and MPI_Comm_split_type(SHARED) sees N nodes; nodes reach each other
# only through veth links into a bridge (the "switch", its own namespace), shaped with tbf in
# both directions (each node's NIC: --rate). mpirun starts in node 0 and reaches the others with
# a fake remote shell (nsrsh) that enters the right namespace. Addresses are 10.77.0.x inside
# namespaces this script creates; nothing outside them is touched. The emulated nodes share the
# real cores, so ranks yield when idle (mpi_yield_when_idle: the hostfile's slots would make
# Open MPI busy-poll). Everything (processes,
# namespaces, temporary files) is removed on exit, error, Ctrl-C or TERM; further Ctrl-C or TERM
# during that cleanup are ignored until it is done. Names are derived from the script's PID
# (namespaces fsmoe<PID>sw and fsmoe<PID>n<I>, temporary directory emucluster.<PID>), so a run
# that was killed outright (SIGKILL) is cleaned up by the next one: it removes the namespaces,
# processes and directories of every earlier run whose script no longer exists.
#
# usage: scripts/emucluster.sh [--nodes N] [--ranks-per-node G] [--rate RATE] [--burst B]
#                              [--mpirun-args "ARGS"] [--check] [--] PROGRAM [ARGS...]
#   --nodes N            emulated nodes (default 2)
#   --ranks-per-node G   MPI ranks per node (default 2)
#   --rate RATE          tbf rate of every node's link, each direction (default 1gbit)
#   --burst B            tbf burst (default: 128 KB, or 100 us of traffic at RATE where that
#                        is more: a bigger bucket refills while a link idles between timed
#                        runs and lets the next transfer beat the line rate, which bends the
#                        fitted line)
#   --mpirun-args ARGS   extra mpirun arguments (word-split)
#   --check              only check that namespaces can be made (exit 0, or 77 with a reason)
# Environment: EMUCLUSTER_STATS=1 prints, after the run, each link's tbf counters (drops,
#   overlimits) and each node's TCP counters (retransmissions, reordering) to stderr.
# Exit status: the MPI command's; 77 when namespaces cannot be made here (not root, no
# CAP_SYS_ADMIN, no iproute2/tc); 2 for bad usage.
set -u

nodes=2
ranks=2
rate=1gbit
burst=auto
extra=""
check_only=0

usage() {
    sed -n '2,/^set -u/p' "$0" | sed -e '/^set -u/d' -e 's/^# \{0,1\}//' >&2
    exit 2
}
die_usage() { echo "emucluster: $*" >&2; exit 2; }

while [ $# -gt 0 ]; do
    case "$1" in
    --nodes) [ $# -ge 2 ] || die_usage "--nodes needs a value"; nodes=$2; shift 2 ;;
    --ranks-per-node) [ $# -ge 2 ] || die_usage "--ranks-per-node needs a value"; ranks=$2; shift 2 ;;
    --rate) [ $# -ge 2 ] || die_usage "--rate needs a value"; rate=$2; shift 2 ;;
    --burst) [ $# -ge 2 ] || die_usage "--burst needs a value"; burst=$2; shift 2 ;;
    --mpirun-args) [ $# -ge 2 ] || die_usage "--mpirun-args needs a value"; extra=$2; shift 2 ;;
    --check) check_only=1; shift ;;
    -h|--help) usage ;;
    --) shift; break ;;
    -*) die_usage "unknown option $1 (see --help)" ;;
    *) break ;;
    esac
done
case "$nodes" in ''|*[!0-9]*) die_usage "--nodes: '$nodes' is not a positive integer" ;; esac
case "$ranks" in ''|*[!0-9]*) die_usage "--ranks-per-node: '$ranks' is not a positive integer" ;; esac
[ "$nodes" -ge 1 ] && [ "$nodes" -le 200 ] || die_usage "--nodes: $nodes is not in 1..200"
[ "$ranks" -ge 1 ] && [ "$ranks" -le 256 ] || die_usage "--ranks-per-node: $ranks is not in 1..256"
if [ "$check_only" -eq 0 ] && [ $# -eq 0 ]; then die_usage "no command given (usage: emucluster.sh [options] -- PROGRAM [ARGS...])"; fi

skip() { echo "emucluster: SKIP: $*" >&2; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "network namespaces need root (running as uid $(id -u))"
for t in ip tc unshare mpirun; do
    command -v "$t" >/dev/null 2>&1 || skip "$t not found (apt-get install iproute2 util-linux openmpi-bin)"
done

tag="fsmoe$$"
sw="${tag}sw"
tmpbase=${TMPDIR:-/tmp}
tmp="$tmpbase/emucluster.$$"
launcher_pid=""
cleaned=0

# The namespaces of the run with script PID $1 (made or half made).
run_namespaces() {
    ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^fsmoe$1(sw|n[0-9]+)\$"
}

# Removes what the run with script PID $1 made: first every process inside its namespaces
# (mpirun, its daemons, the ranks; TERM, then KILL after up to 3 s), then the namespaces (which
# takes their veths and the bridge with them), then its temporary directory. Each step may be
# repeated and may find its work already done.
remove_run() {
    local pid=$1 nss ns p left
    nss=$(run_namespaces "$pid")
    if [ -n "$nss" ]; then
        for ns in $nss; do
            for p in $(ip netns pids "$ns" 2>/dev/null); do kill -TERM "$p" 2>/dev/null; done
        done
        for _ in $(seq 1 30); do
            left=""
            for ns in $nss; do left="$left$(ip netns pids "$ns" 2>/dev/null)"; done
            [ -z "$left" ] && break
            sleep 0.1
        done
        for ns in $nss; do
            for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
        done
        for ns in $nss; do
            # a process may still hold the namespace for a moment after KILL
            for _ in 1 2 3 4 5; do
                ip netns del "$ns" 2>/dev/null && break
                [ -e "/run/netns/$ns" ] || break
                sleep 0.1
            done
        done
    fi
    rm -rf "$tmpbase/emucluster.$pid"
}

# Runs of this script that died without cleaning up (killed with SIGKILL, machine hang): their
# script process is gone, their namespaces, processes and temporary directory are not.
remove_stale_runs() {
    local pids p
    pids=$( { ip netns list 2>/dev/null | awk '{print $1}' |
              sed -n -E 's/^fsmoe([0-9]+)(sw|n[0-9]+)$/\1/p'
              for d in "$tmpbase"/emucluster.*; do
                  [ -d "$d" ] && echo "${d##*.}"
              done; } | grep -E '^[0-9]+$' | sort -u)
    for p in $pids; do
        # a live run is not ours to touch; our own PID can only be a dead run's (PID reuse)
        if [ "$p" != "$$" ] && [ -r "/proc/$p/cmdline" ] &&
            tr '\0' ' ' < "/proc/$p/cmdline" | grep -q 'emucluster\.sh'; then
            continue
        fi
        echo "emucluster: removing what an earlier run (pid $p) left behind" >&2
        remove_run "$p"
    done
}

cleanup() {
    # Further Ctrl-C or TERM must not cut the cleanup short (the commands it starts inherit the
    # ignored signals too); a second call (EXIT after INT) finds nothing left to do.
    trap '' INT TERM
    [ "$cleaned" -eq 1 ] && return
    if [ -n "$launcher_pid" ]; then
        # The launcher's own process group (setsid): mpirun and whatever it started there.
        kill -TERM -- "-$launcher_pid" 2>/dev/null || kill -TERM "$launcher_pid" 2>/dev/null
    fi
    remove_run "$$"
    if [ -n "$launcher_pid" ]; then
        kill -KILL -- "-$launcher_pid" 2>/dev/null
        wait "$launcher_pid" 2>/dev/null
    fi
    cleaned=1
}
trap cleanup EXIT
trap 'cleanup; exit 130' INT
trap 'cleanup; exit 143' TERM

remove_stale_runs
mkdir -p "$tmp" || exit 1

mkns() {
    if ! err=$(ip netns add "$1" 2>&1); then
        skip "cannot create network namespace $1: $err"
    fi
}

# The bucket: 128 KB (two 64 KB GSO packets), or 100 us of traffic where that is more. tbf's
# watchdog is a high-resolution timer, so a small bucket holds most of the rate. Every byte of
# bucket is credit that a transfer after an idle gap spends at infinite speed, a constant
# saving that bends the α-β line (α clamped at 0, points up to several MB below the line).
# Measured at 8gbit, AllToAll and AllReduce between 2 nodes, 1-24 MB: a 10 ms bucket (10 MB)
# let transfers up to ~5 MB beat the line rate; 1 ms (1 MB): points up to 8 MB 10-16 % below
# the line, r2 0.997-0.998; 384 KB: 1-4 MB 10 % below, r2 0.999; 128 KB: within 2 % from
# 2 MB on, r2 0.9997-0.9999. The price: 76 % of the line rate instead of 86 % (the bucket
# empties before the timer refills it when a core is busy) — the profile measures what the
# link gives, so the planner sees it.
if [ "$burst" = auto ]; then
    bits=$(awk -v r="$rate" 'BEGIN {
        n = r + 0; u = tolower(substr(r, length(n "") + 1));
        m = (u == "kbit") ? 1e3 : (u == "mbit") ? 1e6 : (u == "gbit") ? 1e9 : (u == "bit" || u == "") ? 1 : -1;
        if (m < 0 || n <= 0) exit 1; printf "%.0f", n * m }') || die_usage "--rate: '$rate' is not N[k|m|g]bit"
    bytes=$((bits / 8 / 10000))
    [ "$bytes" -ge 131072 ] || bytes=131072
    burst=$bytes
fi

# The switch: a bridge in its own namespace.
mkns "$sw"
ip -n "$sw" link set lo up
ip -n "$sw" link add br0 type bridge || skip "cannot create a bridge"
ip -n "$sw" link set br0 up

hosts="$tmp/hosts"
: > "$hosts"
nsmap=""
for ((i = 0; i < nodes; i++)); do
    ns="${tag}n$i"
    addr="10.77.0.$((i + 1))"
    mkns "$ns"
    ip link add eth0 netns "$ns" type veth peer name "p$i" netns "$sw" \
        || skip "cannot create a veth pair"
    ip -n "$ns" addr add "$addr/24" dev eth0
    ip -n "$ns" link set lo up
    ip -n "$ns" link set eth0 up
    # TCP as the stand-in for a cluster's RDMA fabric, which has neither of these: no slow
    # start after an idle gap (each timed run would begin with a 10-segment window) and no
    # delayed ACKs (quickack: the sender of a message's last segment got no ACK and waited for a
    # tail-loss probe, ~65 probes in one SAA sweep). Measured on Parm's SAA (4 ranks, 8gbit):
    # r2 0.978-0.993 (mean 0.989, 17 jobs) before, 0.990-0.995 (mean 0.992, 5 jobs) after.
    ip netns exec "$ns" sysctl -qw net.ipv4.tcp_slow_start_after_idle=0 ||
        echo "emucluster: warning: cannot turn off TCP slow start after idle on node$i" >&2
    ip -n "$ns" route change 10.77.0.0/24 dev eth0 proto kernel scope link src "$addr" quickack 1 ||
        echo "emucluster: warning: cannot set quickack on node$i's route" >&2
    ip -n "$sw" link set "p$i" master br0
    ip -n "$sw" link set "p$i" up
    # Receive packet steering: which CPU processes the packets arriving on each veth end.
    # Without it a veth hands each packet to the backlog of the CPU that transmits it, and tbf
    # transmits from whichever CPU its timer or the sender runs on, so one TCP flow's packets
    # were processed on two CPUs and arrived out of order (~2% of segments retransmitted
    # spuriously, DSACK-confirmed). One fixed CPU per veth end keeps every flow in order.
    # Which CPU: RPS over all CPUs hashes a connection's two directions (the hash is
    # symmetric) to the same CPU, so an MPI pair exchanging data both ways had all four veth
    # hops of both directions on one core and ran at half the rate whenever that core was
    # also running a rank (measured on 2 cores: AllToAll times bimodal, 1x and 2x). Here the
    # packets node i sends are handled on CPU i mod C (its switch port) and those it receives
    # on CPU (i+1) mod C (its eth0): with 2 nodes each direction stays on one CPU and the two
    # directions on different ones. fsmoe-bench runs a rank of node i on CPU i mod C while it
    # measures across nodes on an oversubscribed machine (microbench/measure.h), next to the
    # traffic it sends.
    cpu_count=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
    [ "$cpu_count" -le 32 ] || cpu_count=32
    cpu_out=$(printf %x $((1 << (i % cpu_count))))
    cpu_in=$(printf %x $((1 << ((i + 1) % cpu_count))))
    ip netns exec "$ns" sh -c "echo $cpu_in > /sys/class/net/eth0/queues/rx-0/rps_cpus" 2>/dev/null ||
        echo "emucluster: warning: cannot set RPS on node$i (TCP may see reordering)" >&2
    ip netns exec "$sw" sh -c "echo $cpu_out > /sys/class/net/p$i/queues/rx-0/rps_cpus" 2>/dev/null ||
        echo "emucluster: warning: cannot set RPS on switch port p$i (TCP may see reordering)" >&2
    # The node's NIC: rate out (node side) and rate in (switch side).
    if ! err=$(ip netns exec "$ns" tc qdisc add dev eth0 root tbf rate "$rate" burst "$burst" latency 5ms 2>&1) ||
       ! err=$(ip netns exec "$sw" tc qdisc add dev "p$i" root tbf rate "$rate" burst "$burst" latency 5ms 2>&1); then
        skip "cannot shape the link with tc tbf (rate $rate): $err"
    fi
    echo "$addr slots=$ranks" >> "$hosts"
    nsmap="$nsmap    $addr) ns=$ns; name=node$i ;;
"
done

if [ "$check_only" -eq 1 ]; then
    echo "emucluster: namespaces, veth, bridge and tbf work here"
    exit 0
fi

# The fake remote shell Open MPI uses to start its daemons on the other "nodes".
cat > "$tmp/nsrsh" <<NSRSH
#!/bin/sh
# nsrsh HOST COMMAND...: run COMMAND inside the namespace of HOST with that node's hostname.
host=\$1; shift
case "\$host" in
$nsmap    *) echo "nsrsh: unknown host \$host" >&2; exit 1 ;;
esac
exec ip netns exec "\$ns" unshare --uts sh -c "hostname \$name; \$*"
NSRSH
chmod +x "$tmp/nsrsh"

np=$((nodes * ranks))
cmd=(mpirun --allow-run-as-root --oversubscribe --hostfile "$hosts"
     --mca plm_rsh_agent "$tmp/nsrsh" --mca pml ob1 --mca btl vader,tcp,self
     --mca btl_tcp_if_include 10.77.0.0/24 --mca oob_tcp_if_include 10.77.0.0/24
     --mca mpi_yield_when_idle 1
     -np "$np")
# shellcheck disable=SC2206
[ -n "$extra" ] && cmd+=($extra)
cmd+=("$@")

echo "emucluster: $nodes node(s) x $ranks rank(s), links $rate each way; running: $*" >&2
# Node 0 launches (PMIx cannot reach the root namespace from inside, toolchain.md). setsid gives
# the launcher its own process group so cleanup can signal all of it.
quoted=$(printf '%q ' "${cmd[@]}")
setsid ip netns exec "${tag}n0" unshare --uts sh -c "hostname node0; exec $quoted" &
launcher_pid=$!
wait "$launcher_pid"
rc=$?
launcher_pid=""
if [ -n "${EMUCLUSTER_STATS:-}" ]; then
    # Debugging aid: what the shaped links did (drops, overlimits, backlog) and TCP's view.
    for ((i = 0; i < nodes; i++)); do
        echo "emucluster: node$i eth0: $(ip netns exec "${tag}n$i" tc -s qdisc show dev eth0 | tr -s ' \n' ' ')" >&2
        echo "emucluster: switch p$i: $(ip netns exec "$sw" tc -s qdisc show dev "p$i" | tr -s ' \n' ' ')" >&2
        echo "emucluster: node$i link: $(ip -n "${tag}n$i" -s link show dev eth0 | tr -s ' \n' ' ')" >&2
        echo "emucluster: node$i tcp: $(ip netns exec "${tag}n$i" nstat -as 2>/dev/null | tail -n +2 | grep -iE "retrans|drop|lost|ofo|prune|collapse|loss|timeout|spurious|dsack|reord|OutSegs|probe" | awk '{printf "%s=%s ", $1, $2}')" >&2
    done
fi
exit "$rc"
