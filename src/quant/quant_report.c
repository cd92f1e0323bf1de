#include "quant/quant_report.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/gnuplot.h"
#include "core/outfile.h"

/* One row of the table: a layer (conv or linear, or the input) and its output. */
typedef struct row {
    const char *layer;
    const dt_qop *op;           /* NULL for the input */
    const dt_qweight_stats *w;  /* NULL for the input */
    const dt_qvalue *value;     /* NULL for float logits */
    const dt_qvalue_stats *act; /* NULL for float logits */
} row;

/* DIR/name through the atomic writer (never onto a symlink, every write checked). */
static FILE *open_in(const char *dir, const char *name, dt_outfile *o, dt_error *err) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return dt_outfile_open(o, path, err) ? NULL : o->f;
}

static int close_in(dt_outfile *o, dt_error *err) {
    return dt_outfile_commit(o, err);
}

static int rows_of(const dt_qnet *q, row *rows) {
    int n = 0;
    rows[n++] = (row){"input", NULL, NULL, &q->values[0], &q->vstats[0]};
    for (int i = 0; i < q->n_ops; i++) {
        const dt_qop *o = &q->ops[i];
        if (!dt_qop_class_of(o->kind)->weight_dims) continue; /* a layer, not a pooling */
        const dt_qvalue *v = &q->values[o->out];
        rows[n++] = (row){o->name, o, &q->wstats[i], v->is_float ? NULL : v,
                          v->is_float ? NULL : &q->vstats[o->out]};
    }
    return n;
}

static void scale_span(const dt_qop *o, double *lo, double *hi) {
    *lo = INFINITY;
    *hi = -INFINITY;
    for (int s = 0; s < o->n_scales; s++) {
        *lo = fmin(*lo, o->weight_scale[s]);
        *hi = fmax(*hi, o->weight_scale[s]);
    }
}

static double clipped_fraction(const dt_qvalue_stats *a) {
    return a->calib.count ? a->clipped / (double)a->calib.count : NAN;
}

static int write_tables(const dt_qnet *q, const row *rows, int n, const char *dir, dt_error *err) {
    dt_outfile csv_out, md_out;
    FILE *csv = open_in(dir, "layers.csv", &csv_out, err);
    if (!csv) return -1;
    fputs("layer,weight_min,weight_max,weight_scale_min,weight_scale_max,weight_sqnr_db,"
          "activation,act_min,act_max,act_mean_minus_3sigma,act_mean_plus_3sigma,range_lo,"
          "range_hi,act_scale,int_lo,int_hi,clipped_fraction,act_sqnr_db\n",
          csv);
    FILE *md = open_in(dir, "report.md", &md_out, err);
    if (!md) {
        dt_outfile_discard(&csv_out);
        return -1;
    }
    char method[64];
    dt_calib_format(&q->cfg.calib, method, sizeof method);
    fprintf(md,
            "# int8 quantization of %s\n\n"
            "Scheme %s, %s weights, activation ranges by %s over %d calibration images.\n\n"
            "- Scales are multipliers: q = round(x * scale). Weight scale: one per layer, or\n"
            "  the smallest..largest of the per-channel ones.\n"
            "- Activation: the layer's output as the next layer reads it (after a fused ReLU\n"
            "  or residual add). min, max, mean +- 3 sigma: the float values over the\n"
            "  calibration images%s. Range: the float values the integers [lo, hi] cover.\n"
            "- Clipped: the fraction of the output's float values beyond that range (zeros\n"
            "  of a ReLU do not count). SQNR = 10 log10(sum x^2 / sum (x - q/scale)^2), of\n"
            "  the weights and of the activations, each quantized alone.\n\n"
            "| layer | weight min | weight max | weight scale | weight SQNR dB | activation | "
            "act min | act max | mean-3σ | mean+3σ | range | int | clipped | act SQNR dB |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
            q->model, dt_quant_scheme_name(q->cfg.scheme),
            q->cfg.per_channel ? "per-channel" : "per-tensor", method, q->calib_samples,
            q->cfg.scheme == DT_QUANT_LAB ? " (before ReLU, where the lab measures them)" : "");
    for (int r = 0; r < n; r++) {
        const row *x = &rows[r];
        double slo = NAN, shi = NAN, wmin = NAN, wmax = NAN, wsq = NAN;
        if (x->op) {
            scale_span(x->op, &slo, &shi);
            wmin = x->w->min;
            wmax = x->w->max;
            wsq = dt_sqnr_db(x->w->signal, x->w->noise);
        }
        char wscale[64] = "-";
        if (x->op && slo == shi)
            snprintf(wscale, sizeof wscale, "%.6g", slo);
        else if (x->op)
            snprintf(wscale, sizeof wscale, "%.4g..%.4g", slo, shi);
        fprintf(csv, "%s,%.6g,%.6g,%.6g,%.6g,%.4g,", x->layer, wmin, wmax, slo, shi, wsq);
        if (x->op)
            fprintf(md, "| %s | %.4g | %.4g | %s | %.2f |", x->layer, wmin, wmax, wscale, wsq);
        else
            fprintf(md, "| %s | - | - | - | - |", x->layer);
        if (!x->value) {
            fputs("logits (float),,,,,,,,,,,\n", csv);
            fputs(" logits (float) | | | | | | | | |\n", md);
            continue;
        }
        const dt_calib_stats *c = &x->act->calib;
        const double mean = dt_calib_mean(c), sd = dt_calib_std(c);
        const double clip = clipped_fraction(x->act);
        const double asq = dt_sqnr_db(x->act->signal, x->act->noise);
        fprintf(csv, "%s,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.9g,%d,%d,%.6g,%.4g\n", x->value->name,
                c->min, c->max, mean - 3 * sd, mean + 3 * sd, x->act->range_lo, x->act->range_hi,
                x->value->scale, x->value->lo, x->value->hi, clip, asq);
        fprintf(md, " %s | %.4g | %.4g | %.4g | %.4g | [%.4g, %.4g] | [%d, %d] | %.4f%% | %.2f |\n",
                x->value->name, c->min, c->max, mean - 3 * sd, mean + 3 * sd, x->act->range_lo,
                x->act->range_hi, x->value->lo, x->value->hi, 100.0 * clip, asq);
    }
    fputs("\nHistograms: weights.png (60 bins per layer), activations.png (30 bins per layer, "
          "over min..max); SVG beside them; histograms.gp redraws them.\n",
          md);
    int rc = close_in(&csv_out, err);
    if (rc) {
        dt_outfile_discard(&md_out);
        return rc;
    }
    return close_in(&md_out, err);
}

/* One gnuplot data block (index k) per panel: bin centre, count. */
static int write_histograms(const row *rows, int n, const char *dir, dt_error *err) {
    dt_outfile out;
    FILE *w = open_in(dir, "weights.dat", &out, err);
    if (!w) return -1;
    for (int r = 1; r < n; r++) {
        const dt_qweight_stats *s = rows[r].w;
        const double width = (s->max - s->min) / DT_QUANT_WEIGHT_BINS;
        fprintf(w, "# %s\n", rows[r].layer);
        for (int b = 0; b < DT_QUANT_WEIGHT_BINS; b++)
            fprintf(w, "%.6g %llu\n", s->min + width * (b + 0.5), (unsigned long long)s->hist[b]);
        fputs("\n\n", w);
    }
    if (close_in(&out, err)) return -1;
    FILE *a = open_in(dir, "activations.dat", &out, err);
    if (!a) return -1;
    for (int r = 0; r < n; r++) {
        if (!rows[r].value) continue;
        const dt_calib_stats *c = &rows[r].act->calib;
        const double width = (c->max - c->min) / DT_CALIB_REPORT_BINS;
        fprintf(a, "# %s\n", rows[r].value->name);
        for (int b = 0; b < DT_CALIB_REPORT_BINS; b++)
            fprintf(a, "%.6g %llu\n", c->min + width * (b + 0.5),
                    (unsigned long long)c->hist_report[b]);
        fputs("\n\n", a);
    }
    return close_in(&out, err);
}

/* A multiplot of `panels` histograms from data file `data`, PNG and SVG; every panel's
 * axes say what they count: xlabel (the value binned), y the count per bin. */
static void plot_panels(FILE *gp, const char *base, const char *data, const char *what,
                        const char *xlabel, const char *ylabel, const char *const *titles,
                        int panels) {
    const int cols = panels <= 3 ? panels : panels <= 6 ? 3 : panels <= 12 ? 4 : 5;
    const int rows = (panels + cols - 1) / cols;
    static const char *const terms[2][2] = {{"pngcairo size %d,%d font 'Sans,9'", "png"},
                                            {"svg size %d,%d dynamic font 'Sans,9'", "svg"}};
    for (int t = 0; t < 2; t++) {
        fputs("set terminal ", gp);
        fprintf(gp, terms[t][0], 320 * cols, 240 * rows + 40);
        fprintf(gp, "\nset termoption noenhanced\nset output '%s.%s'\n", base, terms[t][1]);
        fprintf(gp, "set multiplot layout %d,%d title '%s'\nset xlabel '%s'\nset ylabel '%s'\n",
                rows, cols, what, xlabel, ylabel);
        for (int k = 0; k < panels; k++)
            fprintf(gp, "set title '%s'\nplot '%s' index %d using 1:2 with boxes notitle\n",
                    titles[k], data, k);
        fputs("unset multiplot\n", gp);
    }
}

/* mkdir -p: dir and the folders above it that are missing. */
static int make_dirs(const char *dir, dt_error *err) {
    char path[4096];
    if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path)
        return dt_error_set(err, "report folder name too long: %.60s...", dir);
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(path, 0755) != 0 && errno != EEXIST)
            return dt_error_set(err, "cannot create %s: %s", path, strerror(errno));
        *p = '/';
    }
    if (mkdir(path, 0755) != 0 && errno != EEXIST)
        return dt_error_set(err, "cannot create %s: %s", path, strerror(errno));
    return 0;
}

int dt_quant_report_files(dt_fileset *files, const char *dir, dt_error *err) {
    static const char *const names[] = {
        "layers.csv",  "report.md",   "weights.dat",     "activations.dat", "histograms.gp",
        "gnuplot.err", "weights.png", "activations.png", "weights.svg",     "activations.svg"};
    struct stat st; /* a folder not made yet holds nothing to collide with: made later */
    if (stat(dir, &st) != 0) return errno == ENOENT ? 0 : make_dirs(dir, err);
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        dt_fileset_add_in(files, "--report", dir, names[i], 1);
    return 0;
}

int dt_quant_report_write(const dt_qnet *q, const char *dir, dt_error *err) {
    if (!q->vstats || !q->wstats)
        return dt_error_set(err, "no statistics to report: quantize with the report on");
    if (make_dirs(dir, err)) return -1;
    row *rows = calloc((size_t)q->n_ops + 1, sizeof(row));
    const char **wt = calloc((size_t)q->n_ops + 1, sizeof(char *));
    const char **at = calloc((size_t)q->n_ops + 1, sizeof(char *));
    if (!rows || !wt || !at) {
        free(rows), free(wt), free(at);
        return dt_error_set(err, "out of memory for the report");
    }
    const int n = rows_of(q, rows);
    int nw = 0, na = 0;
    for (int r = 0; r < n; r++) {
        if (rows[r].op) wt[nw++] = rows[r].layer;
        if (rows[r].value) at[na++] = rows[r].value->name;
    }
    int rc = write_tables(q, rows, n, dir, err);
    if (rc == 0) rc = write_histograms(rows, n, dir, err);
    dt_outfile gp_out;
    FILE *gp = rc == 0 ? open_in(dir, "histograms.gp", &gp_out, err) : NULL;
    if (gp) {
        fputs("# Made by dtrain quantize; redraw with: gnuplot histograms.gp\n"
              "set style fill solid 0.6 noborder\nset key off\nset format y '%g'\n"
              "set yrange [0:*]\n",
              gp);
        plot_panels(gp, "weights", "weights.dat", "weights (60 bins over min..max)",
                    "weight value (float, BatchNorm folded in)", "weights per bin", wt, nw);
        plot_panels(gp, "activations", "activations.dat",
                    "activations over the calibration images (30 bins over min..max)",
                    "activation value (float)", "values per bin", at, na);
        rc = close_in(&gp_out, err);
        char errf[4200]; /* gnuplot's messages, kept only when it failed */
        snprintf(errf, sizeof errf, "%s/gnuplot.err", dir);
        if (rc == 0 && dt_gnuplot_run(dir, "histograms.gp", "gnuplot.err") != 0)
            rc = dt_error_set(
                err, "gnuplot failed or is missing (install gnuplot-nox); see %s/gnuplot.err", dir);
        else if (rc == 0)
            remove(errf);
    } else {
        rc = -1;
    }
    free(rows), free(wt), free(at);
    return rc;
}
