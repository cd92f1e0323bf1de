#define _GNU_SOURCE
#include "dtrain/sysmon.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dtrain/timer.h"

int dt_sysmon_machine_ticks(unsigned long long *busy, unsigned long long *total) {
    FILE *f = fopen("/proc/stat", "r");
    if (!f) return -1;
    unsigned long long v[10] = {0};
    int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
                   &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9]);
    fclose(f);
    if (n < 4) return -1;
    /* user nice system idle iowait irq softirq steal (guest is inside user) */
    unsigned long long all = 0;
    for (int i = 0; i < 8 && i < n; i++) all += v[i];
    *total = all;
    *busy = all - v[3] - (n > 4 ? v[4] : 0);
    return 0;
}

/* utime and stime of this process, in ticks (fields 14 and 15 of /proc/self/stat,
 * counted after the command name, which may hold spaces). */
static int process_ticks(unsigned long long *user, unsigned long long *sys) {
    char buf[1024];
    FILE *f = fopen("/proc/self/stat", "r");
    if (!f) return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *p = strrchr(buf, ')');
    if (!p) return -1;
    /* after ") ": state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
     * utime stime */
    return sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", user, sys) == 2
               ? 0
               : -1;
}

static long long rss_bytes(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return -1;
    long pages = 0, resident = 0;
    int ok = fscanf(f, "%ld %ld", &pages, &resident) == 2;
    fclose(f);
    return ok ? (long long)resident * sysconf(_SC_PAGESIZE) : -1;
}

/* Bytes received and sent by every interface but loopback (shared memory between ranks
 * on one host moves none; a second host's traffic shows here). */
static int net_bytes(long long *rx, long long *tx) {
    FILE *f = fopen("/proc/net/dev", "r");
    if (!f) return -1;
    char line[512];
    *rx = *tx = 0;
    while (fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (!colon) continue; /* the two header lines */
        *colon = 0;
        const char *name = line;
        while (*name == ' ') name++;
        if (!strcmp(name, "lo")) continue;
        long long r, t;
        /* rx: bytes packets errs drop fifo frame compressed multicast; tx: bytes ... */
        if (sscanf(colon + 1, "%lld %*d %*d %*d %*d %*d %*d %*d %lld", &r, &t) == 2) {
            *rx += r;
            *tx += t;
        }
    }
    fclose(f);
    return 0;
}

/* read_bytes and write_bytes of /proc/self/io (what reached the block layer); absent
 * on kernels without task I/O accounting. */
static int disk_bytes(long long *rd, long long *wr) {
    FILE *f = fopen("/proc/self/io", "r");
    if (!f) return -1;
    char key[64];
    long long v;
    int got = 0;
    while (fscanf(f, "%63[^:]: %lld\n", key, &v) == 2) {
        if (!strcmp(key, "read_bytes")) *rd = v, got |= 1;
        if (!strcmp(key, "write_bytes")) *wr = v, got |= 2;
    }
    fclose(f);
    return got == 3 ? 0 : -1;
}

/* One sample against the previous one; the caller holds no lock. */
static dt_sys_record sample(dt_sysmon *m) {
    const double now = dt_now();
    dt_sys_record r = {.rank = m->rank, .t = now - m->started, .cores = (int)m->cores};
    unsigned long long user = 0, sys = 0, busy = 0, total = 0;
    const int have_proc = process_ticks(&user, &sys) == 0;
    const int have_machine = dt_sysmon_machine_ticks(&busy, &total) == 0;
    const double dt = now - m->prev_t;
    const double pu = (double)user / m->ticks_per_s, ps = (double)sys / m->ticks_per_s;
    r.cpu_user = have_proc && dt > 0 ? 100.0 * (pu - m->prev_proc_user) / dt : -1;
    r.cpu_sys = have_proc && dt > 0 ? 100.0 * (ps - m->prev_proc_sys) / dt : -1;
    if (have_machine && total > m->prev_total) {
        const double share = (double)(busy - m->prev_busy) / (double)(total - m->prev_total);
        r.machine_cpu = 100.0 * share;
        /* the machine's busy cores less this process's: everything else, the other
         * ranks of the job included */
        const double other = share * m->cores - (r.cpu_user + r.cpu_sys) / 100.0;
        r.other_cores = other > 0 ? other : 0;
    } else {
        r.machine_cpu = r.other_cores = -1;
    }
    r.rss_bytes = rss_bytes();
    long long rx, tx, rd, wr;
    if (net_bytes(&rx, &tx) == 0) {
        r.net_rx = rx - m->net_rx0;
        r.net_tx = tx - m->net_tx0;
    } else {
        r.net_rx = r.net_tx = -1;
    }
    if (disk_bytes(&rd, &wr) == 0) {
        r.disk_read = rd - m->disk_read0;
        r.disk_write = wr - m->disk_write0;
    } else {
        r.disk_read = r.disk_write = -1;
    }
    r.mpi_sent = atomic_load(&m->mpi_bytes);
    m->prev_t = now;
    m->prev_proc_user = pu;
    m->prev_proc_sys = ps;
    m->prev_busy = busy;
    m->prev_total = total;
    return r;
}

static void keep(dt_sysmon *m, const dt_sys_record *r) {
    pthread_mutex_lock(&m->lock);
    if (m->n_records == m->cap_records) {
        long cap = m->cap_records ? 2 * m->cap_records : 64;
        dt_sys_record *p = realloc(m->records, sizeof *p * (size_t)cap);
        if (!p) { /* a sample lost, never the run: the log shows the gap */
            pthread_mutex_unlock(&m->lock);
            return;
        }
        m->records = p;
        m->cap_records = cap;
    }
    m->records[m->n_records++] = *r;
    pthread_mutex_unlock(&m->lock);
}

static void *sampler(void *arg) {
    dt_sysmon *m = arg;
    pthread_mutex_lock(&m->lock);
    double next = dt_now() + m->interval_s;
    while (!m->stop) {
        /* dt_now is CLOCK_MONOTONIC; the condition waits on the realtime clock, so
         * wait for the remaining interval from now on it */
        double left = next - dt_now();
        if (left > 0) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            double at = (double)ts.tv_sec + ts.tv_nsec * 1e-9 + left;
            ts.tv_sec = (time_t)at;
            ts.tv_nsec = (long)((at - (double)ts.tv_sec) * 1e9);
            pthread_cond_timedwait(&m->wake, &m->lock, &ts);
            continue;
        }
        pthread_mutex_unlock(&m->lock);
        dt_sys_record r = sample(m);
        keep(m, &r);
        next += m->interval_s;
        /* woken late (a busy machine): skip the missed slots rather than sample again
         * at once, which would make CPU figures of a few clock ticks over no time */
        if (next < dt_now()) next = dt_now() + m->interval_s;
        pthread_mutex_lock(&m->lock);
    }
    pthread_mutex_unlock(&m->lock);
    return NULL;
}

int dt_sysmon_start(dt_sysmon *m, int rank, double interval_s, dt_error *err) {
    memset(m, 0, sizeof *m);
    m->rank = rank;
    m->interval_s = interval_s;
    m->ticks_per_s = sysconf(_SC_CLK_TCK);
    m->cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (m->ticks_per_s <= 0) m->ticks_per_s = 100;
    if (m->cores <= 0) m->cores = 1;
    atomic_init(&m->mpi_bytes, 0);
    m->started = m->prev_t = dt_now();
    unsigned long long user = 0, sys = 0;
    if (process_ticks(&user, &sys) == 0) {
        m->prev_proc_user = (double)user / m->ticks_per_s;
        m->prev_proc_sys = (double)sys / m->ticks_per_s;
    }
    if (dt_sysmon_machine_ticks(&m->prev_busy, &m->prev_total)) m->prev_busy = m->prev_total = 0;
    if (net_bytes(&m->net_rx0, &m->net_tx0)) m->net_rx0 = m->net_tx0 = 0;
    if (disk_bytes(&m->disk_read0, &m->disk_write0)) m->disk_read0 = m->disk_write0 = 0;
    if (pthread_mutex_init(&m->lock, NULL))
        return dt_error_set(err, "cannot start the resource sampler (mutex)");
    if (pthread_cond_init(&m->wake, NULL)) {
        pthread_mutex_destroy(&m->lock);
        return dt_error_set(err, "cannot start the resource sampler (condition)");
    }
    int rc = pthread_create(&m->thread, NULL, sampler, m);
    if (rc) {
        pthread_cond_destroy(&m->wake);
        pthread_mutex_destroy(&m->lock);
        return dt_error_set(err, "cannot start the resource sampler thread: %s", strerror(rc));
    }
    m->running = 1;
    return 0;
}

void dt_sysmon_add_mpi_bytes(dt_sysmon *m, long long bytes) {
    if (m->running) atomic_fetch_add(&m->mpi_bytes, bytes);
}

int dt_sysmon_take(dt_sysmon *m, dt_sys_record **out, long *n) {
    *out = NULL;
    *n = 0;
    if (!m->running) return 0;
    pthread_mutex_lock(&m->lock);
    int rc = 0;
    if (m->n_records > 0) {
        *out = malloc(sizeof **out * (size_t)m->n_records);
        if (!*out)
            rc = -1;
        else {
            memcpy(*out, m->records, sizeof **out * (size_t)m->n_records);
            *n = m->n_records;
            m->n_records = 0;
        }
    }
    pthread_mutex_unlock(&m->lock);
    return rc;
}

void dt_sysmon_stop(dt_sysmon *m) {
    if (!m->running) return;
    pthread_mutex_lock(&m->lock);
    m->stop = 1;
    pthread_cond_signal(&m->wake);
    pthread_mutex_unlock(&m->lock);
    pthread_join(m->thread, NULL);
    pthread_cond_destroy(&m->wake);
    pthread_mutex_destroy(&m->lock);
    free(m->records);
    m->records = NULL;
    m->n_records = m->cap_records = 0;
    m->running = 0;
}
