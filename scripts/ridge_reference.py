#!/usr/bin/env python3
"""Reference numbers for `dtrain fit-jobs --no-standardize`: plain ridge regression as
scikit-learn's Ridge(alpha=1) computes it (fit_intercept=True: features and target
centred, the intercept not penalised), written with numpy alone, for each of b0, b1,
b2 on the features depth and batch of tests/fixtures/ridge_jobs.csv.

    python3 scripts/ridge_reference.py > tests/fixtures/ridge_numpy.txt

Output: one line per parameter: "b<k> intercept coef_depth coef_batch" (%.12g)."""
import os
import sys

import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
path = os.path.join(here, "..", "tests", "fixtures", "ridge_jobs.csv")
rows = [l.strip().split(",") for l in open(path) if l.strip() and not l.startswith("#")]
header, data = rows[0], rows[1:]
x = np.array([[float(r[header.index(c)]) for c in ("depth", "batch")] for r in data])
alpha = 1.0
for k in range(3):
    y = np.array([float(r[header.index("b%d" % k)]) for r in data])
    xm, ym = x.mean(axis=0), y.mean()
    xc, yc = x - xm, y - ym
    w = np.linalg.solve(xc.T @ xc + alpha * np.eye(x.shape[1]), xc.T @ yc)
    intercept = ym - xm @ w
    sys.stdout.write("b%d %.12g %.12g %.12g\n" % (k, intercept, w[0], w[1]))
