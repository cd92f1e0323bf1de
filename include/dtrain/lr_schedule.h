/* Learning-rate schedules: constant, cosine (to 0 at the end of training) or step
 * (x0.1 at 50% and again at 75% of the epochs), after an optional gradual warm-up
 * (Goyal et al. 2017: linear from the one-process rate to the scaled rate over the
 * first warm-up epochs). Linear scaling rule: the target rate is lr * scale; the
 * caller sets scale to the number of processes when --lr-scaling linear is asked. */
#ifndef DTRAIN_LR_SCHEDULE_H
#define DTRAIN_LR_SCHEDULE_H

/* DT_LR_MODEL: not chosen yet, the model's recipe decides (a dt_train_config's value
 * until dt_train_config_resolve; never a schedule's) */
typedef enum dt_lr_kind { DT_LR_MODEL = -1, DT_LR_CONSTANT, DT_LR_COSINE, DT_LR_STEP } dt_lr_kind;

typedef struct dt_lr_schedule {
    dt_lr_kind kind;
    double base_lr;       /* the rate for one process, as given by --lr */
    double scale;         /* linear scaling factor (1 = none) */
    double warmup_epochs; /* 0 = none */
    long steps_per_epoch;
    int epochs;
} dt_lr_schedule;

/* The rate for global step `step` (0-based, counted over the whole run). */
double dt_lr_at(const dt_lr_schedule *s, long step);

/* Parses "constant", "cosine" or "step"; -1 if unknown. */
int dt_lr_kind_parse(const char *name, dt_lr_kind *kind);
/* The name dt_lr_kind_parse reads back. */
const char *dt_lr_kind_name(dt_lr_kind kind);

#endif
