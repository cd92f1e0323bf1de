# Shared by the bad-input catalogue's scripts (tests/test_bad_input*.sh): a scratch
# folder, the counters and the two kinds of case. Source it after setting DTRAIN;
# finish with bad_input_done.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
passed=0
failed=0
cases=0

# The scripts whose cases Debian's python3-onnx writes: PY, or a skip (77) without it.
need_python_onnx() {
    PY=/usr/bin/python3
    if ! $PY -c 'import onnx, numpy' 2>/dev/null; then
        echo "skipped: Debian's python3-onnx is not installed"
        exit 77
    fi
}

# expect "description" "exact line" "files left untouched (space-separated)" command...
# Under mpirun, Open MPI adds its own banner after our line: only lines starting with
# "dtrain" count, and there must be exactly one.
expect() {
    what=$1 line=$2 files=$3
    shift 3
    cases=$((cases + 1))
    sums=""
    [ -n "$files" ] && sums=$(cd "$tmp" && md5sum $files)
    timeout 60 "$@" >"$tmp/out" 2>"$tmp/err"
    status=$?
    grep '^dtrain' "$tmp/err" >"$tmp/ours"
    ok=1
    { [ "$status" -ne 0 ] && [ "$status" -lt 124 ]; } || ok=0
    if [ "${match_re:-0}" = 1 ]; then
        [ "$(wc -l <"$tmp/ours")" -eq 1 ] && grep -qE "$line" "$tmp/ours" || ok=0
    else
        [ "$(wc -l <"$tmp/ours")" -eq 1 ] && [ "$(cat "$tmp/ours")" = "$line" ] || ok=0
    fi
    if [ -n "$files" ] && [ "$(cd "$tmp" && md5sum $files 2>&1)" != "$sums" ]; then ok=0; fi
    if [ $ok -eq 1 ]; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        echo "FAIL: $what (status $status); expected: $line"
        cat "$tmp/err"
    fi
}

ok_case() { # description, command...: must succeed
    what=$1
    shift
    cases=$((cases + 1))
    if "$@" >/dev/null 2>"$tmp/err"; then passed=$((passed + 1)); else
        failed=$((failed + 1)); echo "FAIL: $what"; cat "$tmp/err"; fi
}

# expect_match: as expect, with an extended regular expression for the line (for
# figures that depend on the thread count or the build)
expect_match() {
    match_re=1
    expect "$@"
    match_re=0
}

# pass "description" / fail "description" [details...]: a case checked by hand
pass() { cases=$((cases + 1)); passed=$((passed + 1)); }
fail() {
    cases=$((cases + 1)); failed=$((failed + 1)); echo "FAIL: $1"
    shift; [ $# -gt 0 ] && printf '%s\n' "$@"
    return 0
}

# nan_weights IN OUT: OUT is the safetensors file IN with its first value NaN, its
# checksums (dtrain's tensor_crc32.*, if any) recomputed: NaN weights as a writer
# saved them, not a damaged file
nan_weights() {
    python3 - "$1" "$2" <<'PY'
import json, struct, sys, zlib
b = bytearray(open(sys.argv[1], "rb").read())
n = struct.unpack("<Q", b[:8])[0]
b[8 + n:8 + n + 4] = struct.pack("<f", float("nan"))
h = json.loads(b[8:8 + n])
meta = h.get("__metadata__", {})
if "tensor_crc32.0" in meta:
    data = bytes(b[8 + n:])
    names = sorted(k for k in h if k != "__metadata__")
    crcs = ["%08x" % zlib.crc32(data[h[k]["data_offsets"][0]:h[k]["data_offsets"][1]]) for k in names]
    for k in [k for k in meta if k.startswith("tensor_crc32.")]:
        del meta[k]
    for i in range(0, len(crcs), 400):
        meta["tensor_crc32.%d" % (i // 400)] = ",".join(crcs[i:i + 400])
    js = json.dumps(h, separators=(",", ":")).encode()
    b = struct.pack("<Q", len(js)) + js + data
open(sys.argv[2], "wb").write(b)
PY
}

bad_input_done() {
    echo "$cases cases: $passed passed, $failed failed"
    [ "$failed" -eq 0 ]
}

# setmeta FILE KEY VALUE: a safetensors file's __metadata__ entry replaced in place
setmeta() {
    python3 - "$@" <<'PY'
import json, struct, sys
path, key, value = sys.argv[1:4]
b = open(path, "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
h["__metadata__"][key] = value
js = json.dumps(h, separators=(",", ":")).encode()
open(path, "wb").write(struct.pack("<Q", len(js)) + js + b[8 + n:])
PY
}
getmeta() { # FILE KEY: the value, or "absent"
    python3 -c 'import json,struct,sys
b=open(sys.argv[1],"rb").read(); n=struct.unpack("<Q",b[:8])[0]
print(json.loads(b[8:8+n])["__metadata__"].get(sys.argv[2], "absent"))' "$@"
}
