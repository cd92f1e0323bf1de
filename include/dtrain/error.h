/* Errors: library functions that can fail take a dt_error* and return 0 on success,
 * -1 on failure with a one-line message in err->msg; the CLI prints it and exits. */
#ifndef DTRAIN_ERROR_H
#define DTRAIN_ERROR_H

#include <stddef.h>

typedef struct dt_error {
    char msg[512];
} dt_error;

/* Formats the message into err (if not NULL) and returns -1, so that
 * `return dt_error_set(err, "...")` reads naturally. */
int dt_error_set(dt_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* 64-byte aligned, zero-filled allocation of `bytes`; on failure sets err naming
 * `what` and returns NULL. Free with dt_free. */
void *dt_alloc(size_t bytes, const char *what, dt_error *err);
void dt_free(void *p);

/* Bytes of physical memory, used to refuse batches that cannot fit before touching
 * them (Linux overcommit would otherwise let the OOM killer end the run). */
size_t dt_physical_memory_bytes(void);

#endif
