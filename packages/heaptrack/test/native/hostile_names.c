/*
 * A program whose symbol names are hostile (test/integration/hostile-text.test.ts): the test
 * renames the hostile_* functions with objcopy --redefine-sym after compiling this file (without
 * debug information, so addr2line reads the names from the symbol table) to names holding GitHub
 * workflow commands, terminal escapes and newlines. Each chain below leaks its block, so every
 * name is on a leak site's stack; honest_site's stack is the control: symbolised, it must read
 * honest_site, main and nothing of the other names.
 */
#include <stdio.h>
#include <stdlib.h>

void *path_site(size_t n); /* hostile_path.c: its DWARF file name holds newlines */

#define LEAF(name)                                   \
    __attribute__((noinline)) void *name(size_t n) { \
        void *p = malloc(n);                         \
        __asm__ volatile("" ::: "memory");           \
        return p;                                    \
    }
#define CALLS(name, callee)                          \
    __attribute__((noinline)) void *name(size_t n) { \
        void *p = callee(n);                         \
        __asm__ volatile("" ::: "memory");           \
        return p;                                    \
    }

/* Chain 1 (3000 bytes): the CI commands, innermost first. */
LEAF(hostile_legacy)
CALLS(hostile_stop, hostile_legacy)
CALLS(hostile_mask, hostile_stop)
CALLS(hostile_error, hostile_mask)
/* Chain 2 (2000 bytes): a newline that forges frames, then terminal escapes. */
LEAF(hostile_newline)
CALLS(hostile_escape, hostile_newline)
/* The control (500 bytes). */
LEAF(honest_site)

int main(void) {
    void *kept[4];
    kept[0] = hostile_error(3000);
    kept[1] = hostile_escape(2000);
    kept[2] = path_site(1000);
    kept[3] = honest_site(500);
    printf("%p %p %p %p\n", kept[0], kept[1], kept[2], kept[3]);
    return 0;
}
