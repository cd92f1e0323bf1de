#!/bin/bash
# Bad input of quantized imported CNNs (issue 41): a file's concat whose input's scale is
# not its own, a concat's range changed, a kept-float op's scale missing or not a
# number. Each refused by eval in one line, the file left as it was.
set -u
DTRAIN=$1
SRC=$(cd "$(dirname "$0")/.." && pwd)
. "$SRC/tests/bad_input_lib.sh"
. "$SRC/tests/quant_lib.sh"
F="--threads 2"
cp "$SRC/tests/fixtures/onnx/squeeze_grouped_1ch.onnx" sq.onnx
"$DTRAIN" train --model sq.onnx --data fashion-mnist --max-samples 64 --test-samples 32 --epochs 1 --quiet $F \
    --save w.safetensors &&
    "$DTRAIN" quantize --model sq.onnx --init w.safetensors --out q.safetensors \
        --calib-samples 64 --calib-method minmax $F >/dev/null ||
    { echo "cannot quantize squeeze_grouped_1ch here"; exit 1; }
R20="--model resnet20 --width 4 --data synthetic:cifar10"
"$DTRAIN" train $R20 --max-samples 64 --test-samples 32 --epochs 1 --quiet $F --save r.safetensors &&
    "$DTRAIN" quantize $R20 --init r.safetensors --out rq.safetensors --calib-samples 32 \
        --calib-method minmax $F >/dev/null ||
    { echo "cannot quantize resnet20 here"; exit 1; }

# rewrite.py IN OUT TENSOR ACTION: a copy with one tensor's data changed or removed
cat >rewrite.py <<'PY'
import json, struct, sys
src, dst, name, action = sys.argv[1:5]
raw = open(src, "rb").read()
(n,) = struct.unpack("<Q", raw[:8])
header = json.loads(raw[8:8 + n])
data = bytearray(raw[8 + n:])
if action == "drop":
    del header[name]
else:
    b, e = header[name]["data_offsets"]
    if action == "double":
        data[b:e] = struct.pack("<f", 2 * struct.unpack("<f", bytes(data[b:e]))[0])
    elif action == "nan":
        data[b:e] = struct.pack("<f", float("nan"))
    elif action == "signed":
        data[b:e] = struct.pack("<2i", -128, 127)
text = json.dumps(header).encode()
text += b" " * (-len(text) % 8)
open(dst, "wb").write(struct.pack("<Q", len(text)) + text + bytes(data))
PY
python3 rewrite.py q.safetensors scale.safetensors concat.16.act_scale double
expect "a concat whose input's scale is not its own" \
    "dtrain eval: scale.safetensors: concat.16's input features.4.expand1x1 has scale $(python3 -c "
import json,struct; raw=open('q.safetensors','rb').read(); n=struct.unpack('<Q',raw[:8])[0]; h=json.loads(raw[8:8+n])
b,e=h['features.4.expand1x1.act_scale']['data_offsets']; v=struct.unpack('<f',raw[8+n+b:8+n+e])[0]; print('%g, not the concat\'s %g' % (v, 2*v))")" \
    "scale.safetensors" "$DTRAIN" eval --model sq.onnx --init scale.safetensors $F --test-samples 10
python3 rewrite.py q.safetensors range.safetensors concat.16.act_range signed
# a u8 activation's range: 8 bits where quantize found VNNI, 7 (reduced) without it
case $(getmeta q.safetensors int8_range) in
reduced) u8="(reduced range) has [0, 127]" ;;
*) u8="(full range) has [0, 255]" ;;
esac
expect "a u8 concat's range made s8" \
    "dtrain eval: range.safetensors: concat.16's act_range is [-128, 127], the symmetric scheme $u8 there" \
    "range.safetensors" "$DTRAIN" eval --model sq.onnx --init range.safetensors $F --test-samples 10
KEPT=$(python3 -c "
import json,struct; raw=open('rq.safetensors','rb').read(); n=struct.unpack('<Q',raw[:8])[0]
print(sorted(k for k in json.loads(raw[8:8+n]) if k.startswith('shortcut_pad.') and k.endswith('.act_scale'))[0])")
python3 rewrite.py rq.safetensors drop.safetensors "$KEPT" drop
expect "a kept-float op's scale missing" \
    "dtrain eval: drop.safetensors: tensor $KEPT is missing" \
    "drop.safetensors" "$DTRAIN" eval $R20 --init drop.safetensors $F --test-samples 10
python3 rewrite.py rq.safetensors nan.safetensors "$KEPT" nan
expect "a kept-float op's scale NaN" \
    "dtrain eval: nan.safetensors: $KEPT[0] is nan, not a positive finite scale" \
    "nan.safetensors" "$DTRAIN" eval $R20 --init nan.safetensors $F --test-samples 10
bad_input_done
