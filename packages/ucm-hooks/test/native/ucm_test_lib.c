/* A library the event tests dlopen after the hooks are installed: its own mmap/munmap calls
 * (through its own GOT) must raise events. */
#include <stddef.h>
#include <sys/mman.h>

void *ucm_test_lib_map(size_t size) {
    return mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
}
int ucm_test_lib_unmap(void *p, size_t size) {
    return munmap(p, size);
}
