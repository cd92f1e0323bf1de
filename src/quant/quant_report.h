/* The quantization report of a network dt_quantize made with cfg.report set: per layer
 * the weights' range, scale(s) and SQNR, the activation's observed range, mean +- 3
 * sigma, the range the integers cover, the fraction of values clipped and the SQNR, as
 * report.md and layers.csv; and the histograms (weights 60 bins, activations 30 bins,
 * one panel per layer) as weights.png/.svg and activations.png/.svg drawn by gnuplot
 * (histograms.gp and the .dat files stay beside them to redraw by hand). */
#ifndef DTRAIN_QUANT_REPORT_H
#define DTRAIN_QUANT_REPORT_H

#include "core/fileset.h"
#include "dtrain/error.h"
#include "quant/quant.h"

/* Creates dir (and missing parents) if needed. Fails if q has no statistics or gnuplot fails. */
int dt_quant_report_write(const dt_qnet *q, const char *dir, dt_error *err);
/* Adds every file the report writes in dir to files as outputs, for the command's
 * check before any work (nothing when dir does not exist yet: the report makes it). */
int dt_quant_report_files(dt_fileset *files, const char *dir, dt_error *err);

#endif
