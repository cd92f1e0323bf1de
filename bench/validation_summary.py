#!/usr/bin/python3
"""Summary of bench/simulate_validation.sh's "shares" part: BASE/pass<r>/<group>_<model>_<rate>
are `dtrain scale` studies, each with predicted.csv (the simulator's step before the runs)
and runs.csv (the measured 2nd epoch). Per pass and group: configs, how many ran faithful
(runs.csv's busy flag: other processes' load or hosts out of quota), the median and worst
|error| of the predicted step over the faithful ones, and Kendall's tau between predicted
and measured step times (the order of configs kept); then the same over the whole pass.
The measured step is t_train / iterations (loader waits excluded, as scale's report)."""
import csv
import glob
import os
import statistics
import sys


def kendall_tau(pairs):
    """tau-a of [(predicted, measured)]: (concordant - discordant) / pairs."""
    n, score = len(pairs), 0
    for i in range(n):
        for j in range(i + 1, n):
            a = (pairs[i][0] - pairs[j][0]) * (pairs[i][1] - pairs[j][1])
            score += (a > 0) - (a < 0)
    return score / (n * (n - 1) / 2) if n > 1 else float("nan")


def study_rows(path):
    """[(procs, predicted ms, measured ms, faithful)] of one study; [] when it did not run."""
    try:
        predicted = list(csv.DictReader(open(os.path.join(path, "predicted.csv"))))
        runs = list(csv.DictReader(open(os.path.join(path, "runs.csv"))))
    except OSError:
        return []
    rows = []
    for run in runs:
        match = [p for p in predicted if p["procs"] == run["procs"] and
                 p["batch"] == run["batch_size"] and p.get("beyond", "0") == "0"]
        if not match:
            continue
        measured = float(run["t_train"]) / float(run["iterations"]) * 1e3
        rows.append((int(run["procs"]), float(match[0]["step_ms"]), measured,
                     run["busy"] == "0"))
    return rows


def line(label, rows):
    faithful = [r for r in rows if r[3]]
    errors = [abs(p / m - 1) * 100 for _, p, m, _ in faithful]
    tau = kendall_tau([(p, m) for _, p, m, _ in faithful])
    if not errors:
        return f"| {label} | {len(rows)} | 0 | - | - | - |"
    return (f"| {label} | {len(rows)} | {len(faithful)} | {statistics.median(errors):.1f}% | "
            f"{max(errors):.1f}% | {tau:.2f} |")


def main():
    base = sys.argv[1]
    head = ("| group | configs | faithful | median abs error | worst | Kendall tau |\n"
            "|---|---|---|---|---|---|")
    for pass_dir in sorted(glob.glob(os.path.join(base, "pass*"))):
        print(f"## {os.path.basename(pass_dir)}\n")
        print("| study | procs | predicted ms | measured ms | error | faithful |")
        print("|---|---|---|---|---|---|")
        groups, every = {}, []
        for study in sorted(os.listdir(pass_dir)):
            rows = study_rows(os.path.join(pass_dir, study))
            for procs, p, m, ok in rows:
                print(f"| {study} | {procs} | {p:.2f} | {m:.2f} | {(p / m - 1) * 100:+.1f}% | "
                      f"{'yes' if ok else 'no'} |")
            groups.setdefault(study.split("_")[0], []).extend(rows)
            every.extend(rows)
        print(f"\n{head}")
        for group, rows in groups.items():
            print(line(group, rows))
        print(line("ring and hier", [r for g, rows in groups.items() if not g.startswith("ps")
                                     for r in rows]))
        print(line("all", every))
        print()


if __name__ == "__main__":
    main()
