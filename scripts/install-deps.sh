#!/bin/sh
# Installs the Debian packages dtrain needs; does nothing when they are all present.
# Usage: scripts/install-deps.sh [--bench]   (--bench adds python3-torch and hyperfine)
set -eu
pkgs="build-essential cmake pkg-config python3 libopenblas-openmp-dev libcjson-dev libdnnl-dev libcmocka-dev zlib1g-dev dataset-fashion-mnist libopenmpi-dev openmpi-bin iproute2 gnuplot-nox slurmd slurmctld slurm-client munge libprotobuf-c-dev protobuf-c-compiler libonnx-dev libonnx-testdata python3-onnx"
if [ "${1:-}" = "--bench" ]; then
    pkgs="$pkgs python3 python3-torch python3-numpy hyperfine time"
fi
missing=""
for p in $pkgs; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
    echo "install-deps: missing packages:$missing (run as root, or install them yourself)" >&2
    exit 1
fi
echo "install-deps: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
# shellcheck disable=SC2086
apt-get install -y -q --no-install-recommends $missing
