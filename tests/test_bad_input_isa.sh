#!/bin/bash
# Bad input of issue 40 ("the suite fails on an AVX2-only CPU"), on any x86 host:
# ONEDNN_MAX_CPU_ISA=AVX2 makes dtrain run as on a Zen 3 (no AVX-512, bf16 or VNNI).
# bf16 is refused there in one line naming the ISA; int8 on oneDNN is exact there or
# not run: a file quantized there has 7-bit activations (int8_range reduced) and the
# same figures on every engine and ISA; a full-range file (the lab's, or one made with
# VNNI) is refused by bench and evaluated by the emulation with one note; a crafted
# int8_range is refused.
set -u
DTRAIN=$1
SRC=$(cd "$(dirname "$0")/.." && pwd)
. "$SRC/tests/bad_input_lib.sh"
AVX2="env ONEDNN_MAX_CPU_ISA=AVX2 OPENBLAS_CORETYPE=Haswell"
F="--threads 2 --test-samples 300"

# figures FILE.json: the eval record's figures an engine must not change
figures() {
    python3 -c 'import json,sys
d=json.load(open(sys.argv[1])); print(d["accuracy"], d["loss"], d["samples"])' "$1"
}
# engine FILE.json
engine() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["engine"])' "$1"; }

"$DTRAIN" train --model lenet5 --max-samples 1000 --epochs 1 --quiet $F --save w.safetensors ||
    { echo "cannot train lenet5 here"; exit 1; }

# --- bf16 on an AVX2-only CPU: refused in one line that names the ISA and the cap
expect "--precision bf16 with ONEDNN_MAX_CPU_ISA=AVX2" \
    "dtrain train: bf16 precision: this CPU (avx2; ONEDNN_MAX_CPU_ISA=AVX2) has neither AVX512-BF16 nor AMX (oneDNN would emulate it slowly); use --precision fp32" \
    "w.safetensors" $AVX2 "$DTRAIN" train --model lenet5 --max-samples 256 --epochs 1 --quiet \
    $F --precision bf16

# --- int8 quantized on the AVX2 host: 7-bit activations, recorded, exact everywhere
$AVX2 "$DTRAIN" quantize --model lenet5 --init w.safetensors --out r.safetensors \
    --calib-samples 128 --calib-method minmax --threads 2 >quantize_r.txt 2>&1
if [ "$(getmeta r.safetensors int8_range)" = reduced ] &&
    grep -q "7-bit activations: this CPU's int8 has no VNNI" quantize_r.txt; then
    pass "quantize on an AVX2 host records int8_range reduced and says so"
else
    fail "quantize on an AVX2 host records int8_range reduced and says so" \
        "int8_range: $(getmeta r.safetensors int8_range)" "$(cat quantize_r.txt)"
fi
$AVX2 "$DTRAIN" eval --model lenet5 --init r.safetensors $F --json >r_avx2.json 2>r_avx2.err
"$DTRAIN" eval --model lenet5 --init r.safetensors $F --json >r_here.json 2>r_here.err
"$DTRAIN" eval --model lenet5 --init r.safetensors $F --json --int8-engine emulate \
    >r_emu.json 2>r_emu.err
if [ -s r_avx2.json ] && [ -s r_here.json ] && [ -s r_emu.json ] &&
    [ "$(engine r_avx2.json)" = dnnl ] && [ "$(engine r_here.json)" = dnnl ] &&
    [ "$(figures r_avx2.json)" = "$(figures r_emu.json)" ] &&
    [ "$(figures r_here.json)" = "$(figures r_emu.json)" ] && ! [ -s r_avx2.err ]; then
    pass "a reduced-range file: oneDNN on AVX2, oneDNN here and the emulation agree"
else
    fail "a reduced-range file: oneDNN on AVX2, oneDNN here and the emulation agree" \
        "avx2: $(cat r_avx2.json r_avx2.err)" "here: $(cat r_here.json r_here.err)" \
        "emulate: $(cat r_emu.json)"
fi

# --- a full-range file where oneDNN's int8 has no VNNI: the lab's (never reduced)
"$DTRAIN" quantize --model lenet5 --init w.safetensors --out lab.safetensors --scheme lab \
    --calib-samples 128 --threads 2 >/dev/null 2>&1 || fail "the lab scheme quantizes"
expect "bench --int8 of a full-range file without VNNI" \
    "dtrain bench: int8 on oneDNN is not exact on this CPU (avx2, no AVX512-VNNI): layer conv1 has odd weights on a signed input; quantize again here (7-bit activations) or use --int8-engine emulate" \
    "lab.safetensors" $AVX2 "$DTRAIN" bench --infer --int8 --init lab.safetensors \
    --model lenet5 --steps 2 --threads 2
$AVX2 "$DTRAIN" eval --model lenet5 --init lab.safetensors $F --json >lab_avx2.json \
    2>lab_avx2.err
"$DTRAIN" eval --model lenet5 --init lab.safetensors $F --json --int8-engine emulate \
    >lab_emu.json 2>/dev/null
if [ -s lab_avx2.json ] && [ "$(engine lab_avx2.json)" = emulate ] &&
    [ "$(figures lab_avx2.json)" = "$(figures lab_emu.json)" ] &&
    [ "$(wc -l <lab_avx2.err)" -eq 1 ] &&
    grep -qx "dtrain eval: note: int8 on oneDNN is not exact on this CPU (avx2, no AVX512-VNNI) for lab.safetensors: layer conv1 has odd weights on a signed input; running the emulation (quantize again here for oneDNN)" lab_avx2.err; then
    pass "eval of a full-range file without VNNI: the emulation, with one note"
else
    fail "eval of a full-range file without VNNI: the emulation, with one note" \
        "$(cat lab_avx2.json lab_avx2.err)"
fi

expect "eval --int8-engine dnnl (given, not the default) of a full-range file without VNNI" \
    "dtrain eval: int8 on oneDNN is not exact on this CPU (avx2, no AVX512-VNNI): layer conv1 has odd weights on a signed input; quantize again here (7-bit activations) or use --int8-engine emulate" \
    "lab.safetensors" $AVX2 "$DTRAIN" eval --model lenet5 --init lab.safetensors $F --int8-engine dnnl

# --- a symmetric file made with VNNI (full range) taken to an AVX2 host
"$DTRAIN" quantize --model lenet5 --init w.safetensors --out q.safetensors \
    --calib-samples 128 --calib-method minmax --threads 2 >/dev/null 2>&1
if [ "$(getmeta q.safetensors int8_range)" = full ]; then # this CPU has VNNI
    expect_match "bench --int8 of a file made with VNNI, on AVX2" \
        "^dtrain bench: int8 on oneDNN is not exact on this CPU \(avx2, no AVX512-VNNI\): layer [a-z0-9.]+ (reads 8-bit activations \(\[0, 255\]\)|has odd weights on a signed input); quantize again here \(7-bit activations\) or use --int8-engine emulate$" \
        "q.safetensors" $AVX2 "$DTRAIN" bench --infer --int8 --init q.safetensors \
        --model lenet5 --steps 2 --threads 2
fi

# --- a crafted int8_range
cp r.safetensors bad.safetensors
setmeta bad.safetensors int8_range half
expect "an unknown int8_range" \
    "dtrain eval: bad.safetensors: unknown int8_range 'half' (full or reduced)" \
    "bad.safetensors" "$DTRAIN" eval --model lenet5 --init bad.safetensors $F
cp lab.safetensors bad.safetensors
setmeta bad.safetensors int8_range reduced
expect "int8_range reduced on a lab file" \
    "dtrain eval: bad.safetensors: int8_range reduced with the lab scheme (symmetric only)" \
    "bad.safetensors" "$DTRAIN" eval --model lenet5 --init bad.safetensors $F
if [ "$(getmeta q.safetensors int8_range)" = full ]; then
    cp q.safetensors bad.safetensors
    setmeta bad.safetensors int8_range reduced
    expect_match "int8_range reduced on a full-range file" \
        "^dtrain eval: bad.safetensors: [a-z0-9.]+'s act_range is \[0, 255\], the symmetric scheme \(reduced range\) has \[0, 127\] there$" \
        "bad.safetensors" "$DTRAIN" eval --model lenet5 --init bad.safetensors $F
fi
bad_input_done
