#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "core/runlock.h"
#include "dtrain/zoo.h"
#include "study/hostcpu.h"
#include "study/linkmodel.h"
#include "study/netns.h"
#include "study/scale_studies.h"
#include "study/sweep.h"

/* Each run sets these itself: its batch size, its log in DIR, no weights, no trace. */
static const char *const scale_not_shared[] = {"batch-size",       "log",    "save",  "checkpoint",
                                               "checkpoint-every", "resume", "trace", "trace-steps",
                                               "trace-events",     NULL};

static void scale_usage(const cli_flags *flags, FILE *out) {
    fprintf(out,
            "usage: dtrain scale [options]\n"
            "\n"
            "The scaling study in one command: trains every (batch size per process, process\n"
            "count) configuration with mpirun for --epochs epochs (the 1st warms up, the 2nd is\n"
            "measured), then writes DIR/runs.csv, DIR/report.md (times, strong and weak\n"
            "speed-up, compute vs communication, all-reduce bandwidth, accuracy vs batch size,\n"
            "a plain reading) and plots. Re-running skips finished configs (their logs are in\n"
            "DIR) made with the same settings, unless --force; a rerun replaces a log only\n"
            "when it succeeds. Ctrl-C ends the running config's processes too.\n"
            "Before the first run, scale profiles the model at each batch size as a rank\n"
            "takes its step (the runs' threads, batches from --data through the loader,\n"
            "beside the other ranks' steps, at least 5 steps and 0.5 s) and predicts every\n"
            "config's step with the simulator (DIR/predicted.csv, kept by a resumed sweep);\n"
            "the report sets each beside its measurement and continues the curves past the\n"
            "machine.\n"
            "\n"
            "  --batch-sizes LIST   per process, e.g. 32,128,512 (default: 32, then x4 up to the\n"
            "                       per-process share of the data, stopping at the first that\n"
            "                       does not fit in memory)\n"
            "  --procs LIST         process counts, e.g. 1,2 (default 1,2); with a parameter-\n"
            "                       server mode, worker counts (servers come on top)\n"
            "  --out DIR            where logs, report and plots go (default runs/scale);\n"
            "                       one study at a time in it (DIR/.scale.lock)\n"
            "  --repeats R          run every config R times, interleaved (all configs, then\n"
            "                       all again), repeat k with --seed + k-1; the report gives\n"
            "                       medians with min-max, and its time to target averages\n"
            "                       the repeats' loss curves (default 1)\n"
            "  --wait-idle          before each run, wait (up to 5 minutes) until other\n"
            "                       processes use under 0.25 cores for 2 s. Whether or not,\n"
            "                       each run's log records the cores other processes used\n"
            "                       during it; above 0.25 the report flags the config busy\n"
            "  --cores N            the report's speed model may recommend up to N cores'\n"
            "                       worth of processes (default: this machine's cores)\n"
            "  --modes LIST         sweep each training mode on the same grid, e.g.\n"
            "                       allreduce,ps-sync,ps-async: one study per mode in\n"
            "                       DIR/<mode>, then DIR/compare.md (dtrain compare: time to\n"
            "                       --target accuracy, bytes per role, CPU) and\n"
            "                       DIR/accuracy_time.png. --servers applies to the\n"
            "                       parameter-server modes\n"
            "  --target ACC         the comparison's target test accuracy (default 0.85)\n"
            "  --hosts netns:H      run the multi-process configs across H emulated hosts:\n"
            "                       network namespaces on this machine, each joined to a\n"
            "                       bridge by a veth link shaped to --link (needs root, or\n"
            "                       CAP_SYS_ADMIN + CAP_NET_ADMIN, and iproute2). mpirun\n"
            "                       starts the ranks through `dtrain netns-rsh`; everything\n"
            "                       is removed on exit, Ctrl-C, SIGTERM and failure, and\n"
            "                       what a SIGKILLed sweep left is removed by the next one.\n"
            "                       Default --procs: 1, 2, 4, ... up to H x ranks per host\n"
            "  --link RATE[,DELAY]  the hosts' links, e.g. 1gbit or 100mbit,200us (rate in\n"
            "                       bit|kbit|mbit|gbit, tc's decimal units; delay in us|ms|s,\n"
            "                       needs tc's netem qdisc, which some kernels lack: then\n"
            "                       the sweep says so and stops). With --link the sweep\n"
            "                       also writes DIR/network.md and network.csv:\n"
            "                       measured all-reduce time per epoch beside the ring model\n"
            "                       k alpha + 2(P-1)/P n/B per step, alpha = 2(P-1) x delay\n"
            "  --ranks-per-host R   ranks on each emulated host (default 1)\n"
            "  --host-cpus cpuset|X|none\n"
            "                       each emulated host's CPU: cpuset (default), CPUs of its\n"
            "                       own, the machine's spread evenly over the hosts\n"
            "                       (neighbours share a CPU when there are more hosts than\n"
            "                       CPUs); X, a cgroup quota of X cores; none, the hosts\n"
            "                       share the machine freely. Each run records the share,\n"
            "                       the hosts' CPU use and throttling and the machine's\n"
            "                       idle time (docs/scaling.md). Needs root; without it,\n"
            "                       said once and run as with none\n"
            "  --hostfile FILE      run the multi-process configs on the machines of FILE\n"
            "                       (mpirun --hostfile: ssh to each, dtrain at the same path\n"
            "                       everywhere); --link then only states the link for the\n"
            "                       model\n"
            "  --launcher L         mpirun (default) or srun: inside a Slurm allocation\n"
            "                       (salloc, sbatch), start the multi-process runs with\n"
            "                       srun -n N --mpi=pmix (SLURM_MPI_TYPE overrides pmix)\n"
            "                       on the allocation's nodes (docs/cluster.md)\n"
            "  --bucket-sizes LIST  sweep gradient bucket sizes in MiB, e.g. 1,5,25: one\n"
            "                       study per size in DIR/bucket_<MiB>, then (with --link)\n"
            "                       network.md over them all\n"
            "  --predict-link R[,D] past the machine: the report continues every batch size's\n"
            "                       curve to --predict-workers workers on this link, each a\n"
            "                       host (default 10gbit,20us; units as --link)\n"
            "  --predict-workers N  ... up to N workers (default 64; 0: none)\n"
            "  --predict-per-host K ... K workers a host (default 1): up to K workers\n"
            "                       share memory; past that, one ring over all of them,\n"
            "                       as dtrain's all-reduce runs across hosts\n"
            "  --target-loss L      the report's time to target: training loss L (default:\n"
            "                       90%% of the way from the first step's loss to the\n"
            "                       lowest final loss of any run)\n"
            "  --force              run every config again (and predict again)\n"
            "  --quiet              no progress\n"
            "  --help               this text\n"
            "\n"
            "  Every run gets the training flags below (as dtrain train). --lr-scaling linear\n"
            "  also runs each multi-process config with the linear scaling rule and\n"
            "  --warmup-epochs (warm-up applies to those runs only).\n"
            "\n");
    cli_flags_help(flags, out,
                   "--threads 1, --epochs 2, --warmup-epochs 1; with\n"
                   "  --max-samples, --test-samples takes the same share of the test split");
}

/* A signal while the hosts are built or between studies: noted, and the hosts are
 * torn down before exiting (dt_sweep_run catches them itself while it runs). */
static volatile sig_atomic_t scale_stop;
static void on_scale_stop(int sig) {
    scale_stop = sig;
}

static int publish(dt_scale_study *study, const char *dir) {
    return cli_publish_study(study, dir, 0);
}

/* The study (or one per bucket size, or per mode), then the link table. 0 or 1. */
static int run_studies(const dt_scale_studies *s) {
    dt_error err;
    const int rc = dt_scale_run_studies(s, stdout, stderr, &err);
    if (rc == -1) cli_fail("scale", "%s", err.msg);
    return rc ? 1 : 0;
}

int cmd_scale(int argc, char **argv) {
    static const struct option own[] = {{"batch-sizes", required_argument, 0, 'b'},
                                        {"procs", required_argument, 0, 'p'},
                                        {"out", required_argument, 0, 'o'},
                                        {"force", no_argument, 0, 'f'},
                                        {"repeats", required_argument, 0, 'r'},
                                        {"wait-idle", no_argument, 0, 'w'},
                                        {"cores", required_argument, 0, 'c'},
                                        {"modes", required_argument, 0, 'M'},
                                        {"target", required_argument, 0, 'T'},
                                        {"hosts", required_argument, 0, 'H'},
                                        {"link", required_argument, 0, 'L'},
                                        {"ranks-per-host", required_argument, 0, 'R'},
                                        {"host-cpus", required_argument, 0, 'C'},
                                        {"hostfile", required_argument, 0, 'F'},
                                        {"bucket-sizes", required_argument, 0, 'B'},
                                        {"launcher", required_argument, 0, 'U'},
                                        {"predict-link", required_argument, 0, 'P'},
                                        {"predict-workers", required_argument, 0, 'W'},
                                        {"predict-per-host", required_argument, 0, 'K'},
                                        {"target-loss", required_argument, 0, 'g'},
                                        {"quiet", no_argument, 0, 'q'},
                                        {"help", no_argument, 0, 'h'},
                                        {0, 0, 0, 0}};
    const char *cmd = "scale";
    long cores = 0;
    char modes[DT_SWEEP_MAX_MODES][32];
    double compare_target = 0.85;
    dt_scale_places places = {.ranks_per_host = 1, .host_cpus = -1};
    dt_link link = {0, 0};
    dt_link beyond = {DT_PREDICT_BEYOND_RATE_BPS, DT_PREDICT_BEYOND_DELAY_S};
    long beyond_workers = DT_PREDICT_BEYOND_WORKERS, beyond_per_host = 1;
    double bucket_mb[16];
    int batches[DT_SWEEP_MAX_GRID], procs[DT_SWEEP_MAX_GRID] = {1, 2};
    dt_error err;
    dt_sweep_config cfg = {.out_dir = "runs/scale",
                           .procs = procs,
                           .n_procs = 2,
                           .repeats = 1,
                           .wait_idle_max_s = 300};
    /* a sweep runs many processes side by side: one thread each, short runs */
    cfg.train = dt_train_config_default();
    cfg.train.threads = 1;
    cfg.train.epochs = 2;
    cfg.train.warmup_epochs = 1;
    cli_flags flags;
    cli_flags_init(&flags, cmd, NULL, scale_not_shared, own);
    for (int opt; (opt = cli_flags_next(&flags, argc, argv, &cfg.train)) != CLI_FLAGS_DONE;) {
        switch (opt) {
        case CLI_FLAGS_ERROR:
            return 2;
        case 'b':
            if ((cfg.n_batches = dt_sweep_parse_ints("--batch-sizes", optarg, batches,
                                                     DT_SWEEP_MAX_GRID, &err)) < 0)
                return cli_fail(cmd, "%s", err.msg), 2;
            break;
        case 'p':
            if ((cfg.n_procs =
                     dt_sweep_parse_ints("--procs", optarg, procs, DT_SWEEP_MAX_GRID, &err)) < 0)
                return cli_fail(cmd, "%s", err.msg), 2;
            places.procs_given = 1;
            break;
        case 'H':
            if (dt_sweep_parse_hosts(optarg, &places.hosts, &err))
                return cli_fail(cmd, "%s", err.msg), 2;
            places.hosts_text = optarg;
            break;
        case 'L':
            if (dt_link_parse(optarg, &link, &err)) return cli_fail(cmd, "%s", err.msg), 2;
            places.link_text = optarg;
            break;
        case 'R':
            if (cli_parse_int(cmd, "--ranks-per-host", optarg, 1, 256, &places.ranks_per_host))
                return 2;
            break;
        case 'C':
            if (dt_sweep_parse_host_cpus(optarg, &places.host_cpus, &places.host_cpuset, &err))
                return cli_fail(cmd, "%s", err.msg), 2;
            places.host_cpus_text = optarg;
            break;
        case 'F':
            places.hostfile = optarg;
            break;
        case 'B':
            if ((places.n_buckets = dt_sweep_parse_mib(optarg, bucket_mb, 16, &err)) < 0)
                return cli_fail(cmd, "%s", err.msg), 2;
            break;
        case 'U':
            if (strcmp(optarg, "mpirun") && strcmp(optarg, "srun"))
                return cli_fail(cmd, "--launcher expects mpirun or srun, got '%s'", optarg), 2;
            cfg.srun = !strcmp(optarg, "srun");
            break;
        case 'o':
            cfg.out_dir = optarg;
            break;
        case 'P':
            if (dt_link_parse(optarg, &beyond, &err))
                return cli_fail(cmd, "--predict-link: %s", err.msg), 2;
            break;
        case 'W':
            if (cli_parse_int(cmd, "--predict-workers", optarg, 0, 1 << 20, &beyond_workers))
                return 2;
            break;
        case 'K':
            if (cli_parse_int(cmd, "--predict-per-host", optarg, 1, 1024, &beyond_per_host))
                return 2;
            break;
        case 'g':
            if (cli_parse_float(cmd, "--target-loss", optarg, 1e-9, 1e9, &cfg.target_loss))
                return 2;
            break;
        case 'f':
            cfg.force = 1;
            break;
        case 'r': {
            long r;
            if (cli_parse_int(cmd, "--repeats", optarg, 1, 100, &r)) return 2;
            cfg.repeats = (int)r;
            break;
        }
        case 'w':
            cfg.wait_idle = 1;
            break;
        case 'c':
            if (cli_parse_int(cmd, "--cores", optarg, 1, 1 << 20, &cores)) return 2;
            break;
        case 'M':
            if ((places.n_modes = dt_sweep_parse_modes(optarg, modes, &err)) < 0)
                return cli_fail(cmd, "%s", err.msg), 2;
            break;
        case 'T':
            if (cli_parse_float(cmd, "--target", optarg, 1e-6, 1.0, &compare_target)) return 2;
            break;
        case 'q':
            cfg.quiet = 1;
            break;
        case 'h':
            scale_usage(&flags, stdout);
            return 0;
        }
    }
    /* the link table, the predictions and the bucket studies model one bucket size */
    if (cfg.train.bucket_mb < 0)
        return cli_fail(cmd, "--bucket-mb auto is for train: a study's link table and "
                             "predictions need a size (give one, or several with --bucket-sizes)"),
               2;
    /* every run gets the same rate, momentum, decay and schedule: the model's recipe
     * for those not given, written out in each child's arguments */
    if (dt_train_config_resolve(&cfg.train, &err)) return cli_fail(cmd, "%s", err.msg), 2;
    /* here --lr-scaling linear asks for extra runs; the sweep scales those itself */
    cfg.lr_scaling = cfg.train.lr_scaling_linear;
    cfg.train.lr_scaling_linear = 0;
    if (dt_scale_check_places(&places, &cfg, procs, &err)) return cli_fail(cmd, "%s", err.msg), 2;
    dt_model_spec spec;
    if (cli_model_and_data(cmd, &cfg.train, &spec)) return 2;
    if (dt_scale_fill_defaults(&cfg, batches, &err)) return cli_fail(cmd, "%s", err.msg), 1;
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) {
        cli_fail(cmd, "cannot find the dtrain binary to run");
        return 1;
    }
    self[len] = 0;
    cfg.dtrain = self;
    char where[4400] = "";
    const char *extra[3];
    dt_netns net;
    memset(&net, 0, sizeof net);
    if (places.hostfile) {
        extra[0] = "--hostfile";
        extra[1] = places.hostfile;
        extra[2] = NULL;
        cfg.mpirun_extra = extra;
        snprintf(where, sizeof where, "hostfile %s%s%s", places.hostfile,
                 places.link_text ? ", link " : "", places.link_text ? places.link_text : "");
        cfg.hosts = where;
    }
    dt_scale_studies studies = {&cfg,
                                (int)cores,
                                modes,
                                places.n_modes,
                                bucket_mb,
                                places.n_buckets,
                                compare_target,
                                &link,
                                (int)places.ranks_per_host,
                                where,
                                &scale_stop,
                                publish,
                                {0, 0, 0, 0, 0, 0, 0, 0}};
    if (places.hosts_text) { /* netns:H: the hosts' link; a hostfile's hosts: unknown */
        studies.network.hosts = (int)places.hosts;
        studies.network.ranks_per_host = (int)places.ranks_per_host;
        studies.network.rate_bps = link.rate_bps;
        studies.network.delay_s = link.delay_s;
    }
    studies.network.beyond_workers = (int)beyond_workers;
    studies.network.beyond_per_host = (int)beyond_per_host;
    studies.network.beyond_rate_bps = beyond.rate_bps;
    studies.network.beyond_delay_s = beyond.delay_s;
    /* one study per --out folder: two at once would interleave and replace each
     * other's logs and report (core/runlock) */
    char lock_path[4200], what[4200];
    dt_runlock out_lock;
    snprintf(what, sizeof what, "--out %s", cfg.out_dir);
    if ((size_t)snprintf(lock_path, sizeof lock_path, "%s/.scale.lock", cfg.out_dir) >=
        sizeof lock_path)
        return cli_fail(cmd, "--out %.100s...: the path is too long", cfg.out_dir), 1;
    if (dt_make_dirs(cfg.out_dir, &err) ||
        dt_runlock_file(&out_lock, lock_path, what, "one study per folder", &err))
        return cli_fail(cmd, "%s", err.msg), 1;
    if (!places.hosts_text) {
        const int rc = run_studies(&studies);
        dt_runlock_release(&out_lock);
        return rc;
    }
    if (strchr(self, ' ')) {
        dt_runlock_release(&out_lock);
        return cli_fail(cmd,
                        "the dtrain binary's path '%s' has a space: mpirun's rsh agent "
                        "cannot take it",
                        self),
               1;
    }
    /* each host's CPU: by default CPUs of its own, the machine's divided among the hosts
     * (docs/scaling.md: the more faithful of the two limits here) */
    double host_cpus = places.host_cpus;
    if (host_cpus < 0) {
        places.host_cpuset = 1;
        host_cpus = 0;
    }
    /* from here on a signal must not skip the teardown */
    struct sigaction stop = {.sa_handler = on_scale_stop}, old_int, old_term;
    sigemptyset(&stop.sa_mask);
    sigaction(SIGINT, &stop, &old_int);
    sigaction(SIGTERM, &stop, &old_term);
    int removed = 0, removed_groups = 0, rc = 1;
    dt_hostcpu hostcpu;
    memset(&hostcpu, 0, sizeof hostcpu);
    if (dt_netns_remove_stale(&removed, &err) || dt_hostcpu_remove_stale(&removed_groups, &err) ||
        dt_netns_up(&net, (int)places.hosts, (int)places.ranks_per_host, &link, &err)) {
        cli_fail(cmd, "%s", err.msg);
        goto done;
    }
    const dt_hostcpu_limit limit = places.host_cpuset ? DT_HOSTCPU_CPUSET : DT_HOSTCPU_QUOTA;
    if ((host_cpus > 0 || places.host_cpuset) &&
        dt_hostcpu_up(&hostcpu, net.prefix, (int)places.hosts, limit, host_cpus, &err)) {
        fprintf(stderr,
                "dtrain scale: the emulated hosts share the machine freely, without CPU "
                "shares: %s\n",
                err.msg);
        host_cpus = 0;
    }
    if (hostcpu.made) cfg.hostcpu = &hostcpu;
    cfg.netns = &net;
    char share[64] = "";
    if (hostcpu.made && places.host_cpuset)
        snprintf(share, sizeof share, ", CPUs of their own (%.3g a host)", hostcpu.cpus);
    else if (hostcpu.made)
        snprintf(share, sizeof share, ", %.3g cores per host", host_cpus);
    snprintf(where, sizeof where, "%s, link %s, %ld rank%s per host%s", places.hosts_text,
             places.link_text, places.ranks_per_host, places.ranks_per_host > 1 ? "s" : "", share);
    cfg.hosts = where;
    if (removed_groups && !cfg.quiet)
        fprintf(stderr, "removed %d CPU share group%s left by a killed sweep\n", removed_groups,
                removed_groups > 1 ? "s" : "");
    if (removed && !cfg.quiet)
        fprintf(stderr, "removed %d network namespace%s left by a killed sweep\n", removed,
                removed > 1 ? "s" : "");
    dt_netns_mpirun words;
    dt_netns_mpirun_words(&net, self, &words);
    cfg.launch_pre = words.pre;
    cfg.mpirun_extra = words.extra;
    if (!scale_stop) {
        if (!cfg.quiet)
            fprintf(stderr, "%ld emulated hosts (namespaces %s-h1..h%ld, bridge %s-br)%s\n",
                    places.hosts, net.prefix, places.hosts, net.prefix, share);
        rc = run_studies(&studies);
    }
done:
    dt_hostcpu_down(&hostcpu);
    dt_netns_down(&net);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    if (scale_stop && rc == 0) rc = 1;
    dt_runlock_release(&out_lock);
    return rc;
}
