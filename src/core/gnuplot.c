#include "core/gnuplot.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

int dt_gnuplot_run(const char *dir, const char *script, const char *stderr_path) {
    fflush(NULL); /* or the child's copy of our buffers could be written twice */
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) { /* plain descriptors here: no stdio buffers are flushed again */
        /* O_NOFOLLOW: a symlink named like the error file is not followed to its target */
        int err_fd = chdir(dir) == 0
                         ? open(stderr_path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, 0644)
                         : -1;
        int null_fd = open("/dev/null", O_RDWR);
        if (err_fd < 0 || null_fd < 0 || dup2(err_fd, STDERR_FILENO) < 0 ||
            dup2(null_fd, STDOUT_FILENO) < 0 || dup2(null_fd, STDIN_FILENO) < 0)
            _exit(127);
        char *const argv[] = {"gnuplot", (char *)script, NULL};
        execvp(argv[0], argv);
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) return -1;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}
