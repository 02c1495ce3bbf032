// cxx_adapter.cpp — heaphook_backend_get() for a backend written as a heaphook::GlobalAllocator.
//
// heaphook_add_backend() compiles this file into every C++ backend (not into C_API ones) with
// HEAPHOOK_BACKEND_NAME set to the backend's name. It turns the virtual interface of
// heaphook.hpp into the C table of backend.h, and defines the two defaults the header leaves
// to the core (do_alloc_zeroed, do_realloc).
//
// Preload libraries are built without exceptions, RTTI or thread-safe statics and are linked
// without libstdc++. The few pieces of the C++ runtime that code built that way may still
// reference are defined here, hidden, so the library stays self-contained:
//   - __cxa_pure_virtual (referenced by the vtable of the abstract GlobalAllocator);
//   - operator new / delete, routed to malloc / free (a virtual destructor needs operator
//     delete; a backend must not use new from inside its hooks, see README).
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

// Set by adapter_init, before the first call of any other member of the table.
heaphook::GlobalAllocator *instance = nullptr;

// get_instance() constructs the backend's static object: the core calls init once, from the
// thread that initialises the backend, with the bootstrap arena serving any malloc it makes.
int adapter_init() {
    instance = &heaphook::GlobalAllocator::get_instance();
    return 0;
}

void *adapter_alloc(size_t size, size_t align) {
    return instance->alloc(size, align);
}
void adapter_dealloc(void *ptr) {
    instance->dealloc(ptr);
}
size_t adapter_get_block_size(void *ptr) {
    return instance->get_block_size(ptr);
}
void *adapter_alloc_zeroed(size_t size) {
    return instance->alloc_zeroed(size);
}
void *adapter_realloc(void *ptr, size_t new_size) {
    return instance->realloc(ptr, new_size);
}
void adapter_fork_prepare() {
    instance->fork_prepare();
}
void adapter_fork_parent() {
    instance->fork_parent();
}
void adapter_fork_child() {
    instance->fork_child();
}
int adapter_get_stats(heaphook_stats *out) {
    return instance->get_stats(out) ? 0 : -1;
}
int adapter_mallopt(int param, int value) {
    return instance->mallopt(param, value);
}
int adapter_trim(size_t pad) {
    return instance->trim(pad);
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
};

}  // namespace

extern "C" const heaphook_backend *heaphook_backend_get(void) {
    return &adapter_table;
}

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
