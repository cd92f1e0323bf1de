/* Non-negative least squares, Lawson and Hanson's active-set algorithm (1974, ch. 23):
 * minimise ||A x - b|| subject to x >= 0, for small dense problems (the performance
 * model has at most a handful of unknowns). Least-squares subproblems are solved by
 * Householder QR in double precision. */
#ifndef DTRAIN_NNLS_H
#define DTRAIN_NNLS_H

enum { DT_NNLS_MAX_COLS = 16 };

/* a: [m, n] row-major, b: [m]; x: [n] out. Returns 0, or -1 if n is out of range or
 * the iteration limit is hit (a degenerate problem). *residual (if not NULL) gets
 * ||A x - b||. */
int dt_nnls(const double *a, const double *b, int m, int n, double *x, double *residual);

/* Unconstrained least squares on the columns listed in cols (others of x set to 0);
 * -1 if those columns are rank-deficient. Used by dt_nnls, exposed for tests. */
int dt_lstsq_cols(const double *a, const double *b, int m, int n, const int *cols, int k,
                  double *x);

#endif
