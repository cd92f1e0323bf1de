#!/bin/sh
# The main job of `make run`: the scaling study of lenet5 on Fashion-MNIST (Debian's
# dataset-fashion-mnist), 1 and 2 processes, the default batch sizes, 2 epochs each,
# every config twice (interleaved; the report gives medians with min-max and flags
# configs measured on a busy machine); prints the report. Two repeats, not three:
# one pass took 107 s here, so three (about 320 s) would not fit in 5 minutes.
# Results (logs, runs.csv, report.md, plots) land in runs/scale/.
set -eu
DTRAIN=${1:-build/dtrain}
"$DTRAIN" scale --model lenet5 --data fashion-mnist --procs 1,2 --epochs 2 --repeats 2 --out runs/scale
cat runs/scale/report.md
echo
echo "report, runs.csv and plots (PNG + SVG): runs/scale/"
