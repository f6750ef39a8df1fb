#!/bin/bash
# Usage: build-guard TEMP_PATH... -- COMMAND...
# Runs COMMAND. When the guard is told to stop (TERM, INT or HUP; the builder asks the kernel
# to send TERM when it dies, even by SIGKILL), it stops COMMAND and removes the temporary
# paths, so a killed build leaves neither a half-written image nor its work files behind.
temps=()
while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do
    temps+=("$1")
    shift
done
shift
"$@" &
child=$!
trap 'kill -TERM "$child" 2>/dev/null; wait "$child"; rm -rf -- "${temps[@]}"; exit 143' TERM INT HUP
wait "$child"
exit $?
