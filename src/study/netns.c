#define _GNU_SOURCE
#include "study/netns.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/cgroup.h"
#include "core/proc.h"
#include "study/hostcpu.h"

#define NETNS_DIR "/run/netns" /* where `ip netns add` mounts its namespaces */
#define NETNS_NET "10.213.0"   /* exists only inside the namespaces made here */

/* A number with a unit from units (names and factors, longest names first so that
 * "mbit" is not read as "bit"); strict: nothing else may follow. */
static int number_with_unit(const char *text, const char *const *names, const double *factors,
                            double *out) {
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || errno || !isfinite(v) || v <= 0) return -1;
    for (int u = 0; names[u]; u++)
        if (!strcmp(end, names[u])) {
            *out = v * factors[u];
            return 0;
        }
    return -1;
}

int dt_link_parse(const char *text, dt_link *link, dt_error *err) {
    static const char *const rates[] = {"gbit", "mbit", "kbit", "bit", NULL};
    static const double rate_f[] = {1e9, 1e6, 1e3, 1};
    static const char *const delays[] = {"ms", "us", "s", NULL};
    static const double delay_f[] = {1e-3, 1e-6, 1};
    char rate[64] = "";
    const char *comma = strchr(text, ',');
    size_t len = comma ? (size_t)(comma - text) : strlen(text);
    if (len == 0 || len >= sizeof rate)
        return dt_error_set(err, "--link expects RATE[,DELAY] like 1gbit or 1gbit,100us, got '%s'",
                            text);
    memcpy(rate, text, len);
    rate[len] = 0;
    link->delay_s = 0;
    if (number_with_unit(rate, rates, rate_f, &link->rate_bps) || link->rate_bps < 8000 ||
        link->rate_bps > 1e12)
        return dt_error_set(err,
                            "--link: '%s' is not a rate from 8kbit to 1000gbit (a number with "
                            "bit, kbit, mbit or gbit)",
                            rate);
    if (comma &&
        (number_with_unit(comma + 1, delays, delay_f, &link->delay_s) || link->delay_s > 10))
        return dt_error_set(
            err, "--link: '%s' is not a delay up to 10 s (a number with us, ms or s)", comma + 1);
    return 0;
}

void dt_netns_name(const dt_netns *n, int i, char *out, size_t size) {
    if (i == 0)
        snprintf(out, size, "%s-br", n->prefix);
    else
        snprintf(out, size, "%s-h%d", n->prefix, i);
}

/* The inode of namespace file path (a /run/netns mount or /proc/PID/ns/net): 0 when
 * it cannot be read. */
static unsigned long long ns_inode(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (unsigned long long)st.st_ino : 0;
}

/* Appends text to out[size] at *used, cut at the end. */
static void append(char *out, size_t size, size_t *used, const char *text) {
    if (*used + 1 >= size) return;
    const int k = snprintf(out + *used, size - *used, "%s", text);
    *used += k > 0 ? (size_t)k : 0;
    if (*used >= size) *used = size - 1;
}

/* The rsh agents of n (`dtrain netns-rsh PREFIX [options] HOST CMD`) that have not yet run
 * their command in their host (an agent that has, is sh or the daemon now), with the
 * kernel's state and where each waits (/proc/PID/wchan): when a launch hangs with a
 * host left empty, whether its agent never started or stopped on its way in. */
static void agents_waiting(const dt_netns *n, char *out, size_t size, size_t *used) {
    DIR *d = opendir("/proc");
    int found = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
        char args[1024];
        const size_t len = dt_proc_file(e->d_name, "cmdline", args, sizeof args);
        if (!len) continue;
        /* ... "netns-rsh" NUL prefix NUL options.. NUL host NUL command (NUL-separated) */
        const char *word = args;
        while (word < args + len && strcmp(word, "netns-rsh")) word += strlen(word) + 1;
        if (word >= args + len) continue;
        word += strlen(word) + 1;
        if (word >= args + len || strcmp(word, n->prefix)) continue;
        word += strlen(word) + 1;
        while (word < args + len && word[0] == '-') word += strlen(word) + 1;
        const char *host = word < args + len ? strrchr(word, '.') : NULL;
        char state, wchan[64];
        long pgrp;
        if (!dt_proc_stat(e->d_name, &state, &pgrp)) state = '?';
        if (!dt_proc_file(e->d_name, "wchan", wchan, sizeof wchan))
            snprintf(wchan, sizeof wchan, "-");
        char item[512];
        snprintf(item, sizeof item, "%s h%.8s: agent %s, state %c, waiting in %s",
                 found ? "," : "; rsh agents not yet in their host:", host ? host + 1 : "?",
                 e->d_name, state, wchan);
        append(out, size, used, item);
        found++;
    }
    if (d) closedir(d);
}

void dt_netns_processes(const dt_netns *n, char *out, size_t size) {
    size_t used = 0;
    out[0] = 0;
    for (int i = 1; i <= n->hosts; i++) {
        char name[64], path[300], item[320];
        dt_netns_name(n, i, name, sizeof name);
        snprintf(path, sizeof path, NETNS_DIR "/%s", name);
        const unsigned long long ino = ns_inode(path);
        snprintf(item, sizeof item, "%sh%d:", i > 1 ? "; " : "", i);
        append(out, size, &used, item);
        int found = 0;
        DIR *d = ino ? opendir("/proc") : NULL;
        for (struct dirent *e; d && (e = readdir(d));) {
            if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
            snprintf(path, sizeof path, "/proc/%s/ns/net", e->d_name);
            if (ns_inode(path) != ino) continue;
            char comm[32];
            if (!dt_proc_file(e->d_name, "comm", comm, sizeof comm))
                snprintf(comm, sizeof comm, "?");
            comm[strcspn(comm, "\n")] = 0;
            snprintf(item, sizeof item, "%s %s %s", found ? "," : "", comm, e->d_name);
            append(out, size, &used, item);
            found++;
        }
        if (d) closedir(d);
        append(out, size, &used, !ino ? " (namespace gone)" : found ? "" : " nothing");
    }
    agents_waiting(n, out, size, &used);
}

void dt_netns_mpirun_words(const dt_netns *n, const char *self, dt_netns_mpirun *w) {
    dt_netns_name(n, 1, w->h1, sizeof w->h1);
    snprintf(w->agent, sizeof w->agent, "%s netns-rsh %s", self, n->prefix);
    /* host 1's mpirun enters the host's CPU share (if any) and its namespace, without a
     * shell: dt_netns_exec */
    const char *launch[] = {self, "netns-exec", n->prefix, "1", NULL};
    /* mpirun inside host 1; the options of shared/notes/mpi-here.md: no tree spawn (every
     * daemon from host 1), TCP only on the hosts' subnet, yielding ranks (spinning ones
     * starve the veth receive path) and two TCP links (one reached half the rate). TCP
     * also between ranks of one host: shared memory (vader) crashed there, its segments
     * named by a hostname all the emulated hosts share. No binding: each host's daemon
     * would bind its first rank to core 0, the same core for every emulated host (the
     * 2-host runs computed at half speed, both ranks on core 0). */
    const char *mpi[] = {"--bind-to",  "none",  "--host",
                         n->host_list, "--mca", "plm_rsh_agent",
                         w->agent,     "--mca", "plm_rsh_no_tree_spawn",
                         "1",          "--mca", "oob_tcp_if_include",
                         n->subnet,    "--mca", "btl",
                         "self,tcp",   "--mca", "btl_tcp_if_include",
                         n->subnet,    "--mca", "mpi_yield_when_idle",
                         "1",          "--mca", "btl_tcp_links",
                         "2",          NULL};
    _Static_assert(sizeof launch <= sizeof w->pre && sizeof mpi <= sizeof w->extra,
                   "the netns launch words outgrew their arrays");
    memcpy(w->pre, launch, sizeof launch);
    memcpy(w->extra, mpi, sizeof mpi);
}

void dt_netns_addr(int i, char *out, size_t size) {
    snprintf(out, size, NETNS_NET ".%d", i);
}

/* Runs argv (no shell), its stdout and stderr captured into out (NUL-terminated,
 * cut to size); returns its exit status, or -1 when it could not start (out says
 * why) or was killed. */
static int run_tool(const char *const *argv, char *out, size_t size) {
    int fds[2];
    out[0] = 0;
    if (pipe2(fds, O_CLOEXEC) != 0) {
        snprintf(out, size, "cannot make a pipe: %s", strerror(errno));
        return -1;
    }
    /* stdin from /dev/null, stdout and stderr into the pipe; in this process's group */
    const dt_proc_opts io = {.stdin_path = "/dev/null", .stdout_fd = fds[1], .stderr_fd = fds[1]};
    dt_proc proc;
    dt_error why;
    const int rc = dt_proc_spawn(&proc, argv, &io, &why);
    close(fds[1]);
    if (rc) {
        close(fds[0]);
        snprintf(out, size, "%s", why.msg);
        return -1;
    }
    size_t used = 0;
    char drain[512];
    for (;;) { /* read all of it, keep what fits: the tool must not block on a full pipe */
        char *dst = used + 1 < size ? out + used : drain;
        size_t room = used + 1 < size ? size - 1 - used : sizeof drain;
        ssize_t got = read(fds[0], dst, room);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) break;
        if (dst == out + used) used += (size_t)got;
    }
    out[used] = 0;
    close(fds[0]);
    int status;
    if (dt_proc_wait(&proc, 1, &status, NULL) != 1) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Runs one setup step; on failure err names the command and the tool's first line. */
static int step(const char *const *argv, const char *hint, dt_error *err) {
    char out[1024];
    if (run_tool(argv, out, sizeof out) == 0) return 0;
    char cmd[512];
    size_t used = 0;
    for (int i = 0; argv[i] && used < sizeof cmd; i++)
        used += (size_t)snprintf(cmd + used, sizeof cmd - used, "%s%s", i ? " " : "", argv[i]);
    out[strcspn(out, "\n")] = 0;
    return dt_error_set(err, "'%s' failed: %s%s", cmd, out[0] ? out : "no message", hint);
}

/* Kills every process inside namespace name (a killed sweep's mpirun and ranks). */
static void kill_inside(const char *name) {
    const char *argv[] = {"ip", "netns", "pids", name, NULL};
    char out[4096];
    if (run_tool(argv, out, sizeof out) != 0) return;
    for (char *p = out; *p;) {
        char *end;
        long pid = strtol(p, &end, 10);
        if (end == p) break;
        if (pid > 1 && pid != (long)getpid()) kill((pid_t)pid, SIGKILL);
        p = end;
    }
}

static void remove_namespace(const char *name) {
    kill_inside(name);
    const char *argv[] = {"ip", "netns", "del", name, NULL};
    char out[512];
    run_tool(argv, out, sizeof out); /* best effort: teardown goes on with the others */
}

void dt_netns_down(dt_netns *n) {
    /* hosts first, bridge last: a host's veth goes with its namespace */
    for (int i = n->made - 1; i >= 0; i--) {
        char name[64];
        dt_netns_name(n, i, name, sizeof name);
        remove_namespace(name);
    }
    n->made = 0;
}

/* At least 256 KiB (the measured recipe of mpi-here.md), 2 ms of traffic above that: tbf
 * needs a burst of at least one timer tick's worth of bytes. Smaller buckets fell short
 * of the rate (2 hosts, ring of 2.8 MB back to back: 1 Gbit/s with 32 and 64 KiB took
 * 25-38 ms against 23.4 with 256 KiB; 10 Gbit/s with 128 KiB 3.2-3.8 ms against 2.8-2.9
 * with 250 KiB), so the bucket stays and the simulator models it (dt_sim_link). */
double dt_netns_burst_bytes(double rate_bps) {
    const double b = rate_bps / 8 * 0.002;
    return b > 262144 ? b : 262144;
}

/* tbf (and netem under it for a delay) on dev in namespace ns: the rate of one
 * direction of a host's link. The delay goes on the host's side only, so that a
 * packet from host to host (two shaped hops through the bridge) is delayed once. */
static int shape(const char *ns, const char *dev, const dt_link *link, int with_delay,
                 dt_error *err) {
    char rate[32], burst[32], delay[32];
    snprintf(rate, sizeof rate, "%.0fbit", link->rate_bps);
    snprintf(burst, sizeof burst, "%.0f", dt_netns_burst_bytes(link->rate_bps));
    if (!with_delay || link->delay_s <= 0) {
        const char *tbf[] = {"tc",  "-n",   ns,   "qdisc", "replace", "dev",     dev,    "root",
                             "tbf", "rate", rate, "burst", burst,     "latency", "50ms", NULL};
        return step(tbf, "", err);
    }
    snprintf(delay, sizeof delay, "%.0fus", link->delay_s * 1e6);
    const char *netem[] = {"tc",   "-n",     ns,   "qdisc", "replace", "dev", dev,
                           "root", "handle", "1:", "netem", "delay",   delay, NULL};
    if (step(netem, "", err))
        return dt_error_set(err,
                            "cannot add the link delay with tc netem (%s): this kernel has no "
                            "netem qdisc (sch_netem); give --link RATE without a delay",
                            err->msg);
    const char *tbf[] = {"tc",     "-n",  ns,        "qdisc", "add", "dev",  dev,
                         "parent", "1:1", "handle",  "10:",   "tbf", "rate", rate,
                         "burst",  burst, "latency", "50ms",  NULL};
    return step(tbf, "", err);
}

int dt_netns_up(dt_netns *n, int hosts, int ranks_per_host, const dt_link *link, dt_error *err) {
    memset(n, 0, sizeof *n);
    if (hosts < 1 || hosts > DT_NETNS_MAX_HOSTS)
        return dt_error_set(err, "netns: %d hosts (1 to %d)", hosts, DT_NETNS_MAX_HOSTS);
    n->hosts = hosts;
    snprintf(n->prefix, sizeof n->prefix, "dtrain-%ld", (long)getpid());
    snprintf(n->subnet, sizeof n->subnet, NETNS_NET ".0/24");
    static const char need[] =
        " (--hosts netns:H needs root, or CAP_SYS_ADMIN and CAP_NET_ADMIN, and iproute2)";
    char br[64], h[64], addr[40], port[16];
    dt_netns_name(n, 0, br, sizeof br);
    const char *add_br[] = {"ip", "netns", "add", br, NULL};
    if (step(add_br, need, err)) return -1;
    n->made = 1;
    const char *bridge[] = {"ip", "-n", br, "link", "add", "br0", "type", "bridge", NULL};
    const char *bridge_up[] = {"ip", "-n", br, "link", "set", "br0", "up", NULL};
    if (step(bridge, "", err) || step(bridge_up, "", err)) goto fail;
    size_t used = 0;
    for (int i = 1; i <= hosts; i++) {
        dt_netns_name(n, i, h, sizeof h);
        dt_netns_addr(i, addr, sizeof addr);
        used += (size_t)snprintf(n->host_list + used, sizeof n->host_list - used, "%s%s:%d",
                                 i > 1 ? "," : "", addr, ranks_per_host);
        strcat(addr, "/24");
        snprintf(port, sizeof port, "p%d", i);
        const char *add_h[] = {"ip", "netns", "add", h, NULL};
        if (step(add_h, need, err)) goto fail;
        n->made++;
        const char *veth[] = {"ip",   "-n",   br,     "link", "add",   port, "type",
                              "veth", "peer", "name", "eth0", "netns", h,    NULL};
        const char *master[] = {"ip", "-n", br, "link", "set", port, "master", "br0", NULL};
        const char *port_up[] = {"ip", "-n", br, "link", "set", port, "up", NULL};
        const char *ip_addr[] = {"ip", "-n", h, "addr", "add", addr, "dev", "eth0", NULL};
        const char *eth_up[] = {"ip", "-n", h, "link", "set", "eth0", "up", NULL};
        const char *lo_up[] = {"ip", "-n", h, "link", "set", "lo", "up", NULL};
        if (step(veth, "", err) || step(master, "", err) || step(port_up, "", err) ||
            step(ip_addr, "", err) || step(eth_up, "", err) || step(lo_up, "", err) ||
            shape(h, "eth0", link, 1, err) || shape(br, port, link, 0, err))
            goto fail;
    }
    return 0;
fail:
    dt_netns_down(n);
    return -1;
}

/* "dtrain-<pid>-..." (or exactly "dtrain-<pid>" when whole) -> pid, or 0 when name is
 * not one of ours. */
static long owner_of(const char *name, int whole) {
    if (strncmp(name, "dtrain-", 7)) return 0;
    char *end;
    errno = 0;
    long pid = strtol(name + 7, &end, 10);
    if (errno || end == name + 7 || *end != (whole ? 0 : '-') || pid < 1) return 0;
    return pid;
}

int dt_netns_remove_stale(int *removed, dt_error *err) {
    *removed = 0;
    DIR *d = opendir(NETNS_DIR);
    if (!d) {
        if (errno == ENOENT) return 0; /* no namespace was ever added */
        return dt_error_set(err, "cannot list %s: %s", NETNS_DIR, strerror(errno));
    }
    char names[256][64];
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) && n < 256;) {
        long pid = owner_of(e->d_name, 0);
        const size_t len = strlen(e->d_name);
        if (pid && len < sizeof names[0] && kill((pid_t)pid, 0) != 0 && errno == ESRCH)
            memcpy(names[n++], e->d_name, len + 1);
    }
    closedir(d);
    /* hosts before their bridge, as dt_netns_down does */
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < n; i++) {
            const int is_bridge = strstr(names[i], "-br") != NULL;
            if (is_bridge == pass) {
                remove_namespace(names[i]);
                ++*removed;
            }
        }
    return 0;
}

/* Enters host i's CPU share (if the sweep made one) and its network namespace. With
 * setns, not `ip netns exec`: that also remounts /sys for the namespace, which hides
 * the cgroups from everything started inside, so mpirun's rsh agent could not move
 * another host's daemon into that host's share, nor a rank read its quota. */
static int enter_host(const char *prefix, long i, dt_error *err) {
    if (dt_hostcpu_join(prefix, (int)i, err)) return -1;
    char path[128];
    snprintf(path, sizeof path, NETNS_DIR "/%s-h%ld", prefix, i);
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return dt_error_set(err, "cannot open %s: %s", path, strerror(errno));
    const int rc = setns(fd, CLONE_NEWNET);
    const int saved = errno;
    close(fd);
    if (rc) return dt_error_set(err, "cannot enter %s: %s", path, strerror(saved));
    return 0;
}

int dt_netns_rsh(int argc, char **argv) {
    /* argv[0] = the prefix, then what mpirun passes an ssh: options, host, command */
    if (argc < 3 || owner_of(argv[0], 1) == 0) {
        fprintf(stderr, "dtrain netns-rsh: usage: netns-rsh dtrain-<pid> [options] HOST CMD...\n");
        return 2;
    }
    int a = 1;
    while (a < argc && argv[a][0] == '-') a++;
    if (a + 1 >= argc) {
        fprintf(stderr, "dtrain netns-rsh: no host and command\n");
        return 2;
    }
    const char *host = argv[a++];
    char *end;
    errno = 0;
    long i = strncmp(host, NETNS_NET ".", sizeof NETNS_NET)
                 ? 0
                 : strtol(host + sizeof NETNS_NET, &end, 10);
    if (i < 1 || i > DT_NETNS_MAX_HOSTS || errno || *end) {
        fprintf(stderr, "dtrain netns-rsh: unknown host %s\n", host);
        return 2;
    }
    size_t len = 1;
    for (int k = a; k < argc; k++) len += strlen(argv[k]) + 1;
    char *cmd = malloc(len);
    if (!cmd) {
        fprintf(stderr, "dtrain netns-rsh: out of memory\n");
        return 1;
    }
    cmd[0] = 0;
    for (int k = a; k < argc; k++) {
        strcat(cmd, argv[k]);
        if (k + 1 < argc) strcat(cmd, " ");
    }
    dt_error err;
    if (enter_host(argv[0], i, &err)) {
        fprintf(stderr, "dtrain netns-rsh: %s\n", err.msg);
        free(cmd);
        return 1;
    }
    /* sshd runs the command string with the user's shell; so does this stand-in */
    char *const run[] = {"sh", "-c", cmd, NULL};
    execvp(run[0], run);
    fprintf(stderr, "dtrain netns-rsh: cannot run sh: %s\n", strerror(errno));
    free(cmd);
    return 127;
}

int dt_netns_exec(int argc, char **argv) {
    /* argv = [prefix, host, command words...] */
    char *end = NULL;
    errno = 0;
    const long i = argc >= 3 ? strtol(argv[1], &end, 10) : 0;
    if (argc < 3 || owner_of(argv[0], 1) == 0 || errno || end == argv[1] || *end || i < 1 ||
        i > DT_NETNS_MAX_HOSTS) {
        fprintf(stderr, "dtrain netns-exec: usage: netns-exec dtrain-<pid> HOST CMD...\n");
        return 2;
    }
    dt_error err;
    if (enter_host(argv[0], i, &err)) {
        fprintf(stderr, "dtrain netns-exec: %s\n", err.msg);
        return 1;
    }
    execvp(argv[2], argv + 2);
    fprintf(stderr, "dtrain netns-exec: cannot run %s: %s\n", argv[2], strerror(errno));
    return 127;
}
