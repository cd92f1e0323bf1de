/* `dtrain scale`'s setup before the sweep: its lists, where the runs go and what the
 * grid defaults to (sweep.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/parse.h"
#include "dtrain/dataset.h"
#include "study/netns.h"
#include "study/sweep.h"
#include "train/train_mode.h"

int dt_sweep_parse_ints(const char *flag, const char *text, int *out, int max, dt_error *err) {
    int n = 0;
    const char *p = text;
    while (*p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 1 || v > (1 << 24) || (*end && *end != ',') || n == max ||
            (n > 0 && v <= out[n - 1]))
            return dt_error_set(err, "%s expects ascending positive integers like 1,2,4, got '%s'",
                                flag, text);
        out[n++] = (int)v;
        p = *end ? end + 1 : end;
    }
    return n > 0 ? n : dt_error_set(err, "%s is empty", flag);
}

int dt_sweep_parse_mib(const char *text, double *out, int max, dt_error *err) {
    int n = 0;
    for (const char *p = text; *p;) {
        char *end;
        double v = strtod(p, &end);
        if (end == p || !(v >= 1e-3 && v <= 1e5) || (*end && *end != ',') || n == max ||
            (n > 0 && v <= out[n - 1]))
            return dt_error_set(
                err, "--bucket-sizes expects ascending MiB values like 1,5,25, got '%s'", text);
        out[n++] = v;
        p = *end ? end + 1 : end;
    }
    return n > 0 ? n : dt_error_set(err, "--bucket-sizes is empty");
}

int dt_sweep_parse_modes(const char *text, char modes[DT_SWEEP_MAX_MODES][32], dt_error *err) {
    int n = 0;
    for (const char *p = text; *p;) {
        size_t len = strcspn(p, ",");
        if (len == 0 || len >= 32 || n == DT_SWEEP_MAX_MODES)
            return dt_error_set(
                err, "--modes expects up to 8 modes like allreduce,ps-sync, got '%s'", text);
        memcpy(modes[n], p, len);
        modes[n][len] = 0;
        dt_train_config probe = dt_train_config_default();
        probe.mode = modes[n];
        const dt_train_mode *mode;
        dt_error why;
        if (dt_train_mode_of(&probe, &mode, &why)) return dt_error_set(err, "--modes: %s", why.msg);
        for (int k = 0; k < n; k++)
            if (!strcmp(modes[k], modes[n]))
                return dt_error_set(err, "--modes names %s twice", modes[n]);
        n++;
        p += len;
        if (*p == ',') p++;
    }
    return n > 0 ? n : dt_error_set(err, "--modes is empty");
}

int dt_sweep_parse_hosts(const char *text, long *hosts, dt_error *err) {
    if (strncmp(text, "netns:", 6))
        return dt_error_set(err,
                            "--hosts expects netns:H (emulated hosts), got '%s'; real "
                            "machines: --hostfile FILE",
                            text);
    return dt_parse_long("--hosts netns:", text + 6, 1, DT_NETNS_MAX_HOSTS, hosts, err);
}

int dt_sweep_parse_host_cpus(const char *text, double *cpus, int *cpuset, dt_error *err) {
    *cpuset = !strcmp(text, "cpuset");
    if (*cpuset || !strcmp(text, "none")) {
        *cpus = 0;
        return 0;
    }
    if (dt_parse_double("--host-cpus", text, 0.01, 1024, cpus, err))
        return dt_error_set(err,
                            "--host-cpus expects cores per host from 0.01 to 1024, cpuset "
                            "or none, got '%s'",
                            text);
    return 0;
}

int dt_scale_check_places(const dt_scale_places *s, dt_sweep_config *cfg, int *procs,
                          dt_error *err) {
    if (s->hostfile && s->hosts_text)
        return dt_error_set(err, "--hosts and --hostfile exclude each other");
    if (s->hosts_text && !s->link_text)
        return dt_error_set(err, "--hosts %s needs --link RATE[,DELAY], e.g. --link 1gbit",
                            s->hosts_text);
    if (s->ranks_per_host != 1 && !s->hosts_text)
        return dt_error_set(err, "--ranks-per-host goes with --hosts netns:H");
    if (s->host_cpus_text && !s->hosts_text)
        return dt_error_set(err, "--host-cpus goes with --hosts netns:H");
    if (s->n_buckets && s->n_modes)
        return dt_error_set(err, "--bucket-sizes and --modes: one at a time");
    if (cfg->srun && (s->hosts_text || s->hostfile))
        return dt_error_set(err, "--launcher srun runs on the Slurm allocation's nodes: drop %s",
                            s->hosts_text ? "--hosts (emulated hosts need mpirun)" : "--hostfile");
    if (cfg->srun && !getenv("SLURM_JOB_ID"))
        return dt_error_set(err, "--launcher srun needs a Slurm allocation (no SLURM_JOB_ID): run "
                                 "the sweep inside salloc or an sbatch script");
    if (s->hostfile) {
        FILE *f = fopen(s->hostfile, "r");
        if (!f)
            return dt_error_set(err, "cannot read --hostfile %s: %s", s->hostfile, strerror(errno));
        fclose(f);
    }
    if (s->hosts_text && !s->procs_given) { /* 1, 2, 4, ... and every slot */
        const int slots = (int)(s->hosts * s->ranks_per_host);
        cfg->n_procs = 0;
        for (int p = 1; p < slots && cfg->n_procs < DT_SWEEP_MAX_GRID - 1; p *= 2)
            procs[cfg->n_procs++] = p;
        procs[cfg->n_procs++] = slots;
    } else if (s->hosts_text && procs[cfg->n_procs - 1] > s->hosts * s->ranks_per_host) {
        return dt_error_set(err,
                            "--procs %d is more than --hosts %s x --ranks-per-host %ld slots; "
                            "give more hosts or --ranks-per-host",
                            procs[cfg->n_procs - 1], s->hosts_text, s->ranks_per_host);
    }
    cfg->procs = procs;
    return 0;
}

/* --max-samples without --test-samples: each run evaluates on the same share of the
 * test split (at least one image), not all of it. A study about training time over
 * 512 of synthetic:imagenet's 1.28 M training images would otherwise evaluate its
 * 50,000 test images after every epoch: hours of alexnet forward per run. */
static void default_test_share(dt_train_config *train) {
    if (train->max_samples <= 0 || train->max_test_samples > 0) return;
    dt_dataset tr, te;
    if (dt_dataset_open(&tr, train->data, 1, NULL)) return; /* the runs will say why */
    if (dt_dataset_open(&te, train->data, 0, NULL) == 0) {
        if (train->max_samples < tr.size) {
            long share = (train->max_samples * (long)te.size + tr.size - 1) / tr.size;
            train->max_test_samples = share < 1 ? 1 : share;
        }
        dt_dataset_close(&te);
    }
    dt_dataset_close(&tr);
}

int dt_scale_fill_defaults(dt_sweep_config *cfg, int *batches, dt_error *err) {
    default_test_share(&cfg->train);
    if (cfg->n_batches == 0) { /* 32, x4, up to the per-process share of the data */
        dt_dataset ds;
        if (dt_dataset_open(&ds, cfg->train.data, 1, err)) return -1;
        const long max = cfg->train.max_samples;
        int size = max > 0 && max < ds.size ? (int)max : ds.size;
        int share = size / cfg->procs[cfg->n_procs - 1];
        dt_dataset_close(&ds);
        for (int b = 32; b <= share && cfg->n_batches < DT_SWEEP_MAX_GRID; b *= 4)
            batches[cfg->n_batches++] = b;
        if (cfg->n_batches == 0) batches[cfg->n_batches++] = share > 0 ? share : 1;
    }
    cfg->batches = batches;
    return 0;
}
