#define _GNU_SOURCE
#include "metrics/sysmon.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "core/timer.h"

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

static double seconds_of(struct timeval tv) {
    return (double)tv.tv_sec + 1e-6 * (double)tv.tv_usec;
}

/* The process's and the machine's CPU counters, back to back. A thread preempted
 * between them (a busy machine) would pair counters of different moments, so a reading
 * that took longer than READ_SLACK_S is taken again, a few times at most. */
enum { READ_ATTEMPTS = 3 };
#define READ_SLACK_S 2e-3
static void read_cpu(dt_sys_reading *x) {
    for (int attempt = 0; attempt < READ_ATTEMPTS; attempt++) {
        const double t0 = dt_now();
        struct rusage ru;
        /* all threads of the process, to the microsecond (/proc/self/stat rounds the
         * same figures down to 10 ms ticks: a tick over a short interval read as
         * several cores) */
        x->have_proc = getrusage(RUSAGE_SELF, &ru) == 0;
        x->proc_user = x->have_proc ? seconds_of(ru.ru_utime) : 0;
        x->proc_sys = x->have_proc ? seconds_of(ru.ru_stime) : 0;
        x->have_machine = dt_sysmon_machine_ticks(&x->busy, &x->total) == 0;
        if (!x->have_machine) x->busy = x->total = 0;
        const double t1 = dt_now();
        x->t = 0.5 * (t0 + t1);
        if (t1 - t0 < READ_SLACK_S) return;
    }
}

int dt_sysmon_cpu_between(const dt_sys_reading *a, const dt_sys_reading *b, long cores,
                          long ticks_per_s, dt_sys_record *r) {
    const double dt = b->t - a->t;
    if (ticks_per_s <= 0 || cores <= 0 || !(dt >= 2.0 / (double)ticks_per_s)) return 1;
    r->cpu_user = r->cpu_sys = r->machine_cpu = r->other_cores = -1;
    if (a->have_proc && b->have_proc) {
        /* both only grow; a step back would be a broken clock, not negative CPU */
        const double u = b->proc_user - a->proc_user, s = b->proc_sys - a->proc_sys;
        r->cpu_user = 100.0 * (u > 0 ? u : 0) / dt;
        r->cpu_sys = 100.0 * (s > 0 ? s : 0) / dt;
    }
    if (a->have_machine && b->have_machine && b->total > a->total) {
        /* iowait may step back (proc(5)), so busy can outrun total by a little */
        const double busy = b->busy > a->busy ? (double)(b->busy - a->busy) : 0;
        const double total = (double)(b->total - a->total);
        const double share = busy < total ? busy / total : 1;
        r->machine_cpu = 100.0 * share;
        if (r->cpu_user >= 0) {
            /* the machine's busy cores less this process's: everything else, the other
             * ranks of the job included */
            const double other = share * (double)cores - (r->cpu_user + r->cpu_sys) / 100.0;
            r->other_cores = other > 0 ? other : 0;
        }
    }
    return 0;
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

/* One sample against the previous one into *r; the caller holds no lock. 0 when the
 * interval was too short to measure: no record, and the next one covers it too. */
static int sample(dt_sysmon *m, dt_sys_record *r) {
    dt_sys_reading now;
    read_cpu(&now);
    *r = (dt_sys_record){.rank = m->rank, .t = now.t - m->started, .cores = (int)m->cores};
    if (dt_sysmon_cpu_between(&m->prev, &now, m->cores, m->ticks_per_s, r)) return 0;
    m->prev = now;
    r->rss_bytes = rss_bytes();
    long long rx, tx, rd, wr;
    if (net_bytes(&rx, &tx) == 0) {
        r->net_rx = rx - m->net_rx0;
        r->net_tx = tx - m->net_tx0;
    } else {
        r->net_rx = r->net_tx = -1;
    }
    if (disk_bytes(&rd, &wr) == 0) {
        r->disk_read = rd - m->disk_read0;
        r->disk_write = wr - m->disk_write0;
    } else {
        r->disk_read = r->disk_write = -1;
    }
    r->mpi_sent = atomic_load(&m->mpi_bytes);
    return 1;
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
    /* Each sample is due a full interval after the last one was taken, not on a fixed
     * grid: on a grid, a thread woken most of an interval late sampled again moments
     * later, and a 10 ms tick of CPU over 1.7 ms read as 574% on a 2-core machine. */
    double due = m->prev.t + m->interval_s;
    while (!m->stop) {
        const double left = due - dt_now();
        if (left > 0) {
            struct timespec ts; /* the condition waits on CLOCK_MONOTONIC, as dt_now */
            clock_gettime(CLOCK_MONOTONIC, &ts);
            const double at = (double)ts.tv_sec + ts.tv_nsec * 1e-9 + left;
            ts.tv_sec = (time_t)at;
            ts.tv_nsec = (long)((at - (double)ts.tv_sec) * 1e9);
            if (ts.tv_nsec >= 1000000000L) ts.tv_nsec = 999999999L;
            pthread_cond_timedwait(&m->wake, &m->lock, &ts);
            continue;
        }
        pthread_mutex_unlock(&m->lock);
        dt_sys_record r;
        if (sample(m, &r)) keep(m, &r);
        due = dt_now() + m->interval_s;
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
    read_cpu(&m->prev);
    m->started = m->prev.t;
    if (net_bytes(&m->net_rx0, &m->net_tx0)) m->net_rx0 = m->net_tx0 = 0;
    if (disk_bytes(&m->disk_read0, &m->disk_write0)) m->disk_read0 = m->disk_write0 = 0;
    if (pthread_mutex_init(&m->lock, NULL))
        return dt_error_set(err, "cannot start the resource sampler (mutex)");
    pthread_condattr_t attr;
    int bad = pthread_condattr_init(&attr);
    if (!bad) {
        bad =
            pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) || pthread_cond_init(&m->wake, &attr);
        pthread_condattr_destroy(&attr);
    }
    if (bad) {
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
