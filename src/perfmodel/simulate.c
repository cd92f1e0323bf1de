#include "perfmodel/simulate.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/textfile.h"
#include "parallel/ddp.h"

dt_sim_config dt_sim_config_default(void) {
    return (dt_sim_config){.mode = DT_SIM_ALLREDUCE,
                           .topology = DT_SIM_RING,
                           .per_node = 1,
                           .servers = 1,
                           .link = {0.0, 0.0},
                           .intra = {0.0, 0.0},
                           .batch = 0,
                           .compute_speedup = 1.0,
                           .bucket_mb = DT_DDP_BUCKET_MB_DEFAULT,
                           .bytes_per_param = 4.0};
}

/* A finite number followed by one of the units (multipliers into SI base units). */
typedef struct unit {
    const char *name;
    double scale;
} unit;

static int number_with_unit(const char *text, const unit *units, double *out) {
    if (!text[0] || strchr(" \t\n+", text[0])) return -1;
    char *end;
    errno = 0;
    const double v = strtod(text, &end);
    if (end == text || errno || !isfinite(v) || v < 0) return -1;
    for (const unit *u = units; u->name; u++)
        if (!strcmp(end, u->name)) {
            *out = v * u->scale;
            return 0;
        }
    return -1;
}

int dt_sim_parse_link(const char *text, dt_sim_link *link, dt_error *err) {
    static const unit rates[] = {{"bit", 1.0 / 8},  {"kbit", 1e3 / 8}, {"mbit", 1e6 / 8},
                                 {"gbit", 1e9 / 8}, {"B/s", 1.0},      {"KB/s", 1e3},
                                 {"MB/s", 1e6},     {"GB/s", 1e9},     {NULL, 0}};
    static const unit times[] = {{"s", 1.0}, {"ms", 1e-3}, {"us", 1e-6}, {"ns", 1e-9}, {NULL, 0}};
    char rate[64];
    const char *comma = strchr(text, ',');
    const size_t len = comma ? (size_t)(comma - text) : strlen(text);
    if (len >= sizeof rate) return dt_error_set(err, "link '%s': the rate is too long", text);
    memcpy(rate, text, len);
    rate[len] = 0;
    dt_sim_link l = {0.0, 0.0, 0.0};
    if (number_with_unit(rate, rates, &l.bytes_per_s) || !(l.bytes_per_s > 0))
        return dt_error_set(err,
                            "link '%s': the rate must be a positive number with a unit "
                            "(bit, kbit, mbit, gbit, B/s, KB/s, MB/s, GB/s), e.g. 10gbit",
                            text);
    if (comma && number_with_unit(comma + 1, times, &l.latency_s))
        return dt_error_set(err,
                            "link '%s': the latency must be a number >= 0 with a unit "
                            "(s, ms, us, ns), e.g. 10gbit,50us",
                            text);
    *link = l;
    return 0;
}

/* A whole number in [1, 1 << 20] and nothing after it. */
static int count_after(const char *text, int *out) {
    if (!text[0] || text[0] < '0' || text[0] > '9') return -1;
    char *end;
    errno = 0;
    const long v = strtol(text, &end, 10);
    if (*end || errno || v < 1 || v > (1L << 20)) return -1;
    *out = (int)v;
    return 0;
}

int dt_sim_parse_topology(const char *text, dt_sim_config *c, dt_error *err) {
    if (!strcmp(text, "ring")) {
        c->topology = DT_SIM_RING;
        return 0;
    }
    if (!strncmp(text, "tree:", 5)) {
        if (count_after(text + 5, &c->per_node))
            return dt_error_set(err, "topology '%s': tree:K needs K workers per node, 1..1048576",
                                text);
        c->topology = DT_SIM_TREE;
        return 0;
    }
    if (!strncmp(text, "ps:", 3)) {
        if (count_after(text + 3, &c->servers))
            return dt_error_set(err, "topology '%s': ps:S needs S servers, 1..1048576", text);
        c->topology = DT_SIM_PS;
        return 0;
    }
    return dt_error_set(err, "unknown topology '%s' (ring, tree:K or ps:S)", text);
}

static const char *const mode_names[] = {"allreduce", "allreduce-no-overlap", "ps-sync",
                                         "ps-async"};

int dt_sim_parse_mode(const char *text, dt_sim_mode *mode, dt_error *err) {
    for (int i = 0; i < 4; i++)
        if (!strcmp(text, mode_names[i])) {
            *mode = (dt_sim_mode)i;
            return 0;
        }
    return dt_error_set(
        err, "unknown mode '%s' (allreduce, allreduce-no-overlap, ps-sync, ps-async)", text);
}

const char *dt_sim_mode_name(dt_sim_mode mode) {
    return mode_names[mode];
}

/* The time n bytes take on link l in one direction beyond its latency: what its token
 * bucket holds (tokens) crosses at once, the rest at the rate. */
static double link_bytes_s(const dt_sim_link *l, double n, double tokens) {
    return (n > tokens ? n - tokens : 0.0) / l->bytes_per_s;
}

/* What the bucket of l holds after `idle` seconds without traffic, from `tokens`. */
static double refill(const dt_sim_link *l, double tokens, double idle) {
    const double t = tokens + (idle > 0 ? idle : 0) * l->bytes_per_s;
    return t < l->burst_bytes ? t : l->burst_bytes;
}

/* Ring all-reduce of n bytes over p members of one link: reduce-scatter + all-gather.
 * Each member's link carries 2 (p - 1) / p n bytes each way, one step after another:
 * the bucket (*tokens, taken from) pays for their first bytes. */
static double ring_s(const dt_sim_link *l, int p, double n, double *tokens) {
    if (p <= 1) return 0.0;
    const double sent = 2.0 * (p - 1) / p * n, held = *tokens;
    *tokens = held > sent ? held - sent : 0.0;
    return 2.0 * (p - 1) * l->latency_s + link_bytes_s(l, sent, held);
}

/* dt_sim_allreduce_s with the link's bucket holding *tokens (what it spends taken). */
static double allreduce_s(const dt_sim_config *c, int workers, double bytes, double *tokens) {
    if (workers <= 1) return 0.0;
    if (c->topology != DT_SIM_TREE) return ring_s(&c->link, workers, bytes, tokens);
    const int k = c->per_node < workers ? c->per_node : workers;
    const int nodes = (workers + c->per_node - 1) / c->per_node;
    /* inside a node: reduce-scatter then, at the end, all-gather: half a ring each */
    const double intra =
        k > 1 ? (k - 1) * c->intra.latency_s + (double)(k - 1) / k * bytes / c->intra.bytes_per_s
              : 0.0;
    return 2.0 * intra + ring_s(&c->link, nodes, bytes, tokens);
}

double dt_sim_allreduce_s(const dt_sim_config *c, int workers, double bytes) {
    double empty = 0.0; /* one all-reduce alone: every byte at the rate */
    return allreduce_s(c, workers, bytes, &empty);
}

/* A push or a pull of the whole gradient: the worker's link or the servers' ingress
 * (every worker's share arrives at each server) is the bottleneck. Each direction of
 * each port has its bucket, holding `tokens` when the transfer starts. */
static double ps_transfer_s(const dt_sim_config *c, int workers, double bytes, double tokens) {
    const double worker = link_bytes_s(&c->link, bytes, tokens);
    const double server = link_bytes_s(&c->link, workers * bytes / c->servers, tokens);
    return c->link.latency_s + (worker > server ? worker : server);
}

static int check(const dt_profile *p, const dt_sim_config *c, int workers, dt_error *err) {
    const int ps = c->mode == DT_SIM_PS_SYNC || c->mode == DT_SIM_PS_ASYNC;
    if (workers < 1) return dt_error_set(err, "workers must be at least 1, got %d", workers);
    if (c->batch < 1) return dt_error_set(err, "the batch per worker must be at least 1");
    if (!(c->compute_speedup > 0) || !isfinite(c->compute_speedup))
        return dt_error_set(err, "the compute speed-up must be a positive number");
    if (!(c->bucket_mb > 0)) return dt_error_set(err, "the bucket size must be positive");
    if (!(c->bytes_per_param > 0)) return dt_error_set(err, "bytes per parameter must be positive");
    if (!(c->link.bytes_per_s > 0) || !(c->link.latency_s >= 0))
        return dt_error_set(err, "the link needs a positive rate and a latency >= 0");
    if (c->topology == DT_SIM_TREE && (!(c->intra.bytes_per_s > 0) || !(c->intra.latency_s >= 0)))
        return dt_error_set(err, "tree:K needs an intra-node link with a positive rate");
    if (ps != (c->topology == DT_SIM_PS))
        return dt_error_set(err, "mode %s needs %s", dt_sim_mode_name(c->mode),
                            ps ? "the ps:S topology" : "a ring or tree:K topology");
    if (p->n_ops < 1 || p->batch < 1) return dt_error_set(err, "the profile has no ops");
    return 0;
}

int dt_simulate(const dt_profile *p, const dt_sim_config *c, int workers, dt_sim_result *r,
                dt_error *err) {
    if (check(p, c, workers, err)) return -1;
    /* Per-op times scale with the batch (the kernels' work does) and the device. */
    const double k = (double)c->batch / p->batch / c->compute_speedup;
    const double update = p->sgd_s / c->compute_speedup;
    double forward = p->other_s * k;
    for (int i = 0; i < p->n_ops; i++) forward += p->ops[i].forward_s * k;
    memset(r, 0, sizeof *r);
    r->workers = workers;
    const double bytes = (double)p->params * c->bytes_per_param;

    if (c->mode == DT_SIM_PS_SYNC || c->mode == DT_SIM_PS_ASYNC) {
        double backward = 0.0;
        for (int i = 0; i < p->n_ops; i++) backward += p->ops[i].backward_s * k;
        const double server_update = update / c->servers; /* each server its shard */
        r->compute_s = forward + backward;
        /* a worker's push and pull go on different directions of its port, each idle
         * for a step's compute: their buckets refill meanwhile */
        const double tokens = refill(&c->link, 0.0, r->compute_s);
        if (c->mode == DT_SIM_PS_SYNC) {
            r->comm_s = 2.0 * ps_transfer_s(c, workers, bytes, tokens);
            r->step_s = r->compute_s + r->comm_s + server_update;
        } else {
            const double own = 2.0 * (c->link.latency_s + link_bytes_s(&c->link, bytes, tokens));
            const double servers =
                workers * (2.0 * bytes / c->servers / c->link.bytes_per_s + server_update);
            r->comm_s = own;
            r->step_s = r->compute_s + own > servers ? r->compute_s + own : servers;
        }
        r->exposed_s = r->step_s - r->compute_s;
        r->images_per_s = workers * c->batch / r->step_s;
        return 0;
    }

    /* All-reduce: the event schedule. Buckets as the trainer makes them. */
    const size_t per = dt_ddp_bucket_floats(c->bucket_mb);
    const int nb = dt_ddp_bucket_total(p->params, per);
    size_t *begin = malloc(sizeof(size_t) * (size_t)nb);
    size_t *count = malloc(sizeof(size_t) * (size_t)nb);
    size_t *produced = calloc((size_t)nb, sizeof(size_t));
    double *ready = malloc(sizeof(double) * (size_t)nb);
    if (!begin || !count || !produced || !ready) {
        free(begin);
        free(count);
        free(produced);
        free(ready);
        return dt_error_set(err, "out of memory for %d buckets", nb);
    }
    for (int b = 0; b < nb; b++) {
        dt_ddp_bucket_range(p->params, per, b, &begin[b], &count[b]);
        ready[b] = -1.0;
    }
    double t = forward;
    int next_ready = 0; /* buckets complete in order, as in ddp.c's hook */
    for (int i = p->n_ops - 1; i >= 0; i--) {
        const dt_profile_op *op = &p->ops[i];
        t += op->backward_s * k;
        if (op->param_count == 0) continue;
        for (int b = next_ready; b < nb; b++) {
            const size_t lo = op->param_offset > begin[b] ? op->param_offset : begin[b];
            const size_t end = op->param_offset + op->param_count;
            const size_t hi = end < begin[b] + count[b] ? end : begin[b] + count[b];
            if (hi > lo) produced[b] += hi - lo;
        }
        while (next_ready < nb && produced[next_ready] >= count[next_ready])
            ready[next_ready++] = t;
    }
    const double backward_end = t;
    /* the link's bucket refills while the link is idle: before the first bucket since
     * the step before's last bytes, an update and this step's compute ago */
    double channel = 0.0, comm = 0.0, tokens = 0.0;
    for (int b = 0; b < nb; b++) {
        /* untouched buckets (none in the zoo) and every bucket without overlap go when
         * backward ends, as dt_ddp_finish_step does */
        double at =
            ready[b] < 0 || c->mode == DT_SIM_ALLREDUCE_NO_OVERLAP ? backward_end : ready[b];
        if (channel > at) at = channel;
        tokens = refill(&c->link, tokens, at - (b == 0 ? -update : channel));
        const double cost = allreduce_s(c, workers, (double)count[b] * c->bytes_per_param, &tokens);
        channel = at + cost;
        comm += cost;
    }
    free(begin);
    free(count);
    free(produced);
    free(ready);
    const double sync_end = channel > backward_end ? channel : backward_end;
    r->buckets = nb;
    r->compute_s = backward_end + update;
    r->step_s = sync_end + update;
    r->exposed_s = r->step_s - r->compute_s;
    r->comm_s = comm;
    r->images_per_s = workers * c->batch / r->step_s;
    return 0;
}

int dt_sim_speedup_to_step(const dt_profile *p, const dt_sim_config *c, double step_s,
                           double *speedup, double *here_s, dt_error *err) {
    dt_sim_config one = *c;
    one.compute_speedup = 1;
    dt_sim_result r;
    if (dt_simulate(p, &one, 1, &r, err)) return -1;
    if (!(step_s > 0)) return dt_error_set(err, "a measured step must be positive");
    *speedup = r.step_s / step_s;
    if (here_s) *here_s = r.step_s;
    return 0;
}

int dt_sim_sweep(const dt_profile *p, const dt_sim_config *c, const int *workers, int n,
                 dt_sim_result *res, dt_error *err) {
    for (int i = 0; i < n; i++)
        if (dt_simulate(p, c, workers[i], &res[i], err)) return -1;
    return 0;
}

/* Speed-up of res[i] against res[0] at the same batch per worker: N t(N0) / (N0 t(N)). */
double dt_sim_speedup(const dt_sim_result *res, int i) {
    return res[i].workers * res[0].step_s / res[0].workers / res[i].step_s;
}

void dt_sim_table(const dt_profile *p, const dt_sim_config *c, const dt_sim_result *res, int n,
                  char *table, size_t cap) {
    size_t used = 0;
    used += (size_t)snprintf(
        table + used, cap - used,
        "model %s, batch %d per worker, mode %s, %d bucket(s) of <= %g MiB, compute x%g\n"
        "speed-up = N t(1)/t(N) against %d worker(s) at the same batch per worker\n"
        "%8s %11s %11s %11s %11s %9s %7s %12s\n",
        p->model, c->batch, dt_sim_mode_name(c->mode), res[0].buckets, c->bucket_mb,
        c->compute_speedup, res[0].workers, "workers", "step_ms", "compute_ms", "exposed_ms",
        "comm_ms", "speedup", "eff%", "images/s");
    for (int i = 0; i < n && used < cap; i++) {
        const dt_sim_result *r = &res[i];
        const double sp = dt_sim_speedup(res, i);
        used += (size_t)snprintf(
            table + used, cap - used, "%8d %11.3f %11.3f %11.3f %11.3f %9.2f %7.1f %12.1f\n",
            r->workers, 1e3 * r->step_s, 1e3 * r->compute_s, 1e3 * r->exposed_s, 1e3 * r->comm_s,
            sp, 100.0 * sp / r->workers * res[0].workers, r->images_per_s);
    }
}

/* dt_sim_validate: the columns of the CSV of measured configs. */
enum {
    V_NAME,
    V_PROFILE,
    V_WORKERS,
    V_BATCH,
    V_TOPOLOGY,
    V_LINK,
    V_MODE,
    V_STEP,
    V_LATENCY,
    V_SPEEDUP,
    V_BUCKET,
    V_INTRA,
    V_COMPUTE,
    V_EXPOSED,
    V_COLUMNS
};
static const char *const v_columns[V_COLUMNS] = {
    "name",      "profile",    "workers",    "batch_size", "topology",
    "link",      "mode",       "step_ms",    "latency",    "compute_speedup",
    "bucket_mb", "intra_link", "compute_ms", "exposed_ms"};
enum { V_REQUIRED = V_LATENCY, MAX_ROWS = 1000 };

static int compare_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A field as a number in [lo, hi] (dt_csv_number), without a sign in front. */
static int strict_double(const char *text, double lo, double hi, double *out) {
    return text[0] == '+' || dt_csv_number(text, lo, hi, out) ? -1 : 0;
}

/* One row: the config from its fields, the prediction, the error against step_ms. */
static int validate_row(const char *path, int lineno, char **f, const int *col, double *err_pct,
                        char *line_out, size_t cap, dt_error *err) {
    dt_sim_config c = dt_sim_config_default();
    double workers, batch, step_ms;
    const char *bad = NULL;
    int bad_col = 0;
    if (strict_double(f[col[V_WORKERS]], 1, 1 << 20, &workers) || workers != floor(workers))
        bad = "workers", bad_col = col[V_WORKERS];
    else if (strict_double(f[col[V_BATCH]], 1, 1 << 24, &batch) || batch != floor(batch))
        bad = "batch_size", bad_col = col[V_BATCH];
    else if (strict_double(f[col[V_STEP]], 1e-9, 1e9, &step_ms))
        bad = "step_ms", bad_col = col[V_STEP];
    else if (col[V_SPEEDUP] >= 0 && f[col[V_SPEEDUP]][0]) {
        if (strict_double(f[col[V_SPEEDUP]], 1e-9, 1e9, &c.compute_speedup))
            bad = "compute_speedup", bad_col = col[V_SPEEDUP];
    }
    if (!bad && col[V_BUCKET] >= 0 && f[col[V_BUCKET]][0] &&
        strict_double(f[col[V_BUCKET]], 1e-6, 1e6, &c.bucket_mb))
        bad = "bucket_mb", bad_col = col[V_BUCKET];
    if (bad) return dt_error_set(err, "%s line %d: bad %s '%s'", path, lineno, bad, f[bad_col]);
    c.batch = (int)batch;
    dt_error why;
    char link[128];
    if (snprintf(link, sizeof link, "%s%s%s", f[col[V_LINK]], col[V_LATENCY] >= 0 ? "," : "",
                 col[V_LATENCY] >= 0 ? f[col[V_LATENCY]] : "") >= (int)sizeof link)
        return dt_error_set(err, "%s line %d: link and latency longer than %zu characters", path,
                            lineno, sizeof link - 1);
    if (dt_sim_parse_link(link, &c.link, &why) ||
        dt_sim_parse_topology(f[col[V_TOPOLOGY]], &c, &why) ||
        dt_sim_parse_mode(f[col[V_MODE]], &c.mode, &why))
        return dt_error_set(err, "%s line %d: %s", path, lineno, why.msg);
    c.intra = c.link;
    if (col[V_INTRA] >= 0 && f[col[V_INTRA]][0] &&
        dt_sim_parse_link(f[col[V_INTRA]], &c.intra, &why))
        return dt_error_set(err, "%s line %d: %s", path, lineno, why.msg);
    /* the profile beside the CSV */
    char profile_path[4200];
    const char *slash = strrchr(path, '/');
    const int used = f[col[V_PROFILE]][0] == '/' || !slash
                         ? snprintf(profile_path, sizeof profile_path, "%s", f[col[V_PROFILE]])
                         : snprintf(profile_path, sizeof profile_path, "%.*s/%s",
                                    (int)(slash - path), path, f[col[V_PROFILE]]);
    if (used < 0 || used >= (int)sizeof profile_path) /* never a cut name: another file */
        return dt_error_set(err, "%s line %d: the profile's path is longer than %zu bytes", path,
                            lineno, sizeof profile_path - 1);
    dt_profile p;
    if (dt_profile_read(&p, profile_path, &why))
        return dt_error_set(err, "%s line %d: %s", path, lineno, why.msg);
    dt_sim_result r;
    const int rc = dt_simulate(&p, &c, (int)workers, &r, &why);
    dt_profile_free(&p);
    if (rc) return dt_error_set(err, "%s line %d: %s", path, lineno, why.msg);
    *err_pct = 100.0 * (1e3 * r.step_s - step_ms) / step_ms;
    char measured_split[64] = "";
    double mc, me;
    if (col[V_COMPUTE] >= 0 && col[V_EXPOSED] >= 0 &&
        !strict_double(f[col[V_COMPUTE]], 0, 1e9, &mc) &&
        !strict_double(f[col[V_EXPOSED]], 0, 1e9, &me))
        snprintf(measured_split, sizeof measured_split, "%.2f / %.2f", mc, me);
    snprintf(line_out, cap, "| %s | %d | %s | %s | %s | %.2f | %s | %.2f | %.2f / %.2f | %+.1f%% |",
             f[col[V_NAME]], (int)workers, f[col[V_TOPOLOGY]], link, f[col[V_MODE]], step_ms,
             measured_split[0] ? measured_split : "-", 1e3 * r.step_s, 1e3 * r.compute_s,
             1e3 * r.exposed_s, *err_pct);
    return 0;
}

int dt_sim_validate(const char *path, FILE *out, dt_sim_validation *v, dt_error *err) {
    dt_csv csv;
    if (dt_csv_open(&csv, path, err)) return -1;
    char line[1024];
    char **f = csv.field;
    int col[V_COLUMNS], n_fields = 0, n = 0, rc = 0, got;
    double *errors = malloc(sizeof(double) * MAX_ROWS);
    if (!errors) {
        dt_csv_close(&csv);
        return dt_error_set(err, "out of memory");
    }
    for (int i = 0; i < V_COLUMNS; i++) col[i] = -1;
    fprintf(out, "| config | workers | topology | link | mode | measured ms | measured compute / "
                 "exposed ms | predicted ms | predicted compute / exposed ms | error |\n"
                 "|---|---|---|---|---|---|---|---|---|---|\n");
    while (rc == 0 && (got = dt_csv_next(&csv, err)) != 0) { /* '#' comments skipped */
        if (got < 0) {
            rc = -1;
            break;
        }
        const int k = csv.n, lineno = (int)csv.in.lineno;
        if (n_fields == 0) { /* the header */
            n_fields = k;
            for (int i = 0; i < k; i++)
                for (int c = 0; c < V_COLUMNS; c++)
                    if (!strcmp(f[i], v_columns[c])) col[c] = i;
            for (int c = 0; c < V_REQUIRED && rc == 0; c++)
                if (col[c] < 0) rc = dt_error_set(err, "%s: no '%s' column", path, v_columns[c]);
            continue;
        }
        if (k != n_fields) {
            rc = dt_error_set(err, "%s line %d: %d fields, the header has %d", path, lineno, k,
                              n_fields);
            break;
        }
        if (n == MAX_ROWS) {
            rc = dt_error_set(err, "%s: more than %d rows", path, MAX_ROWS);
            break;
        }
        if (validate_row(path, lineno, f, col, &errors[n], line, sizeof line, err)) {
            rc = -1;
            break;
        }
        fprintf(out, "%s\n", line);
        errors[n] = fabs(errors[n]);
        n++;
    }
    dt_csv_close(&csv);
    if (rc == 0 && n == 0) rc = dt_error_set(err, "%s has no rows", path);
    if (rc == 0) {
        qsort(errors, (size_t)n, sizeof(double), compare_double);
        v->n = n;
        v->median = n % 2 ? errors[n / 2] : 0.5 * (errors[n / 2 - 1] + errors[n / 2]);
        v->largest = errors[n - 1];
    }
    free(errors);
    return rc;
}
