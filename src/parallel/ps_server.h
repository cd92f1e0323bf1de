/* The server role of parameter-server training (see ps.h for the modes): rank s of
 * the first P ranks holds shard s of the parameters and its optimizer state, and
 * serves the workers' pulls and pushes until every worker is done. */
#ifndef DTRAIN_PS_SERVER_H
#define DTRAIN_PS_SERVER_H

#include "dtrain/error.h"
#include "dtrain/lr_schedule.h"
#include "dtrain/model.h"
#include "dtrain/sgd.h"
#include "dtrain/world.h"
#include "parallel/ps.h"

/* Serves over the process world `job` (servers are its ranks 0..P-1, workers the
 * rest). opt holds the optimizer state (the whole buffer's; only the shard is used);
 * sched gives the rate per server version (one version per update); version is the
 * number of updates made before (0, or a resumed run's). A worker's state request
 * (dt_ps_fetch_state) is answered as its pull would be. */
int dt_ps_serve(const dt_world *job, const dt_ps_config *cfg, dt_model *m, dt_sgd *opt,
                const dt_lr_schedule *sched, long version, dt_ps_server_stats *stats,
                dt_error *err);

#endif
