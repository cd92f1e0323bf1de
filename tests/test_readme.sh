#!/bin/bash
# The README runs as written: its two commands (make run's main job, in a copy of the
# checkout's shape; make test is this suite), then, as a newcomer pasting them into a
# terminal of a fresh clone would, every ```sh block in order in one shell (exports and
# cd carry over), and every ```python block with Debian's python3 where it has PyTorch
# (else that block is reported skipped: make test does not install python3-torch; the
# README names the install, make bench does it). Sizes shrink through the README's own
# documented variable, DTRAIN_MAX_SAMPLES. The blocks start in a fresh clone's shape
# (build/ (this build) and scripts/ linked, no runs/) with an empty HOME and no
# PYTHONPATH; they must leave that clone as they found it (their results go to the
# folder the first block makes).
# usage: test_readme.sh BUILD_DIR
set -u
BUILD=$(cd "$1" && pwd)
SRC=$(cd "$(dirname "$0")/.." && pwd)
README=$SRC/README.md
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() {
    echo "FAIL: $*" >&2
    exit 1
}
export DTRAIN_MAX_SAMPLES=${DTRAIN_MAX_SAMPLES:-2000}

# The README starts with exactly the two commands.
head -5 "$README" | grep -q '^    make run  ' || fail "README's first command is not make run"
head -5 "$README" | grep -q '^    make test ' || fail "README's second command is not make test"

# a fresh clone's shape: the build and the scripts, nothing else
clone_shape() {
    mkdir -p "$1"
    ln -s "$BUILD" "$1/build"
    ln -s "$SRC/scripts" "$1/scripts"
}
MAINJOB=$TMP/mainjob
CHECKOUT=$TMP/checkout
clone_shape "$MAINJOB"
clone_shape "$CHECKOUT"

# One script of all blocks, each announced with its README line.
PY=""
if /usr/bin/python3 -c 'import torch, numpy' 2>/dev/null; then PY=/usr/bin/python3; fi
awk -v py="$PY" '
    /^```sh$/ { inblock = "sh"; printf "echo \"== README line %d (sh), at $SECONDS s\"\n", NR; next }
    /^```python$/ {
        inblock = "py"; n_py++
        if (py == "") printf "echo \"SKIP README line %d (python): Debian python3-torch is not installed (apt-get install python3-torch, as the README says; make bench installs it)\"\n", NR
        else printf "echo \"== README line %d (python)\"\n%s - <<'"'"'PY_BLOCK'"'"'\n", NR, py
        next
    }
    /^```$/ && inblock != "" {
        if (inblock == "py" && py != "") print "PY_BLOCK"
        inblock = ""; next
    }
    inblock == "sh" { print; next }
    inblock == "py" && py != "" { print; next }
    /^```/ { printf "echo \"FAIL: README line %d: a code block that is neither sh nor python\"; exit 1\n", NR }
' "$README" >"$TMP/blocks.sh"
n_blocks=$(grep -c '^```sh$' "$README")
[ "$n_blocks" -ge 5 ] || fail "only $n_blocks sh blocks found in the README"

cd "$MAINJOB" || fail "cd $MAINJOB"
# make run = install-deps + build (this suite did both) + the main job:
echo "== make run's main job (scripts/main-job.sh), DTRAIN_MAX_SAMPLES=$DTRAIN_MAX_SAMPLES"
start=$SECONDS
scripts/main-job.sh build/dtrain >"$TMP/make_run.out" 2>&1 ||
    fail "make run's main job failed: $(tail -5 "$TMP/make_run.out")"
grep -q '^# ' "$TMP/make_run.out" || fail "make run printed no report: $(tail -5 "$TMP/make_run.out")"
[ -f runs/scale/report.md ] || fail "make run left no runs/scale/report.md"
echo "   ($((SECONDS - start)) s)"

cd "$CHECKOUT" || fail "cd $CHECKOUT"
mkdir "$TMP/home"
env -u PYTHONPATH HOME="$TMP/home" bash -e -o pipefail "$TMP/blocks.sh" >"$TMP/blocks.out" 2>&1
rc=$?
grep '^== \|^SKIP ' "$TMP/blocks.out"
if [ $rc -ne 0 ]; then
    echo "--- last lines of the README's commands:" >&2
    tail -25 "$TMP/blocks.out" >&2
    fail "a README block failed (exit $rc) after the last '==' line above"
fi
left=$(cd "$CHECKOUT" && ls -A | sort | tr '\n' ' ')
[ "$left" = "build scripts " ] || fail "the README's blocks left files in the checkout: $left"
[ -z "$(ls -A "$TMP/home" | grep -v '^dtrain-try$')" ] ||
    fail "the README's blocks left files in HOME: $(ls -A "$TMP/home")"
[ -s "$TMP/home/dtrain-try/runs/lenet5.safetensors" ] ||
    fail "the README's blocks wrote no runs/lenet5.safetensors in the folder the first block made"
echo "ok: make run and all $n_blocks sh blocks of the README ran as written (DTRAIN_MAX_SAMPLES=$DTRAIN_MAX_SAMPLES)"
