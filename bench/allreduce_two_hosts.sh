#!/bin/sh
# All-reduce of resnet18's gradient (44.7 MB) between two hosts over a 1 Gbit/s link
# (two network namespaces, scripts/netns-hosts.sh), against the bandwidth model:
# a 2-rank ring sends 2(P-1)/P * S = S bytes each way, so time >= S / (1 Gbit/s).
#   bench/allreduce_two_hosts.sh [BUILD_DIR]       (root)
set -eu
BUILD=${1:-build}
. "$(dirname "$0")/../scripts/netns-hosts.sh"
trap netns_down EXIT INT TERM
netns_up $$
out=$(netns_mpirun "$BUILD/bench_allreduce" 5 44695848)
echo "$out"
echo "$out" | awk -F'[:,}]' '{
    for (i = 1; i < NF; i++) { if ($i ~ /"bytes"/) b = $(i+1); if ($i ~ /"ring_ms"/) r = $(i+1); if ($i ~ /"mpi_ms"/) m = $(i+1) }
    model = b * 8 / 1e9 * 1e3
    printf "44.7 MB over 1 Gbit/s: model %.0f ms; ring %.0f ms (%.2fx the model); mpi %.0f ms (%.2fx)\n", model, r, r / model, m, m / model }'
