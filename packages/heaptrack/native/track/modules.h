/*
 * modules.h — the module map: every loaded ELF object (program, libraries) with its load
 * address, address range and GNU build id, sent to the log so that addresses can be
 * symbolised after the process is gone.
 */
#ifndef HH_MODULES_H
#define HH_MODULES_H

#include <stdbool.h>
#include <stdint.h>

/* Emits a MODULE record for every loaded object not yet sent in this process (all of them
 * after hh_modules_reset). Cheap when nothing was loaded since the last call. */
void hh_modules_sync(void);

/* True when pc lies in a module already sent. */
bool hh_modules_contains(uintptr_t pc);

/* Forget what was sent (a fork child writes a log of its own). */
void hh_modules_reset(void);

/* The address range of the object containing addr. */
bool hh_modules_range_of(uintptr_t addr, uintptr_t *lo, uintptr_t *hi);

#endif /* HH_MODULES_H */
