#!/bin/sh
# make test where nothing was installed before (issue 40): a minimal Debian 12 root
# (debootstrap --variant=minbase bookworm, plus build-essential, cmake, git and python3),
# an /etc/hosts naming localhost and this host as an installed system's does, this
# checkout's branch cloned into /root/dtrain, then COMMAND run there as root (default:
# make test, whose readme test runs the README's blocks in a fresh folder).
# proc, /sys (with its cgroups), /dev (with a /dev/shm of its own) and /run are mounted
# in a mount namespace of the command's own: they vanish with it, nothing is left
# mounted on the host.
# Usage (as root): scripts/fresh-root.sh DIR [BRANCH [COMMAND]]
#   DIR     DIR/base is made once (debootstrap) and kept as it is; each run copies it to
#           DIR/root afresh (the last run's root is removed first)
#   BRANCH  default: the branch checked out here; it must be committed
#   COMMAND default: make test
# The mirror is apt's first Debian source here (else deb.debian.org); DTRAIN_MIRROR sets it.
set -eu
[ $# -ge 1 ] || {
    echo "usage: scripts/fresh-root.sh DIR [BRANCH [COMMAND]]" >&2
    exit 2
}
[ "$(id -u)" = 0 ] || {
    echo "fresh-root: debootstrap and chroot need root" >&2
    exit 1
}
DIR=$(realpath -m "$1")
BASE=$DIR/base
ROOT=$DIR/root
SRC=$(cd "$(dirname "$0")/.." && pwd)
BRANCH=${2:-$(git -C "$SRC" rev-parse --abbrev-ref HEAD)}
COMMAND=${3:-make test}
if [ -z "${DTRAIN_MIRROR:-}" ]; then
    DTRAIN_MIRROR=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list 2>/dev/null |
        sed -n 's,^\(URIs:\|deb\) *\(\[[^]]*\] *\)\?\(https\?://[^ ]*/debian\)/\? .*$,\3,p; s,^URIs: *\(https\?://[^ ]*/debian\)/\?$,\1,p' | head -1)
    DTRAIN_MIRROR=${DTRAIN_MIRROR:-http://deb.debian.org/debian}
fi
command -v debootstrap >/dev/null || {
    echo "fresh-root: no debootstrap (apt-get install debootstrap)" >&2
    exit 1
}

mkdir -p "$DIR"
# one run at a time per DIR: the lock is held until the command ends (fd 9 goes with it)
exec 9>"$DIR/lock"
flock -n 9 || {
    echo "fresh-root: another run holds $DIR/lock" >&2
    exit 1
}
if [ ! -f "$BASE/.fresh-root-complete" ]; then
    echo "fresh-root: debootstrap --variant=minbase bookworm $BASE $DTRAIN_MIRROR"
    rm -rf "$BASE"
    debootstrap --variant=minbase --include=build-essential,cmake,git,python3 bookworm "$BASE" "$DTRAIN_MIRROR"
    touch "$BASE/.fresh-root-complete"
fi
if grep -q " $ROOT[/ ]" /proc/self/mountinfo; then
    echo "fresh-root: something is mounted under $ROOT (a run still going?); not removing it" >&2
    exit 1
fi
rm -rf "$ROOT"
cp -a "$BASE" "$ROOT"
rm "$ROOT/.fresh-root-complete"
# what an installed system has: its host name, localhost, a resolver
host=$(uname -n)
echo "$host" >"$ROOT/etc/hostname"
printf '127.0.0.1\tlocalhost\n127.0.1.1\t%s\n\n::1\tlocalhost ip6-localhost ip6-loopback\nff02::1\tip6-allnodes\nff02::2\tip6-allrouters\n' \
    "$host" >"$ROOT/etc/hosts"
cp -L /etc/resolv.conf "$ROOT/etc/resolv.conf"

rm -rf "$ROOT/root/dtrain"
git clone -q --branch "$BRANCH" "$SRC" "$ROOT/root/dtrain"
echo "fresh-root: $(git -C "$ROOT/root/dtrain" log -1 --format='%h %s' | cut -c1-100)"
echo "fresh-root: running '$COMMAND' in $ROOT:/root/dtrain"

# shellcheck disable=SC2016
exec unshare --mount --propagation private sh -c '
    set -e
    root=$1
    shift
    # / a mount point, as on an installed system: ip netns exec makes it a slave mount
    mount --bind "$root" "$root"
    mount -t proc proc "$root/proc"
    mount --rbind /sys "$root/sys" # with its cgroup mounts, which slurmd needs
    mount --rbind /dev "$root/dev"
    mount -t tmpfs -o mode=1777,nosuid,nodev shm "$root/dev/shm"
    mount -t tmpfs -o mode=755,nosuid,nodev run "$root/run"
    exec chroot "$root" /usr/bin/env -i HOME=/root USER=root LOGNAME=root SHELL=/bin/bash \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin TERM=dumb \
        /bin/bash -c "cd /root/dtrain && $1"
' fresh-root "$ROOT" "$COMMAND"
