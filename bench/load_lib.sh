# Sourced by the side-by-side benchmarks (compare_torch.sh, onnx_models.sh,
# trace_cost.sh): a JSON field, a median, the range, and other processes' CPU use
# during a stretch of the run.
field() { sed -n "s/.*\"$1\": *\([0-9.]*\).*/\1/p"; }
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
spread() { sort -n | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%s-%s", lo, hi }'; }
# Other processes' CPU use, in cores: the machine's busy time from /proc/stat less what
# this shell's children (the benchmarks) used (the shell's `times`), over the wall time.
HZ=$(getconf CLK_TCK)
CORES=$(grep -c '^cpu[0-9]' /proc/stat)
# mark FILE: the machine's counters and this shell's children's CPU times, into FILE.
# Never inside $(...) or a pipe: `times` would run in a subshell, whose children's
# times are its own (none).
mark() {
    head -1 /proc/stat >"$1"
    times >>"$1"
}
other_cores() { # the mark files before and after
    a="$(head -1 "$1") $(sed -n 3p "$1")" b="$(head -1 "$2") $(sed -n 3p "$2")"
    echo "$a $b" | sed 's/\([0-9]*\)m\([0-9.]*\)s/\1 \2/g' | awk -v hz="$HZ" -v n="$CORES" '{
        # fields: cpu u n s idle iow irq sirq steal g gn | kid_user (m s) kid_sys (m s), twice
        tb = 0; for (i = 2; i <= 11; i++) tb += $i; ib = $5 + $6; kb = 60 * $12 + $13 + 60 * $14 + $15;
        ta = 0; for (i = 17; i <= 26; i++) ta += $i; ia = $20 + $21; ka = 60 * $27 + $28 + 60 * $29 + $30;
        busy = (ta - ia) - (tb - ib); wall = (ta - tb) / n;
        v = wall > 0 ? (busy - hz * (ka - kb)) / wall : 0; printf "%.2f", v < 0 ? 0 : v }'
}
