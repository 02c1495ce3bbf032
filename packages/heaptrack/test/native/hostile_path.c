/*
 * A function whose DWARF file name holds newlines and a forged frame
 * (test/integration/hostile-text.test.ts compiles this file with -gdwarf-4: addr2line then prints
 * the name with its newlines).
 */
#include <stdlib.h>

#line 7 "hostile\nfake_frame at /etc/passwd:1\npath.c"
__attribute__((noinline)) void *path_site(size_t n) {
    void *p = malloc(n);
    __asm__ volatile("" ::: "memory");
    return p;
}
