#!/bin/bash
# The folder-level include graph of src/: which area (src/<area>/) includes which, how
# often and from which files; its cycles; and the edges that go up the layer order
# below. Exits 1 when an include lies on an upward edge or inside a cycle and is not in
# the allow-list, or when the allow-list names an include that no longer offends (the
# list only shrinks); 2 on a usage error or a header whose area is unknown.
#
# Usage: scripts/include_graph.sh [--dot] [--allow FILE] [--root DIR]
#   --dot         print the graph for graphviz (dot -Tsvg) instead of the report
#   --allow FILE  the allow-list (default: scripts/include_graph.allow, if present);
#                 one known offending include a line: FILE HEADER REASON...
#   --root DIR    the checkout (default: this script's parent folder)
#
# Areas: a file under src/<area>/ (an internal header too) is in <area>; a public
# header, include/dtrain/<x>.h, is in the area of the one src/*/<x>.c, or, for a header
# with no such file, in the area its own line "/* area: <area> */" names. An internal
# header src/<area>/<x>.h whose <x>.c is in another folder is refused (exit 2).
# Edges: every #include "dtrain/<x>.h" (or <dtrain/<x>.h>),
# "<area>/<x>.h" or a path relative to the including file, in src/**/*.[ch] and
# include/dtrain/*.h.
set -euo pipefail

# Lower layers first; areas on one line are one layer and may not form a cycle among
# themselves. docs/architecture.md (Layers) quotes this order; the script checks it does.
LAYERS=(
    "core"
    "data optim metrics"
    "nn"
    "exec io"
    "quant parallel"
    "perfmodel"
    "train"
    "study"
    "cli"
)

usage() {
    sed -n '/^# Usage:/,/^# *--root/s/^# \{0,1\}//p' "$0" >&2
    exit 2
}

dot=0 allow="" root=""
while [ $# -gt 0 ]; do
    case $1 in
    --dot) dot=1 ;;
    --allow)
        [ $# -ge 2 ] || usage
        allow=$2
        shift
        ;;
    --root)
        [ $# -ge 2 ] || usage
        root=$2
        shift
        ;;
    *) usage ;;
    esac
    shift
done
[ -n "$root" ] || root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 2
if [ ! -d src ] || [ ! -d include/dtrain ]; then
    echo "include_graph: $root has no src/ and include/dtrain/" >&2
    exit 2
fi
[ -n "$allow" ] || allow=scripts/include_graph.allow
[ -e "$allow" ] || allow=/dev/null

order=""
declare -A layer_of
for i in "${!LAYERS[@]}"; do
    for a in ${LAYERS[$i]}; do layer_of[$a]=$i; done
    order+="${order:+ < }${LAYERS[$i]// /, }"
done

fail_setup() {
    echo "include_graph: $*" >&2
    exit 2
}

for d in src/*/; do
    a=${d#src/}
    a=${a%/}
    [ -n "${layer_of[$a]+x}" ] || fail_setup "src/$a/ has no layer: add it to LAYERS in $0"
done
grep -qF "$order" docs/architecture.md 2>/dev/null ||
    fail_setup "docs/architecture.md (Layers) does not quote the layer order: $order"

# The area of every public header: its .c's folder, else its "/* area: X */" line.
declare -A c_area said_area area_of_header
for c in src/*/*.c src/*/*/*.c; do
    [ -e "$c" ] || continue
    b=${c##*/}
    b=${b%.c}
    a=${c#src/}
    a=${a%%/*}
    if [ -n "${c_area[$b]+x}" ] && [ "${c_area[$b]}" != "$a" ]; then
        c_area[$b]="?"
    else
        c_area[$b]=$a
    fi
done
while IFS=: read -r h line; do
    [ -n "${said_area[$h]+x}" ] && continue # the first line counts
    a=${line#/\* area: }
    said_area[$h]=${a% \*/}
done < <(grep -H '^/\* area: [a-z_0-9]* \*/$' include/dtrain/*.h || true)
for h in include/dtrain/*.h; do
    b=${h##*/}
    b=${b%.h}
    said=${said_area[$h]:-}
    from_c=${c_area[$b]:-}
    if [ -n "$said" ]; then
        [ -n "${layer_of[$said]+x}" ] || fail_setup "$h: area '$said' is no folder of src/"
        [ -z "$from_c" ] || [ "$from_c" = "$said" ] || [ "$from_c" = "?" ] ||
            fail_setup "$h says area $said, but its .c is in src/$from_c/"
        area_of_header[$h]=$said
    elif [ "$from_c" = "?" ]; then
        fail_setup "$h: $b.c is in several folders; say which with a line /* area: <area> */"
    elif [ -n "$from_c" ]; then
        area_of_header[$h]=$from_c
    else
        fail_setup "$h has no src/*/$b.c: name its area with a line /* area: <area> */"
    fi
done

area_of() { # a path relative to the root -> its area in $to, or "" if it is not ours
    to=""
    case $1 in
    src/*/*)
        to=${1#src/}
        to=${to%%/*}
        ;;
    include/dtrain/*.h) to=${area_of_header[$1]:-} ;;
    esac
}

normalize() { # a/b/../c/./d -> a/c/d, in $norm
    local part out=() IFS=/
    for part in $1; do
        case $part in
        . | '') ;;
        ..) [ ${#out[@]} -gt 0 ] && unset "out[$((${#out[@]} - 1))]" ;;
        *) out+=("$part") ;;
        esac
    done
    norm="${out[*]}"
}

for h in src/*/*.h; do
    [ -e "$h" ] || continue
    b=${h##*/}
    b=${b%.h}
    a=${h#src/}
    a=${a%%/*}
    from_c=${c_area[$b]:-}
    [ -z "$from_c" ] || [ "$from_c" = "$a" ] || [ "$from_c" = "?" ] ||
        fail_setup "$h: $b.c is in src/$from_c/: move the header there"
done

# One line per include that crosses folders: FROM TO FILE HEADER
edges=$(mktemp)
trap 'rm -f "$edges"' EXIT
mapfile -t files < <(find src include/dtrain -name "*.[ch]" | LC_ALL=C sort)
while IFS=: read -r f inc; do
    area_of "$f"
    from=$to
    inc=${inc#*[\"<]}
    inc=${inc%%[\">]*}
    target=""
    case $inc in
    dtrain/*) target=include/$inc ;;
    *)
        first=${inc%%/*}
        if [ "$first" != "$inc" ] && [ -n "${layer_of[$first]+x}" ]; then
            target=src/$inc
        elif [ -e "${f%/*}/$inc" ]; then
            normalize "${f%/*}/$inc"
            target=$norm
        fi
        ;;
    esac
    [ -n "$target" ] || continue # a generated or system header
    [ -e "$target" ] || fail_setup "$f includes \"$inc\", which is not there"
    area_of "$target"
    [ -n "$to" ] || continue
    [ "$from" != "$to" ] && printf '%s %s %s %s\n' "$from" "$to" "$f" "$inc"
done < <(grep -HE '^[[:space:]]*#[[:space:]]*include[[:space:]]*("|<dtrain/)' "${files[@]}" || true) >"$edges"

layers_flat=""
for i in "${!LAYERS[@]}"; do
    for a in ${LAYERS[$i]}; do layers_flat+="$a=$i "; done
done

awk -v dot="$dot" -v layers="$layers_flat" -v order="$order" -v allow_path="$allow" '
function is_upward(e) { return layer[efrom[e]] > -1 && layer[efrom[e]] < layer[eto[e]] }
function edge_key(e) { return sprintf("%02d %02d %s", layer[efrom[e]], layer[eto[e]], e) }
# A shortest path from a to b along edges (BFS), as "a -> x -> b"; "" if none.
function path(a, b,    queue, head, tail, seen, prev, x, i, p, out) {
    split("", seen); split("", prev)
    queue[tail = 1] = a; seen[a] = 1; head = 1
    while (head <= tail) {
        x = queue[head++]
        if (x == b) break
        for (i = 1; i <= n_areas; i++)
            if (adj[x, area[i]] && !seen[area[i]]) {
                seen[area[i]] = 1; prev[area[i]] = x; queue[++tail] = area[i]
            }
    }
    if (!seen[b]) return ""
    for (p = b; p != a; p = prev[p]) out = (p == b ? p : p " -> " out)
    return a " -> " out
}
BEGIN {
    n = split(layers, kv, " ")
    for (i = 1; i <= n; i++) {
        split(kv[i], p, "=")
        layer[p[1]] = p[2] + 0
        area[++n_areas] = p[1]
    }
}
FILENAME == allow_path {
    if ($0 ~ /^[[:space:]]*(#|$)/) next
    key = $1 " " $2
    reason = $0
    sub(/^[^[:space:]]+[[:space:]]+[^[:space:]]+[[:space:]]*/, "", reason)
    if (reason == "") { bad_allow = bad_allow "  " allow_path " line " FNR ": " key " gives no reason\n" }
    allowed[key] = reason
    allow_line[key] = FNR
    next
}
{
    e = $1 " -> " $2
    if (!(e in count)) { edge[++n_edges] = e; efrom[e] = $1; eto[e] = $2 }
    count[e]++
    causes[e] = causes[e] (causes[e] == "" ? "" : ", ") $3 " (" $4 ")"
    inc[++n_inc] = $0
    adj[$1, $2] = reach[$1, $2] = 1
}
END {
    # edges in layer order (from, then to): insertion sort
    for (i = 2; i <= n_edges; i++)
        for (j = i; j > 1 && edge_key(edge[j - 1]) > edge_key(edge[j]); j--) {
            t = edge[j]; edge[j] = edge[j - 1]; edge[j - 1] = t
        }
    # transitive closure: a and b are in one cycle when each reaches the other
    for (k = 1; k <= n_areas; k++)
        for (i = 1; i <= n_areas; i++)
            if (reach[area[i], area[k]])
                for (j = 1; j <= n_areas; j++)
                    if (reach[area[k], area[j]]) reach[area[i], area[j]] = 1
    for (i = 1; i <= n_edges; i++) {
        e = edge[i]
        cyclic[e] = reach[eto[e], efrom[e]]
        # upward edges, and edges within one layer that close a cycle: a cycle of
        # layered folders has one or the other
        offends[e] = is_upward(e) || (cyclic[e] && layer[efrom[e]] == layer[eto[e]])
    }
    if (dot) {
        print "digraph include_graph {"
        print "  rankdir=BT; node [shape=box];"
        for (l = 0; l < n_areas; l++) {
            line = ""
            for (i = 1; i <= n_areas; i++) if (layer[area[i]] == l) line = line " \"" area[i] "\";"
            if (line != "") print "  { rank=same;" line " }"
        }
        for (i = 1; i <= n_edges; i++) {
            e = edge[i]
            style = offends[e] ? ", color=red, fontcolor=red" : (cyclic[e] ? ", color=orange" : "")
            printf "  \"%s\" -> \"%s\" [label=\"%d\"%s];\n", efrom[e], eto[e], count[e], style
        }
        print "}"
        exit 0
    }
    print "layer order (lower first): " order
    print ""
    print "edges (from -> to: includes, the files and headers behind them):"
    for (i = 1; i <= n_edges; i++) {
        e = edge[i]
        printf "  %-22s %3d  %s\n", e, count[e], causes[e]
    }
    print ""
    print "cycles (folders that reach each other; a shortest cycle through each offending edge):"
    n_cycles = 0
    for (i = 1; i <= n_areas; i++) {
        a = area[i]
        if (done[a] || !reach[a, a]) continue
        members = a
        done[a] = 1
        for (j = i + 1; j <= n_areas; j++)
            if (reach[a, area[j]] && reach[area[j], a]) { members = members ", " area[j]; done[area[j]] = 1 }
        print "  {" members "}"
        for (j = 1; j <= n_edges; j++) {
            e = edge[j]
            if (offends[e] && cyclic[e] && done[efrom[e]] == 1 && index(", " members ", ", ", " efrom[e] ", "))
                print "    " path(efrom[e], eto[e]) substr(path(eto[e], efrom[e]), length(eto[e]) + 1)
        }
        for (j = i; j <= n_areas; j++) if (done[area[j]] == 1) done[area[j]] = 2
        n_cycles++
    }
    if (!n_cycles) print "  none"
    print ""
    print "upward edges (a lower layer includes a higher one):"
    n_up = 0
    for (i = 1; i <= n_edges; i++)
        if (is_upward(edge[i])) { print "  " edge[i] (cyclic[edge[i]] ? " (in a cycle)" : ""); n_up++ }
    if (!n_up) print "  none"
    print ""
    print "offending includes:"
    n_off = 0
    for (i = 1; i <= n_inc; i++) {
        split(inc[i], f, " ")
        e = f[1] " -> " f[2]
        if (!offends[e]) continue
        n_off++
        key = f[3] " " f[4]
        what = (is_upward(e) ? "upward " : "cycle ") e ": " f[3] " includes " f[4]
        if (key in allowed) {
            print "  allowed: " what " (" allowed[key] ")"
            used[key] = 1
        } else {
            print "  NEW: " what
            bad = 1
        }
    }
    for (key in allowed)
        if (!(key in used)) {
            split(key, kk, " ")
            printf "  STALE: %s line %d: %s no longer includes %s on an offending edge: remove the line\n", allow_path, allow_line[key], kk[1], kk[2]
            n_stale++
            bad = 1
        }
    if (!n_off && !n_stale) print "  none"
    if (bad_allow != "") { printf "%s", bad_allow; bad = 1 }
    print ""
    print (bad ? "FAIL: an offending include not in the allow-list, or a stale or unexplained allow-list line" : "OK")
    exit bad ? 1 : 0
}' "$allow" "$edges"
