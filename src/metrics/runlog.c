#define _GNU_SOURCE /* getline */
#include "metrics/runlog.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "core/runlock.h"
#include "core/textfile.h"

/* ---- the format: one field list per event, used to write and to read ---- */

typedef enum field_kind {
    F_INT,    /* int, %d */
    F_LONG,   /* long, %ld */
    F_LLONG,  /* long long, %lld */
    F_ULLONG, /* unsigned long long, %llu */
    F_REAL,   /* double, printed with the field's format */
    F_STRING, /* char[size] */
    F_BOOL,   /* int 0/1, true/false */
    F_HIST    /* long[DT_RUNLOG_STALENESS_BINS], an array of counts */
} field_kind;

typedef struct field {
    const char *name;
    field_kind kind;
    size_t offset, size;
    const char *real_format; /* F_REAL only */
    int required;            /* reading: a record without it is an error */
} field;

#define FIELD(type, member, kind, format, required)                                                \
    { #member, kind, offsetof(type, member), sizeof(((type *)0)->member), format, required }

/* The historical order and formats (docs/architecture.md, "Run log fields"). */
static const field RUN_FIELDS[] = {
    FIELD(dt_run_record, model, F_STRING, NULL, 0),
    FIELD(dt_run_record, params, F_LLONG, NULL, 0),
    FIELD(dt_run_record, procs, F_INT, NULL, 0),
    FIELD(dt_run_record, mode, F_STRING, NULL, 0),
    FIELD(dt_run_record, batch_size, F_INT, NULL, 0),
    FIELD(dt_run_record, global_batch, F_INT, NULL, 0),
    FIELD(dt_run_record, data, F_STRING, NULL, 0),
    FIELD(dt_run_record, dataset_size, F_INT, NULL, 0),
    FIELD(dt_run_record, steps_per_epoch, F_LONG, NULL, 0),
    FIELD(dt_run_record, epochs, F_INT, NULL, 0),
    FIELD(dt_run_record, lr, F_REAL, "%g", 0),
    FIELD(dt_run_record, lr_scaling, F_STRING, NULL, 0),
    FIELD(dt_run_record, warmup_epochs, F_REAL, "%g", 0),
    FIELD(dt_run_record, momentum, F_REAL, "%g", 0),
    FIELD(dt_run_record, weight_decay, F_REAL, "%g", 0),
    FIELD(dt_run_record, lr_schedule, F_STRING, NULL, 0),
    FIELD(dt_run_record, threads, F_INT, NULL, 0),
    FIELD(dt_run_record, threads_from, F_STRING, NULL, 0),
    FIELD(dt_run_record, loader_workers, F_INT, NULL, 0),
    FIELD(dt_run_record, allreduce, F_STRING, NULL, 0),
    FIELD(dt_run_record, comm_dtype, F_STRING, NULL, 0),
    FIELD(dt_run_record, precision, F_STRING, NULL, 0),
    FIELD(dt_run_record, bucket_mb, F_REAL, "%g", 0),
    FIELD(dt_run_record, buckets, F_INT, NULL, 0),
    FIELD(dt_run_record, overlap, F_BOOL, NULL, 0),
    FIELD(dt_run_record, overlap_why, F_STRING, NULL, 0),
    FIELD(dt_run_record, allreduce_used, F_STRING, NULL, 0),
    FIELD(dt_run_record, seed, F_ULLONG, NULL, 0),
    FIELD(dt_run_record, workers, F_INT, NULL, 0),
    FIELD(dt_run_record, servers, F_INT, NULL, 0),
    FIELD(dt_run_record, version, F_STRING, NULL, 0),
    FIELD(dt_run_record, cpu_quota, F_REAL, "%.4g", 0),
    FIELD(dt_run_record, cpu, F_STRING, NULL, 0),
    FIELD(dt_run_record, cpus, F_INT, NULL, 0),
    FIELD(dt_run_record, memory_gib, F_REAL, "%.4g", 0),
    FIELD(dt_run_record, isa, F_STRING, NULL, 0),
    FIELD(dt_run_record, libraries, F_STRING, NULL, 0),
    FIELD(dt_run_record, hosts, F_INT, NULL, 0),
    FIELD(dt_run_record, host, F_STRING, NULL, 0),
};

static const field STEP_FIELDS[] = {
    FIELD(dt_step_record, rank, F_INT, NULL, 1),
    FIELD(dt_step_record, epoch, F_INT, NULL, 0),
    FIELD(dt_step_record, step, F_LONG, NULL, 1),
    FIELD(dt_step_record, loss, F_REAL, "%.9g", 1),
    FIELD(dt_step_record, lr, F_REAL, "%.9g", 0),
    FIELD(dt_step_record, t_data, F_REAL, "%.9g", 0),
    FIELD(dt_step_record, t_compute, F_REAL, "%.9g", 0),
    FIELD(dt_step_record, t_comm, F_REAL, "%.9g", 0),
    FIELD(dt_step_record, t_comm_exposed, F_REAL, "%.9g", 0),
    FIELD(dt_step_record, bytes_sent, F_LLONG, NULL, 0),
    FIELD(dt_step_record, t_pull, F_REAL, "%.9g", 0),
    FIELD(dt_step_record, t_push, F_REAL, "%.9g", 0),
    FIELD(dt_step_record, t_wait, F_REAL, "%.9g", 0),
    FIELD(dt_step_record, bytes_received, F_LLONG, NULL, 0),
};

static const field EPOCH_FIELDS[] = {
    FIELD(dt_epoch_record, epoch, F_INT, NULL, 1),
    FIELD(dt_epoch_record, train_loss, F_REAL, "%.9g", 0),
    FIELD(dt_epoch_record, train_acc, F_REAL, "%.9g", 0),
    FIELD(dt_epoch_record, test_loss, F_REAL, "%.9g", 0),
    FIELD(dt_epoch_record, test_acc, F_REAL, "%.9g", 0),
    FIELD(dt_epoch_record, t_epoch, F_REAL, "%.9g", 0),
    FIELD(dt_epoch_record, t_train, F_REAL, "%.9g", 0),
    FIELD(dt_epoch_record, t_data, F_REAL, "%.9g", 0),
    FIELD(dt_epoch_record, t_compute, F_REAL, "%.9g", 0),
    FIELD(dt_epoch_record, t_comm, F_REAL, "%.9g", 0),
    FIELD(dt_epoch_record, t_comm_exposed, F_REAL, "%.9g", 0),
    FIELD(dt_epoch_record, t_epoch_mean, F_REAL, "%.9g", 0),
    FIELD(dt_epoch_record, t_train_mean, F_REAL, "%.9g", 0),
    FIELD(dt_epoch_record, t_data_mean, F_REAL, "%.9g", 0),
    FIELD(dt_epoch_record, t_compute_mean, F_REAL, "%.9g", 0),
    FIELD(dt_epoch_record, t_comm_mean, F_REAL, "%.9g", 0),
    FIELD(dt_epoch_record, t_comm_exposed_mean, F_REAL, "%.9g", 0),
    FIELD(dt_epoch_record, t_eval, F_REAL, "%.9g", 0),
    FIELD(dt_epoch_record, bytes_sent, F_LLONG, NULL, 0),
    FIELD(dt_epoch_record, images, F_LLONG, NULL, 0),
    FIELD(dt_epoch_record, allreduce_auto, F_STRING, NULL, 0),
    FIELD(dt_epoch_record, bucket_auto, F_STRING, NULL, 0),
    FIELD(dt_epoch_record, straggler, F_INT, NULL, 0),
    FIELD(dt_epoch_record, straggler_host, F_STRING, NULL, 0),
    FIELD(dt_epoch_record, straggler_slower, F_REAL, "%.4g", 0),
    FIELD(dt_epoch_record, straggler_wait, F_REAL, "%.6g", 0),
};

static const field PS_SERVER_FIELDS[] = {
    FIELD(dt_ps_server_record, server, F_INT, NULL, 1),
    FIELD(dt_ps_server_record, updates, F_LONG, NULL, 0),
    FIELD(dt_ps_server_record, applied, F_LONG, NULL, 0),
    FIELD(dt_ps_server_record, dropped, F_LONG, NULL, 0),
    FIELD(dt_ps_server_record, busy_s, F_REAL, "%.6g", 0),
    FIELD(dt_ps_server_record, bytes_in, F_LLONG, NULL, 0),
    FIELD(dt_ps_server_record, bytes_out, F_LLONG, NULL, 0),
    FIELD(dt_ps_server_record, max_clock_gap, F_LONG, NULL, 0),
    FIELD(dt_ps_server_record, staleness_hist, F_HIST, NULL, 0),
};

static const field PS_EPOCH_FIELDS[] = {
    FIELD(dt_ps_epoch_record, server, F_INT, NULL, 1),
    FIELD(dt_ps_epoch_record, epoch, F_INT, NULL, 1),
    FIELD(dt_ps_epoch_record, dropped, F_LONG, NULL, 0),
    FIELD(dt_ps_epoch_record, staleness_hist, F_HIST, NULL, 0),
};

static const field RESUME_FIELDS[] = {
    FIELD(dt_resume_record, step, F_LONG, NULL, 1),
    FIELD(dt_resume_record, epoch, F_INT, NULL, 0),
    FIELD(dt_resume_record, procs, F_INT, NULL, 0),
    FIELD(dt_resume_record, lost_steps, F_LONG, NULL, 0),
};

static const field SYS_FIELDS[] = {
    FIELD(dt_sys_record, rank, F_INT, NULL, 1),
    FIELD(dt_sys_record, role, F_STRING, NULL, 0),
    FIELD(dt_sys_record, t, F_REAL, "%.4g", 1),
    FIELD(dt_sys_record, cpu_user, F_REAL, "%.4g", 0),
    FIELD(dt_sys_record, cpu_sys, F_REAL, "%.4g", 0),
    FIELD(dt_sys_record, machine_cpu, F_REAL, "%.4g", 0),
    FIELD(dt_sys_record, cores, F_INT, NULL, 0),
    FIELD(dt_sys_record, other_cores, F_REAL, "%.4g", 0),
    FIELD(dt_sys_record, rss_bytes, F_LLONG, NULL, 0),
    FIELD(dt_sys_record, net_rx, F_LLONG, NULL, 0),
    FIELD(dt_sys_record, net_tx, F_LLONG, NULL, 0),
    FIELD(dt_sys_record, mpi_sent, F_LLONG, NULL, 0),
    FIELD(dt_sys_record, disk_read, F_LLONG, NULL, 0),
    FIELD(dt_sys_record, disk_write, F_LLONG, NULL, 0),
};

static const field EVAL_FIELDS[] = {
    FIELD(dt_eval_record, epoch, F_INT, NULL, 0),
    FIELD(dt_eval_record, step, F_LONG, NULL, 1),
    FIELD(dt_eval_record, t, F_REAL, "%.6g", 1),
    FIELD(dt_eval_record, t_train, F_REAL, "%.6g", 0),
    FIELD(dt_eval_record, test_loss, F_REAL, "%.9g", 0),
    FIELD(dt_eval_record, test_acc, F_REAL, "%.9g", 1),
    FIELD(dt_eval_record, samples, F_LONG, NULL, 0),
};

static const field WORKER_FIELDS[] = {
    FIELD(dt_worker_record, rank, F_INT, NULL, 1),
    FIELD(dt_worker_record, steps, F_LONG, NULL, 0),
    FIELD(dt_worker_record, bytes_sent, F_LLONG, NULL, 0),
    FIELD(dt_worker_record, bytes_received, F_LLONG, NULL, 0),
    FIELD(dt_worker_record, t_comm, F_REAL, "%.9g", 0),
};

static const field LOAD_FIELDS[] = {
    FIELD(dt_load_record, wall_s, F_REAL, "%.4g", 0),
    FIELD(dt_load_record, machine_cores, F_REAL, "%.4g", 0),
    FIELD(dt_load_record, run_cores, F_REAL, "%.4g", 0),
    FIELD(dt_load_record, other_cores, F_REAL, "%.4g", 1),
    FIELD(dt_load_record, cores, F_INT, NULL, 0),
    FIELD(dt_load_record, idle_mean, F_REAL, "%.4g", 0),
    FIELD(dt_load_record, idle_min, F_REAL, "%.4g", 0),
    FIELD(dt_load_record, host_cpus, F_REAL, "%.4g", 0),
    FIELD(dt_load_record, throttled_max, F_REAL, "%.4g", 0),
    FIELD(dt_load_record, host_used_min, F_REAL, "%.4g", 0),
};

typedef struct event_format {
    const char *name;
    dt_runlog_event event;
    const field *fields;
    int n_fields;
    int flush; /* make the record visible at once (sweep progress, crash) */
} event_format;

#define EVENT(name, id, fields, flush)                                                             \
    { name, id, fields, sizeof fields / sizeof fields[0], flush }

static const event_format EVENTS[] = {
    EVENT("run", DT_EVENT_RUN, RUN_FIELDS, 0),
    EVENT("step", DT_EVENT_STEP, STEP_FIELDS, 0),
    EVENT("epoch", DT_EVENT_EPOCH, EPOCH_FIELDS, 1),
    EVENT("ps_server", DT_EVENT_PS_SERVER, PS_SERVER_FIELDS, 0),
    EVENT("ps_epoch", DT_EVENT_PS_EPOCH, PS_EPOCH_FIELDS, 0),
    EVENT("resume", DT_EVENT_RESUME, RESUME_FIELDS, 1),
    EVENT("sys", DT_EVENT_SYS, SYS_FIELDS, 0),
    EVENT("load", DT_EVENT_LOAD, LOAD_FIELDS, 1),
    EVENT("worker", DT_EVENT_WORKER, WORKER_FIELDS, 0),
    EVENT("eval", DT_EVENT_EVAL, EVAL_FIELDS, 1),
};
enum { N_EVENTS = sizeof EVENTS / sizeof EVENTS[0] };

static const event_format *event_format_of(dt_runlog_event id) {
    for (int i = 0; i < N_EVENTS; i++)
        if (EVENTS[i].event == id) return &EVENTS[i];
    return NULL;
}

/* ---- writing ---- */

/* One run per log: a lock on the log file itself, held through the descriptor the
 * run writes with (core/runlock), taken before the file is cut or written. */
static int lock_log(int fd, const char *path, dt_error *err) {
    char what[4200];
    snprintf(what, sizeof what, "--log %s", path);
    return dt_runlock_fd(fd, what, "one run per log", err);
}

int dt_runlog_open(dt_runlog *log, const char *path, dt_error *err) {
    log->file = NULL;
    log->write_failed = 0;
    log->flush_all = 0;
    log->hashed = 0;
    log->crc = 0; /* crc32 of nothing */
    if (!path || !*path) return 0;
    /* never through a symlink nor onto a device (dt_outfile_check said so at setup;
     * O_NOFOLLOW and the regular-file check close the window since) */
    /* read too: a checkpoint reads the log back for its crc32 (dt_runlog_prefix) */
    const int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && lock_log(fd, path, err)) {
        close(fd); /* another run writes it: left as it is */
        return -1;
    }
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || ftruncate(fd, 0) != 0 ||
        !(log->file = fdopen(fd, "w"))) {
        const int e = fd >= 0 && fstat(fd, &st) == 0 && !S_ISREG(st.st_mode) ? 0 : errno;
        if (fd >= 0) close(fd);
        if (!e) return dt_error_set(err, "cannot write run log %s: not a regular file", path);
        return dt_error_set(err, "cannot write run log %s: %s", path,
                            e == ELOOP ? "a symbolic link (not followed)" : strerror(e));
    }
    return 0;
}

/* Counts the step records in the rest of f (JSON read with cJSON, as the reader does;
 * a cut-short last line is not a record). */
static long count_steps(FILE *f) {
    /* a line no longer than the reader takes (textfile.h); a longer one is no record,
     * skipped without holding it (the tail past the checkpoint is not trusted) */
    enum { LINE = DT_TEXT_MAX_LINE + 2 };
    char *line = malloc(LINE);
    long n = 0;
    if (!line) return 0;
    while (fgets(line, LINE, f)) {
        const size_t len = strlen(line);
        if (len == LINE - 1 && line[len - 1] != '\n') {
            int c;
            while ((c = getc(f)) != EOF && c != '\n')
                ;
            continue;
        }
        cJSON *o = cJSON_Parse(line);
        const cJSON *ev = cJSON_GetObjectItemCaseSensitive(o, "event");
        n += cJSON_IsString(ev) && !strcmp(ev->valuestring, "step");
        cJSON_Delete(o);
    }
    free(line);
    return n;
}

/* Extends log->crc over the file's bytes [log->hashed, end): pread, so the stream's
 * position is untouched. */
static int crc_to(dt_runlog *log, int fd, long end) {
    unsigned char buf[1 << 16];
    while (log->hashed < end) {
        const long want =
            end - log->hashed < (long)sizeof buf ? end - log->hashed : (long)sizeof buf;
        const ssize_t got = pread(fd, buf, (size_t)want, (off_t)log->hashed);
        if (got <= 0) {
            if (got < 0 && errno == EINTR) continue;
            if (got == 0) errno = EIO; /* shorter than it was */
            return -1;
        }
        log->crc = crc32(log->crc, buf, (uInt)got);
        log->hashed += got;
    }
    return 0;
}

int dt_runlog_open_resume(dt_runlog *log, const char *path, long offset, unsigned long crc,
                          long *lost_steps, dt_error *err) {
    log->file = NULL;
    log->write_failed = 0;
    log->flush_all = 0;
    log->hashed = 0;
    log->crc = 0;
    *lost_steps = 0;
    if (!path || !*path) return 0;
    const int fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT)
        return dt_error_set(err,
                            "its run log %s is gone; give --log NEW to start a new log, or "
                            "restore it",
                            path);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        const int e = errno;
        if (fd >= 0) close(fd);
        return dt_error_set(err, "cannot continue its run log %s: %s", path,
                            e == ELOOP ? "a symbolic link (not followed)" : strerror(e));
    }
    FILE *f = S_ISREG(st.st_mode) ? fdopen(fd, "r+") : NULL;
    if (!f) {
        const int e = S_ISREG(st.st_mode) ? errno : 0;
        close(fd);
        return e ? dt_error_set(err, "cannot continue its run log %s: %s", path, strerror(e))
                 : dt_error_set(err, "its run log %s is not a regular file", path);
    }
    /* the same bytes as at the checkpoint, else it is not this run's log */
    int rc = lock_log(fd, path, err);
    if (rc)
        ; /* another run writes it */
    else if ((long)st.st_size < offset)
        rc = dt_error_set(err,
                          "its run log %s has %lld bytes, fewer than the %ld it had at the "
                          "checkpoint: another run's log? (give --log NEW to start a new log)",
                          path, (long long)st.st_size, offset);
    else if (crc_to(log, fd, offset) != 0)
        rc = dt_error_set(err, "cannot read its run log %s: %s", path, strerror(errno));
    else if (log->crc != crc)
        rc = dt_error_set(err,
                          "its run log %s differs from the checkpoint's in its first %ld bytes: "
                          "another run wrote it? (give --log NEW to start a new log)",
                          path, offset);
    else if (fseek(f, offset, SEEK_SET) != 0)
        rc = dt_error_set(err, "cannot continue its run log %s: %s", path, strerror(errno));
    if (rc) {
        fclose(f);
        return -1;
    }
    *lost_steps = count_steps(f);
    /* records after the checkpoint describe work the resumed run does again */
    if (fflush(f) != 0 || ftruncate(fileno(f), offset) != 0 || fseek(f, offset, SEEK_SET) != 0) {
        int e = errno;
        fclose(f);
        return dt_error_set(err, "cannot cut its run log %s back to %ld bytes: %s", path, offset,
                            strerror(e));
    }
    log->file = f;
    return 0;
}

long dt_runlog_offset(dt_runlog *log) {
    if (!log->file) return -1;
    if (fflush(log->file) != 0) {
        if (!log->write_failed) log->write_failed = errno ? errno : EIO;
        return -1;
    }
    return ftell(log->file);
}

int dt_runlog_prefix(dt_runlog *log, long *offset, unsigned long *crc) {
    *offset = dt_runlog_offset(log);
    if (*offset < 0) return -1;
    if (log->hashed > *offset) { /* cannot happen: the log only grows */
        log->hashed = 0;
        log->crc = 0;
    }
    if (crc_to(log, fileno(log->file), *offset) != 0) {
        if (!log->write_failed) log->write_failed = errno ? errno : EIO;
        return -1;
    }
    *crc = log->crc;
    return 0;
}

/* The length of the well-formed UTF-8 sequence at p (1 to 4 bytes; RFC 3629: no
 * overlong form, no surrogate, nothing past U+10FFFF), or 0 if p starts none. Reads
 * no byte past the first that does not fit, so never past the string's NUL. */
static int utf8_length(const unsigned char *p) {
    const unsigned char c = p[0];
    unsigned char lo = 0x80, hi = 0xBF;
    int n;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF)
        n = 2;
    else if (c >= 0xE0 && c <= 0xEF)
        n = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    else if (c >= 0xF0 && c <= 0xF4)
        n = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    else
        return 0;
    if (p[1] < lo || p[1] > hi) return 0;
    for (int i = 2; i < n; i++)
        if (p[i] < 0x80 || p[i] > 0xBF) return 0;
    return n;
}

/* JSON string, always valid UTF-8 JSON: quotes, backslashes and control characters
 * escaped; well-formed UTF-8 as it is; every other byte (a Latin-1 file name, say)
 * as \u00XX, the character of that byte in Latin-1, so Python's json and cJSON read
 * it (as that character, in UTF-8: up to two bytes for one; runlog.h's sizes allow
 * for it). */
int dt_json_write_string(FILE *f, const char *s) {
    int rc = putc('"', f) == EOF;
    for (const unsigned char *p = (const unsigned char *)s; *p && !rc; p++) {
        switch (*p) {
        case '"':
            rc = fputs("\\\"", f) < 0;
            break;
        case '\\':
            rc = fputs("\\\\", f) < 0;
            break;
        case '\n':
            rc = fputs("\\n", f) < 0;
            break;
        case '\r':
            rc = fputs("\\r", f) < 0;
            break;
        case '\t':
            rc = fputs("\\t", f) < 0;
            break;
        default: {
            const int n = *p < 0x20 ? 0 : utf8_length(p);
            if (n == 0) {
                rc = fprintf(f, "\\u%04x", *p) < 0;
            } else {
                rc = fwrite(p, 1, (size_t)n, f) != (size_t)n;
                p += n - 1;
            }
        }
        }
    }
    return rc || putc('"', f) == EOF ? -1 : 0;
}

static int write_value(FILE *f, const field *fd, const char *base) {
    const void *at = base + fd->offset;
    switch (fd->kind) {
    case F_INT:
        return fprintf(f, "%d", *(const int *)at) < 0 ? -1 : 0;
    case F_LONG:
        return fprintf(f, "%ld", *(const long *)at) < 0 ? -1 : 0;
    case F_LLONG:
        return fprintf(f, "%lld", *(const long long *)at) < 0 ? -1 : 0;
    case F_ULLONG:
        return fprintf(f, "%llu", *(const unsigned long long *)at) < 0 ? -1 : 0;
    case F_REAL: {
        double v = *(const double *)at;
        if (!isfinite(v)) return fputs("null", f) < 0 ? -1 : 0;
        return fprintf(f, fd->real_format, v) < 0 ? -1 : 0;
    }
    case F_STRING:
        return dt_json_write_string(f, (const char *)at);
    case F_BOOL:
        return fputs(*(const int *)at ? "true" : "false", f) < 0 ? -1 : 0;
    case F_HIST: {
        const long *h = at;
        int rc = putc('[', f) == EOF;
        for (int b = 0; b < DT_RUNLOG_STALENESS_BINS && !rc; b++)
            rc = fprintf(f, b ? ",%ld" : "%ld", h[b]) < 0;
        return rc || putc(']', f) == EOF ? -1 : 0;
    }
    }
    return -1;
}

static void write_record(dt_runlog *log, dt_runlog_event id, const void *record) {
    if (!log->file) return;
    const event_format *ev = event_format_of(id);
    FILE *f = log->file;
    int rc = fprintf(f, "{\"event\":\"%s\"", ev->name) < 0;
    for (int i = 0; i < ev->n_fields && !rc; i++)
        rc = fprintf(f, ",\"%s\":", ev->fields[i].name) < 0 ||
             write_value(f, &ev->fields[i], record) != 0;
    if (!rc) rc = fputs("}\n", f) < 0;
    if (!rc && (ev->flush || log->flush_all)) rc = fflush(f) != 0;
    if (rc && !log->write_failed) log->write_failed = errno ? errno : EIO;
}

void dt_runlog_run(dt_runlog *log, const dt_run_record *r) {
    write_record(log, DT_EVENT_RUN, r);
}

void dt_runlog_step(dt_runlog *log, const dt_step_record *r) {
    write_record(log, DT_EVENT_STEP, r);
}

void dt_runlog_epoch(dt_runlog *log, const dt_epoch_record *r) {
    write_record(log, DT_EVENT_EPOCH, r);
}

void dt_runlog_ps_server(dt_runlog *log, const dt_ps_server_record *r) {
    write_record(log, DT_EVENT_PS_SERVER, r);
}

void dt_runlog_ps_epoch(dt_runlog *log, const dt_ps_epoch_record *r) {
    write_record(log, DT_EVENT_PS_EPOCH, r);
}

void dt_runlog_resume(dt_runlog *log, const dt_resume_record *r) {
    write_record(log, DT_EVENT_RESUME, r);
}

void dt_runlog_sys(dt_runlog *log, const dt_sys_record *r) {
    write_record(log, DT_EVENT_SYS, r);
}

void dt_runlog_eval(dt_runlog *log, const dt_eval_record *r) {
    write_record(log, DT_EVENT_EVAL, r);
}

void dt_runlog_worker(dt_runlog *log, const dt_worker_record *r) {
    write_record(log, DT_EVENT_WORKER, r);
}

int dt_runlog_append_load(const char *path, const dt_load_record *r, dt_error *err) {
    /* the log exists (a finished run's): appended to, never created, never through a
     * symlink nor onto anything but a regular file */
    const int fd = open(path, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    dt_runlog log = {.file = NULL};
    const char *why = NULL;
    if (fd < 0 || fstat(fd, &st) != 0)
        why = errno == ELOOP ? "a symbolic link (not followed)" : strerror(errno);
    else if (!S_ISREG(st.st_mode))
        why = "not a regular file";
    else if (!(log.file = fdopen(fd, "a")))
        why = strerror(errno);
    if (why) {
        if (fd >= 0) close(fd);
        return dt_error_set(err, "cannot append to run log %s: %s", path, why);
    }
    write_record(&log, DT_EVENT_LOAD, r);
    return dt_runlog_close(&log, err);
}

int dt_runlog_close(dt_runlog *log, dt_error *err) {
    if (!log->file) return 0;
    int failed = log->write_failed;
    if (!failed && ferror(log->file)) failed = EIO;
    int rc = fclose(log->file);
    if (rc != 0 && !failed) failed = errno;
    log->file = NULL;
    log->write_failed = 0;
    if (failed) return dt_error_set(err, "cannot finish run log: %s", strerror(failed));
    return 0;
}

/* ---- reading ---- */

/* Sets an absent field to "unknown": -1, NAN, "", or zeros for a histogram. */
static void set_absent(const field *fd, char *base) {
    void *at = base + fd->offset;
    switch (fd->kind) {
    case F_INT:
    case F_BOOL:
        *(int *)at = -1;
        break;
    case F_LONG:
        *(long *)at = -1;
        break;
    case F_LLONG:
        *(long long *)at = -1;
        break;
    case F_ULLONG:
        *(unsigned long long *)at = 0;
        break;
    case F_REAL:
        *(double *)at = NAN;
        break;
    case F_STRING:
        *(char *)at = 0;
        break;
    case F_HIST:
        memset(at, 0, fd->size);
        break;
    }
}

/* An integer-valued JSON number within [lo, hi] (5.0 and 5e0 are integers). */
static int integer_of(const cJSON *item, double lo, double hi, double *out) {
    if (!cJSON_IsNumber(item)) return -1;
    double v = item->valuedouble;
    if (!isfinite(v) || v != floor(v) || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

static int read_value(const field *fd, const cJSON *item, char *base, dt_error *err) {
    void *at = base + fd->offset;
    double v = 0;
    switch (fd->kind) {
    case F_INT:
        if (integer_of(item, INT_MIN, INT_MAX, &v)) break;
        *(int *)at = (int)v;
        return 0;
    case F_LONG: /* 2^63 is not a long; the largest double below it is */
        if (integer_of(item, -0x1p63, 0x1.fffffffffffffp62, &v)) break;
        *(long *)at = (long)v;
        return 0;
    case F_LLONG:
        if (integer_of(item, -0x1p63, 0x1.fffffffffffffp62, &v)) break;
        *(long long *)at = (long long)v;
        return 0;
    case F_ULLONG:
        if (integer_of(item, 0, 0x1.fffffffffffffp63, &v)) break;
        *(unsigned long long *)at = (unsigned long long)v;
        return 0;
    case F_REAL:
        if (cJSON_IsNull(item)) { /* a non-finite number (see rewrite_non_finite) */
            *(double *)at = NAN;
            return 0;
        }
        if (!cJSON_IsNumber(item)) return dt_error_set(err, "\"%s\" is not a number", fd->name);
        *(double *)at = item->valuedouble;
        return 0;
    case F_STRING:
        if (!cJSON_IsString(item)) return dt_error_set(err, "\"%s\" is not a string", fd->name);
        if (strlen(item->valuestring) >= fd->size)
            return dt_error_set(err, "\"%s\" is longer than %zu characters", fd->name,
                                fd->size - 1);
        memcpy(at, item->valuestring, strlen(item->valuestring) + 1);
        return 0;
    case F_BOOL:
        if (!cJSON_IsBool(item)) return dt_error_set(err, "\"%s\" is not true or false", fd->name);
        *(int *)at = cJSON_IsTrue(item) ? 1 : 0;
        return 0;
    case F_HIST: {
        long *h = at;
        int n = cJSON_IsArray(item) ? cJSON_GetArraySize(item) : -1;
        if (n < 0 || n > DT_RUNLOG_STALENESS_BINS)
            return dt_error_set(err, "\"%s\" is not an array of at most %d counts", fd->name,
                                DT_RUNLOG_STALENESS_BINS);
        memset(h, 0, fd->size);
        for (int b = 0; b < n; b++) {
            if (integer_of(cJSON_GetArrayItem(item, b), 0, LONG_MAX / 2, &v))
                return dt_error_set(err, "\"%s\"[%d] is not a count", fd->name, b);
            h[b] = (long)v;
        }
        return 0;
    }
    }
    return dt_error_set(err, "\"%s\" is not an integer", fd->name);
}

/* Non-standard numbers some writers emit - printf's nan/inf (dtrain before it wrote
 * null for them), Python's NaN/Infinity - become null outside strings, so cJSON
 * parses the line and the reader sees a non-finite real. NULL if out of memory. */
static char *rewrite_non_finite(const char *line) {
    static const char *const TOKENS[] = {"-Infinity", "Infinity", "-NaN", "NaN",
                                         "-nan",      "nan",      "-inf", "inf"};
    size_t n = strlen(line);
    char *out = malloc(2 * n + 1); /* "null" replaces tokens of 3 letters or more */
    if (!out) return NULL;
    size_t o = 0;
    int in_string = 0;
    for (size_t i = 0; i < n;) {
        char c = line[i];
        if (in_string) {
            out[o++] = line[i++];
            if (c == '\\' && i < n)
                out[o++] = line[i++];
            else if (c == '"')
                in_string = 0;
            continue;
        }
        size_t matched = 0;
        for (size_t t = 0; t < sizeof TOKENS / sizeof TOKENS[0] && !matched; t++) {
            size_t len = strlen(TOKENS[t]);
            char next = line[i + len < n ? i + len : n];
            if (!strncmp(line + i, TOKENS[t], len) && !isalnum((unsigned char)next)) matched = len;
        }
        if (matched) {
            memcpy(out + o, "null", 4);
            o += 4;
            i += matched;
        } else {
            in_string = c == '"';
            out[o++] = line[i++];
        }
    }
    out[o] = 0;
    return out;
}

/* 0, -1 with err on a bad record, -2 with err if the line is not JSON at all. */
static int parse_line(const char *line, dt_runlog_entry *entry, dt_error *err) {
    cJSON *o = cJSON_ParseWithOpts(line, NULL, 1);
    if (!o) {
        char *fixed = rewrite_non_finite(line);
        if (!fixed) return dt_error_set(err, "out of memory");
        o = cJSON_ParseWithOpts(fixed, NULL, 1);
        free(fixed);
        if (!o) {
            dt_error_set(err, "not valid JSON");
            return -2;
        }
    }
    int rc = 0;
    const cJSON *ev = cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, "event") : NULL;
    if (!cJSON_IsObject(o))
        rc = dt_error_set(err, "not a JSON object");
    else if (!cJSON_IsString(ev))
        rc = dt_error_set(err, "no \"event\" name");
    memset(entry, 0, sizeof *entry);
    entry->event = DT_EVENT_OTHER;
    const event_format *format = NULL;
    for (int i = 0; rc == 0 && i < N_EVENTS && !format; i++)
        if (!strcmp(ev->valuestring, EVENTS[i].name)) format = &EVENTS[i];
    if (format) {
        entry->event = format->event;
        char *base = (char *)&entry->run; /* every member of the union starts here */
        for (int i = 0; i < format->n_fields && rc == 0; i++) {
            const field *fd = &format->fields[i];
            const cJSON *item = cJSON_GetObjectItemCaseSensitive(o, fd->name);
            if (item)
                rc = read_value(fd, item, base, err);
            else if (fd->required)
                rc = dt_error_set(err, "a \"%s\" record without \"%s\"", format->name, fd->name);
            else
                set_absent(fd, base);
        }
    }
    cJSON_Delete(o);
    return rc;
}

int dt_runlog_parse_line(const char *line, dt_runlog_entry *entry, dt_error *err) {
    return parse_line(line, entry, err) ? -1 : 0;
}

/* Appends one record to a growing array. */
static int append(void **items, long *n, long *cap, size_t size, const void *item) {
    if (*n == *cap) {
        long grown = *cap ? *cap * 2 : 256;
        void *p = realloc(*items, (size_t)grown * size);
        if (!p) return -1;
        *items = p;
        *cap = grown;
    }
    memcpy((char *)*items + (size_t)*n * size, item, size);
    (*n)++;
    return 0;
}

static int blank(const char *s) {
    for (; *s; s++)
        if (*s != ' ' && *s != '\t' && *s != '\n' && *s != '\r') return 0;
    return 1;
}

/* A run log's size bound (a regular file only, lines of at most DT_TEXT_MAX_LINE
 * bytes: textfile.h): 1 GiB holds millions of step records, and a wrong path
 * (/dev/zero, a FIFO, a huge file without newlines) is refused, not read into memory. */
#define RUNLOG_MAX_BYTES ((size_t)1 << 30)

int dt_runlog_load(const char *path, dt_runlog_contents *c, dt_error *err) {
    memset(c, 0, sizeof *c);
    dt_text_lines in;
    if (dt_text_lines_open(&in, path, "run log", RUNLOG_MAX_BYTES, err)) return -1;
    long cap_steps = 0, cap_epochs = 0, cap_servers = 0, cap_ps_epochs = 0, cap_sys = 0,
         cap_workers = 0, cap_evals = 0;
    int rc = 0, got;
    dt_runlog_entry e;
    dt_error why;
    while (rc == 0 && (got = dt_text_lines_next(&in, err)) != 0) {
        if (got < 0) {
            rc = -1;
            break;
        }
        const char *line = in.line;
        if (blank(line)) continue;
        int status = parse_line(line, &e, &why);
        if (status == -2 && line[in.len - 1] != '\n') { /* the last line, cut short */
            c->truncated_lines++;
            continue;
        }
        if (status) {
            rc = dt_error_set(err, "%s:%ld: %s", path, in.lineno, why.msg);
            break;
        }
        int grown = 0;
        switch (e.event) {
        case DT_EVENT_RUN:
            c->has_run = 1;
            c->run = e.run;
            break;
        case DT_EVENT_STEP:
            grown = append((void **)&c->steps, &c->n_steps, &cap_steps, sizeof e.step, &e.step);
            break;
        case DT_EVENT_EPOCH:
            grown =
                append((void **)&c->epochs, &c->n_epochs, &cap_epochs, sizeof e.epoch, &e.epoch);
            break;
        case DT_EVENT_PS_SERVER:
            grown = append((void **)&c->ps_servers, &c->n_ps_servers, &cap_servers,
                           sizeof e.ps_server, &e.ps_server);
            break;
        case DT_EVENT_PS_EPOCH:
            grown = append((void **)&c->ps_epochs, &c->n_ps_epochs, &cap_ps_epochs,
                           sizeof e.ps_epoch, &e.ps_epoch);
            break;
        case DT_EVENT_SYS:
            grown = append((void **)&c->sys, &c->n_sys, &cap_sys, sizeof e.sys, &e.sys);
            break;
        case DT_EVENT_EVAL:
            grown = append((void **)&c->evals, &c->n_evals, &cap_evals, sizeof e.eval, &e.eval);
            break;
        case DT_EVENT_WORKER:
            grown = append((void **)&c->workers, &c->n_workers, &cap_workers, sizeof e.worker,
                           &e.worker);
            break;
        case DT_EVENT_LOAD:
            c->has_load = 1;
            c->load = e.load;
            break;
        case DT_EVENT_RESUME: /* where a run continued: not needed by the readers */
            break;
        case DT_EVENT_OTHER:
            c->unknown_events++;
            break;
        }
        if (grown) rc = dt_error_set(err, "out of memory reading %s", path);
    }
    dt_text_lines_close(&in);
    if (rc) dt_runlog_contents_free(c);
    return rc;
}

void dt_runlog_contents_free(dt_runlog_contents *c) {
    free(c->steps);
    free(c->epochs);
    free(c->ps_servers);
    free(c->ps_epochs);
    free(c->sys);
    free(c->workers);
    free(c->evals);
    c->evals = NULL;
    c->sys = NULL;
    c->workers = NULL;
    c->steps = NULL;
    c->epochs = NULL;
    c->ps_servers = NULL;
    c->ps_epochs = NULL;
    c->n_steps = c->n_epochs = c->n_ps_servers = c->n_ps_epochs = c->n_sys = c->n_workers =
        c->n_evals = 0;
}
