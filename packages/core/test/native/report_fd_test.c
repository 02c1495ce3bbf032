/*
 * report_fd_test.c — an exit report must survive the program closing stderr.
 *
 * coreutils close fd 2 before library destructors run; heaphook writes its reports to a
 * duplicate of stderr taken when the library was loaded. This program closes fd 2, opens a
 * file so that descriptor 2 is reused by something else, then calls malloc_stats. Run under
 * LD_PRELOAD=libheaphook_<name>.so: the report must appear on the original stderr, and not in
 * the file that took descriptor 2 (whose path is argv[1]).
 */
#include <fcntl.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv) {
    void *block = malloc(12345);
    close(STDERR_FILENO);
    if (argc > 1) {
        int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644); /* takes descriptor 2 */
        if (fd != STDERR_FILENO) {
            printf("expected the file to take fd 2, got %d\n", fd);
            return 1;
        }
    }
    malloc_stats();
    free(block);
    printf("report_fd_test: done\n");
    return 0;
}
