#!/bin/bash
# make install's layout, and the installed copy used as a user would: the CLI runs from
# another folder, and a program outside the tree compiles and links against the library
# through pkg-config alone.
# usage: test_install.sh BUILD_DIR [extra compiler flags, e.g. the sanitizers of BUILD_DIR]
set -eu
BUILD=$1
shift
extra=() # CTest passes an empty argument when the build has no sanitizers
for flag in "$@"; do [ -z "$flag" ] || extra+=("$flag"); done
SRC=$(cd "$(dirname "$0")/.." && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() {
    echo "FAIL: $*" >&2
    exit 1
}

# DESTDIR + PREFIX (a packager's staged install): everything lands under DESTDIR/PREFIX
DESTDIR=$TMP/stage cmake --install "$BUILD" --prefix /opt/dtrain >"$TMP/stage.log"
for f in bin/dtrain include/dtrain/model.h include/dtrain/version.h include/dtrain/dtrain.h; do
    [ -f "$TMP/stage/opt/dtrain/$f" ] || fail "DESTDIR install lacks opt/dtrain/$f"
done
[ -n "$(find "$TMP/stage/opt/dtrain" -name libdtrain.a)" ] || fail "DESTDIR install lacks libdtrain.a"
installed=$(cd "$TMP/stage/opt/dtrain/include/dtrain" && ls)
[ "$installed" = "$(cd "$SRC/include/dtrain" && ls)" ] ||
    fail "the installed headers are not the public ones of include/dtrain/: $(echo "$installed" | paste -sd, -)"
pc=$(find "$TMP/stage/opt/dtrain" -name dtrain.pc)
[ -n "$pc" ] || fail "DESTDIR install lacks dtrain.pc"
pcprefix=$(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --variable=prefix dtrain)
[ "$(cd "$pcprefix" && pwd -P)" = "$(cd "$TMP/stage/opt/dtrain" && pwd -P)" ] ||
    fail "dtrain.pc's prefix $pcprefix is not where it was installed"
echo "ok: DESTDIR=... PREFIX=/opt/dtrain installs bin, lib, include and pkg-config under it"

# PREFIX alone, then use it
cmake --install "$BUILD" --prefix "$TMP/p" >"$TMP/install.log"
want=$("$BUILD/dtrain" --version)
got=$(cd "$TMP" && "$TMP/p/bin/dtrain" --version)
[ "$got" = "$want" ] || fail "installed --version '$got', built '$want'"
case "$got" in "dtrain "[0-9]*.[0-9]*.[0-9]*" ("*")") ;; *) fail "--version says '$got'" ;; esac
ldd "$TMP/p/bin/dtrain" | grep -q 'openblas-openmp/libopenblas' ||
    fail "installed dtrain does not load OpenBLAS's OpenMP build: $(ldd "$TMP/p/bin/dtrain" | grep blas)"
(cd "$TMP" && OMP_NUM_THREADS=1 "$TMP/p/bin/dtrain" train --model logreg --data synthetic:mnist \
    --max-samples 256 --epochs 1 --threads 1 --quiet --log run.jsonl) || fail "installed dtrain train failed"
grep -q "\"version\":\"$(echo "$want" | sed 's/^dtrain //')\"" "$TMP/run.jsonl" ||
    fail "the run record does not carry the version: $(head -c 300 "$TMP/run.jsonl")"
echo "ok: installed dtrain runs from another folder, --version '$got' is in the run record"

export PKG_CONFIG_PATH
PKG_CONFIG_PATH=$(dirname "$(find "$TMP/p" -name dtrain.pc)")
# shellcheck disable=SC2046 # pkg-config's output is a list of flags
cc -std=c11 -Wall -Wextra -Werror "${extra[@]}" "$SRC/tests/install/use_dtrain.c" -o "$TMP/use_dtrain" \
    $(pkg-config --cflags --libs dtrain) || fail "a program does not build against the installed dtrain"
out=$(cd "$TMP" && "$TMP/use_dtrain")
[ "$out" = "dtrain $(echo "$want" | sed 's/^dtrain \([^ ]*\) .*/\1/'): lenet5 has 61706 parameters" ] ||
    fail "the program linked against the installed library printed '$out'"
echo "ok: $out (built with pkg-config --cflags --libs dtrain)"
for h in "$TMP/p/include/dtrain/"*.h; do
    # shellcheck disable=SC2046 # pkg-config's output is a list of flags
    printf '#include <dtrain/%s>\n' "${h##*/}" | cc -std=c11 -Wall -Wextra -Werror -fsyntax-only -x c - \
        $(pkg-config --cflags dtrain) || fail "the installed <dtrain/${h##*/}> does not compile alone"
done
echo "ok: every installed header compiles on its own"
