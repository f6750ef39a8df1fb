#!/bin/bash
# Usage: build-guard TEMP_PATH... -- COMMAND...
# Runs COMMAND in a session (so a process group) of its own. When the guard is told to stop
# (TERM, INT or HUP; the builder asks the kernel to send TERM when it dies, even by SIGKILL), it
# sends TERM to COMMAND's whole group, so that apptainer and whatever it started can clean up
# their own temporary folders, waits up to HPCML_STOP_GRACE seconds (default 10) for all of them
# to end, KILLs what is left, then removes the temporary paths: a killed build leaves neither a
# half-written image, nor its work files, nor a process behind.
set -u
grace=${HPCML_STOP_GRACE:-10}
if ! [[ $grace =~ ^[0-9]{1,5}$ ]]; then
    echo "build-guard: HPCML_STOP_GRACE=$grace is not a whole number of seconds" >&2
    exit 2
fi
if ! command -v setsid >/dev/null; then
    echo "build-guard: setsid (util-linux) not found" >&2
    exit 2
fi
temps=()
while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do
    temps+=("$1")
    shift
done
shift
child=

# True while COMMAND (before its setsid too) or a live process of its group is left. Bash
# reaps COMMAND as soon as it ends; the zombies of what COMMAND started have ended as well,
# though a slow init (in a container) can take seconds to reap them: /proc tells them apart.
stat_fields='^.*\) ([A-Za-z]) -?[0-9]+ ([0-9]+) '      # state, parent, group
running() {
    local stat line seen=0
    kill -0 "$1" 2>/dev/null && return 0
    kill -0 -- "-$1" 2>/dev/null || return 1
    for stat in /proc/[0-9]*/stat; do
        { read -r line <"$stat"; } 2>/dev/null || continue      # ended meanwhile
        seen=1
        if [[ $line =~ $stat_fields ]] && [ "${BASH_REMATCH[2]}" = "$1" ] \
            && [ "${BASH_REMATCH[1]}" != Z ] && [ "${BASH_REMATCH[1]}" != X ]; then
            return 0
        fi
    done
    [ "$seen" = 0 ]         # no /proc to read: the group is there, so count it as running
}

stop() {
    # the builder's TERM and the kernel's may both come: the second must not cut this short
    trap '' TERM INT HUP
    local pid=${child:-${!:-}} i     # $!: TERM came between the start and child=
    if [ -n "$pid" ]; then
        echo "build-guard: stopping the command: TERM, then KILL after ${grace} s" >&2
        kill -TERM -- "-$pid" "$pid" 2>/dev/null
        for ((i = 0; i < 5 * 10#$grace; i++)); do     # every 0.2 s, for the grace period
            running "$pid" || break
            sleep 0.2
        done
        kill -KILL -- "-$pid" "$pid" 2>/dev/null
        # a KILLed process may finish a write first: let it go before its files are removed
        for ((i = 0; i < 10; i++)); do
            running "$pid" || break
            sleep 0.2
        done
    fi
    rm -rf -- "${temps[@]}"
    exit 143
}

trap stop TERM INT HUP
setsid "$@" &
child=$!
wait "$child"
