/*
 * ucm_early_lib.c — a library whose constructor registers a VM handler (as heaptrack's tracer
 * does), preloaded after libheaphook_ucm.so: preloaded libraries' constructors run in reverse
 * order, so this one runs before ucm-hooks' own constructor. The registration must read the
 * configuration first and leave the hooks' real sbrk/brk right (ucm_early_test checks).
 */
#include <dlfcn.h>
#include <stddef.h>

#include "heaphook/ucm.h"

size_t ucm_early_mapped, ucm_early_unmapped;

static void on_vm(heaphook_ucm_event_type_t type, heaphook_ucm_event_t *event, void *arg) {
    (void)arg;
    if (type == HEAPHOOK_UCM_EVENT_VM_MAPPED) ucm_early_mapped += event->vm_mapped.size;
    if (type == HEAPHOOK_UCM_EVENT_VM_UNMAPPED) ucm_early_unmapped += event->vm_unmapped.size;
}

__attribute__((constructor)) static void ucm_early_register(void) {
    heaphook_ucm_status_t (*set)(int, int, heaphook_ucm_event_callback_t, void *) =
        (heaphook_ucm_status_t(*)(int, int, heaphook_ucm_event_callback_t, void *))dlsym(
            RTLD_DEFAULT, "heaphook_ucm_set_event_handler");
    if (set != NULL)
        set(HEAPHOOK_UCM_EVENT_VM_MAPPED | HEAPHOOK_UCM_EVENT_VM_UNMAPPED, 0, on_vm, NULL);
}
