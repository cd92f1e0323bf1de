/* Helpers shared by the C tests: random fills and error norms. */
#ifndef DTRAIN_TESTUTIL_H
#define DTRAIN_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>

void fill_uniform(float *x, size_t n, uint64_t seed, float lo, float hi);
/* ||a - b|| / max(||b||, tiny): the norm-wise relative error of a against b. */
double rel_error(const float *a, const float *b, size_t n);
/* Calloc that fails the running test on out-of-memory. */
void *test_alloc(size_t bytes);

/* Norm-wise relative error of every F32 tensor of safetensors file a against b
 * (together, as one vector); fails the test if a file or a tensor is missing. */
double safetensors_rel_error(const char *a, const char *b);

struct dt_model_spec;
/* The spec of a parity fixture's model (its metadata's "model"): a zoo name, or an
 * ONNX file named relative to the fixture's folder (scripts/make_onnx_fixtures.py),
 * whose path goes into onnx_path (spec->name points into it). Fails the test on error. */
void fixture_model_spec(struct dt_model_spec *spec, const char *fixture_path, const char *model,
                        char *onnx_path, size_t size);

/* A row of tests/fixtures/onnx/families.txt (issue 41's torchvision families): the
 * fixture (onnx/NAME.onnx and its parity data) and what it does today: imports at
 * PyTorch's parity, or is refused naming exactly the operators in `ops` (commas). */
typedef struct family_row {
    char name[64];
    int parity;
    char ops[256];
} family_row;
/* Reads $DT_FIXTURES/onnx/families.txt into rows (at most max); returns the count.
 * Fails the test on a malformed row. */
int family_rows(family_row *rows, int max);

struct dt_train_config;
/* The small run the equivalence tests compare: synthetic MNIST, 6 steps, SGD with
 * momentum and weight decay, one thread, fixed seed. */
struct dt_train_config equivalence_config(const char *model, int batch);

struct CMUnitTest;
struct dt_world;
/* main() of a test run under mpirun: initialises the world, lets rank 0 alone
 * print, runs the group on every rank and fails if any rank failed. */
int run_mpi_tests(struct dt_world *world, const struct CMUnitTest *tests, size_t count, int *argc,
                  char ***argv);

#endif
