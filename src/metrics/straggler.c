#include "metrics/straggler.h"

#include <stdlib.h>
#include <string.h>

#include "core/stats.h"

int dt_straggler_find(const double *own_s, int n, double step_s, double share, dt_straggler *s) {
    memset(s, 0, sizeof *s);
    s->rank = -1;
    if (n < 2 || !(step_s > 0)) return 0;
    int slowest = 0;
    for (int i = 1; i < n; i++)
        if (own_s[i] > own_s[slowest]) slowest = i;
    /* the others' median: sorted without the slowest */
    double *others = malloc(sizeof *others * (size_t)(n - 1));
    if (!others) return 0; /* out of memory: no one named */
    int m = 0;
    for (int i = 0; i < n; i++)
        if (i != slowest) others[m++] = own_s[i];
    const double median = dt_median(others, m);
    free(others);
    s->wait_s = own_s[slowest] - median;
    s->slower = median > 0 ? own_s[slowest] / median - 1 : 0.0;
    s->share = s->wait_s / step_s;
    if (!(s->share > share)) return 0;
    s->rank = slowest;
    return 1;
}
