// original_allocator.cpp — an allocator in tier4/heaphook's style that hands every call to
// glibc's own allocator: its __libc_* entry points, and malloc_usable_size found with
// dlsym(RTLD_NEXT), with the function-pointer types of heaphook/hook_types.hpp. Written for
// heaphook's tests; write(2) for errors, as the hooks may not use stdio.
#include <dlfcn.h>

#include <cstdlib>

#include "heaphook/heaphook.hpp"
#include "heaphook/hook_types.hpp"

extern "C" {
void *__libc_malloc(size_t size);
void __libc_free(void *ptr);
void *__libc_calloc(size_t count, size_t size);
void *__libc_realloc(void *ptr, size_t size);
void *__libc_memalign(size_t align, size_t size);
}

using namespace heaphook;

namespace {

void fail(const char *what) {
    // heaphook.hpp declares write and strlen.
    ssize_t written = write(STDERR_FILENO, what, strlen(what));
    (void)written;
    abort();
}

}  // namespace

class OriginalAllocator : public GlobalAllocator {
    const malloc_type malloc_ = __libc_malloc;
    const memalign_type memalign_ = __libc_memalign;
    const free_type free_ = __libc_free;
    const calloc_type calloc_ = __libc_calloc;
    const realloc_type realloc_ = __libc_realloc;
    malloc_usable_size_type usable_size_;

   public:
    // Resolved here, during the core's initialisation (any allocation dlsym makes is served by
    // the bootstrap arena), rather than at the first do_get_block_size.
    OriginalAllocator()
        : usable_size_(
              reinterpret_cast<malloc_usable_size_type>(dlsym(RTLD_NEXT, "malloc_usable_size"))) {
        if (usable_size_ == nullptr) fail("original_allocator: no malloc_usable_size after us\n");
    }

   private:
    void *do_alloc(size_t bytes, size_t align) override {
        return align == 1 ? malloc_(bytes) : memalign_(align, bytes);
    }
    void do_dealloc(void *ptr) override { free_(ptr); }
    size_t do_get_block_size(void *ptr) override { return usable_size_(ptr); }
    void *do_alloc_zeroed(size_t bytes) override { return calloc_(bytes, 1); }
    void *do_realloc(void *ptr, size_t new_size) override { return realloc_(ptr, new_size); }
};

GlobalAllocator &GlobalAllocator::get_instance() {
    static OriginalAllocator original;
    return original;
}
