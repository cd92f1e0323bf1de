#include "dtrain/lr_schedule.h"

#include <math.h>
#include <string.h>

double dt_lr_at(const dt_lr_schedule *s, long step) {
    const double target = s->base_lr * s->scale;
    const double epoch = (double)step / (double)(s->steps_per_epoch > 0 ? s->steps_per_epoch : 1);
    if (s->warmup_epochs > 0 && epoch < s->warmup_epochs) /* from base_lr to target */
        return s->base_lr + (target - s->base_lr) * epoch / s->warmup_epochs;
    const double total = (double)s->epochs;
    switch (s->kind) {
    case DT_LR_COSINE: {
        double start = s->warmup_epochs, span = total - start;
        double t = span > 0 ? (epoch - start) / span : 1.0;
        if (t > 1.0) t = 1.0;
        return 0.5 * target * (1.0 + cos(3.14159265358979323846 * t));
    }
    case DT_LR_STEP:
        return target * (epoch >= 0.75 * total ? 0.01 : epoch >= 0.5 * total ? 0.1 : 1.0);
    case DT_LR_CONSTANT:
    case DT_LR_MODEL: /* resolved before any schedule is built */
        break;
    }
    return target;
}

int dt_lr_kind_parse(const char *name, dt_lr_kind *kind) {
    if (!strcmp(name, "constant"))
        *kind = DT_LR_CONSTANT;
    else if (!strcmp(name, "cosine"))
        *kind = DT_LR_COSINE;
    else if (!strcmp(name, "step"))
        *kind = DT_LR_STEP;
    else
        return -1;
    return 0;
}

const char *dt_lr_kind_name(dt_lr_kind kind) {
    return kind == DT_LR_COSINE ? "cosine" : kind == DT_LR_STEP ? "step" : "constant";
}
