/*
 * heaphook/reloc.h — GOT relocation patching: redirect the calls that loaded objects make to a
 * named function, without LD_PRELOAD.
 *
 * A call from an object to a function of another object goes through that object's GOT: a
 * JUMP_SLOT entry (calls through the PLT) or a GLOB_DAT entry (-fno-plt calls and address
 * loads). Writing another address into those entries redirects the calls. Full RELRO objects
 * (-z relro -z now) keep their GOT read-only after start-up: the page is made writable, written
 * and given its protection back. PIE and non-PIE executables, lazy and immediate binding and
 * -fno-plt objects are all handled. Only RELA relocations (x86-64, AArch64) are supported.
 *
 * Two levels, after plthook's habits (numeric errors, replace returns the old pointer):
 *
 *  - one object:  heaphook_reloc_open / _open_by_address / _replace / _close
 *  - the process: heaphook_reloc_patch — every loaded object except the skipped ones, and every
 *    object loaded later (dlopen is patched while a patch is active), undone by
 *    heaphook_reloc_unpatch. Objects unloaded by dlclose are forgotten.
 *
 * Not redirected: calls inside the object that defines the function when it binds them
 * locally (-Bsymbolic, hidden or protected symbols, static functions), calls made through
 * pointers obtained before the patch (dlsym results, vtables), and the dynamic loader itself.
 * Thread safety: the process-wide functions take one mutex (made fork-safe, see "Fork" below);
 * a thread calling the function while it is being patched gets either the old or the new target.
 */
#ifndef HEAPHOOK_RELOC_H
#define HEAPHOOK_RELOC_H

#ifdef __cplusplus
extern "C" {
#endif

/* Errors (returned as negative numbers are not used: these are the return values). */
#define HEAPHOOK_RELOC_OK 0
#define HEAPHOOK_RELOC_NOT_FOUND 1      /* no object / no relocation of that symbol */
#define HEAPHOOK_RELOC_INVALID_ARG 2    /* NULL argument, empty name */
#define HEAPHOOK_RELOC_BAD_OBJECT 3     /* no dynamic section, REL instead of RELA, ... */
#define HEAPHOOK_RELOC_PROTECT_FAILED 4 /* mprotect refused (errno kept) */
#define HEAPHOOK_RELOC_NO_MEMORY 5      /* the patch table is full */
#define HEAPHOOK_RELOC_NO_ORIGINAL 6    /* the original function cannot be found */

/* A short message for an error number ("symbol not found", ...). */
const char *heaphook_reloc_strerror(int error);

/* ---- One object ------------------------------------------------------------------------ */

typedef struct heaphook_reloc_object heaphook_reloc_object;

/* Opens a loaded object by file name: NULL is the main program, else a path or the last path
 * component ("libc.so.6"). *out is released with heaphook_reloc_close. */
int heaphook_reloc_open(heaphook_reloc_object **out, const char *filename);
/* Opens the loaded object containing address (a function or variable of it). */
int heaphook_reloc_open_by_address(heaphook_reloc_object **out, const void *address);
/* Writes replacement into every GOT entry of symbol in the object. *old (may be NULL) receives
 * the function the entries led to before: the resolved function even when lazy binding had not
 * resolved it yet. NOT_FOUND when the object has no relocation of symbol. */
int heaphook_reloc_replace(heaphook_reloc_object *object, const char *symbol, void *replacement,
                           void **old);
/* *current receives the function the object's first GOT entry of symbol leads to now (resolved
 * through the loader when lazy binding has not resolved it yet). NOT_FOUND when the object has
 * no relocation of symbol. */
int heaphook_reloc_get(heaphook_reloc_object *object, const char *symbol, void **current);
void heaphook_reloc_close(heaphook_reloc_object *object);

/* ---- The whole process ----------------------------------------------------------------- */

typedef struct heaphook_reloc_handle heaphook_reloc_handle;

/* Redirects symbol in every loaded object (except skipped ones) to replacement, now and in
 * objects loaded later. *original (may be NULL) receives the function calls went to before
 * (the definition dlsym finds, skipping replacement itself). *patch identifies the patch for
 * heaphook_reloc_unpatch (may be NULL when it is never undone). Patching a symbol that has an
 * active patch adds a layer: the newest wins, and its *original is the previous replacement.
 * Returns OK even when no object calls symbol yet (a later dlopen may bring one). */
int heaphook_reloc_patch(const char *symbol, void *replacement, void **original,
                         heaphook_reloc_handle **patch);
/* Undoes a patch: every entry it wrote gets its previous value back (if another patch of the
 * same symbol was applied after it, undo that first). Objects loaded after the patch that were
 * patched by the dlopen hook get the real function. Undoing the last active patch removes the
 * dlopen / dlclose hooks as well: every GOT entry is then what it was before the first patch. */
int heaphook_reloc_unpatch(heaphook_reloc_handle *patch);
/* *function receives the function calls to symbol reach now: dlsym(RTLD_DEFAULT)'s answer,
 * except that a non-PIE program's canonical PLT entry (its own jump through the GOT slot a patch
 * would redirect) is followed to the function behind it. Use it to find what a replacement
 * should forward to before patching. NOT_FOUND when no loaded object defines symbol. */
int heaphook_reloc_resolve(const char *symbol, void **function);
/* Never patch the object containing address (call it with a function of your own library, so
 * that its calls to the original are not redirected to itself). Up to 32 objects. */
int heaphook_reloc_skip(const void *address);
/* How many GOT entries the active patches have written (for tests and logs). */
unsigned long heaphook_reloc_patched_entries(void);

/* ---- Fork ------------------------------------------------------------------------------ */

/* The process-wide functions hold one mutex while they patch (and inside the dlopen / dlclose
 * hooks), and may call dlsym, which may allocate, under it: a fork must not copy it held.
 * By default the first heaphook_reloc_patch registers pthread_atfork handlers of its own
 * (prepare takes the mutex, parent releases it, child re-initialises it). A library with a
 * fork module of its own (one pthread_atfork calling every component's handlers in a
 * documented lock order) calls heaphook_reloc_fork_by_caller() before its first patch (from
 * its constructor), and then these three from its handlers: the mutex comes after every lock a
 * thread holds while it calls heaphook_reloc_patch / _unpatch, and before every lock the
 * allocator (reached through dlsym's allocations) takes. */
void heaphook_reloc_fork_by_caller(void);
void heaphook_reloc_prefork(void);
void heaphook_reloc_postfork_parent(void);
void heaphook_reloc_postfork_child(void);

#ifdef __cplusplus
}
#endif

#endif /* HEAPHOOK_RELOC_H */
