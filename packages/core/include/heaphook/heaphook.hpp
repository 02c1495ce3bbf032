// heaphook/heaphook.hpp — the C++ form of the backend contract.
//
// Source-compatible with the original heaphook: derive from heaphook::GlobalAllocator,
// implement do_alloc, do_dealloc and do_get_block_size (optionally do_alloc_zeroed and
// do_realloc), and define GlobalAllocator::get_instance() returning a static instance:
//
//   class MyAllocator : public heaphook::GlobalAllocator { ... };
//   heaphook::GlobalAllocator &heaphook::GlobalAllocator::get_instance() {
//       static MyAllocator allocator;
//       return allocator;
//   }
//
// Build it with heaphook_add_backend(<name> <sources>) (cmake/heaphook.cmake). The guarantees
// and duties are those of heaphook/backend.h: size > 0; align is 1 (default, 16-byte
// alignment expected) or a power of two multiple of sizeof(void*); ptr non-null and owned.
// Preload libraries are compiled without exceptions, RTTI or thread-safe statics, and are
// linked without libstdc++: keep to the language core (no iostreams, no std containers that
// allocate through operator new from inside the hooks). heaphook_add_backend(<name>
// CXX_STDLIB ...) (and tier4's build_library) links libstdc++ and allows all of C++ instead.
//
// Like tier4/heaphook's header, this one declares what backends written against it call
// without including anything else: write, getpid, STDERR_FILENO (unistd.h), memset, memcpy,
// strlen (string.h) and the stdio functions (cstdio, for code outside the hooks, such as an
// exit report).
#ifndef HEAPHOOK_HEAPHOOK_HPP
#define HEAPHOOK_HEAPHOOK_HPP

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <stddef.h>
#include <string.h>
#include <unistd.h>

#include <cstdio>

#include "heaphook/backend.h"

namespace heaphook {

class GlobalAllocator {
   protected:
    // Derived classes are constructed by get_instance() only.
    GlobalAllocator() = default;
    // Not virtual: the instance is a static object and is never deleted through a base pointer.
    ~GlobalAllocator() = default;

   public:
    GlobalAllocator(const GlobalAllocator &) = delete;
    GlobalAllocator &operator=(const GlobalAllocator &) = delete;
    GlobalAllocator(GlobalAllocator &&) = delete;
    GlobalAllocator &operator=(GlobalAllocator &&) = delete;

    // Defined by the backend: returns its one static instance.
    static GlobalAllocator &get_instance();

    // Allocates size (> 0) bytes aligned to align (1 = default 16-byte alignment).
    // Returns nullptr when the backend cannot serve the request.
    [[nodiscard]] void *alloc(size_t size, size_t align = 1) { return do_alloc(size, align); }
    // Releases a block returned by alloc, alloc_zeroed or realloc; ptr is never nullptr.
    void dealloc(void *ptr) { do_dealloc(ptr); }
    // The usable size of the block at ptr.
    size_t get_block_size(void *ptr) { return do_get_block_size(ptr); }
    // Like alloc(size), with the block zeroed.
    [[nodiscard]] void *alloc_zeroed(size_t size) { return do_alloc_zeroed(size); }
    // Resizes ptr's block to new_size (> 0); on failure returns nullptr and ptr stays valid.
    [[nodiscard]] void *realloc(void *ptr, size_t new_size) { return do_realloc(ptr, new_size); }

    // Extras beyond the original contract, all optional.
    void fork_prepare() { do_fork_prepare(); }
    void fork_parent() { do_fork_parent(); }
    void fork_child() { do_fork_child(); }
    bool get_stats(heaphook_stats *out) { return do_get_stats(out); }
    int mallopt(int param, int value) { return do_mallopt(param, value); }
    int trim(size_t pad) { return do_trim(pad); }

   private:
    virtual void *do_alloc(size_t size, size_t align) = 0;
    virtual void do_dealloc(void *ptr) = 0;
    virtual size_t do_get_block_size(void *ptr) = 0;

    // Default: do_alloc(size, 1) then zero the block.
    virtual void *do_alloc_zeroed(size_t size);
    // Default: allocate, copy min(old usable size, new_size) bytes, release the old block.
    virtual void *do_realloc(void *ptr, size_t new_size);

    // Fork hooks: prepare takes every lock, parent releases, child re-initialises.
    virtual void do_fork_prepare() {}
    virtual void do_fork_parent() {}
    virtual void do_fork_child() {}
    // Fills *out and returns true when the backend keeps statistics.
    virtual bool do_get_stats(heaphook_stats *) { return false; }
    // mallopt: 1 accepted, 0 refused. Default: accepted and ignored.
    virtual int do_mallopt(int, int) { return 1; }
    // malloc_trim: 1 when memory went back to the system.
    virtual int do_trim(size_t) { return 0; }
};

}  // namespace heaphook

// tier4/heaphook compiles its tracing into GlobalAllocator when TRACE is defined; here tracing
// is a backend of its own (heaptrack: LD_PRELOAD="libheaphook_heaptrack.so <your library>"), and
// the constant only keeps code that tests it compiling.
#ifdef TRACE
static constexpr bool HeapTraceEnabled = true;
#else
static constexpr bool HeapTraceEnabled = false;
#endif

#endif  // HEAPHOOK_HEAPHOOK_HPP
