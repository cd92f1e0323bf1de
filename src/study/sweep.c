#define _GNU_SOURCE
#include "dtrain/sweep.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dtrain/timer.h"
#include "dtrain/train_flags.h"
#include "dtrain/train_mode.h"

static double num(const cJSON *o, const char *key, double fallback) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : fallback;
}

int dt_scale_row_from_log(const char *path, dt_scale_study *study, dt_scale_row *row, int *complete,
                          dt_error *err) {
    FILE *f = fopen(path, "r");
    if (!f) return dt_error_set(err, "cannot open run log %s: %s", path, strerror(errno));
    memset(row, 0, sizeof *row);
    row->t_data = row->t_compute = row->t_comm = row->t_comm_exposed = -1;
    row->bytes_sent = row->final_loss = row->test_acc = -1;
    char *line = NULL;
    size_t cap = 0;
    int epochs_wanted = -1, epochs_seen = 0, have_run = 0;
    while (getline(&line, &cap, f) > 0) {
        if (!strstr(line, "\"event\":\"run\"") && !strstr(line, "\"event\":\"epoch\"")) continue;
        cJSON *o = cJSON_Parse(line);
        if (!o) continue; /* a line cut by an interrupted run */
        const cJSON *ev = cJSON_GetObjectItemCaseSensitive(o, "event");
        if (cJSON_IsString(ev) && !strcmp(ev->valuestring, "run")) {
            have_run = 1;
            /* workers scale the study; parameter servers come on top */
            row->procs = (int)num(o, "workers", num(o, "procs", 1));
            row->batch = (int)num(o, "batch_size", 0);
            row->iterations = (long)num(o, "steps_per_epoch", 0);
            epochs_wanted = (int)num(o, "epochs", -1);
            const cJSON *sc = cJSON_GetObjectItemCaseSensitive(o, "lr_scaling");
            row->lr_scaled = cJSON_IsString(sc) && !strcmp(sc->valuestring, "linear");
            study->params = num(o, "params", study->params);
            study->dataset_size = num(o, "dataset_size", study->dataset_size);
            const cJSON *mode = cJSON_GetObjectItemCaseSensitive(o, "mode");
            if (cJSON_IsString(mode) && strcmp(mode->valuestring, "single"))
                snprintf(study->mode, sizeof study->mode, "%s", mode->valuestring);
            if (num(o, "servers", 0) > 0) study->servers = (int)num(o, "servers", 0);
            const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, "model");
            const cJSON *d = cJSON_GetObjectItemCaseSensitive(o, "data");
            if (cJSON_IsString(m))
                snprintf(study->model, sizeof study->model, "%s", m->valuestring);
            if (cJSON_IsString(d)) snprintf(study->data, sizeof study->data, "%s", d->valuestring);
        } else {
            epochs_seen++;
            /* times of the 2nd epoch (the 1st warms caches), or of the only one */
            if (epochs_seen <= 2) {
                row->t_train = num(o, "t_train", 0);
                row->t_epoch = num(o, "t_epoch", 0);
                row->t_data = num(o, "t_data_mean", -1);
                row->t_compute = num(o, "t_compute_mean", -1);
                row->t_comm = num(o, "t_comm_mean", -1);
                row->t_comm_exposed = num(o, "t_comm_exposed_mean", -1);
                double bytes = num(o, "bytes_sent", -1);
                row->bytes_sent = bytes >= 0 && row->procs > 0 ? bytes / row->procs : -1;
            }
            row->final_loss = num(o, "train_loss", -1);
            row->test_acc = num(o, "test_acc", -1);
        }
        cJSON_Delete(o);
    }
    free(line);
    fclose(f);
    if (!have_run) return dt_error_set(err, "%s: no \"run\" record (not a dtrain run log?)", path);
    *complete = epochs_wanted > 0 && epochs_seen >= epochs_wanted;
    return 0;
}

static void log_path(char *out, size_t size, const char *dir, int procs, int batch, int scaled) {
    snprintf(out, size, "%s/run_p%d_b%d%s.jsonl", dir, procs, batch, scaled ? "_lrlinear" : "");
}

int dt_scale_read_dir(const char *dir, dt_scale_study *study, dt_error *err) {
    DIR *d = opendir(dir);
    if (!d) return dt_error_set(err, "cannot open %s: %s", dir, strerror(errno));
    struct dirent *e;
    int rc = 0;
    while (rc == 0 && (e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (strncmp(e->d_name, "run_", 4) || n < 7 || strcmp(e->d_name + n - 6, ".jsonl")) continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        dt_scale_row row;
        int complete;
        if (dt_scale_row_from_log(path, study, &row, &complete, err))
            rc = -1;
        else if (!complete)
            dt_scale_add_note(study, "%s is incomplete (an interrupted run); left out", e->d_name);
        else
            rc = dt_scale_add_row(study, &row, err);
    }
    closedir(d);
    if (rc == 0 && study->n_rows == 0)
        rc = dt_error_set(err, "%s holds no complete run logs (run_*.jsonl)", dir);
    return rc;
}

/* Progress from the run log the child is writing: its last step record. */
static void show_progress(FILE *log, long *offset, int index, int total, int procs, int batch,
                          int epochs, long steps_per_epoch, double started) {
    if (!log) return;
    fseek(log, *offset, SEEK_SET);
    char line[1024];
    long step = -1, got = 0;
    int epoch = 0;
    while (fgets(line, sizeof line, log)) {
        size_t n = strlen(line);
        if (n == 0 || line[n - 1] != '\n') break; /* half-written: read it next time */
        *offset = ftell(log);
        const char *s = strstr(line, "\"event\":\"step\"");
        if (!s) continue;
        const char *e = strstr(line, "\"epoch\":"), *k = strstr(line, "\"step\":");
        if (e && k) {
            epoch = atoi(e + 8);
            step = atol(k + 7);
            got = 1;
        }
    }
    if (!got) return;
    double elapsed = dt_now() - started;
    long done = step + 1, all = steps_per_epoch * epochs;
    double rate = done * (double)batch * procs / elapsed;
    double eta = done > 0 ? elapsed / done * (all - done) : 0;
    fprintf(stderr,
            "\r\033[K[config %d/%d] %d proc%s, batch %d: epoch %d/%d, step %ld/%ld, "
            "%.0f img/s, ETA %.0f s",
            index, total, procs, procs > 1 ? "s" : "", batch, epoch + 1, epochs,
            done - epoch * steps_per_epoch, steps_per_epoch, rate, eta);
}

/* Runs one configuration; returns 0, 1 if it does not fit in memory, -1 on error. */
static int run_config(const dt_sweep_config *cfg, int procs, int batch, int scaled, const char *log,
                      int index, int total, dt_error *err) {
    char errpath[4200];
    snprintf(errpath, sizeof errpath, "%s.stderr", log);
    /* The child's flags: the sweep's training config with this run's settings. */
    dt_train_config run = cfg->train;
    run.batch_size = batch;
    run.lr_scaling_linear = scaled;
    run.warmup_epochs = scaled ? cfg->train.warmup_epochs : 0; /* warm-up goes with scaling */
    run.log_path = log;
    const dt_train_mode *mode;
    if (dt_train_mode_of(&run, &mode, err)) return -1;
    char np[16], flag_text[2048];
    snprintf(np, sizeof np, "%d", procs + (mode->has_servers ? run.ps.servers : 0));
    const char *argv[96];
    const int argv_size = (int)(sizeof argv / sizeof *argv);
    int a = 0;
    if (procs > 1 || mode->has_servers) {
        argv[a++] = "mpirun";
        argv[a++] = "-np";
        argv[a++] = np;
    }
    argv[a++] = cfg->dtrain;
    argv[a++] = "train";
    /* room left for --quiet and the closing NULL */
    const int flags =
        dt_train_flags_to_argv(&run, argv + a, argv_size - a - 2, flag_text, sizeof flag_text, err);
    if (flags < 0) return -1;
    a += flags;
    argv[a++] = "--quiet";
    argv[a] = NULL;
    unlink(log);
    double started = dt_now();
    pid_t pid = fork();
    if (pid < 0) return dt_error_set(err, "cannot start a run: %s", strerror(errno));
    if (pid == 0) {
        FILE *e = freopen(errpath, "w", stderr);
        if (!e || !freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "r", stdin))
            _exit(127);
        /* Open MPI's settings for running as root and for more ranks than cores */
        setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
        setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
        setenv("OMPI_MCA_rmaps_base_oversubscribe", "1", 0);
        setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);
        execvp(argv[0], (char *const *)argv);
        fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    FILE *logf = NULL;
    long offset = 0, steps_per_epoch = 1;
    const int live = !cfg->quiet && isatty(STDERR_FILENO); /* else a line per config */
    int status = 0;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) break;
        if (r < 0 && errno != EINTR) break;
        struct timespec ts = {0, 300 * 1000 * 1000};
        nanosleep(&ts, NULL);
        if (!live) continue;
        if (!logf && (logf = fopen(log, "r"))) {
            char line[2048];
            if (fgets(line, sizeof line, logf)) {
                const char *s = strstr(line, "\"steps_per_epoch\":");
                if (s) steps_per_epoch = atol(s + 18);
                offset = ftell(logf);
            } else {
                fclose(logf);
                logf = NULL;
            }
        }
        show_progress(logf, &offset, index, total, procs, batch, cfg->train.epochs, steps_per_epoch,
                      started);
    }
    if (logf) fclose(logf);
    if (live) fputs("\r\033[K", stderr);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        unlink(errpath);
        return 0;
    }
    /* The child's own one-line error, for the memory stop or to pass on. */
    char first[512] = "";
    FILE *e = fopen(errpath, "r");
    if (e) {
        char line[512];
        while (fgets(line, sizeof line, e))
            if (strstr(line, "dtrain")) {
                snprintf(first, sizeof first, "%s", line);
                break;
            }
        fclose(e);
    }
    first[strcspn(first, "\n")] = 0;
    if (strstr(first, "does not fit in memory")) {
        unlink(errpath); /* the report's note says it */
        return 1;
    }
    return dt_error_set(err, "run with %d process%s, batch %d failed (%s; see %s)", procs,
                        procs > 1 ? "es" : "", batch, first[0] ? first : "no message", errpath);
}

int dt_make_dirs(const char *path, dt_error *err) {
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == 0) {
            char c = *p;
            *p = 0;
            if (mkdir(buf, 0755) != 0 && errno != EEXIST)
                return dt_error_set(err, "cannot create %s: %s", buf, strerror(errno));
            *p = c;
            if (!c) break;
        }
    }
    return 0;
}

int dt_sweep_run(const dt_sweep_config *cfg, dt_scale_study *study, dt_error *err) {
    if (dt_make_dirs(cfg->out_dir, err)) return -1;
    snprintf(study->model, sizeof study->model, "%s", cfg->train.model);
    snprintf(study->data, sizeof study->data, "%s", cfg->train.data);
    int total = 0, index = 0;
    for (int b = 0; b < cfg->n_batches; b++)
        for (int p = 0; p < cfg->n_procs; p++) total += 1 + (cfg->lr_scaling && cfg->procs[p] > 1);
    for (int b = 0; b < cfg->n_batches; b++) {
        int memory_stop = 0;
        for (int p = 0; p < cfg->n_procs && !memory_stop; p++) {
            for (int scaled = 0; scaled <= (cfg->lr_scaling && cfg->procs[p] > 1); scaled++) {
                char log[4096];
                log_path(log, sizeof log, cfg->out_dir, cfg->procs[p], cfg->batches[b], scaled);
                index++;
                dt_scale_row row;
                int complete = 0;
                if (!cfg->force && access(log, R_OK) == 0 &&
                    dt_scale_row_from_log(log, study, &row, &complete, NULL) == 0 && complete) {
                    if (!cfg->quiet)
                        fprintf(stderr,
                                "[config %d/%d] %d proc%s, batch %d: done before, kept "
                                "(--force to run again)\n",
                                index, total, cfg->procs[p], cfg->procs[p] > 1 ? "s" : "",
                                cfg->batches[b]);
                    if (dt_scale_add_row(study, &row, err)) return -1;
                    continue;
                }
                int rc =
                    run_config(cfg, cfg->procs[p], cfg->batches[b], scaled, log, index, total, err);
                if (rc < 0) return -1;
                if (rc == 1) {
                    dt_scale_add_note(study,
                                      "batch size %d per process does not fit in memory with %d "
                                      "process%s; the sweep stopped there (larger batch sizes "
                                      "were not run)",
                                      cfg->batches[b], cfg->procs[p],
                                      cfg->procs[p] > 1 ? "es" : "");
                    unlink(log);
                    memory_stop = 1;
                    break;
                }
                if (dt_scale_row_from_log(log, study, &row, &complete, err) ||
                    dt_scale_add_row(study, &row, err))
                    return -1;
                if (!cfg->quiet) {
                    fprintf(stderr,
                            "[config %d/%d] %d proc%s, batch %d: epoch time %.2f s, test "
                            "accuracy %.2f%%\n",
                            index, total, row.procs, row.procs > 1 ? "s" : "", row.batch,
                            row.t_epoch, 100.0 * row.test_acc);
                }
            }
        }
        if (memory_stop) break;
    }
    return 0;
}
