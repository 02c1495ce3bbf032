/*
 * heaphook/leaks.h — leak checking in libheaphook_heaptrack.so (README "Leak checking").
 *
 * Two ways to find leaks, usable together:
 *
 *  - Automatic (conservative): the tracer keeps a table of live blocks; a check stops every
 *    other thread, marks every block reachable from the writable data of every loaded object,
 *    every thread's stack, registers and TLS, scanning marked blocks in turn (start or interior
 *    pointers count), and logs the unreachable ones. It runs at exit by default
 *    (HEAPHOOK_LEAK_CHECK=0 turns that off), on HEAPHOOK_LEAK_SIGNAL, or by
 *    heaphook_leak_check().
 *
 *  - Precise (explicit model): register struct layouts, allocate typed objects, register root
 *    objects, and heaphook_leak_check_precise() searches the graph from the registered roots
 *    through the declared pointer fields only. Under the automatic mode, a typed block is
 *    scanned through its pointer fields only, so a non-pointer field whose value looks like an
 *    address does not keep another block alive.
 *
 * Link with -lheaphook_heaptrack (or LD_PRELOAD it and resolve these symbols with dlsym).
 * Nothing here allocates through malloc except heaphook_alloc_typed; printing uses write(2).
 */
#ifndef HEAPHOOK_LEAKS_H
#define HEAPHOOK_LEAKS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One field of a struct layout. */
typedef struct heaphook_field {
    const char *name;
    const char *type; /* the field's type name, for printing */
    size_t offset;
    size_t size;
    int is_pointer; /* holds pointers: size / sizeof(void *) of them */
} heaphook_field;

/* Registers a layout; returns its type id (>= 1), or -1 (bad arguments, table full). */
int heaphook_type_register(const char *name, size_t size, const heaphook_field *fields,
                           size_t nfields);

/* malloc of count zeroed objects of a registered type, remembered with their type. free()
 * releases them. NULL on failure. */
void *heaphook_alloc_typed(int type, size_t count);

/* Gives an existing heap block (from malloc & co.) a type; 0, or -1 when not a live block. */
int heaphook_set_type(void *block, int type);

/* A global or static object of a registered type is a root (its pointer fields are followed);
 * 0 or -1. Removing an address not registered is a no-op. */
int heaphook_root_add(const void *object, int type);
int heaphook_root_remove(const void *object);

/* Marks (is_root = 1) or unmarks a heap object as a root; 0, or -1 when not a live block. */
int heaphook_root_mark(void *block, int is_root);

/* Runs the automatic (conservative) check now; returns the number of leaked blocks, or -1 when
 * leak tracking is off (HEAPHOOK_LEAK_CHECK=0 and no type registered). */
long heaphook_leak_check(void);

/* Runs the precise check now: typed objects not reachable from the registered roots through
 * pointer fields are leaked. Returns their number, or -1 when leak tracking is off. */
long heaphook_leak_check_precise(void);

/* One leaked object of the last check. */
typedef struct heaphook_leak {
    void *ptr;
    size_t size;
    int type;              /* 0 when untyped */
    const char *type_name; /* "" when untyped */
} heaphook_leak;

/* Calls fn for every leaked object of the last check (stops when fn returns non-zero); returns
 * the number of calls. */
long heaphook_leaks_foreach(int (*fn)(const heaphook_leak *leak, void *arg), void *arg);

/* Writes one line per leaked object of the last check to fd: "leak <ptr> <size> <type>\n". */
void heaphook_leaks_print(int fd);

/* The figures of the last check, for a monitor that reads them periodically (the agent's client
 * sends them to `heaphook agent`). checks counts the checks made so far (0: none yet, the rest
 * is then 0). */
typedef struct heaphook_leak_summary {
    unsigned long long checks;
    unsigned long long live_blocks; /* blocks the last check looked at */
    unsigned long long reachable_blocks, reachable_bytes;
    unsigned long long leaked_blocks, leaked_bytes;
} heaphook_leak_summary;

/* Fills *out: 0; 1 when a check is running now (nothing written; ask again later: this never
 * waits for a check); -1 when leak tracking is off. Allocates nothing. */
int heaphook_leak_get_summary(heaphook_leak_summary *out);

#ifdef __cplusplus
}
#endif

#endif /* HEAPHOOK_LEAKS_H */
