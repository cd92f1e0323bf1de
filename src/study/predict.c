#define _GNU_SOURCE /* pipe2, sched_setaffinity */
#include "study/predict.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/outfile.h"
#include "core/proc.h"
#include "core/stats.h"
#include "core/textfile.h"
#include "core/threads.h"
#include "core/timer.h"
#include "dtrain/dataset.h"
#include "parallel/overlap.h"
#include "perfmodel/simulate.h"
#include "study/hostcpu.h"
#include "study/netns.h"
#include "train/bench.h"

/* Ranks on one machine talk through dtrain's shared-memory all-reduce: its bus
 * bandwidth by bench_allreduce here is 7.4 GB/s at 256 KiB and about 8 GB/s at 44.7 MB
 * (docs/distributed.md), a few microseconds a call at 4 KiB. */
static const double SHM_BYTES_PER_S = 8e9, SHM_LATENCY_S = 2.5e-6;
static const dt_sim_link SHM = {.latency_s = SHM_LATENCY_S, .bytes_per_s = SHM_BYTES_PER_S};
/* A link of rate_bps bit/s and delay_s a message, as the simulator takes it. */
static dt_sim_link link_of(double rate_bps, double delay_s) {
    return (dt_sim_link){.latency_s = delay_s, .bytes_per_s = rate_bps / 8};
}

/* Each profile times PROFILE_STEPS steps (after bench's 3 warm-up steps), and at least
 * PROFILE_MIN_S of them: lenet5's step at batch 32 read 1.43 ms over 10 steps (its
 * linear layers' first calls 5x slower) and 1.13-1.20 over 200, as its runs take.
 * Long steps vary little: 5 of them keep the profiles of make run's study short. */
enum { PROFILE_STEPS = 5, PROFILE_MAX_STEPS = 5000 };
static const double PROFILE_MIN_S = 0.5;
static const char *const COLUMNS[] = {"procs",   "batch",      "threads", "step_ms", "compute_ms",
                                      "comm_ms", "exposed_ms", "network", "beyond"};
/* "beyond" may be absent (files written before it): every row of the grid then */
enum { N_COLUMNS = sizeof COLUMNS / sizeof *COLUMNS, N_REQUIRED = N_COLUMNS - 1 };

/* The simulator's schedule for the sweep's training mode: all-reduce (with or without
 * overlap, decided by the caller) or a parameter-server one on cfg's servers; 0 for a
 * mode it has none for (ssp's bounded staleness). */
static int sim_mode_of(const dt_sweep_config *cfg, dt_sim_mode *mode) {
    const char *m = cfg->train.mode ? cfg->train.mode : "allreduce";
    if (!strcmp(m, "allreduce")) return *mode = DT_SIM_ALLREDUCE, 1;
    if (!strcmp(m, "ps-sync")) return *mode = DT_SIM_PS_SYNC, 1;
    if (!strcmp(m, "ps-async")) return *mode = DT_SIM_PS_ASYNC, 1;
    return 0;
}

/* A parameter-server mode's schedule on c's link: the servers on hosts (or cores) of
 * their own. */
static void ps_config(const dt_sweep_config *cfg, dt_sim_config *c) {
    dt_sim_mode mode = DT_SIM_ALLREDUCE;
    if (!sim_mode_of(cfg, &mode) || mode == DT_SIM_ALLREDUCE) return;
    c->mode = mode;
    c->topology = DT_SIM_PS;
    c->servers = cfg->train.ps.servers > 0 ? cfg->train.ps.servers : 1;
}

/* The parameter servers of a run: ranks 0 .. servers - 1, the workers after them
 * (train's layout); 0 in an all-reduce mode. */
static int servers_of(const dt_sweep_config *cfg) {
    dt_sim_mode mode = DT_SIM_ALLREDUCE;
    if (!sim_mode_of(cfg, &mode) || mode == DT_SIM_ALLREDUCE) return 0;
    return cfg->train.ps.servers > 0 ? cfg->train.ps.servers : 1;
}

/* Whether each rank of a run of procs processes gets a core of its own: Open MPI 4.1's
 * mpirun binds 2 ranks to cores and more to the socket; one process runs without
 * mpirun (sweep.c), emulated hosts' runs with --bind-to none (netns.c). */
static int ranks_bound(const dt_sweep_config *cfg, const dt_scale_network *net, int procs) {
    procs += servers_of(cfg); /* the servers are ranks too */
    return procs == 2 && net->hosts == 0 && !cfg->srun;
}

/* The simulator's view of the study's network for procs processes, and its words. */
static void network_config(const dt_sweep_config *cfg, const dt_scale_network *net, int procs,
                           dt_sim_config *c, char *words, size_t size) {
    c->intra = c->link = SHM;
    c->topology = DT_SIM_RING;
    int local_ranks = procs, spans = 0;
    /* a parameter server's job spans hosts from one worker on: the server is a rank */
    if (net->hosts > 0 && procs + servers_of(cfg) > 1) {
        /* dtrain's all-reduce across hosts is a flat ring over the ranks unless told
         * --allreduce hier (auto may choose it, a prediction cannot know), and on the
         * emulated hosts even ranks of one host talk over TCP: a ring of procs on the
         * link, which is what 2 hosts x 2 ranks measured with the ring
         * (bench/simulate_validation.sh: 42 ms for 2.8 MB at 1 Gbit/s, as 4 hosts) */
        const int per = net->ranks_per_host > 0 ? net->ranks_per_host : 1;
        c->link = link_of(net->rate_bps, net->delay_s);
        /* the emulated link is a token bucket (netns.c): after an idle spell (a step's
         * compute) its first bytes cross at once. lenet5's 247 KB push at 1 Gbit/s
         * fits in the 256 KiB bucket: one server and 2 workers measured 4.3 ms of
         * communication a step, the rate alone says 7.9 */
        c->link.burst_bytes = dt_netns_burst_bytes(net->rate_bps);
        spans = procs + servers_of(cfg) > per;
        local_ranks = procs < per ? procs : per;
        const int two_level = cfg->train.allreduce == DT_ALLREDUCE_HIER && per > 1;
        if (two_level) {
            /* --allreduce hier: the simulator's tree:K, a reduce-scatter and an
             * all-gather inside a host, as dtrain's hier (allreduce.c). Taken as shared
             * memory: scale's emulated hosts give MPI TCP only (netns.c), so there the
             * step inside a host runs the ring over the namespace's loopback */
            c->topology = DT_SIM_TREE;
            c->per_node = per;
        }
        snprintf(words, size,
                 "emulated hosts: %g Mbit/s and %g us a message (bursts of %g KiB); %d rank(s) "
                 "a host%s",
                 net->rate_bps * 1e-6, net->delay_s * 1e6, c->link.burst_bytes / 1024, per,
                 two_level ? "; two levels (hier)" : "");
    } else {
        snprintf(words, size, "shared memory: %g GB/s; %g us a message", SHM_BYTES_PER_S * 1e-9,
                 SHM_LATENCY_S * 1e6);
    }
    /* the overlap the run gets: --overlap, else train's rule on the cores mpirun gives
     * each rank */
    int overlap = cfg->train.overlap == DT_OVERLAP_ON;
    if (cfg->train.overlap == DT_OVERLAP_AUTO) {
        char why[256];
        const int host = dt_overlap_host_cores();
        overlap = dt_overlap_auto(host, ranks_bound(cfg, net, procs) ? 1 : host, local_ranks,
                                  cfg->train.threads > 0 ? cfg->train.threads : 1, spans, why,
                                  sizeof why);
    }
    c->mode = overlap ? DT_SIM_ALLREDUCE : DT_SIM_ALLREDUCE_NO_OVERLAP;
    ps_config(cfg, c);
}

/* Past the machine: `workers` workers, each a host (or beyond_per_host a host) on the
 * predict link. */
static void beyond_config(const dt_sweep_config *cfg, const dt_scale_network *net, int workers,
                          dt_sim_config *c, char *words, size_t size) {
    c->intra = SHM;
    c->link = link_of(net->beyond_rate_bps, net->beyond_delay_s);
    const int per = net->beyond_per_host > 1 ? net->beyond_per_host : 1;
    /* one host: shared memory; more: dtrain's flat ring over every worker, whose
     * hops between hosts set its pace (network_config) */
    c->topology = DT_SIM_RING;
    if (per > 1 && workers <= per) c->link = c->intra;
    /* ranks spanning hosts overlap (train's rule), unless told off */
    c->mode = cfg->train.overlap == DT_OVERLAP_OFF ? DT_SIM_ALLREDUCE_NO_OVERLAP : DT_SIM_ALLREDUCE;
    snprintf(words, size, "%g Mbit/s links and %g us a message; %d worker(s) a host",
             net->beyond_rate_bps * 1e-6, net->beyond_delay_s * 1e6, per);
    ps_config(cfg, c);
}

/* How long a load may take to build its model and finish its warm-up steps. */
enum { LOAD_WARM_MS = 600 * 1000 };

/* The other ranks' compute beside a profile: a config of P processes on this machine
 * (emulated hosts too share its cores) is profiled with P - 1 `dtrain bench --load`
 * processes of the same model, batch and threads running beside it, each warm first.
 * Two lenet5 ranks took 3-10% longer a step than one alone (memory and caches shared,
 * make run's study), which a profile taken alone did not see. */
typedef struct loads {
    dt_proc *procs;
    int *ask, *answer; /* each load's stdin (write end) and stdout (read end) */
    int n;
} loads;

static void loads_stop(loads *l) {
    for (int i = 0; i < l->n; i++) {
        dt_proc_kill(&l->procs[i], SIGKILL);
        dt_proc_wait(&l->procs[i], 1, NULL, NULL);
        close(l->ask[i]);
        close(l->answer[i]);
    }
    free(l->procs);
    free(l->ask);
    free(l->answer);
    memset(l, 0, sizeof *l);
}

/* One line from fd into line[size] (without its newline): 1, or 0 at end of file, or -1
 * when none came within timeout_ms. Byte by byte: the loads write nothing else. */
static int read_line(int fd, char *line, size_t size, int timeout_ms) {
    size_t have = 0;
    for (;;) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        const int ready = poll(&pfd, 1, timeout_ms);
        if (ready < 0 && errno == EINTR) continue;
        if (ready <= 0) return -1;
        char c;
        const ssize_t k = read(fd, &c, 1);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return 0;
        if (c == '\n') break;
        if (have + 1 < size) line[have++] = c;
    }
    line[have] = 0;
    return 1;
}

/* Asks every load for the median of its steps since the last ask (bench --load): the
 * slowest into *slowest (0 when asked only to start a window); -1 with err. */
static int loads_ask(loads *l, const dt_sweep_config *cfg, double *slowest, dt_error *err) {
    *slowest = 0;
    /* a load that died closed its stdin: the write fails with EPIPE, and the SIGPIPE it
     * raises here (which would end scale without a word) is blocked and taken back */
    sigset_t pipe_signal, before;
    sigemptyset(&pipe_signal);
    sigaddset(&pipe_signal, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_signal, &before);
    int dead = -1, why = 0;
    for (int i = 0; i < l->n && dead < 0; i++)
        if (write(l->ask[i], "?", 1) != 1) dead = i, why = errno;
    if (why == EPIPE) {
        const struct timespec now = {0, 0};
        while (sigtimedwait(&pipe_signal, NULL, &now) == SIGPIPE) {
        }
    }
    pthread_sigmask(SIG_SETMASK, &before, NULL);
    if (dead >= 0)
        return dt_error_set(err, "the profile's load (%s bench --load) ended: %s", cfg->dtrain,
                            strerror(why));
    for (int i = 0; i < l->n; i++) {
        char line[64], *end = NULL;
        const int got = read_line(l->answer[i], line, sizeof line, LOAD_WARM_MS);
        const double s = got == 1 && !strncmp(line, "load: ", 6) ? strtod(line + 6, &end) : -1;
        if (!(s >= 0) || !end || *end)
            return dt_error_set(err, "the profile's load (%s bench --load) %s", cfg->dtrain,
                                got < 0   ? "did not answer in 10 minutes"
                                : got > 0 ? "answered something else than its median step"
                                          : "ended first");
        if (s > *slowest) *slowest = s;
    }
    return 0;
}

/* This thread on the `k`-th CPU (from 0) of `allowed` alone (children started now
 * inherit it); -1 with errno. */
static int bind_to_core(const cpu_set_t *allowed, int k) {
    int cpu = 0;
    for (int seen = 0; cpu < CPU_SETSIZE; cpu++)
        if (CPU_ISSET(cpu, allowed) && seen++ == k) break;
    if (cpu == CPU_SETSIZE) return errno = EINVAL, -1;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return sched_setaffinity(0, sizeof set, &set);
}

/* This thread on the CPUs of emulated host `host` (children started now inherit them);
 * -1 with errno. */
static int bind_to_host(const dt_hostcpu *hc, int host) {
    int cpus[256];
    const int n = dt_hostcpu_cpus_of(hc, host, cpus, 256);
    if (n < 1) return errno = EINVAL, -1;
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int k = 0; k < n; k++) CPU_SET(cpus[k], &set);
    return sched_setaffinity(0, sizeof set, &set);
}

/* Starts n loads, each warm when this returns; with `core` >= 0 each is bound to a core
 * of its own, every core 0..n but `core` in turn; with `hc`, load k (rank first + k + 1)
 * to the CPUs of its rank's emulated host, `per` ranks a host (this thread's cores are
 * changed: the caller restores them). */
static int loads_start(loads *l, const dt_sweep_config *cfg, const cpu_set_t *allowed, int n,
                       int core, const dt_hostcpu *hc, int per, int first, int batch, int threads,
                       dt_error *err) {
    memset(l, 0, sizeof *l);
    if (n == 0) return 0;
    l->procs = calloc((size_t)n, sizeof *l->procs);
    l->ask = calloc((size_t)n, sizeof *l->ask);
    l->answer = calloc((size_t)n, sizeof *l->answer);
    if (!l->procs || !l->ask || !l->answer) {
        loads_stop(l);
        return dt_error_set(err, "out of memory for the profile's loads");
    }
    char batch_text[16], threads_text[16], workers_text[16], steps_text[16], width_text[16];
    snprintf(batch_text, sizeof batch_text, "%d", batch);
    snprintf(threads_text, sizeof threads_text, "%d", threads);
    snprintf(workers_text, sizeof workers_text, "%d", cfg->train.loader_workers);
    /* --steps: how many of its last steps a load's median can cover */
    snprintf(steps_text, sizeof steps_text, "%d", (int)PROFILE_MAX_STEPS);
    const char *argv[20] = {cfg->dtrain,    "bench",    "--model",   cfg->train.model,
                            "--batch-size", batch_text, "--threads", threads_text,
                            "--steps",      steps_text, "--load"};
    int a = 11;
    if (cfg->train.width > 0) { /* the model the runs train, not its default width */
        snprintf(width_text, sizeof width_text, "%d", cfg->train.width);
        argv[a++] = "--width";
        argv[a++] = width_text;
    }
    if (cfg->train.data) { /* fed as the run's ranks are */
        const char *fed[] = {"--data", cfg->train.data, "--feed", "--loader-workers", workers_text};
        memcpy(argv + a, fed, sizeof fed);
    }
    for (int i = 0; i < n; i++) {
        const int its = i < core ? i : i + 1;
        if (core >= 0 && bind_to_core(allowed, its)) {
            loads_stop(l);
            return dt_error_set(err, "cannot bind the profile's load to core %d: %s", its,
                                strerror(errno));
        }
        const int host = (first + i + 1) / per + 1;
        if (hc && bind_to_host(hc, host)) {
            loads_stop(l);
            return dt_error_set(err, "cannot bind the profile's load to host %d's CPUs: %s", host,
                                strerror(errno));
        }
        int in[2] = {-1, -1}, out[2] = {-1, -1};
        if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC)) {
            dt_error_set(err, "cannot make a pipe for the profile's load: %s", strerror(errno));
            for (int k = 0; k < 2; k++)
                if (in[k] >= 0) close(in[k]);
            loads_stop(l);
            return -1;
        }
        const dt_proc_opts o = {
            .new_group = 1, .death_signal = SIGKILL, .stdin_fd = in[0], .stdout_fd = out[1]};
        const int bad = dt_proc_spawn(&l->procs[l->n], argv, &o, err);
        close(in[0]);
        close(out[1]);
        if (bad) {
            close(in[1]);
            close(out[0]);
            loads_stop(l);
            return -1;
        }
        l->ask[l->n] = in[1];
        l->answer[l->n] = out[0];
        l->n++;
        char line[64];
        const int got = read_line(out[0], line, sizeof line, LOAD_WARM_MS);
        if (got != 1 || strcmp(line, "load: warm")) {
            loads_stop(l);
            return dt_error_set(err,
                                "the profile's load (%s bench --model %s --batch-size %d "
                                "--load) %s",
                                cfg->dtrain, cfg->train.model, batch,
                                got < 0 ? "was not warm after 10 minutes" : "ended first");
        }
    }
    return 0;
}

/* Whether the ranks run on this machine (emulated hosts do; a hostfile's or srun's
 * hosts do not, and their steps are not profiled beside loads here). */
static int ranks_here(const dt_sweep_config *cfg, const dt_scale_network *net) {
    return !cfg->srun && (net->hosts > 0 || !cfg->mpirun_extra);
}

/* cfg's model at batch on this machine as a rank of a run of procs processes takes its
 * step: its batches through train's loader from the study's data, with the other
 * ranks' steps running beside it (bench --load), PROFILE_STEPS steps and more until
 * PROFILE_MIN_S. Where mpirun binds the ranks a core each, the profile and the loads
 * are bound so too (one thread a rank: only this thread is bound here, not OpenMP's
 * and OpenBLAS's); a rank's loader thread then shares its core (lenet5 at batch 128
 * took 12% longer a step with its batches decoded on the step's core than beside it).
 * A step waits for the slowest rank: *slowest (may be NULL) gets the loads' slowest
 * median step over the profile's time (this machine's two vCPUs ran lenet5's step at
 * 5.2-5.8 and 5.6-6.3 ms, batch 128, each bound in turn, 3 times). */
static int profile_run(dt_profile *p, const dt_sweep_config *cfg, const dt_dataset *data,
                       const dt_scale_network *net, int procs, int batch, int threads,
                       double *slowest, dt_error *err) {
    cpu_set_t saved;
    if (sched_getaffinity(0, sizeof saved, &saved))
        return dt_error_set(err, "cannot read this process's cores: %s", strerror(errno));
    const int here = ranks_here(cfg, net);
    const int core =
        here && threads == 1 && ranks_bound(cfg, net, procs) && CPU_COUNT(&saved) >= procs ? 0 : -1;
    /* emulated hosts with CPUs of their own: each rank (and its loader) as its host's
     * runs, the profile as the first worker */
    const dt_hostcpu *hc = here && net->hosts > 0 && cfg->hostcpu &&
                                   dt_hostcpu_cpus_of(cfg->hostcpu, 1, (int[1]){0}, 1) > 0
                               ? cfg->hostcpu
                               : NULL;
    const int per = net->ranks_per_host > 0 ? net->ranks_per_host : 1;
    /* the profile as the first worker (rank 0, or the first after the servers), the
     * loads as the other workers; a server naps while it waits (ps_server.c) and is
     * not a load */
    const int first = servers_of(cfg);
    double others = 0;
    loads l;
    int rc = loads_start(&l, cfg, &saved, here ? procs - 1 : 0, core, hc, per, first, batch,
                         threads, err);
    if (rc == 0 && core >= 0 && bind_to_core(&saved, core))
        rc = dt_error_set(err, "cannot bind the profile to core %d: %s", core, strerror(errno));
    if (rc == 0 && hc && bind_to_host(hc, first / per + 1))
        rc = dt_error_set(err, "cannot bind the profile to host %d's CPUs: %s", first / per + 1,
                          strerror(errno));
    const dt_bench_span span = {
        .steps = PROFILE_STEPS, .max_steps = PROFILE_MAX_STEPS, .min_seconds = PROFILE_MIN_S};
    if (rc == 0) rc = loads_ask(&l, cfg, &others, err); /* their window starts */
    if (rc == 0)
        rc = dt_bench_profile(p, cfg->train.model, cfg->train.width, data,
                              cfg->train.loader_workers, batch, &span, threads, err);
    if (rc == 0) rc = loads_ask(&l, cfg, &others, err);
    if (slowest) *slowest = others;
    loads_stop(&l);
    if ((core >= 0 || hc) && sched_setaffinity(0, sizeof saved, &saved) && rc == 0)
        rc = dt_error_set(err, "cannot restore this process's cores: %s", strerror(errno));
    return rc;
}

/* The past-the-machine worker counts: 1, 2, 4, .. and the largest. */
static int next_workers(int w, int max) {
    return w < max && 2 * w > max ? max : 2 * w;
}

static int has_row(const dt_scale_study *old, int procs, int batch, int threads, int beyond) {
    for (int i = 0; i < old->n_predicted; i++)
        if (old->predicted[i].procs == procs && old->predicted[i].batch == batch &&
            old->predicted[i].threads == threads && old->predicted[i].beyond == beyond)
            return 1;
    return 0;
}

/* Whether OUT/predicted.csv has a row for every config of the grid at these threads: a
 * resumed sweep keeps the predictions made before its first runs (made again only with
 * --force, which measures everything again too). */
static int predictions_cover(const dt_sweep_config *cfg, const dt_scale_network *net, int threads) {
    dt_scale_study old;
    memset(&old, 0, sizeof old);
    dt_error err;
    int covered = dt_scale_read_predictions(&old, cfg->out_dir, &err) == 1;
    for (int b = 0; b < cfg->n_batches && covered; b++) {
        for (int k = 0; k < cfg->n_procs && covered; k++)
            covered = has_row(&old, cfg->procs[k], cfg->batches[b], threads, 0);
        for (int w = 1; w <= net->beyond_workers && covered;
             w = next_workers(w, net->beyond_workers))
            covered = has_row(&old, w, cfg->batches[b], threads, 1);
    }
    if (covered && net->beyond_workers > 0) { /* on the same network */
        dt_sim_config c = dt_sim_config_default();
        char words[160];
        beyond_config(cfg, net, 2, &c, words, sizeof words);
        covered = !strncmp(old.predicted_beyond, words, strlen(words));
    }
    free(old.predicted);
    return covered;
}

/* DIR/predicted.csv opened for writing whole (outfile.h), its header written. */
static int predictions_open(dt_outfile *f, const char *dir, dt_error *err) {
    char path[4200];
    snprintf(path, sizeof path, "%s/predicted.csv", dir);
    if (dt_make_dirs(dir, err) || dt_outfile_open(f, path, err)) return -1;
    for (int i = 0; i < N_COLUMNS; i++) fprintf(f->f, "%s%s", i ? "," : "", COLUMNS[i]);
    fputc('\n', f->f);
    return 0;
}

/* One predicted row of c (its batch, buckets and wire set) into f; -1 with err when
 * the simulator refuses the config. */
static int write_sim_row(FILE *f, const dt_profile *p, const dt_sim_config *c, int workers,
                         int threads, const char *words, int beyond, dt_error *err) {
    dt_sim_result r;
    if (dt_simulate(p, c, workers, &r, err)) return -1;
    char schedule[64];
    if (c->topology == DT_SIM_PS)
        snprintf(schedule, sizeof schedule, " (%s; %d server(s))", dt_sim_mode_name(c->mode),
                 c->servers);
    else
        snprintf(schedule, sizeof schedule, "%s",
                 c->mode == DT_SIM_ALLREDUCE ? " (overlap)" : " (no overlap)");
    fprintf(f, "%d,%d,%d,%.6g,%.6g,%.6g,%.6g,%s%s,%d\n", workers, c->batch, threads, r.step_s * 1e3,
            r.compute_s * 1e3, r.comm_s * 1e3, r.exposed_s * 1e3, words, schedule, beyond);
    return 0;
}

/* One predicted row of a scale study's config into f. */
static int write_row(FILE *f, const dt_profile *p, dt_sim_config *c, int workers, int batch,
                     int threads, const dt_sweep_config *cfg, const char *words, int beyond,
                     dt_error *err) {
    c->batch = batch;
    if (cfg->train.bucket_mb > 0) c->bucket_mb = cfg->train.bucket_mb;
    c->bytes_per_param = cfg->train.comm_dtype == DT_COMM_FP32 ? 4 : 2;
    return write_sim_row(f, p, c, workers, threads, words, beyond, err);
}

int dt_scale_predict(const dt_sweep_config *cfg, const dt_scale_network *net, FILE *progress,
                     dt_error *err) {
    dt_sim_mode mode;
    if (!sim_mode_of(cfg, &mode)) {
        if (!cfg->quiet)
            fprintf(progress,
                    "no prediction for mode %s (the simulator has schedules for allreduce, "
                    "ps-sync and ps-async)\n",
                    cfg->train.mode);
        return 0;
    }
    const int threads = cfg->train.threads > 0 ? cfg->train.threads : 1;
    if (!cfg->force && predictions_cover(cfg, net, threads)) { /* made before the first runs */
        if (!cfg->quiet) fprintf(progress, "predictions kept from before the first runs\n");
        return 0;
    }
    const double started = dt_now();
    /* the study's data, open once for every profile (0.6 s a time for Fashion-MNIST) */
    dt_dataset opened, *data = NULL;
    if (cfg->train.data) {
        if (dt_dataset_open(&opened, cfg->train.data, 1, err)) return -1;
        data = &opened;
    }
    dt_outfile f;
    if (predictions_open(&f, cfg->out_dir, err)) {
        if (data) dt_dataset_close(data);
        return -1;
    }
    const int saved_threads = dt_threads_get();
    dt_threads_set(threads);
    int rc = 0;
    for (int b = 0; b < cfg->n_batches && rc == 0; b++) {
        dt_profile p = {0};
        dt_error why;
        /* alone: the grid's one process, and every worker past the machine (a host each) */
        if (profile_run(&p, cfg, data, net, 1, cfg->batches[b], threads, NULL, &why)) {
            /* e.g. a batch that does not fit: the sweep says so */
            if (!cfg->quiet)
                fprintf(progress, "no prediction at batch %d: %s\n", cfg->batches[b], why.msg);
            dt_profile_free(&p);
            continue;
        }
        if (!cfg->quiet)
            fprintf(progress,
                    "predicting: %s at batch %d, %d thread%s: %.2f ms a step here (%zu "
                    "parameters)\n",
                    cfg->train.model, cfg->batches[b], threads, threads > 1 ? "s" : "",
                    p.step_s * 1e3, p.params);
        for (int k = 0; k < cfg->n_procs && rc == 0; k++) {
            const int procs = cfg->procs[k];
            dt_sim_config c = dt_sim_config_default();
            char words[160];
            network_config(cfg, net, procs, &c, words, sizeof words);
            if (procs == 1) {
                rc = write_row(f.f, &p, &c, procs, cfg->batches[b], threads, cfg, words, 0, err);
                continue;
            }
            dt_profile beside = {0};
            double slowest = 0; /* the loads' slowest median step */
            if (profile_run(&beside, cfg, data, net, procs, cfg->batches[b], threads, &slowest,
                            &why)) {
                if (!cfg->quiet)
                    fprintf(progress, "no prediction at batch %d on %d processes: %s\n",
                            cfg->batches[b], procs, why.msg);
            } else {
                if (!cfg->quiet)
                    fprintf(
                        progress, "  beside %d more: %.2f ms a step (the others' slowest: %.2f)\n",
                        ranks_here(cfg, net) ? procs - 1 : 0, beside.step_s * 1e3, slowest * 1e3);
                /* the step waits for the slowest rank: the simulator's compute scaled */
                if (slowest > beside.step_s) c.compute_speedup = beside.step_s / slowest;
                rc = write_row(f.f, &beside, &c, procs, cfg->batches[b], threads, cfg, words, 0,
                               err);
            }
            dt_profile_free(&beside);
        }
        for (int w = 1; w <= net->beyond_workers && rc == 0;
             w = next_workers(w, net->beyond_workers)) {
            dt_sim_config c = dt_sim_config_default();
            char words[160];
            beyond_config(cfg, net, w, &c, words, sizeof words);
            rc = write_row(f.f, &p, &c, w, cfg->batches[b], threads, cfg, words, 1, err);
        }
        dt_profile_free(&p);
    }
    dt_threads_set(saved_threads);
    if (data) dt_dataset_close(data);
    if (rc) {
        dt_outfile_discard(&f);
        return -1;
    }
    if (dt_outfile_commit(&f, err)) return -1;
    if (!cfg->quiet) fprintf(progress, "predicted in %.1f s\n", dt_now() - started);
    return 0;
}

int dt_scale_predict_times(dt_scale_study *s, const char *profile_path, double rate_bps,
                           double delay_s, int beyond_workers, const char *dir, dt_error *err) {
    dt_profile p = {0};
    if (dt_profile_read(&p, profile_path, err)) return -1;
    int batches[64];
    const int nb = dt_scale_distinct(s, 1, batches);
    /* each batch's factor: the profile's one-worker step here over the time there */
    double factor[64], known[64];
    int n_known = 0, rc = 0;
    for (int b = 0; b < nb && rc == 0; b++) {
        factor[b] = -1;
        const double there = dt_scale_measured_step(s, dt_scale_find(s, 1, batches[b], 0));
        if (there <= 0) continue;
        dt_sim_config c = dt_sim_config_default();
        c.batch = batches[b];
        c.link = link_of(rate_bps, delay_s);
        rc = dt_sim_speedup_to_step(&p, &c, there, &factor[b], NULL, err);
        if (rc == 0) known[n_known++] = factor[b];
    }
    if (rc == 0 && n_known == 0)
        rc =
            dt_error_set(err, "--profile: the times have no 1-process row, whose step rescales the "
                              "profile to the device they were measured on");
    const double median = rc ? 0 : dt_median(known, n_known); /* sorts known */
    char words[160], beyond_words[160];
    snprintf(words, sizeof words,
             "%g Mbit/s and %g us a message; one worker a host; compute from %s rescaled to the "
             "1-process times",
             rate_bps * 1e-6, delay_s * 1e6, profile_path);
    snprintf(beyond_words, sizeof beyond_words,
             "%g Mbit/s links and %g us a message; 1 worker(s) a host", rate_bps * 1e-6,
             delay_s * 1e6);
    for (char *c = words; *c; c++) /* a CSV field */
        if (*c == ',') *c = ';';
    dt_outfile f;
    if (rc || predictions_open(&f, dir, err)) {
        dt_profile_free(&p);
        return -1;
    }
    for (int b = 0; b < nb && rc == 0; b++) {
        dt_sim_config c = dt_sim_config_default();
        c.batch = batches[b];
        c.link = link_of(rate_bps, delay_s);
        c.compute_speedup = factor[b] > 0 ? factor[b] : median;
        for (int i = 0; i < s->n_rows && rc == 0; i++)
            if (s->rows[i].batch == batches[b] && !s->rows[i].lr_scaled)
                rc = write_sim_row(f.f, &p, &c, s->rows[i].procs, 1, words, 0, err);
        for (int w = 1; w <= beyond_workers && rc == 0; w = next_workers(w, beyond_workers))
            rc = write_sim_row(f.f, &p, &c, w, 1, beyond_words, 1, err);
    }
    dt_profile_free(&p);
    if (rc) {
        dt_outfile_discard(&f);
        return -1;
    }
    if (dt_outfile_commit(&f, err)) return -1;
    if (dt_scale_read_predictions(s, dir, err) != 1) return -1;
    s->predicted_calibrated = 1;
    return 0;
}

static int read_predictions_raw(dt_scale_study *s, const char *dir, dt_error *err) {
    char path[4200];
    snprintf(path, sizeof path, "%s/predicted.csv", dir);
    if (access(path, F_OK) != 0) return 0;
    dt_csv csv;
    if (dt_csv_open(&csv, path, err)) return -1;
    int col[N_COLUMNS], got = dt_csv_next(&csv, err), rc = 0;
    if (got <= 0) {
        dt_csv_close(&csv);
        return got < 0 ? -1 : dt_error_set(err, "%s is empty", path);
    }
    for (int i = 0; i < N_COLUMNS; i++) {
        col[i] = -1;
        for (int j = 0; j < csv.n; j++)
            if (!strcmp(csv.field[j], COLUMNS[i])) col[i] = j;
        if (col[i] < 0 && i < N_REQUIRED) {
            dt_csv_close(&csv);
            return dt_error_set(err, "%s: no '%s' column", path, COLUMNS[i]);
        }
    }
    free(s->predicted);
    s->predicted = NULL;
    s->n_predicted = 0;
    int cap = 0;
    while (rc == 0 && (got = dt_csv_next(&csv, err)) == 1) {
        const int columns = col[N_COLUMNS - 1] >= 0 ? N_COLUMNS : N_REQUIRED;
        if (csv.n != columns) {
            rc = dt_error_set(err, "%s line %ld: %d fields where the header has %d", path,
                              csv.in.lineno, csv.n, columns);
            break;
        }
        double v[7];
        const double hi[7] = {1 << 20, 1 << 24, 1 << 16, 1e12, 1e12, 1e12, 1e12};
        for (int i = 0; i < 7 && rc == 0; i++)
            rc = dt_csv_field_number(&csv, COLUMNS[i], csv.field[col[i]], i < 3 ? 1 : 0, hi[i],
                                     &v[i], err);
        if (rc) break;
        if (s->n_predicted == cap) {
            cap = cap ? 2 * cap : 16;
            dt_scale_predicted *grown = realloc(s->predicted, sizeof *grown * (size_t)cap);
            if (!grown) {
                rc = dt_error_set(err, "out of memory reading %s", path);
                break;
            }
            s->predicted = grown;
        }
        double beyond = 0;
        if (col[N_COLUMNS - 1] >= 0 &&
            dt_csv_field_number(&csv, "beyond", csv.field[col[N_COLUMNS - 1]], 0, 1, &beyond,
                                err)) {
            rc = -1;
            break;
        }
        s->predicted[s->n_predicted++] = (dt_scale_predicted){
            .beyond = beyond != 0,
            .procs = (int)v[0],
            .batch = (int)v[1],
            .threads = (int)v[2],
            .step_s = v[3] * 1e-3,
            .compute_s = v[4] * 1e-3,
            .comm_s = v[5] * 1e-3,
            .exposed_s = v[6] * 1e-3,
        };
        if (beyond == 0)
            snprintf(s->predicted_on, sizeof s->predicted_on, "%s", csv.field[col[7]]);
        else
            snprintf(s->predicted_beyond, sizeof s->predicted_beyond, "%s", csv.field[col[7]]);
    }
    if (got < 0) rc = -1;
    dt_csv_close(&csv);
    return rc ? -1 : 1;
}

/* OUT/drift.csv's factors into s and onto its grid predictions (see
 * dt_scale_profile_drift): 0, or -1 with err for a file that is there but bad. */
enum { DRIFT_MAX = 256 };
static const char *const DRIFT_COLUMNS[] = {"pass", "batch", "step_ms", "factor"};
typedef struct drift_row {
    int pass, batch;
    double step_ms, factor;
} drift_row;

/* Reads OUT/drift.csv into rows (room for DRIFT_MAX): how many, 0 when there is none,
 * -1 with err. */
static int read_drift(const char *dir, drift_row *rows, dt_error *err) {
    char path[4200];
    snprintf(path, sizeof path, "%s/drift.csv", dir);
    if (access(path, F_OK) != 0) return 0;
    dt_csv csv;
    if (dt_csv_open(&csv, path, err)) return -1;
    int n = 0, got = dt_csv_next(&csv, err), rc = got < 0 ? -1 : 0;
    if (got == 1 && (csv.n != 4 || strcmp(csv.field[0], "pass")))
        rc = dt_error_set(err, "%s: the header is not pass,batch,step_ms,factor", path);
    while (rc == 0 && (got = dt_csv_next(&csv, err)) == 1) {
        if (csv.n != 4 || n == DRIFT_MAX) {
            rc = dt_error_set(err, "%s line %ld: %s", path, csv.in.lineno,
                              csv.n != 4 ? "4 fields expected" : "too many rows");
            break;
        }
        double v[4];
        const double hi[4] = {1 << 16, 1 << 24, 1e12, 1e6};
        for (int i = 0; i < 4 && rc == 0; i++)
            rc = dt_csv_field_number(&csv, DRIFT_COLUMNS[i], csv.field[i], i < 2 ? 1 : 1e-12, hi[i],
                                     &v[i], err);
        if (rc == 0) rows[n++] = (drift_row){(int)v[0], (int)v[1], v[2], v[3]};
    }
    if (got < 0) rc = -1;
    dt_csv_close(&csv);
    return rc ? -1 : n;
}

static int apply_drift(dt_scale_study *s, const char *dir, dt_error *err) {
    drift_row rows[DRIFT_MAX];
    const int n = read_drift(dir, rows, err);
    if (n <= 0) return n;
    /* each pass's median factor, for the report; pass 1 is the prediction's own */
    s->n_drift = 1;
    s->drift[0] = 1;
    for (int pass = 1; pass < 16; pass++) {
        double f[DRIFT_MAX];
        int k = 0;
        for (int i = 0; i < n; i++)
            if (rows[i].pass == pass) f[k++] = rows[i].factor;
        if (k == 0) break;
        s->drift[s->n_drift++] = dt_median(f, k);
    }
    /* each grid config's compute x the mean factor of its batch over the passes */
    for (int i = 0; i < s->n_predicted; i++) {
        dt_scale_predicted *p = &s->predicted[i];
        if (p->beyond) continue;
        double sum = 1;
        int passes = 1;
        for (int j = 0; j < n; j++)
            if (rows[j].batch == p->batch) sum += rows[j].factor, passes++;
        const double compute = p->compute_s * sum / passes;
        p->step_s += compute - p->compute_s;
        p->compute_s = compute;
    }
    return 0;
}

int dt_scale_read_predictions(dt_scale_study *s, const char *dir, dt_error *err) {
    const int rc = read_predictions_raw(s, dir, err);
    if (rc == 1 && apply_drift(s, dir, err)) return -1;
    return rc;
}

int dt_scale_profile_drift(const dt_sweep_config *cfg, int pass, FILE *progress, dt_error *err) {
    const dt_scale_network *net = cfg->network;
    dt_scale_study old;
    memset(&old, 0, sizeof old);
    const int have = net ? read_predictions_raw(&old, cfg->out_dir, err) : 0;
    if (have <= 0) {
        free(old.predicted);
        return have;
    }
    drift_row rows[DRIFT_MAX];
    int n = read_drift(cfg->out_dir, rows, err), kept = 0;
    if (n < 0) {
        free(old.predicted);
        return -1;
    }
    for (int i = 0; i < n; i++) /* this pass's rows are taken again */
        if (rows[i].pass != pass) rows[kept++] = rows[i];
    n = kept;
    const int threads = cfg->train.threads > 0 ? cfg->train.threads : 1;
    dt_dataset opened, *data = NULL;
    int rc = 0;
    if (cfg->train.data) {
        rc = dt_dataset_open(&opened, cfg->train.data, 1, err);
        if (rc == 0) data = &opened;
    }
    const int saved_threads = dt_threads_get();
    dt_threads_set(threads);
    for (int b = 0; b < cfg->n_batches && rc == 0 && n < DRIFT_MAX; b++) {
        const dt_scale_predicted *was = NULL;
        for (int i = 0; i < old.n_predicted && !was; i++)
            if (!old.predicted[i].beyond && old.predicted[i].procs == 1 &&
                old.predicted[i].batch == cfg->batches[b])
                was = &old.predicted[i];
        dt_profile p = {0};
        dt_error why;
        if (!was || !(was->step_s > 0) ||
            profile_run(&p, cfg, data, net, 1, cfg->batches[b], threads, NULL, &why)) {
            dt_profile_free(&p);
            continue; /* no prediction at this batch, or it no longer profiles */
        }
        dt_sim_config c = dt_sim_config_default();
        char words[160];
        network_config(cfg, net, 1, &c, words, sizeof words);
        c.batch = cfg->batches[b];
        /* the factor that turns the prediction's step into this one */
        double factor = 0, now_s = 0;
        rc = dt_sim_speedup_to_step(&p, &c, was->step_s, &factor, &now_s, err);
        dt_profile_free(&p);
        if (rc == 0) {
            rows[n++] = (drift_row){pass, cfg->batches[b], now_s * 1e3, factor};
            if (!cfg->quiet)
                fprintf(progress,
                        "profiled again before pass %d: batch %d, %.2f ms a step (x%.3f)\n",
                        pass + 1, cfg->batches[b], now_s * 1e3, factor);
        }
    }
    dt_threads_set(saved_threads);
    if (data) dt_dataset_close(data);
    free(old.predicted);
    if (rc) return -1;
    char path[4200];
    snprintf(path, sizeof path, "%s/drift.csv", cfg->out_dir);
    dt_outfile f;
    if (dt_outfile_open(&f, path, err)) return -1;
    fputs("pass,batch,step_ms,factor\n", f.f);
    for (int i = 0; i < n; i++)
        fprintf(f.f, "%d,%d,%.6g,%.6g\n", rows[i].pass, rows[i].batch, rows[i].step_ms,
                rows[i].factor);
    return dt_outfile_commit(&f, err);
}

/* The past-the-machine rows: per batch size, step, epoch and speed-up against one
 * worker on the same network (the dataset split over the workers). */
static void write_beyond(const dt_scale_study *s, FILE *out) {
    int most = 0; /* workers */
    for (int i = 0; i < s->n_predicted; i++)
        if (s->predicted[i].beyond && s->predicted[i].procs > most) most = s->predicted[i].procs;
    if (most == 0) return;
    fprintf(out,
            "\n### Past the machine (predicted)\n\nThe same profiles on 1 to %d workers over "
            "%s (`scale --predict-link`, `--predict-workers`, `--predict-per-host`; defaults "
            "10 Gbit/s, 20 us, 64 workers, one a host). Epoch: the %.0f samples split over the "
            "workers, steps x the simulated step (from the one-process profiles); speed-up "
            "T(1)/T(N) at the "
            "same batch per worker.\n\n| batch | workers | step (ms) | exposed comm (ms) | "
            "epoch (s) | speed-up | efficiency |\n|---|---|---|---|---|---|---|\n",
            most, s->predicted_beyond, s->dataset_size);
    for (int i = 0; i < s->n_predicted; i++) {
        const dt_scale_predicted *p = &s->predicted[i];
        if (!p->beyond) continue;
        const dt_scale_predicted *one = NULL; /* this batch's one worker */
        for (int j = 0; j < s->n_predicted && !one; j++)
            if (s->predicted[j].beyond && s->predicted[j].batch == p->batch &&
                s->predicted[j].procs == 1)
                one = &s->predicted[j];
        const double it = dt_scale_split_iterations(s->dataset_size, p->procs, p->batch);
        const double it1 = dt_scale_split_iterations(s->dataset_size, 1, p->batch);
        fprintf(out, "| %d | %d | %.2f | %.2f |", p->batch, p->procs, p->step_s * 1e3,
                p->exposed_s * 1e3);
        if (it > 0 && one && it1 > 0) {
            const double t = it * p->step_s, sp = it1 * one->step_s / t;
            fprintf(out, " %.3g | %.2f | %.0f%% |\n", t, sp, 100 * sp / p->procs);
        } else {
            fputs(" | | |\n", out);
        }
    }
}

double dt_scale_measured_step(const dt_scale_study *s, const dt_scale_row *r) {
    const double t = r ? (r->t_epoch > 0 ? r->t_epoch : r->t_train) : -1;
    const double it = r ? dt_scale_iterations(s, r) : -1;
    return it > 0 && t > 0 ? t / it : -1;
}

/* report --times --profile: a 1-process config rescaled the profile, so its prediction
 * is its measurement by construction. */
static int calibrates(const dt_scale_study *s, const dt_scale_predicted *p) {
    return s->predicted_calibrated && p->procs == 1;
}

/* Whether a grid config runs more processes (x threads) than the study's machine has
 * cores: the simulator gives each its own core, so it cannot predict such a config
 * (ps runs: the servers count too). Not so where its run r had emulated hosts with
 * CPUs of their own: each rank's compute was profiled on its host's CPUs. */
static int oversubscribed(const dt_scale_study *s, const dt_scale_predicted *p,
                          const dt_scale_row *r) {
    const int servers = !strncmp(s->mode, "ps", 2) ? s->servers : 0;
    if (r && r->host_cpus > 0) return 0;
    return s->cores > 0 && p->procs * (p->threads > 0 ? p->threads : 1) + servers > s->cores;
}

/* |error| of each grid prediction measured on a quiet machine and not oversubscribed,
 * into errors (room for s->n_predicted); returns how many; *busy, *over: those
 * left out. */
static int grid_errors(const dt_scale_study *s, double *errors, int *busy, int *over) {
    int n = 0;
    *busy = *over = 0;
    for (int i = 0; i < s->n_predicted; i++) {
        const dt_scale_predicted *p = &s->predicted[i];
        const dt_scale_row *r = p->beyond ? NULL : dt_scale_find(s, p->procs, p->batch, 0);
        const double measured = dt_scale_measured_step(s, r);
        if (measured <= 0 || calibrates(s, p)) continue;
        if (oversubscribed(s, p, r))
            (*over)++;
        else if (r->busy)
            (*busy)++;
        else
            errors[n++] = fabs((p->step_s - measured) / measured);
    }
    return n;
}

void dt_scale_prediction_error(const dt_scale_study *s, double *median, double *worst, int *n,
                               int *busy, int *oversubscribed) {
    double *errors = malloc(sizeof(double) * (size_t)(s->n_predicted + 1));
    int left_busy = 0, left_over = 0;
    const int count = errors ? grid_errors(s, errors, &left_busy, &left_over) : 0;
    const double mid = errors ? dt_median(errors, count) : -1; /* sorts them */
    if (median) *median = mid;
    if (worst) *worst = count ? errors[count - 1] : -1;
    if (n) *n = count;
    if (busy) *busy = left_busy;
    if (oversubscribed) *oversubscribed = left_over;
    free(errors);
}

void dt_scale_write_predictions(const dt_scale_study *s, FILE *out) {
    if (s->n_predicted == 0) return;
    if (s->predicted_calibrated)
        fprintf(out,
                "\n## Predicted from a profile taken here\n\n`report --times --profile` "
                "rescaled the profile's compute at each batch size by the 1-process time "
                "measured there (a batch without one: the median factor of the others; "
                "Daydream's and dPRO's what-if) and simulated every config's step on %s "
                "(`predicted.csv`). The 1-process configs calibrate it and are left out of the "
                "error.\n\n| procs | batch | threads | predicted step (ms) | compute (ms) | "
                "exposed comm (ms) | measured step (ms) | error | repeats (ms) | |\n"
                "|---|---|---|---|---|---|---|---|---|---|\n",
                s->predicted_on);
    else
        fprintf(out,
                "\n## Predicted before measuring\n\n`scale` profiled the model here at each batch "
                "size with the threads each run gets, as a rank takes its step (bench's training "
                "step fed by train's loader from the study's data; for P processes beside P-1 "
                "copies of it, bound as mpirun binds the ranks, the slowest rank's median step "
                "kept) and simulated every config's step before the first run "
                "(`predicted.csv`; communication over %s). Measured step: the measured epoch's "
                "time / its steps (the median over the repeats, their range beside it).\n\n| procs "
                "| batch | threads | predicted step (ms) | compute (ms) | exposed comm (ms) | "
                "measured step (ms) | error | repeats (ms) | |\n"
                "|---|---|---|---|---|---|---|---|---|---|\n",
                s->predicted_on);
    int ranged = 0, within = 0;
    double widest = 0; /* the repeats' largest (max - min) / median */
    for (int i = 0; i < s->n_predicted; i++) {
        const dt_scale_predicted *p = &s->predicted[i];
        if (p->beyond) continue; /* the table below */
        const dt_scale_row *r = dt_scale_find(s, p->procs, p->batch, 0);
        fprintf(out, "| %d | %d | %d | %.2f | %.2f | %.2f |", p->procs, p->batch, p->threads,
                p->step_s * 1e3, p->compute_s * 1e3, p->exposed_s * 1e3);
        const double measured = dt_scale_measured_step(s, r);
        if (measured <= 0) {
            fputs(" not measured | | | |\n", out);
            continue;
        }
        const double e = (p->step_s - measured) / measured;
        fprintf(out, " %.2f | %+.1f%% |", measured * 1e3, 100 * e);
        /* the repeats' range of the same time the measured step uses */
        const int epoch = r->t_epoch > 0;
        const double lo = epoch ? r->t_epoch_min : r->t_train_min;
        const double hi = epoch ? r->t_epoch_max : r->t_train_max;
        const double it = dt_scale_iterations(s, r);
        if (r->repeats > 1 && lo > 0 && hi >= lo) {
            fprintf(out, " %.2f-%.2f |", lo / it * 1e3, hi / it * 1e3);
            if (!r->busy && !oversubscribed(s, p, r) && !calibrates(s, p)) {
                ranged++;
                within += p->step_s >= lo / it && p->step_s <= hi / it;
                if ((hi - lo) / it / measured > widest) widest = (hi - lo) / it / measured;
            }
        } else {
            fputs(" |", out);
        }
        fprintf(out, " %s |\n",
                calibrates(s, p)          ? "calibrates the profile"
                : oversubscribed(s, p, r) ? "more processes than cores: left out"
                : r->unfaithful           ? "unfaithful (hosts out of CPU quota): left out"
                : r->busy                 ? "busy: left out"
                                          : "");
    }
    double median, worst;
    int n_errors, busy, over;
    dt_scale_prediction_error(s, &median, &worst, &n_errors, &busy, &over);
    if (n_errors > 0)
        fprintf(out,
                "\n**Median |error| %.1f%%** over %d config%s (worst %.1f%%); %d measured on a "
                "busy machine left out",
                100 * median, n_errors, n_errors > 1 ? "s" : "", 100 * worst, busy);
    else
        fprintf(out,
                "\n**No median |error|**: no config was measured on a quiet machine with a "
                "core for each process (%d busy left out",
                busy);
    if (over > 0)
        fprintf(out,
                "; %d with more processes than the machine's %d cores left out too (the "
                "simulator gives each process a core of its own)",
                over, s->cores);
    fputs(n_errors > 0 ? ".\n" : ").\n", out);
    if (s->n_drift > 1) {
        fputs("Before each repeat pass after the first, the model was profiled again alone "
              "(`drift.csv`): its step against the prediction's own profile, median over the "
              "batch sizes,",
              out);
        for (int i = 1; i < s->n_drift; i++)
            fprintf(out, "%s pass %d x%.3f", i > 1 ? "," : "", i + 1, s->drift[i]);
        fputs("; each config's predicted compute above is scaled by its batch's mean factor "
              "over the passes (the first: x1), as the measured step is the median over "
              "them.\n",
              out);
    } else if (ranged > 0) {
        fputs("The model was not profiled again between the repeat passes: the predictions "
              "hold the machine's speed at the start.\n",
              out);
    }
    if (ranged > 0)
        fprintf(out,
                "The prediction lies within the range of the repeats' measured steps in %d of "
                "%d configs; the repeats of one config differ by up to %.0f%% of their median "
                "(the machine's own speed between them).\n",
                within, ranged, 100 * widest);
    write_beyond(s, out);
}
