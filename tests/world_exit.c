/* Driver for test_world_exit.sh: a job ends the way dtrain's failures end it, with
 * the roles of a parameter-server job whose workers agreed on a failure (the mix that
 * hung Open MPI's mpirun): rank 0 still at work (polling, as a server waits on its
 * workers), rank 1 speaks and ends the job, the others wait for it. With "together",
 * every rank ends at the same point; with "late", every rank but 1 ends well
 * (dt_world_finalize) and rank 1 then fails alone, as a final save failing on one rank
 * would. With "orphaned", every rank waits for an abort that never comes, and the test
 * kills mpirun: the ranks must end at once, not after the 60 s bound. Run under
 * mpirun with 4 ranks. */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/timer.h"
#include "dtrain/world.h"

int main(int argc, char **argv) {
    const char *how = argc > 1 ? argv[1] : "";
    if (strcmp(how, "mixed") && strcmp(how, "together") && strcmp(how, "late") &&
        strcmp(how, "orphaned")) {
        fprintf(stderr, "usage: world_exit mixed|together|late|orphaned (under mpirun -np 4)\n");
        return 2;
    }
    const int together = strcmp(how, "together") == 0;
    dt_world w;
    dt_error err;
    if (dt_world_init(&w, &argc, &argv, &err)) {
        fprintf(stderr, "world_exit: %s\n", err.msg);
        return 2;
    }
    if (together) {
        if (w.rank == 0) fprintf(stderr, "world_exit: ended together\n");
        dt_world_exit(&w, 1, DT_EXIT_TOGETHER);
    }
    if (strcmp(how, "orphaned") == 0) { /* every rank waits for an abort none sends */
        printf("world_exit: rank %d (pid %ld) waits\n", w.rank, (long)getpid());
        fflush(stdout);
        dt_world_exit(&w, 1, DT_EXIT_WAIT);
    }
    if (strcmp(how, "late") == 0) { /* rank 1 fails after the others ended well */
        if (w.rank != 1) {
            dt_world_finalize(&w);
            return 0;
        }
        const struct timespec late = {0, 200000000};
        nanosleep(&late, NULL);
        dt_world_abort(&w, "world_exit: rank 1 fails last");
    }
    if (w.rank == 1) {
        fprintf(stderr, "world_exit: rank 1 ends the job\n");
        dt_world_exit(&w, 1, DT_EXIT_ENDS_JOB);
    }
    if (w.rank > 1) dt_world_exit(&w, 1, DT_EXIT_WAIT);
    /* rank 0: at work until the abort ends it; 30 s without one is a failure */
    const double until = dt_now() + 30.0;
    const struct timespec poll = {0, 10000000};
    while (dt_now() < until) nanosleep(&poll, NULL);
    fprintf(stderr, "world_exit: rank 0 was not ended by rank 1's abort\n");
    return 3;
}
