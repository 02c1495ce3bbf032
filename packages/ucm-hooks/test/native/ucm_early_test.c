/*
 * ucm_early_test.c — run with LD_PRELOAD="libheaphook_ucm.so libucm_early_lib.so": a 64 MiB
 * malloc and free, sbrk(0) and a trim of the heap, then the early library's VM totals. Prints
 * "early: mapped <bytes> unmapped <bytes>".
 */
#include <dlfcn.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(void) {
    char *big = malloc(64u << 20);
    big[0] = 1;
    free(big);
    for (int i = 0; i < 1000; ++i) free(malloc(100000)); /* grows and trims the main heap */
    (void)sbrk(0);
    malloc_trim(0);
    size_t *mapped = dlsym(RTLD_DEFAULT, "ucm_early_mapped");
    size_t *unmapped = dlsym(RTLD_DEFAULT, "ucm_early_unmapped");
    if (mapped == NULL || unmapped == NULL) {
        printf("early: the early library is not loaded\n");
        return 1;
    }
    printf("early: mapped %zu unmapped %zu\n", *mapped, *unmapped);
    return 0;
}
