#!/bin/sh
# make test where nothing was installed before (issue 40): a minimal Debian 12 root
# (debootstrap --variant=minbase bookworm, plus build-essential, cmake, git and python3),
# an /etc/hosts naming localhost and this host as an installed system's does, this
# checkout's branch cloned into /root/dtrain, then COMMAND run there as root (default:
# make test, whose readme test runs the README's blocks in a fresh folder).
# proc, sys, /dev (with a /dev/shm of its own) and /run are mounted in a mount namespace
# of the command's own: they vanish with it, nothing is left mounted on the host.
# Usage (as root): scripts/fresh-root.sh DIR [BRANCH [COMMAND]]
#   DIR     the root, made once (debootstrap) and kept; the clone is made again each time
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
ROOT=$(realpath -m "$1")
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

if [ ! -x "$ROOT/usr/bin/cmake" ]; then
    echo "fresh-root: debootstrap --variant=minbase bookworm $ROOT $DTRAIN_MIRROR"
    debootstrap --variant=minbase --include=build-essential,cmake,git,python3 bookworm "$ROOT" "$DTRAIN_MIRROR"
fi
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
    mount -t proc proc "$root/proc"
    mount -t sysfs sys "$root/sys"
    mount --rbind /dev "$root/dev"
    mount -t tmpfs -o mode=1777,nosuid,nodev shm "$root/dev/shm"
    mount -t tmpfs -o mode=755,nosuid,nodev run "$root/run"
    exec chroot "$root" /usr/bin/env -i HOME=/root USER=root LOGNAME=root SHELL=/bin/bash \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin TERM=dumb \
        /bin/bash -c "cd /root/dtrain && $1"
' fresh-root "$ROOT" "$COMMAND"
