/* A library of the relocation-patching test (reloc_main.c): calls into libc and into itself. */
#include <unistd.h>

int reloc_lib_value(void) {
    return 1;
}
/* Calls getpid through this library's GOT. */
int reloc_lib_getpid(void) {
    return (int)getpid();
}
/* Calls its own exported function: through the PLT/GOT unless bound locally. */
int reloc_lib_call_value(void) {
    return reloc_lib_value() * 10;
}
