#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "dtrain/world.h"
#include "dtrain/zoo.h"
#include "train/train_mode.h"
#include "train/trainer.h"

static void train_usage(const cli_flags *flags, FILE *out) {
    fprintf(out, "usage: dtrain train [options]\n"
                 "\n"
                 "Trains a model with SGD and reports loss and test accuracy.\n"
                 "\n"
                 "A run that diverges stops with exit status 1 and saves nothing (no --save;\n"
                 "checkpoints already written stay): diverged means a training loss that is\n"
                 "NaN or infinite at any step, or above 10000 times its start (the first step's\n"
                 "loss, at least ln(classes)) for 3 steps in a row, or a test loss or weights\n"
                 "that are not finite at the end of an epoch.\n"
                 "\n");
    cli_flags_help(flags, out, NULL);
    fprintf(out, "  --quiet              no progress output (errors are still printed)\n"
                 "  --help               this text\n");
}

typedef struct console {
    int tty, quiet;
} console;

static void show_progress(void *ctx, const dt_train_progress *p) {
    const console *c = ctx;
    if (c->quiet) return;
    if (p->epoch_done) {
        fprintf(stderr,
                "%sepoch %d/%d  train loss %.4f  train acc %.2f%%  test loss %.4f  test acc "
                "%.2f%%  %.0f img/s  %.1f s\n",
                c->tty ? "\r\033[K" : "", p->epoch + 1, p->epochs, p->loss, 100.0 * p->train_acc,
                p->test_loss, 100.0 * p->test_acc, p->images_per_s, p->t_epoch);
    } else if (c->tty) {
        fprintf(stderr, "\r\033[Kepoch %d/%d  step %ld/%ld  loss %.4f  %.0f img/s  ETA %.0f s",
                p->epoch + 1, p->epochs, p->step, p->steps_per_epoch, p->loss, p->images_per_s,
                p->eta_s);
    }
}

/* A launched process ends a failure found before MPI with the others, quietly
 * (world.h); one started alone returns its status. */
static int end_launched(const dt_world *w, int status) {
    if (dt_world_launched()) dt_world_exit(w, status, DT_EXIT_TOGETHER);
    return status;
}

int cmd_train(int argc, char **argv) {
    static const struct option own[] = {
        {"quiet", no_argument, 0, 'q'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    const char *cmd = "train";
    dt_train_config cfg = dt_train_config_default();
    console con = {isatty(STDERR_FILENO), 0};
    cli_flags flags;
    cli_flags_init(&flags, cmd, NULL, NULL, own);
    for (int opt; (opt = cli_flags_next(&flags, argc, argv, &cfg)) != CLI_FLAGS_DONE;) {
        if (opt == CLI_FLAGS_ERROR) return end_launched(NULL, 2);
        if (opt == 'q') con.quiet = 1;
        if (opt == 'h') {
            train_usage(&flags, stdout);
            return 0;
        }
    }
    dt_model_spec spec;
    if (cli_model_and_data(cmd, &cfg, &spec)) return end_launched(NULL, 2);
    (void)cli_threads(cmd, cfg.threads); /* its warning; dt_train chooses the same */

    dt_error err;
    dt_train_result res = {0}; /* a parameter server fills none of it */
    /* a process started alone trains without MPI (a world of NULL) */
    dt_world world, *job = NULL;
    if (dt_world_launched()) {
        if (dt_world_init(&world, NULL, NULL, &err)) {
            cli_fail(cmd, "%s", err.msg);
            return end_launched(&world, 1);
        }
        job = &world;
    }
    /* rank 0 reports; in parameter-server mode the first worker, after the servers (rank
     * 0 where there is none: every rank refuses that job alike) */
    const dt_train_mode *mode = dt_train_mode_find(cfg.mode);
    const int rank = job ? job->rank : 0;
    const int workers_from =
        mode->has_servers && job && cfg.ps.servers > 0 && cfg.ps.servers < job->size
            ? cfg.ps.servers
            : 0;
    if (rank != workers_from) con.quiet = 1;
    if (dt_train(&cfg, job, show_progress, &con, &res, &err)) {
        if (con.tty && !con.quiet) fputc('\n', stderr);
        if (!job) return cli_fail(cmd, "%s", err.msg), 1;
        /* one rank's failure: it ends the job; one every worker returned: the first
         * says it, then every rank ends (the servers, waiting on workers, by an abort) */
        if (res.alone && job->size > 1) dt_world_abort(job, "%s", err.msg);
        const int speaker = rank == workers_from;
        if (speaker) cli_say(cmd, "%s", err.msg);
        dt_world_exit(job, 1,
                      workers_from == 0 ? DT_EXIT_TOGETHER
                      : speaker         ? DT_EXIT_ENDS_JOB
                                        : DT_EXIT_WAIT);
    }
    if (job) dt_world_finalize(job);
    if (res.finished) { /* not an error: a restart after the last checkpoint lands here */
        if (rank == workers_from)
            fprintf(stderr, "dtrain train: --resume %s: the run already finished at step %ld%s%s\n",
                    cfg.resume_dir, res.steps, cfg.save_path ? "; its weights in " : "",
                    cfg.save_path ? cfg.save_path : "");
        return 0;
    }
    if (!con.quiet)
        printf("trained %s on %s: %ld steps, final loss %.4f, test accuracy %.2f%%%s%s\n",
               cfg.model, cfg.data, res.steps, res.final_loss, 100.0 * res.test_acc,
               cfg.save_path ? ", weights in " : "", cfg.save_path ? cfg.save_path : "");
    /* the run's summary (the epoch records have it too) */
    if (!con.quiet && res.straggler >= 0)
        printf("straggler: rank %d (%s): %.0f%% slower compute, the others waited %.3g s a step "
               "for it (epoch %d)\n",
               res.straggler, res.straggler_host, 100.0 * res.straggler_slower,
               res.straggler_wait_s, res.straggler_epoch);
    return 0;
}
