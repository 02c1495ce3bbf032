/*
 * vm.h — mapped-memory events recorded from ucm-hooks (vm.c).
 */
#ifndef HH_VM_H
#define HH_VM_H

#include <stdbool.h>

#include "trace.h"

/* HEAPHOOK_TRACE_VM (auto, yes, no) and whether ucm-hooks is in the process: true when VM
 * events are to be recorded. Stops the program when yes is asked for without ucm-hooks, unless
 * attaching (attach()'s process is not ours to stop: one warning, no events). */
bool hh_vm_configure(bool attaching);

/* Registers the handler (outside any hook: from the constructor, or after an attach). */
void hh_vm_start(void);

/* Unregisters it (before a detach): once it returns the handler records nothing more. */
void hh_vm_stop(void);

/*
 * Holding a record. free and realloc reserve their event's record before they call the next
 * allocator (so that the log has the free before any malloc that gets the block again) and
 * publish it after. Until then the collector cannot read past that record; a VM event raised
 * inside the call (glibc's free unmapping a large block, realloc moving one with mremap) must
 * therefore neither wait for room in the ring nor for the stack trie's lock, whose holder may
 * be waiting for that very room: a deadlock seen under load with a 64 KiB ring. The hooks call
 * hh_vm_hold_record before the call and hh_vm_release_record once their record is out; in
 * between, the handler only notes an event (time, address, size), and the release records what
 * was noted, with the hook's call stack.
 */
extern HH_TLS bool hh_vm_holding_record;
extern HH_TLS int hh_vm_held_count;

void hh_vm_record_held(void);

/* Before the next allocator's call: whether the hook holds a record (reserved, not published). */
static inline void hh_vm_hold_record(bool holding) {
    hh_vm_holding_record = holding;
}

/* After the hook has published its record: the events noted meanwhile are recorded now. */
static inline void hh_vm_release_record(void) {
    hh_vm_holding_record = false;
    if (HH_UNLIKELY(hh_vm_held_count != 0)) hh_vm_record_held();
}

#endif /* HH_VM_H */
