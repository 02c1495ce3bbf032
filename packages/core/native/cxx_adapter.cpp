// cxx_adapter.cpp — heaphook_backend_get() for a backend written as a heaphook::GlobalAllocator.
//
// heaphook_add_backend() compiles this file into every C++ backend (not into C_API ones) with
// HEAPHOOK_BACKEND_NAME set to the backend's name. It turns the virtual interface of
// heaphook.hpp into the C table of backend.h, and defines the two defaults the header leaves
// to the core (do_alloc_zeroed, do_realloc).
//
// The adapter asks get_instance() for the backend at every call, as tier4/heaphook's hooks do:
// a backend may return another allocator while it is inside itself (tier4's backtrace
// allocator serves its own allocations from a plain one that way).
//
// Without CXX_STDLIB, preload libraries are built without exceptions, RTTI or thread-safe
// statics and are linked without libstdc++. The few pieces of the C++ runtime that code built
// that way may still reference are defined here, hidden, so the library stays self-contained:
//   - __cxa_pure_virtual (referenced by the vtable of the abstract GlobalAllocator);
//   - operator new / delete, routed to malloc / free (a virtual destructor needs operator
//     delete; a backend must not use new from inside its hooks, see README).
//
// With CXX_STDLIB (HEAPHOOK_CXX_STDLIB=1) the library links libstdc++, which provides them, and:
//   - the backend is initialised only once the library's own static constructors have run
//     (this file's constructor runs last among them: heaphook_add_backend adds it after the
//     backend's sources). Before that, libstdc++'s start-up allocations (its exception
//     emergency pool) and the loader's are served by the bootstrap arena (init answers
//     HEAPHOOK_INIT_LATER), so the backend's global objects, std::string, std::unordered_map,
//     iostreams ... are all constructed before the backend's first call;
//   - an exception that leaves a do_* member is caught here: alloc answers nullptr (ENOMEM),
//     the others do nothing, instead of unwinding into the C core and the program's malloc.
#include <stdlib.h>
#include <string.h>

#include <new>

#include "heaphook/backend.h"
#include "heaphook/heaphook.hpp"
#include "heaphook/log.h"

#ifndef HEAPHOOK_BACKEND_NAME
#error "HEAPHOOK_BACKEND_NAME must name the backend (heaphook_add_backend sets it)"
#endif

// ---- The defaults of heaphook.hpp ------------------------------------------------------------

void *heaphook::GlobalAllocator::do_alloc_zeroed(size_t size) {
    void *ptr = do_alloc(size, 1);
    if (ptr != nullptr) memset(ptr, 0, size);
    return ptr;
}

void *heaphook::GlobalAllocator::do_realloc(void *ptr, size_t new_size) {
    void *moved = do_alloc(new_size, 1);
    if (moved == nullptr) return nullptr;
    size_t old_size = do_get_block_size(ptr);
    memcpy(moved, ptr, old_size < new_size ? old_size : new_size);
    do_dealloc(ptr);
    return moved;
}

// ---- The adapter -----------------------------------------------------------------------------

namespace {

heaphook::GlobalAllocator &self() {
    return heaphook::GlobalAllocator::get_instance();
}

#if HEAPHOOK_CXX_STDLIB
// Set by the constructor below, after every other static constructor of the library.
bool constructors_done = false;
#endif

// get_instance() constructs the backend's static object: the core calls init once, from the
// thread that initialises the backend, with the bootstrap arena serving any malloc it makes.
int adapter_init() {
#if HEAPHOOK_CXX_STDLIB
    if (!__atomic_load_n(&constructors_done, __ATOMIC_ACQUIRE)) return HEAPHOOK_INIT_LATER;
#endif
    (void)self();
    return 0;
}

#if HEAPHOOK_CXX_STDLIB && defined(__cpp_exceptions)
#define HH_GUARD(fallback, ...) \
    try {                       \
        __VA_ARGS__;            \
    } catch (...) {             \
        fallback;               \
    }
#else
#define HH_GUARD(fallback, ...) __VA_ARGS__;
#endif

void *adapter_alloc(size_t size, size_t align) {
    HH_GUARD(return nullptr, return self().alloc(size, align))
}
void adapter_dealloc(void *ptr){HH_GUARD(return, self().dealloc(ptr))} size_t
    adapter_get_block_size(void *ptr) {
    HH_GUARD(return 0, return self().get_block_size(ptr))
}
void *adapter_alloc_zeroed(size_t size) {
    HH_GUARD(return nullptr, return self().alloc_zeroed(size))
}
void *adapter_realloc(void *ptr, size_t new_size) {
    HH_GUARD(return nullptr, return self().realloc(ptr, new_size))
}
void adapter_fork_prepare() {
    self().fork_prepare();
}
void adapter_fork_parent() {
    self().fork_parent();
}
void adapter_fork_child() {
    self().fork_child();
}
int adapter_get_stats(heaphook_stats *out) {
    HH_GUARD(return -1, return self().get_stats(out) ? 0 : -1)
}
int adapter_mallopt(int param, int value) {
    HH_GUARD(return 0, return self().mallopt(param, value))
}
int adapter_trim(size_t pad) {
    HH_GUARD(return 0, return self().trim(pad))
}

const heaphook_backend adapter_table = {
    HEAPHOOK_BACKEND_NAME,
    adapter_init,
    adapter_alloc,
    adapter_dealloc,
    adapter_get_block_size,
    adapter_alloc_zeroed,
    adapter_realloc,
    adapter_fork_prepare,
    adapter_fork_parent,
    adapter_fork_child,
    adapter_get_stats,
    adapter_mallopt,
    adapter_trim,
    nullptr,  // print_stats: the core renders get_stats
    0,        // dealloc_keeps_errno: a C++ backend's dealloc may make any system call
    0,        // alloc_sets_errno: the core sets ENOMEM when a C++ backend's alloc returns null
};

}  // namespace

extern "C" const heaphook_backend *heaphook_backend_get(void) {
    return &adapter_table;
}

#if HEAPHOOK_CXX_STDLIB

extern "C" bool hh_backend_make_ready(void);

// Default priority, and this file is linked after the backend's sources: runs after their
// static constructors (and after every dependency's, libstdc++'s included). Initialises the
// backend now, before main, so that a bad configuration value still stops the program there.
__attribute__((constructor)) static void adapter_constructors_ran() {
    __atomic_store_n(&constructors_done, true, __ATOMIC_RELEASE);
    hh_backend_make_ready();
}

#else

// ---- The C++ runtime pieces (hidden, see above) ---------------------------------------------

extern "C" void __cxa_pure_virtual() {
    heaphook_fatal("pure virtual method called");
}

void *operator new(size_t size) {
    void *ptr = malloc(size);
    if (ptr == nullptr) heaphook_fatal("operator new: out of memory (%zu bytes)", size);
    return ptr;
}
void *operator new[](size_t size) {
    return operator new(size);
}
void *operator new(size_t size, const std::nothrow_t &) noexcept {
    return malloc(size);
}
void *operator new[](size_t size, const std::nothrow_t &) noexcept {
    return malloc(size);
}
void operator delete(void *ptr) noexcept {
    free(ptr);
}
void operator delete[](void *ptr) noexcept {
    free(ptr);
}
void operator delete(void *ptr, size_t) noexcept {
    free(ptr);
}
void operator delete[](void *ptr, size_t) noexcept {
    free(ptr);
}

#endif
