#!/bin/sh
# scripts/include_graph.sh: first on small made-up trees (an upward edge, a cycle
# within one layer, relative and <dtrain/x.h> includes, the allow-list's new and stale
# lines, a header of no known folder), then on this checkout, which must pass: no
# cycle and no upward edge (beyond an allow-list's, if there is one).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
GRAPH=$ROOT/scripts/include_graph.sh
. "$(dirname "$0")/checks.sh"

# tree DIR: every folder of the real layer order, and docs quoting it
tree() {
    for a in core data optim metrics nn exec io quant parallel perfmodel train study cli; do
        mkdir -p "$1/src/$a"
    done
    mkdir -p "$1/include/dtrain" "$1/docs"
    grep '^    core < ' "$ROOT/docs/architecture.md" >"$1/docs/architecture.md"
}
# run DIR [ARGS]: the script's status in $status, its output in $tmp/out
run() {
    d=$1
    shift
    "$GRAPH" --root "$d" "$@" >"$tmp/out" 2>&1
    status=$?
}

t=$tmp/up
tree "$t"
printf '#include "dtrain/zoo.h"\n#include "../core/rng.h"\n' >"$t/src/data/loader.c"
touch "$t/src/nn/zoo.c" "$t/include/dtrain/zoo.h" "$t/src/core/rng.h"
run "$t"
check "an upward edge fails" [ "$status" -eq 1 ]
check "it names the file and the header" grep -qx "  NEW: upward data -> nn: src/data/loader.c includes dtrain/zoo.h" "$tmp/out"
check "a relative include is an edge" grep -q "^  data -> core  *1  src/data/loader.c (../core/rng.h)" "$tmp/out"
echo '#include <dtrain/zoo.h> /* as an installed header */' >"$t/src/optim/sgd.c"
run "$t"
check "<dtrain/x.h> is an edge too" grep -qx "  NEW: upward optim -> nn: src/optim/sgd.c includes dtrain/zoo.h" "$tmp/out"
printf '#include "nn/zoo.h"\n' >"$t/src/optim/sgd.c"
touch "$t/src/nn/zoo.h"
run "$t"
check "\"<area>/x.h\" is an edge" grep -qx "  NEW: upward optim -> nn: src/optim/sgd.c includes nn/zoo.h" "$tmp/out"
rm "$t/src/nn/zoo.h"
rm "$t/src/optim/sgd.c"
printf 'src/data/loader.c dtrain/zoo.h the loader builds models (a test)\n' >"$t/allow"
run "$t" --allow "$t/allow"
check "an allowed upward edge passes" [ "$status" -eq 0 ]
check "it says why it is allowed" grep -q "allowed: upward data -> nn: .*(the loader builds models (a test))" "$tmp/out"
printf '#include "dtrain/rng.h"\n' >"$t/src/data/loader.c"
touch "$t/include/dtrain/rng.h" "$t/src/core/rng.c"
run "$t" --allow "$t/allow"
check "a listed include that no longer offends fails" [ "$status" -eq 1 ]
check "it says which line to remove" grep -q "STALE: .*allow line 1: src/data/loader.c no longer includes dtrain/zoo.h" "$tmp/out"

t=$tmp/cycle
tree "$t"
echo '#include "dtrain/runlog.h"' >"$t/src/data/idx.c"
echo '#include "dtrain/idx.h"' >"$t/include/dtrain/runlog.h"
touch "$t/src/metrics/runlog.c" "$t/include/dtrain/idx.h"
run "$t"
check "a cycle within one layer fails" [ "$status" -eq 1 ]
check "it is printed as a cycle" grep -qx "    data -> metrics -> data" "$tmp/out"
check "both of its edges are named" sh -c "grep -c '^  NEW: cycle' '$tmp/out' | grep -qx 2"
check "--dot draws them red" sh -c "'$GRAPH' --root '$t' --dot | grep -q '\"data\" -> \"metrics\" \[label=\"1\", color=red'"

t=$tmp/misplaced
tree "$t"
touch "$t/src/nn/zoo.c" "$t/src/exec/zoo.h" "$t/include/dtrain/error.h" "$t/src/core/error.c"
run "$t"
check "an internal header away from its .c is refused" [ "$status" -eq 2 ]
check "it says where it belongs" grep -q "src/exec/zoo.h: zoo.c is in src/nn/: move the header there" "$tmp/out"

t=$tmp/area
tree "$t"
echo '#include "dtrain/kernel.h"' >"$t/src/nn/conv2d.c"
touch "$t/include/dtrain/kernel.h"
run "$t"
check "a header of no folder is refused" [ "$status" -eq 2 ]
check "it says how to name its folder" grep -q "kernel.h has no src/\*/kernel.c: name its area with a line /\* area: <area> \*/" "$tmp/out"
echo '/* area: exec */' >"$t/include/dtrain/kernel.h"
run "$t"
check "its area line puts it in exec: nn -> exec is upward" grep -qx "  NEW: upward nn -> exec: src/nn/conv2d.c includes dtrain/kernel.h" "$tmp/out"

run "$ROOT"
check "this checkout: no offending include beyond the allow-list" [ "$status" -eq 0 ]
[ "$status" -eq 0 ] || cat "$tmp/out"
finish
