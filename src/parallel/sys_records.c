#include "parallel/sys_records.h"

#include <stdlib.h>

enum { SYS_TAG_COUNT = 7401, SYS_TAG_RECORDS = 7402 };

void dt_sys_records_send(const dt_world *w, int to, const dt_sys_record *r, long n) {
    long long count = n;
    dt_world_send_bytes(w, &count, sizeof count, to, SYS_TAG_COUNT, "resource samples");
    if (n > 0)
        dt_world_send_bytes(w, r, sizeof *r * (size_t)n, to, SYS_TAG_RECORDS, "resource samples");
}

int dt_sys_records_recv(const dt_world *w, int from, dt_sys_record **r, long *n, dt_error *err) {
    long long count = 0;
    *r = NULL;
    *n = 0;
    dt_world_recv_bytes(w, &count, sizeof count, from, SYS_TAG_COUNT, "resource samples");
    if (count <= 0) return 0;
    *r = malloc(sizeof **r * (size_t)count);
    if (!*r) return dt_error_set(err, "out of memory for resource samples");
    dt_world_recv_bytes(w, *r, sizeof **r * (size_t)count, from, SYS_TAG_RECORDS,
                        "resource samples");
    *n = (long)count;
    return 0;
}
