/* Fits saved as small JSON files (dtrain fit-loss --save, fit-speed --save) and read
 * back by dtrain predict:
 *   {"fit": "loss", "b0": .., "b1": .., "b2": .., "last_step": .., "converge_step": ..}
 *   {"fit": "speed-ps" | "speed-allreduce", "theta": [..]} */
#ifndef DTRAIN_FITFILE_H
#define DTRAIN_FITFILE_H

#include "dtrain/error.h"
#include "dtrain/perfmodel.h"

/* last_step: the last step the fit saw; converge_step: its predicted step. */
int dt_loss_fit_save(const char *path, const dt_loss_fit *fit, double last_step,
                     double converge_step, dt_error *err);
int dt_loss_fit_load(const char *path, dt_loss_fit *fit, double *last_step, double *converge_step,
                     dt_error *err);
int dt_speed_fit_save(const char *path, const dt_speed_fit *fit, dt_error *err);
int dt_speed_fit_load(const char *path, dt_speed_fit *fit, dt_error *err);

#endif
