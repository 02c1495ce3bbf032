/* The one line heaphook-inject prints for a refusal or a failure, on stderr. */
#include "inject.h"

#include <stdarg.h>
#include <stdio.h>

int refuse(int code, const char *format, ...) {
    va_list args;
    va_start(args, format);
    fputs("heaphook-inject: ", stderr);
    vfprintf(stderr, format, args);
    fputc('\n', stderr);
    va_end(args);
    return code;
}
