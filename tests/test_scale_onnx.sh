#!/bin/sh
# dtrain scale on an imported model (issue 41): torchvision's VisionTransformer from its
# committed export makes a study with predictions as a zoo model does: every config
# predicted before its run, each prediction set beside its measurement in report.md
# with the median |error| (or the note that none was measured on a quiet machine).
set -u
DTRAIN=$1
FX="$(cd "$(dirname "$0")" && pwd)/fixtures/onnx"
. "$(dirname "$0")/checks.sh"
cd "$tmp" || exit 1
cp "$FX/vit.onnx" vit.onnx
"$DTRAIN" scale --model vit.onnx --procs 1,2 --batch-sizes 16 --epochs 1 --max-samples 128 \
    --test-samples 32 --out s >out.txt 2>&1
check "scale --model vit.onnx ends well" grep -q "^report: s/report.md" out.txt
check "... its 2 configs predicted" [ "$(grep -c ',0$' s/predicted.csv)" -eq 2 ]
check "... before the first run" sh -c "grep -n 'predicting: vit.onnx at batch 16' out.txt | cut -d: -f1 |
    { read p; grep -n 'config 1/' out.txt | cut -d: -f1 | { read r; [ \$p -lt \$r ]; }; }"
for p in 1 2; do
    check "the report sets predicted beside measured at $p process(es)" \
        grep -q "^| $p | 16 | [0-9]* | [0-9.]* | [0-9.]* | [0-9.]* | [0-9.]* | [-+][0-9.]*% |" s/report.md
done
check "... with the median |error|" grep -q "^\*\*Median |error| [0-9.]*%\*\* over\|^\*\*No median |error|\*\*: no config was measured on a quiet" s/report.md
grep -A8 '^## Predicted before measuring' s/report.md | tail -4
finish
