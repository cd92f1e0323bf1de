#include "dtrain/runlog.h"

#include <errno.h>
#include <string.h>

int dt_runlog_open(dt_runlog *log, const char *path, dt_error *err) {
    log->file = NULL;
    if (!path || !*path) return 0;
    log->file = fopen(path, "w");
    if (!log->file) return dt_error_set(err, "cannot write run log %s: %s", path, strerror(errno));
    return 0;
}

void dt_runlog_run(dt_runlog *log, const char *fields_json) {
    if (log->file) fprintf(log->file, "{\"event\":\"run\",%s}\n", fields_json);
}

void dt_runlog_step(dt_runlog *log, const dt_step_record *r) {
    if (!log->file) return;
    fprintf(log->file,
            "{\"event\":\"step\",\"rank\":%d,\"epoch\":%d,\"step\":%ld,\"loss\":%.9g,\"lr\":%.9g,"
            "\"t_data\":%.9g,\"t_compute\":%.9g,\"t_comm\":%.9g,\"t_comm_exposed\":%.9g,"
            "\"bytes_sent\":%lld,\"t_pull\":%.9g,\"t_push\":%.9g,\"t_wait\":%.9g,"
            "\"bytes_received\":%lld}\n",
            r->rank, r->epoch, r->step, r->loss, r->lr, r->t_data, r->t_compute, r->t_comm,
            r->t_comm_exposed, r->bytes_sent, r->t_pull, r->t_push, r->t_wait, r->bytes_received);
}

void dt_runlog_epoch(dt_runlog *log, const dt_epoch_record *r) {
    if (!log->file) return;
    fprintf(log->file,
            "{\"event\":\"epoch\",\"epoch\":%d,\"train_loss\":%.9g,\"train_acc\":%.9g,"
            "\"test_loss\":%.9g,\"test_acc\":%.9g,\"t_epoch\":%.9g,\"t_train\":%.9g,"
            "\"t_data\":%.9g,\"t_compute\":%.9g,\"t_comm\":%.9g,\"t_comm_exposed\":%.9g,"
            "\"t_epoch_mean\":%.9g,\"t_train_mean\":%.9g,\"t_data_mean\":%.9g,"
            "\"t_compute_mean\":%.9g,\"t_comm_mean\":%.9g,\"t_comm_exposed_mean\":%.9g,"
            "\"t_eval\":%.9g,\"bytes_sent\":%lld,\"images\":%lld}\n",
            r->epoch, r->train_loss, r->train_acc, r->test_loss, r->test_acc, r->t_epoch,
            r->t_train, r->t_data, r->t_compute, r->t_comm, r->t_comm_exposed, r->t_epoch_mean,
            r->t_train_mean, r->t_data_mean, r->t_compute_mean, r->t_comm_mean,
            r->t_comm_exposed_mean, r->t_eval, r->bytes_sent, r->images);
    fflush(log->file);
}

void dt_runlog_ps_server(dt_runlog *log, int server, const dt_ps_server_stats *st, int epochs) {
    if (!log->file) return;
    fprintf(log->file,
            "{\"event\":\"ps_server\",\"server\":%d,\"updates\":%ld,\"applied\":%ld,"
            "\"dropped\":%ld,\"busy_s\":%.6g,\"bytes_in\":%lld,\"bytes_out\":%lld,"
            "\"max_clock_gap\":%ld,\"staleness_hist\":[",
            server, st->updates, st->applied, st->dropped, st->busy_s, st->bytes_in, st->bytes_out,
            st->max_clock_gap);
    for (int b = 0; b < DT_PS_STALENESS_BINS; b++)
        fprintf(log->file, b ? ",%ld" : "%ld", st->staleness_hist[b]);
    fputs("]}\n", log->file);
    for (int e = 0; e < epochs && e < DT_PS_MAX_EPOCHS; e++) {
        fprintf(log->file,
                "{\"event\":\"ps_epoch\",\"server\":%d,\"epoch\":%d,\"dropped\":%ld,"
                "\"staleness_hist\":[",
                server, e, st->epoch_dropped[e]);
        for (int b = 0; b < DT_PS_STALENESS_BINS; b++)
            fprintf(log->file, b ? ",%ld" : "%ld", st->epoch_hist[e][b]);
        fputs("]}\n", log->file);
    }
}

int dt_runlog_close(dt_runlog *log, dt_error *err) {
    if (!log->file) return 0;
    int rc = fclose(log->file);
    log->file = NULL;
    if (rc != 0) return dt_error_set(err, "cannot finish run log: %s", strerror(errno));
    return 0;
}
