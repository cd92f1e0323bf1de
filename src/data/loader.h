/* The input pipeline: W worker threads decode and augment batches ahead of the
 * trainer into a bounded ring of `depth` batch slots (default 2W), as a PyTorch
 * DataLoader with num_workers = W and prefetching. Batch b of an epoch always
 * holds the same samples and lands in order, whatever W is. With W = 0 the trainer
 * decodes each batch itself when it asks for it.
 *
 * Ownership: the loader owns the slots; dt_loader_next lends one to the trainer
 * until dt_loader_release. */
#ifndef DTRAIN_LOADER_H
#define DTRAIN_LOADER_H

#include <stdint.h>

#include "dtrain/dataset.h"
#include "dtrain/error.h"
#include "dtrain/transform.h"

typedef struct dt_loader dt_loader;

/* The loader keeps pointers to ds and t: they must outlive it. */
int dt_loader_create(dt_loader **loader, const dt_dataset *ds, const dt_transform *t, int batch,
                     int workers, int depth, dt_error *err);
void dt_loader_destroy(dt_loader *loader);

/* Schedules an epoch over indices[0..count) (kept by pointer until the epoch's last
 * batch is released). The previous epoch's batches must all have been released. */
void dt_loader_start_epoch(dt_loader *loader, const int *indices, int count, int epoch);

/* Waits for the next batch of the epoch; returns its size (0 when the epoch is
 * done) and lends its buffers: x [n, c, h, w], y [n]. */
int dt_loader_next(dt_loader *loader, const float **x, const int32_t **y);
void dt_loader_release(dt_loader *loader);

#endif
