/*
 * ucm_compat_test.c — code written against libucm's event API, compiled unchanged against
 * heaphook/ucm_compat.h and linked with libheaphook_ucm.so (and with a stand-in "libucm.so"
 * defining ucm_set_event_handler itself, as a real libucm loaded by UCX would: it must not be
 * called). Prints "compat: ok" or the failure.
 */
#include <stdio.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "heaphook/ucm_compat.h"

static size_t mapped, unmapped;

static void vm_handler(ucm_event_type_t event_type, ucm_event_t *event, void *arg) {
    (void)arg;
    if (event_type == UCM_EVENT_VM_MAPPED) mapped += event->vm_mapped.size;
    if (event_type == UCM_EVENT_VM_UNMAPPED) unmapped += event->vm_unmapped.size;
}

int main(void) {
    size_t size = 1 << 20;
    ucs_status_t status =
        ucm_set_event_handler(UCM_EVENT_VM_MAPPED | UCM_EVENT_VM_UNMAPPED, 0, vm_handler, NULL);
    if (status != UCS_OK) {
        printf("compat: ucm_set_event_handler: %d\n", (int)status);
        return 1;
    }
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    munmap(p, size);
    ucm_unset_event_handler(UCM_EVENT_VM_MAPPED | UCM_EVENT_VM_UNMAPPED, vm_handler, NULL);
    if (mapped != size || unmapped != size) {
        printf("compat: mapped %zu unmapped %zu, expected %zu\n", mapped, unmapped, size);
        return 1;
    }
    /* External events: registering installs nothing, the caller reports. */
    static size_t external;
    ucm_set_external_event(UCM_EVENT_VM_UNMAPPED);
    ucm_set_event_handler(UCM_EVENT_VM_UNMAPPED, 0, vm_handler, &external);
    unmapped = 0;
    ucm_vm_munmap((void *)4096, 8192);
    ucm_unset_event_handler(UCM_EVENT_VM_UNMAPPED, vm_handler, &external);
    ucm_unset_external_event(UCM_EVENT_VM_UNMAPPED);
    if (unmapped != 8192) {
        printf("compat: ucm_vm_munmap reported %zu\n", unmapped);
        return 1;
    }
    /* The calls with and without events. */
    mapped = unmapped = 0;
    ucm_set_event_handler(UCM_EVENT_VM_MAPPED | UCM_EVENT_VM_UNMAPPED, 0, vm_handler, NULL);
    void *q = ucm_orig_mmap(NULL, size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    void *r = ucm_mremap(q, size, 2 * size, MREMAP_MAYMOVE);
    ucm_orig_munmap(r, 2 * size);
    ucm_unset_event_handler(UCM_EVENT_VM_MAPPED | UCM_EVENT_VM_UNMAPPED, vm_handler, NULL);
    if (mapped != 2 * size || unmapped != size) {
        printf("compat: ucm_orig_mmap/ucm_mremap/ucm_orig_munmap: mapped %zu unmapped %zu\n",
               mapped, unmapped);
        return 1;
    }
    if (ucm_test_events(UCM_EVENT_MMAP | UCM_EVENT_VM_MAPPED) != UCS_OK) {
        printf("compat: ucm_test_events failed\n");
        return 1;
    }
    printf("compat: ok\n");
    return 0;
}
