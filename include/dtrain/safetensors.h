/* safetensors files: 8-byte little-endian header length, a JSON header mapping names
 * to {dtype, shape, data_offsets}, then the raw little-endian data. Reading checks
 * every offset and shape against the file; writing is atomic (temporary file, fsync,
 * rename). */
#ifndef DTRAIN_SAFETENSORS_H
#define DTRAIN_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "dtrain/error.h"

enum { DT_ST_MAX_DIMS = 8 };

typedef struct dt_st_tensor {
    char name[128];
    char dtype[8]; /* "F32", "I64", ... */
    int ndim;
    int64_t shape[DT_ST_MAX_DIMS];
    size_t numel;
    const uint8_t *data; /* into the file's data section */
    size_t bytes;
} dt_st_tensor;

/* A metadata value holds a path of up to PATH_MAX and more (a --data spec); the
 * reader refuses a longer key or value rather than cutting it. */
enum { DT_ST_META_KEY_MAX = 64, DT_ST_META_VALUE_MAX = 4200 };
/* Metadata entries a file may hold (a checkpoint's flags and position, ~40, and its
 * tensors' checksums, 400 to an entry: room for ~1.6 million tensors). The reader
 * allocates as many as the file has (4.2 KB each), refusing more than this. */
enum { DT_ST_META_MAX = 4096 };

typedef struct dt_st_meta {
    char key[DT_ST_META_KEY_MAX];
    char value[DT_ST_META_VALUE_MAX];
} dt_st_meta;

typedef struct dt_safetensors {
    char path[256];
    dt_st_tensor *tensors;
    int n_tensors;
    dt_st_meta *meta;
    int n_meta;
    uint8_t *file; /* whole file, owned */
    size_t file_bytes;
} dt_safetensors;

int dt_safetensors_read(dt_safetensors *st, const char *path, dt_error *err);
void dt_safetensors_free(dt_safetensors *st);
const dt_st_tensor *dt_safetensors_find(const dt_safetensors *st, const char *name);
const char *dt_safetensors_meta(const dt_safetensors *st, const char *key);

/* Copies tensor `name` into out after checking it exists with exactly this dtype ("F32",
 * "I8", "I32", ...) and shape; the error names the file, the tensor and what differs. */
int dt_safetensors_get(const dt_safetensors *st, const char *name, const char *dtype, int ndim,
                       const int *shape, void *out, dt_error *err);
/* Copies tensor `name` (F32) into out after checking it exists and has exactly the
 * given shape; the error names the file, the tensor and what differs. */
int dt_safetensors_get_f32(const dt_safetensors *st, const char *name, int ndim, const int *shape,
                           float *out, dt_error *err);
/* Copies an integer tensor (I64 or I32) of `count` elements into int32 out. */
int dt_safetensors_get_i32(const dt_safetensors *st, const char *name, size_t count, int32_t *out,
                           dt_error *err);

/* One tensor to write. */
typedef struct dt_st_entry {
    const char *name;
    const char *dtype; /* "F32", "I64", "I32", "I8" */
    int ndim;
    int64_t shape[DT_ST_MAX_DIMS];
    const void *data;
} dt_st_entry;

/* Metadata with a control character in a key or value (a newline splits every message
 * that names it) is refused by the reader and the writer alike, in one line naming the
 * entry; dt_safetensors_meta_check is the writer's check, for callers that check
 * before any work. */
int dt_safetensors_write(const char *path, const dt_st_entry *entries, int n_entries,
                         const dt_st_meta *meta, int n_meta, dt_error *err);
int dt_safetensors_meta_check(const dt_st_meta *meta, int n_meta, const char *path, dt_error *err);

#endif
