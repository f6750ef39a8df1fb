#!/bin/bash
# Usage: build-guard TMPFILE COMMAND...
# Runs COMMAND. When the guard is told to stop (TERM, INT or HUP; the builder asks the kernel
# to send TERM when it dies, even by SIGKILL), it stops COMMAND and removes TMPFILE, so a
# killed build leaves no half-written image behind.
tmp=$1
shift
"$@" &
child=$!
trap 'kill -TERM "$child" 2>/dev/null; wait "$child"; rm -f -- "$tmp"; exit 143' TERM INT HUP
wait "$child"
exit $?
