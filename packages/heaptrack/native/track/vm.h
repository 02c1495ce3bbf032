/*
 * vm.h — mapped-memory events recorded from ucm-hooks (vm.c).
 */
#ifndef HH_VM_H
#define HH_VM_H

#include <stdbool.h>

/* HEAPHOOK_TRACE_VM (auto, yes, no) and whether ucm-hooks is in the process: true when VM
 * events are to be recorded. Stops the program when yes is asked for without ucm-hooks. */
bool hh_vm_configure(void);

/* Registers the handler (outside any hook: from the constructor). */
void hh_vm_start(void);

#endif /* HH_VM_H */
