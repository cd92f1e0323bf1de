/* libFuzzer target for the checkpoint metadata reader: every input is a training
 * checkpoint (DIR/checkpoint.safetensors); its __metadata__ is parsed into a resume
 * point (dt_resume_parse), checked against runs of several shapes
 * (dt_resume_check_run), and the whole --resume load runs for a logreg run without
 * momentum (flags compared, weights read) as tests/fuzz/corpus_checkpoint's files were
 * written: --model logreg --momentum 0 --batch-size 16 --max-samples 64.
 * Build and run: scripts/fuzz.sh SECONDS checkpoint. */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dtrain/train_state.h"
#include "dtrain/zoo.h"
#include "train/resume.h"

static char dir[64];
static dt_train_state state;
static dt_train_config cfg;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    snprintf(dir, sizeof dir, "/tmp/dtrain_fuzz_ck_%ld", (long)getpid());
    mkdir(dir, 0755);
    cfg = dt_train_config_default();
    cfg.model = "logreg";
    cfg.data = "fashion-mnist";
    cfg.momentum = 0;
    cfg.batch_size = 16;
    cfg.max_samples = 64;
    cfg.threads = 1;
    dt_model_spec spec;
    dt_error err;
    if (dt_zoo_default_spec(&spec, "logreg") ||
        dt_train_state_init(&state, &spec, 16, cfg.seed, NULL, cfg.lr, cfg.momentum,
                            cfg.weight_decay, &err))
        return -1;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[128];
    snprintf(path, sizeof path, "%s/checkpoint.safetensors", dir);
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    const int ok = fwrite(data, 1, size, f) == size;
    if (fclose(f) != 0 || !ok) return 0;
    dt_error err;
    dt_safetensors st;
    if (dt_safetensors_read(&st, path, &err)) return 0;
    dt_resume_point p;
    if (dt_resume_parse(&st, dir, &p, &err) == 0) {
        const dt_resume_run runs[] = {
            {1, 64, 16}, {90, 60000, 128}, {INT_MAX, INT_MAX, 1}, {1, 1, INT_MAX}};
        for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++)
            if (dt_resume_check_run(&p, dir, &runs[i], &err) == 0)
                dt_resume_finished(&p, runs[i].epochs, LONG_MAX);
    }
    dt_safetensors_free(&st);
    for (int epochs = 1; epochs <= 2; epochs++) {
        cfg.epochs = epochs;
        const dt_resume_run run = {epochs, 64, 16};
        dt_resume_load(dir, &cfg, &run, &state.model, &state.opt, &p, &err);
    }
    return 0;
}
