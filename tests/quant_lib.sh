# Sourced by the int8 tests of imported models (after checks.sh, in $tmp): exits 77
# where Debian's Fashion-MNIST is missing, and train_quantize, their one recipe.
if [ ! -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
    echo "skip: Debian's dataset-fashion-mnist is not installed"
    exit 77
fi

# train_quantize MODEL.onnx NAME: 2 epochs on 6,000 Fashion-MNIST images (one thread,
# seed 1: the same numbers every run) into NAME.w.safetensors, quantized into
# NAME.q.safetensors with quantize's output in NAME.quantize.txt.
train_quantize() {
    "$DTRAIN" train --model "$1" --data fashion-mnist --max-samples 6000 --test-samples 500 \
        --epochs 2 --lr 0.05 --threads 1 --seed 1 --quiet --save "$2.w.safetensors"
    "$DTRAIN" quantize --model "$1" --init "$2.w.safetensors" --out "$2.q.safetensors" \
        --threads 1 >"$2.quantize.txt"
}
