/*
 * vm.h — mapped-memory events recorded from ucm-hooks (vm.c).
 */
#ifndef HH_VM_H
#define HH_VM_H

#include <stdbool.h>

/* HEAPHOOK_TRACE_VM (auto, yes, no) and whether ucm-hooks is in the process: true when VM
 * events are to be recorded. Stops the program when yes is asked for without ucm-hooks, unless
 * attaching (attach()'s process is not ours to stop: one warning, no events). */
bool hh_vm_configure(bool attaching);

/* Registers the handler (outside any hook: from the constructor, or after an attach). */
void hh_vm_start(void);

/* Unregisters it (before a detach): once it returns the handler records nothing more. */
void hh_vm_stop(void);

#endif /* HH_VM_H */
