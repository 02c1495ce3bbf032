/* The library reloc_main.c dlopens after a patch is active. */
#include <unistd.h>

int reloc_late_getpid(void) {
    return (int)getpid();
}
