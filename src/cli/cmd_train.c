#define _GNU_SOURCE
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "dtrain/trainer.h"
#include "dtrain/train_mode.h"
#include "dtrain/world.h"
#include "dtrain/zoo.h"

static void train_usage(FILE *out) {
    fprintf(out,
            "usage: dtrain train [options]\n"
            "\n"
            "Trains a model with SGD on one process and reports loss and test accuracy.\n"
            "\n"
            "  --model M            logreg | mlp | lenet5 | resnet18 (default lenet5)\n"
            "  --width W            resnet18 stem channels (default 64; smaller = narrower)\n"
            "  --data SPEC          synthetic:mnist | synthetic:cifar10 (default: the one\n"
            "                       matching the model's input shape)\n"
            "  --epochs E           passes over the training set (default 1)\n"
            "  --batch-size B       samples per step (default 128)\n"
            "  --lr X               learning rate (default 0.1)\n"
            "  --momentum X         SGD momentum (default 0.9)\n"
            "  --weight-decay X     L2 weight decay (default 5e-4)\n"
            "  --lr-schedule S      constant (default) | cosine | step (x0.1 at 50%% and 75%%)\n"
            "  --warmup-epochs K    ramp the rate up linearly over the first K epochs\n"
            "  --threads T          compute threads (default: all cores)\n"
            "  --seed S             seed for initialisation and shuffling (default 0)\n"
            "  --max-steps N        stop after N steps in total\n"
            "  --max-samples N      train on the first N training samples only\n"
            "  --test-samples N     evaluate on the first N test samples only\n"
            "  --loader-workers W   threads decoding batches ahead of training (default 1;\n"
            "                       0 = decode in the training thread)\n"
            "  --augment            RandomCrop(32, pad 4) + RandomHorizontalFlip on training\n"
            "  --no-augment         none (default: on for CIFAR-10 data, off for MNIST-like)\n"
            "\n"
            "  Data parallelism: run under mpirun -np N (as root: see docs/distributed.md);\n"
            "  each rank trains on its shard with --batch-size samples per step.\n"
            "  --mode allreduce     synchronous SGD with gradient all-reduce (default)\n"
            "  --allreduce A        auto (default: ring for buckets >= 64 KiB, else mpi) |\n"
            "                       ring (own reduce-scatter + all-gather) | mpi\n"
            "  --bucket-mb X        gradient bucket size in MiB (default 25)\n"
            "  --no-overlap         all-reduce after backward instead of during it\n"
            "  --mode ps-sync|ps-async|ssp   parameter-server training: ranks 0..P-1 serve\n"
            "                       shards of the parameters, the others are workers\n"
            "  --servers P          parameter servers (default 1)\n"
            "  --replicas-to-aggregate K   ps-sync: gradients averaged per update (default:\n"
            "                       all workers); later ones for an old version are dropped\n"
            "  --staleness S        ssp: a worker may run at most S steps ahead (default 3)\n"
            "  --test-delay I:MS    testing aid: worker (or rank) I sleeps MS ms every step\n"
            "  --lr-scaling S       linear: lr x number of processes (use --warmup-epochs)\n"
            "                       | none (default)\n"
            "\n"
            "  --log FILE           write the JSON Lines run log to FILE\n"
            "  --save FILE          write the final weights (safetensors, PyTorch names)\n"
            "  --init FILE          start from weights in FILE (safetensors)\n"
            "  --quiet              no progress output (errors are still printed)\n"
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

int cmd_train(int argc, char **argv) {
    static const struct option opts[] = {{"model", required_argument, 0, 'm'},
                                         {"width", required_argument, 0, 'W'},
                                         {"data", required_argument, 0, 'd'},
                                         {"epochs", required_argument, 0, 'e'},
                                         {"batch-size", required_argument, 0, 'b'},
                                         {"lr", required_argument, 0, 'l'},
                                         {"momentum", required_argument, 0, 'M'},
                                         {"weight-decay", required_argument, 0, 'w'},
                                         {"threads", required_argument, 0, 't'},
                                         {"seed", required_argument, 0, 's'},
                                         {"max-steps", required_argument, 0, 'S'},
                                         {"max-samples", required_argument, 0, 'N'},
                                         {"test-samples", required_argument, 0, 'T'},
                                         {"log", required_argument, 0, 'L'},
                                         {"save", required_argument, 0, 'o'},
                                         {"init", required_argument, 0, 'i'},
                                         {"quiet", no_argument, 0, 'q'},
                                         {"lr-schedule", required_argument, 0, 'C'},
                                         {"warmup-epochs", required_argument, 0, 'U'},
                                         {"loader-workers", required_argument, 0, 'R'},
                                         {"augment", no_argument, 0, 'A'},
                                         {"no-augment", no_argument, 0, 'a'},
                                         {"mode", required_argument, 0, 'D'},
                                         {"allreduce", required_argument, 0, 'G'},
                                         {"bucket-mb", required_argument, 0, 'B'},
                                         {"no-overlap", no_argument, 0, 'O'},
                                         {"lr-scaling", required_argument, 0, 'X'},
                                         {"servers", required_argument, 0, 'P'},
                                         {"replicas-to-aggregate", required_argument, 0, 'K'},
                                         {"staleness", required_argument, 0, 'Z'},
                                         {"test-delay", required_argument, 0, 'Y'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    dt_train_config cfg = dt_train_config_default();
    console con = {isatty(STDERR_FILENO), 0};
    const char *cmd = "train";
    long v;
    double x;
    int opt;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (opt) {
        case 'm':
            cfg.model = optarg;
            break;
        case 'W':
            if (cli_parse_int(cmd, "--width", optarg, 1, 1024, &v)) return 2;
            cfg.width = (int)v;
            break;
        case 'd':
            cfg.data = optarg;
            break;
        case 'e':
            if (cli_parse_int(cmd, "--epochs", optarg, 1, 100000, &v)) return 2;
            cfg.epochs = (int)v;
            break;
        case 'b':
            if (cli_parse_int(cmd, "--batch-size", optarg, 1, 1 << 24, &v)) return 2;
            cfg.batch_size = (int)v;
            break;
        case 'l':
            if (cli_parse_float(cmd, "--lr", optarg, 1e-12, 1e6, &x)) return 2;
            cfg.lr = (float)x;
            break;
        case 'M':
            if (cli_parse_float(cmd, "--momentum", optarg, 0.0, 0.999999, &x)) return 2;
            cfg.momentum = (float)x;
            break;
        case 'w':
            if (cli_parse_float(cmd, "--weight-decay", optarg, 0.0, 1.0, &x)) return 2;
            cfg.weight_decay = (float)x;
            break;
        case 't':
            if (cli_parse_int(cmd, "--threads", optarg, 1, 1024, &v)) return 2;
            cfg.threads = (int)v;
            break;
        case 's':
            if (cli_parse_int(cmd, "--seed", optarg, 0, 0x7fffffffffffffffL, &v)) return 2;
            cfg.seed = (uint64_t)v;
            break;
        case 'S':
            if (cli_parse_int(cmd, "--max-steps", optarg, 1, 0x7fffffffffffffffL, &v)) return 2;
            cfg.max_steps = v;
            break;
        case 'N':
            if (cli_parse_int(cmd, "--max-samples", optarg, 1, 0x7fffffffL, &v)) return 2;
            cfg.max_samples = v;
            break;
        case 'T':
            if (cli_parse_int(cmd, "--test-samples", optarg, 1, 0x7fffffffL, &v)) return 2;
            cfg.max_test_samples = v;
            break;
        case 'L':
            cfg.log_path = optarg;
            break;
        case 'o':
            cfg.save_path = optarg;
            break;
        case 'i':
            cfg.init_path = optarg;
            break;
        case 'R':
            if (cli_parse_int(cmd, "--loader-workers", optarg, 0, 64, &v)) return 2;
            cfg.loader_workers = (int)v;
            break;
        case 'C':
            if (dt_lr_kind_parse(optarg, &cfg.lr_schedule)) {
                cli_fail(cmd, "--lr-schedule must be constant, cosine or step, got '%s'", optarg);
                return 2;
            }
            break;
        case 'U':
            if (cli_parse_float(cmd, "--warmup-epochs", optarg, 0.0, 1e6, &x)) return 2;
            cfg.warmup_epochs = x;
            break;
        case 'A':
            cfg.augment = 1;
            break;
        case 'D':
            if (cli_check_mode(cmd, optarg)) return 2;
            cfg.mode = optarg;
            break;
        case 'G':
            if (dt_allreduce_parse(optarg, &cfg.allreduce)) {
                cli_fail(cmd, "--allreduce must be auto, ring or mpi, got '%s'", optarg);
                return 2;
            }
            break;
        case 'B':
            if (cli_parse_float(cmd, "--bucket-mb", optarg, 1e-6, 1e5, &x)) return 2;
            cfg.bucket_mb = x;
            break;
        case 'O':
            cfg.no_overlap = 1;
            break;
        case 'P':
            if (cli_parse_int(cmd, "--servers", optarg, 1, 63, &v)) return 2;
            cfg.ps.servers = (int)v;
            break;
        case 'K':
            if (cli_parse_int(cmd, "--replicas-to-aggregate", optarg, 1, 100000, &v)) return 2;
            cfg.ps.replicas = (int)v;
            break;
        case 'Y':
            if (sscanf(optarg, "%d:%d", &cfg.delay_worker, &cfg.delay_ms) != 2 ||
                cfg.delay_worker < 0 || cfg.delay_ms < 0) {
                cli_fail(cmd, "--test-delay expects WORKER:MS, got '%s'", optarg);
                return 2;
            }
            break;
        case 'Z':
            if (cli_parse_int(cmd, "--staleness", optarg, 0, 100000, &v)) return 2;
            cfg.ps.staleness = (int)v;
            break;
        case 'X':
            if (cli_parse_lr_scaling(cmd, optarg, &cfg.lr_scaling_linear)) return 2;
            break;
        case 'a':
            cfg.augment = 0;
            break;
        case 'q':
            con.quiet = 1;
            break;
        case 'h':
            train_usage(stdout);
            return 0;
        default:
            return cli_bad_option(cmd, argv, optind);
        }
    }
    if (cli_no_extra_args(cmd, argc, argv, optind)) return 2;
    dt_model_spec spec;
    if (cli_model_spec(cmd, cfg.model, &spec)) return 2;
    /* CIFAR-10 itself is not on this machine (no download here): resnet18 defaults to
     * synthetic data of its shape; the MNIST-shaped models to real Fashion-MNIST. */
    if (!cfg.data) cfg.data = spec.in_c == 3 ? "synthetic:cifar10" : "fashion-mnist";

    dt_error err;
    dt_train_result res;
    dt_world world;
    if (dt_world_init(&world, NULL, NULL, &err)) {
        cli_fail(cmd, "%s", err.msg);
        return 1;
    }
    /* rank 0 reports; in parameter-server mode the first worker, after the servers */
    const dt_train_mode *mode = dt_train_mode_find(cfg.mode);
    if (world.rank != (mode->has_servers ? cfg.ps.servers : 0)) con.quiet = 1;
    if (dt_train(&cfg, &world, show_progress, &con, &res, &err)) {
        if (con.tty && !con.quiet) fputc('\n', stderr);
        if (world.size > 1) dt_world_abort(&world, "%s", err.msg); /* ends every rank */
        cli_fail(cmd, "%s", err.msg);
        dt_world_finalize(&world);
        return 1;
    }
    dt_world_finalize(&world);
    if (!con.quiet)
        printf("trained %s on %s: %ld steps, final loss %.4f, test accuracy %.2f%%%s%s\n",
               cfg.model, cfg.data, res.steps, res.final_loss, 100.0 * res.test_acc,
               cfg.save_path ? ", weights in " : "", cfg.save_path ? cfg.save_path : "");
    return 0;
}
