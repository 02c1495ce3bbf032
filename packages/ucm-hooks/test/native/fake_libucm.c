/* Stands in for UCX's real libucm in the compatibility test: same function names. Calling it
 * means the compat header let a libucm name through. */
#include <stdio.h>
#include <stdlib.h>

int ucm_set_event_handler(int events, int priority, void *cb, void *arg) {
    (void)events, (void)priority, (void)cb, (void)arg;
    fprintf(stdout, "compat: the real libucm's ucm_set_event_handler was called\n");
    exit(3);
}
void ucm_unset_event_handler(int events, void *cb, void *arg) {
    (void)events, (void)cb, (void)arg;
    fprintf(stdout, "compat: the real libucm's ucm_unset_event_handler was called\n");
    exit(3);
}
