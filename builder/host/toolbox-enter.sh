#!/bin/bash
# Run a command inside the Apptainer toolbox root (a Debian tree under the user's cache),
# through a private mount namespace and pivot_root: apptainer refuses a chroot. The caller's
# working directories are bound at the same paths, so paths mean the same inside and out.
# Usage: enter /usr/bin/apptainer ARGS...   (always an absolute path inside the toolbox:
# with the host's directories bound in, a PATH lookup could find the shim and loop forever)
set -euo pipefail
here="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)"
root="$(dirname "$here")/root"

if [ "${HPCML_TOOLBOX_STEP:-}" != "inside" ]; then
    exec unshare --mount --propagation private env HPCML_TOOLBOX_STEP=inside "$here/enter" "$@"
fi
unset HPCML_TOOLBOX_STEP

cwd="$(pwd -P)"
binds=(/tmp)
[ -d "${HOME:-}" ] && binds+=("$HOME")
top="/$(printf '%s' "$cwd" | cut -d/ -f2)"
case "$top" in
    /|/usr|/etc|/bin|/sbin|/lib|/lib64|/var|/boot|/proc|/sys|/dev|/run) binds+=("$cwd") ;;
    *) binds+=("$top") ;;
esac
IFS=: read -r -a extra <<< "${HPCML_TOOLBOX_BINDS:-}"
binds+=("${extra[@]}")
# What the command names on the host must exist in here too: each --bind/-B source and the
# folder of each image or definition file, so that `apptainer exec --bind /srv/data x.sif`
# works as with an installed Apptainer. System folders are left out: binding the host's over
# the toolbox's own would break the toolbox.
add_host_path() {
    local path
    path="$(readlink -f -- "$1" 2>/dev/null)" || return 0
    case "$path" in
        /|/usr|/usr/*|/etc|/etc/*|/bin|/bin/*|/sbin|/sbin/*|/lib|/lib/*|/lib64|/lib64/*|/proc*|/sys*|/dev*|/run*) ;;
        *) binds+=("$path") ;;
    esac
}
previous=""
for arg in "${@:2}"; do
    specs=""
    case "$previous" in --bind|-B) specs="$arg" ;; esac
    case "$arg" in
        --bind=*) specs="${arg#--bind=}" ;;
        *.sif|*.def|*.img) [ -e "$arg" ] && add_host_path "$(dirname -- "$arg")" ;;
    esac
    if [ -n "$specs" ]; then
        IFS=, read -r -a spec_list <<< "$specs"
        for spec in "${spec_list[@]}"; do add_host_path "${spec%%:*}"; done
    fi
    previous="$arg"
done

mount --bind "$root" "$root"
for dir in proc sys dev; do
    mount --rbind "/$dir" "$root/$dir"
done
for dir in "${binds[@]}"; do
    if [ -z "$dir" ] || [ ! -e "$dir" ]; then continue; fi
    if [ -d "$dir" ]; then mkdir -p "$root$dir"; else mkdir -p "$(dirname "$root$dir")"; touch "$root$dir"; fi
    mount --rbind "$dir" "$root$dir"
done
for file in /etc/hosts /etc/resolv.conf; do
    [ -e "$file" ] || continue
    touch "$root$file"
    mount --bind "$file" "$root$file"
done
cd "$root"
mkdir -p .oldroot
pivot_root . .oldroot
cd /
umount -l /.oldroot
cd "$cwd"
exec "$@"
