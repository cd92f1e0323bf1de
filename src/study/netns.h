/* Emulated hosts on one machine: H network namespaces ("hosts") joined through a bridge
 * in its own namespace, each by a veth pair shaped in both directions with tbf (and
 * netem for a delay, where the kernel has it). A star through a bridge gives every host
 * its own link to the switch, as a rack does, so a ring all-reduce crosses each shaped
 * link once per direction per step, which is what the ring model assumes.
 *
 * Names carry the owner's pid (dtrain-<pid>-h<i>, dtrain-<pid>-br) so that a later run
 * can remove what a SIGKILLed sweep left (dt_netns_remove_stale). Every `ip`/`tc` runs
 * through posix_spawnp with an argv, no shell; mpirun's rsh agent (dt_netns_rsh) is the
 * only place a command string is run by `sh -c`, inside the host's namespace, exactly
 * as sshd would run it. Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) and iproute2. */
#ifndef DTRAIN_NETNS_H
#define DTRAIN_NETNS_H

#include <sys/types.h>

#include "dtrain/error.h"

enum { DT_NETNS_MAX_HOSTS = 64 };

/* A link: rate in bit/s and one-way delay in seconds (0: none). */
typedef struct dt_link {
    double rate_bps;
    double delay_s;
} dt_link;

/* "1gbit", "100mbit,100us", "2.5gbit,1ms": a rate in bit|kbit|mbit|gbit (decimal
 * prefixes, as tc), optionally a delay in s|ms|us. */
int dt_link_parse(const char *text, dt_link *link, dt_error *err);

typedef struct dt_netns {
    int hosts;
    int made;        /* namespaces created so far (the bridge's first), for teardown */
    char prefix[32]; /* dtrain-<pid> */
    char subnet[32]; /* 10.213.0.0/24: private to these namespaces */
    char host_list[DT_NETNS_MAX_HOSTS * 24]; /* for mpirun --host: 10.213.0.1:R,... */
} dt_netns;

/* The namespace name of host i (1-based) or of the bridge (i = 0). */
void dt_netns_name(const dt_netns *n, int i, char *out, size_t size);
/* What runs in each host, for a launch that hung: "h1: mpirun 812, dtrain 830; h2:
 * nothing; ..." (process names and ids, found by their network namespace), then the
 * rsh agents that have not yet entered their host: "; rsh agents not yet in their
 * host: h2: agent 829, state D, waiting in <wchan>" into out, cut at size. */
void dt_netns_processes(const dt_netns *n, char *out, size_t size);
/* Host i's address (1-based). */
void dt_netns_addr(int i, char *out, size_t size);

/* The depth (bytes) of the token bucket (tbf) that shapes each direction of an emulated
 * host's link of rate_bps: after the link idled, that many bytes cross unshaped. */
double dt_netns_burst_bytes(double rate_bps);

/* Builds hosts namespaces and the bridge, links shaped to link; on failure removes
 * whatever it made and says which step failed and why (and what it needs). */
int dt_netns_up(dt_netns *n, int hosts, int ranks_per_host, const dt_link *link, dt_error *err);
/* Removes the namespaces (and with them the veths and the bridge), first killing any
 * process still inside one. Safe to call twice and after a failed dt_netns_up. */
void dt_netns_down(dt_netns *n);

/* Removes namespaces named dtrain-<pid>-* whose pid is no longer running (left by a
 * killed sweep), killing processes still inside them; *removed counts them. */
int dt_netns_remove_stale(int *removed, dt_error *err);

/* How mpirun starts the ranks on the hosts: from inside host 1 (pre: self netns-exec
 * PREFIX 1), its daemons through `self netns-rsh PREFIX` (the agent), and the options
 * of extra (after -np N). Both NULL-terminated; the words point into w and n. */
typedef struct dt_netns_mpirun {
    char h1[64], agent[4200];
    const char *pre[8];
    const char *extra[32];
} dt_netns_mpirun;
void dt_netns_mpirun_words(const dt_netns *n, const char *self, dt_netns_mpirun *w);

/* mpirun's rsh agent: argv = [prefix, ssh-style options..., host, command words...].
 * Runs the words joined by spaces with `sh -c` inside the namespace of host (as sshd
 * would); returns only on error (after printing one line), with an exit status. */
int dt_netns_rsh(int argc, char **argv);
/* Host 1's mpirun: argv = [prefix, host, command words...]. Enters the host's CPU share
 * (hostcpu.h; none: nothing to enter) and runs the words inside its namespace, without
 * a shell; returns only on error, with an exit status. */
int dt_netns_exec(int argc, char **argv);

#endif
