// heaphook/hook_types.hpp — the types of the functions heaphook interposes, under the names
// tier4/heaphook gives them (global, as there), so that a backend that forwards to the next
// allocator (dlsym(RTLD_NEXT, ...)) or to glibc (__libc_malloc ...) declares its function
// pointers the same way:
//
//   static malloc_type next_malloc = reinterpret_cast<malloc_type>(dlsym(RTLD_NEXT, "malloc"));
#ifndef HEAPHOOK_HOOK_TYPES_HPP
#define HEAPHOOK_HOOK_TYPES_HPP

#include <stddef.h>

using malloc_type = void *(*)(size_t size);
using free_type = void (*)(void *ptr);
using calloc_type = void *(*)(size_t count, size_t size);
using realloc_type = void *(*)(void *ptr, size_t new_size);
using posix_memalign_type = int (*)(void **result, size_t align, size_t size);
using memalign_type = void *(*)(size_t align, size_t size);
using aligned_alloc_type = void *(*)(size_t align, size_t size);
using valloc_type = void *(*)(size_t size);
using pvalloc_type = void *(*)(size_t size);
using malloc_usable_size_type = size_t (*)(void *ptr);
// Beyond tier4's list: the other calls heaphook interposes.
using reallocarray_type = void *(*)(void *ptr, size_t count, size_t size);

#endif  // HEAPHOOK_HOOK_TYPES_HPP
