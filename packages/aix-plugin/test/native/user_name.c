/*
 * user_name.c — a program that selects its AIX malloc plug-in itself, by defining
 * _malloc_user_defined_name (exported from the executable: linked with -rdynamic).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef USER_MALLOC_NAME
#define USER_MALLOC_NAME "libaix_bump.a"
#endif

char *_malloc_user_defined_name = USER_MALLOC_NAME;

int main(void) {
    char *p = malloc(100);
    strcpy(p, "user-defined malloc");
    printf("%s ok\n", p);
    free(p);
    return 0;
}
