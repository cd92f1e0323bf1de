#!/bin/sh
# Installs the Debian packages dtrain needs; does nothing when they are all present.
# Usage: scripts/install-deps.sh [--bench] [--dev] [--list]
#   --bench  adds what make bench needs (python3-torch, hyperfine, ...)
#   --dev    adds clang, clang-format and debootstrap (scripts/fuzz.sh, make format,
#            scripts/fresh-root.sh)
#   --list   prints the packages (of the sets asked for) instead; tests/test_programs.py checks that
#            each program the tests and scripts call comes from one of them or from the
#            baseline (debootstrap --variant=minbase + build-essential cmake git python3)
# The base set: the build, the tests (procps: ps and pgrep; iproute2: ip, tc and ss; ssh for
# mpirun --hostfile (tests/test_bad_input_launch.sh); the Slurm daemons for
# tests/test_slurm.sh) and the main job.
set -eu
base="build-essential cmake pkg-config python3 libopenblas-openmp-dev libcjson-dev libdnnl-dev libcmocka-dev zlib1g-dev dataset-fashion-mnist libopenmpi-dev openmpi-bin openssh-client procps iproute2 gnuplot-nox slurmd slurmctld slurm-client munge libprotobuf-c-dev protobuf-c-compiler libonnx-dev libonnx-testdata python3-onnx"
bench="python3-torch python3-numpy hyperfine time"
dev="clang clang-format libclang-rt-14-dev debootstrap"
pkgs=$base
list=0
for arg in "$@"; do
    case $arg in
    --bench) pkgs="$pkgs $bench" ;;
    --dev) pkgs="$pkgs $dev" ;;
    --list) list=1 ;;
    *)
        echo "install-deps: unknown option '$arg' (usage: scripts/install-deps.sh [--bench] [--dev] [--list])" >&2
        exit 2
        ;;
    esac
done
if [ "$list" = 1 ]; then
    echo "$pkgs" | tr ' ' '\n'
    exit 0
fi
missing=""
for p in $pkgs; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
    echo "install-deps: missing packages:$missing (run as root: scripts/install-deps.sh, or: apt-get install$missing)" >&2
    exit 1
fi
echo "install-deps: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
# shellcheck disable=SC2086
apt-get install -y -q --no-install-recommends $missing
