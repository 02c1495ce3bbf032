/*
 * heaphook/ucm_compat.h — compile code written against libucm's event API unchanged against
 * heaphook (replace #include <ucm/api/ucm.h> with this header and link libheaphook_ucm.so).
 *
 * Every name is a macro for a heaphook_ucm_* name, so the objects refer only to heaphook
 * symbols: a real libucm loaded in the same process (by UCX) keeps its own handlers, and the
 * two never bind to each other. Do not include both this header and <ucm/api/ucm.h> in one
 * file.
 */
#ifndef HEAPHOOK_UCM_COMPAT_H
#define HEAPHOOK_UCM_COMPAT_H

#include "heaphook/ucm.h"

#define ucm_event_type_t heaphook_ucm_event_type_t
#define ucm_event_t heaphook_ucm_event_t
#define ucm_event_callback_t heaphook_ucm_event_callback_t
#define ucm_set_event_handler heaphook_ucm_set_event_handler
#define ucm_unset_event_handler heaphook_ucm_unset_event_handler
#define ucm_test_events heaphook_ucm_test_events
#define ucm_set_external_event heaphook_ucm_set_external_event
#define ucm_unset_external_event heaphook_ucm_unset_external_event
#define ucm_vm_mmap heaphook_ucm_vm_mmap
#define ucm_vm_munmap heaphook_ucm_vm_munmap
#define ucm_mmap heaphook_ucm_mmap
#define ucm_munmap heaphook_ucm_munmap
#define ucm_mremap heaphook_ucm_mremap
#define ucm_shmat heaphook_ucm_shmat
#define ucm_shmdt heaphook_ucm_shmdt
#define ucm_sbrk heaphook_ucm_sbrk
#define ucm_brk heaphook_ucm_brk
#define ucm_madvise heaphook_ucm_madvise
#define ucm_orig_mmap heaphook_ucm_orig_mmap
#define ucm_orig_munmap heaphook_ucm_orig_munmap
#define ucm_orig_mremap heaphook_ucm_orig_mremap
#define ucm_orig_shmat heaphook_ucm_orig_shmat
#define ucm_orig_shmdt heaphook_ucm_orig_shmdt
#define ucm_orig_sbrk heaphook_ucm_orig_sbrk
#define ucm_orig_brk heaphook_ucm_orig_brk
#define ucm_orig_madvise heaphook_ucm_orig_madvise

#define UCM_EVENT_NONE HEAPHOOK_UCM_EVENT_NONE
#define UCM_EVENT_MMAP HEAPHOOK_UCM_EVENT_MMAP
#define UCM_EVENT_MUNMAP HEAPHOOK_UCM_EVENT_MUNMAP
#define UCM_EVENT_MREMAP HEAPHOOK_UCM_EVENT_MREMAP
#define UCM_EVENT_SHMAT HEAPHOOK_UCM_EVENT_SHMAT
#define UCM_EVENT_SHMDT HEAPHOOK_UCM_EVENT_SHMDT
#define UCM_EVENT_SBRK HEAPHOOK_UCM_EVENT_SBRK
#define UCM_EVENT_MADVISE HEAPHOOK_UCM_EVENT_MADVISE
#define UCM_EVENT_BRK HEAPHOOK_UCM_EVENT_BRK
#define UCM_EVENT_VM_MAPPED HEAPHOOK_UCM_EVENT_VM_MAPPED
#define UCM_EVENT_VM_UNMAPPED HEAPHOOK_UCM_EVENT_VM_UNMAPPED
#define UCM_EVENT_MEM_TYPE_ALLOC HEAPHOOK_UCM_EVENT_MEM_TYPE_ALLOC
#define UCM_EVENT_MEM_TYPE_FREE HEAPHOOK_UCM_EVENT_MEM_TYPE_FREE
#define UCM_EVENT_FLAG_NO_INSTALL HEAPHOOK_UCM_EVENT_FLAG_NO_INSTALL
#define UCM_EVENT_FLAG_EXISTING_ALLOC HEAPHOOK_UCM_EVENT_FLAG_EXISTING_ALLOC

/* ucs_status_t, unless UCS's own header is in this file too. */
#ifndef UCS_TYPES_STATUS_H_
#define ucs_status_t heaphook_ucm_status_t
#define UCS_OK HEAPHOOK_UCM_OK
#define UCS_ERR_NO_MEMORY HEAPHOOK_UCM_ERR_NO_MEMORY
#define UCS_ERR_INVALID_PARAM HEAPHOOK_UCM_ERR_INVALID_PARAM
#define UCS_ERR_NO_ELEM HEAPHOOK_UCM_ERR_NO_ELEM
#define UCS_ERR_UNSUPPORTED HEAPHOOK_UCM_ERR_UNSUPPORTED
#endif

#endif /* HEAPHOOK_UCM_COMPAT_H */
