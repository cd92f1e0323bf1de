#include "dtrain/simulate.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/ddp.h"

dt_sim_config dt_sim_config_default(void) {
    return (dt_sim_config){.mode = DT_SIM_ALLREDUCE,
                           .topology = DT_SIM_RING,
                           .per_node = 1,
                           .servers = 1,
                           .link = {0.0, 0.0},
                           .intra = {0.0, 0.0},
                           .batch = 0,
                           .compute_speedup = 1.0,
                           .bucket_mb = 25.0,
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
    dt_sim_link l = {0.0, 0.0};
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

/* Ring all-reduce of n bytes over p members of one link: reduce-scatter + all-gather. */
static double ring_s(const dt_sim_link *l, int p, double n) {
    if (p <= 1) return 0.0;
    return 2.0 * (p - 1) * l->latency_s + 2.0 * (p - 1) / p * n / l->bytes_per_s;
}

double dt_sim_allreduce_s(const dt_sim_config *c, int workers, double bytes) {
    if (workers <= 1) return 0.0;
    if (c->topology != DT_SIM_TREE) return ring_s(&c->link, workers, bytes);
    const int k = c->per_node < workers ? c->per_node : workers;
    const int nodes = (workers + c->per_node - 1) / c->per_node;
    /* inside a node: reduce-scatter then, at the end, all-gather: half a ring each */
    const double intra =
        k > 1 ? (k - 1) * c->intra.latency_s + (double)(k - 1) / k * bytes / c->intra.bytes_per_s
              : 0.0;
    return 2.0 * intra + ring_s(&c->link, nodes, bytes);
}

/* A push or a pull of the whole gradient: the worker's link or the servers' ingress
 * (every worker's share arrives at each server) is the bottleneck. */
static double ps_transfer_s(const dt_sim_config *c, int workers, double bytes) {
    const double worker = bytes / c->link.bytes_per_s;
    const double server = workers * bytes / c->servers / c->link.bytes_per_s;
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
        if (c->mode == DT_SIM_PS_SYNC) {
            r->comm_s = 2.0 * ps_transfer_s(c, workers, bytes);
            r->step_s = r->compute_s + r->comm_s + server_update;
        } else {
            const double own = 2.0 * (c->link.latency_s + bytes / c->link.bytes_per_s);
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
    double channel = 0.0, comm = 0.0;
    for (int b = 0; b < nb; b++) {
        /* untouched buckets (none in the zoo) and every bucket without overlap go when
         * backward ends, as dt_ddp_finish_step does */
        double at =
            ready[b] < 0 || c->mode == DT_SIM_ALLREDUCE_NO_OVERLAP ? backward_end : ready[b];
        if (channel > at) at = channel;
        const double cost = dt_sim_allreduce_s(c, workers, (double)count[b] * c->bytes_per_param);
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
