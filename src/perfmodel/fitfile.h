/* Fits saved as small JSON files (dtrain fit-loss --save, fit-speed --save) and read
 * back by dtrain predict:
 *   {"fit": "loss", "b0": .., "b1": .., "b2": .., "last_step": .., "converge_step": ..
 *    [, "target_loss": .., "observed_step": ..] [, "b1_at_bound": true]}
 *   {"fit": "speed-ps" | "speed-allreduce", "theta": [..]} */
#ifndef DTRAIN_FITFILE_H
#define DTRAIN_FITFILE_H

#include "dtrain/error.h"
#include "perfmodel/perfmodel.h"

/* last_step: the last step the fit saw; converge_step: its predicted step. With a
 * target loss (target > 0), converge_step is the step predicted for it and
 * observed_step the step where the smoothed loss first reached it (-1: never); both
 * are saved. target <= 0 leaves them out. b1_at_bound marks a fit whose b1 is 0
 * (no finite start: dt_loss_fit_b1_at_bound). */
int dt_loss_fit_save(const char *path, const dt_loss_fit *fit, double last_step,
                     double converge_step, double target, double observed_step, dt_error *err);
int dt_loss_fit_load(const char *path, dt_loss_fit *fit, double *last_step, double *converge_step,
                     dt_error *err);
int dt_speed_fit_save(const char *path, const dt_speed_fit *fit, dt_error *err);
int dt_speed_fit_load(const char *path, dt_speed_fit *fit, dt_error *err);

#endif
