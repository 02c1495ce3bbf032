// tlsf.cpp — a TLSF allocator in tier4/heaphook's style, written for heaphook's tests: the
// TLSF 2.x API of the ROS tlsf package (tlsf/tlsf.h: init_memory_pool, add_new_area,
// tlsf_malloc, tlsf_free, tlsf_realloc, tlsf_calloc; heaphook's tlsf::tlsf target implements
// it), a pool of INITIAL_MEMPOOL_SIZE bytes grown by ADDITIONAL_MEMPOOL_SIZE, doubled until the
// request fits (sizes too small for the request skipped), one lock, and a block's size read from
// the word in front of it, as TLSF 2.x lays blocks out. Beyond tier4's: the fork hooks (so a
// program that forks while threads allocate does not deadlock), aligned blocks without a side table
// (the original pointer and a flag in the 16 bytes in front of the aligned one), and NULL when the
// system refuses memory.
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>

#include <cstdint>

#include "heaphook/heaphook.hpp"
#include "heaphook/utils.hpp"
#include "tlsf/tlsf.h"

using namespace heaphook;

namespace {

size_t size_from_env(const char *name, size_t fallback) {
    const char *text = getenv(name);
    if (text == nullptr || *text == '\0') return fallback;
    char *end = nullptr;
    unsigned long long value = strtoull(text, &end, 10);
    if (*end != '\0' || value == 0) {
        write_to_stderr("tlsf: ", name, " must be a number of bytes\n");
        abort();
    }
    return value;
}

void *map(size_t bytes) {
    void *area = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return area == MAP_FAILED ? nullptr : area;
}

// The word in front of a block: its usable size, low 4 bits flags (TLSF 2.x: 0 when used).
// kAligned marks an aligned block, whose word before that holds the block it lives in.
constexpr size_t kAligned = 1;
size_t &head(void *ptr) {
    return static_cast<size_t *>(ptr)[-1];
}
void *&origin(void *ptr) {
    return static_cast<void **>(ptr)[-2];
}

}  // namespace

class TlsfAllocator : public GlobalAllocator {
    pthread_mutex_t lock_ = PTHREAD_MUTEX_INITIALIZER;
    char *pool_ = nullptr;
    size_t additional_ = 0;

   public:
    TlsfAllocator() {
        size_t initial = size_from_env("INITIAL_MEMPOOL_SIZE", 100 * 1000 * 1000);
        additional_ = size_from_env("ADDITIONAL_MEMPOOL_SIZE", 100 * 1000 * 1000);
        pool_ = static_cast<char *>(map(initial));
        if (pool_ == nullptr || init_memory_pool(initial, pool_) == size_t(-1)) {
            write_to_stderr("tlsf: cannot make a pool of ", initial, " bytes\n");
            abort();
        }
    }

   private:
    // Calls allocate() under the lock, adding areas (ADDITIONAL_MEMPOOL_SIZE, then twice the
    // previous one ...) while it fails; an area too small for need bytes is skipped rather than
    // mapped (areas are not contiguous). nullptr when the system refuses the area.
    template <class F>
    void *allocate_growing(size_t need, F allocate) {
        pthread_mutex_lock(&lock_);
        void *ptr = allocate();
        for (size_t area = additional_; ptr == nullptr && area != 0; area *= 2) {
            if (area < need + 4096) continue;
            void *more = map(area);
            if (more == nullptr) break;
            add_new_area(more, area, pool_);
            ptr = allocate();
        }
        pthread_mutex_unlock(&lock_);
        return ptr;
    }

    void *do_alloc(size_t size, size_t align) override {
        if (align == 1) return allocate_growing(size, [size] { return tlsf_malloc(size); });
        void *block =
            allocate_growing(size + align, [=] { return tlsf_malloc(size + align + 16); });
        if (block == nullptr) return nullptr;
        uintptr_t start = reinterpret_cast<uintptr_t>(block) + 16;
        void *aligned = reinterpret_cast<void *>((start + align - 1) & ~(uintptr_t(align) - 1));
        size_t usable = head(block) - (static_cast<char *>(aligned) - static_cast<char *>(block));
        origin(aligned) = block;
        head(aligned) = (usable & ~size_t(15)) | kAligned;
        return aligned;
    }

    void do_dealloc(void *ptr) override {
        if (head(ptr) & kAligned) ptr = origin(ptr);
        pthread_mutex_lock(&lock_);
        tlsf_free(ptr);
        pthread_mutex_unlock(&lock_);
    }

    size_t do_get_block_size(void *ptr) override { return head(ptr) & ~size_t(15); }

    void *do_alloc_zeroed(size_t size) override {
        return allocate_growing(size, [size] { return tlsf_calloc(size, 1); });
    }

    void *do_realloc(void *ptr, size_t new_size) override {
        if (head(ptr) & kAligned) {  // moves to a plain block
            void *moved = do_alloc(new_size, 1);
            if (moved == nullptr) return nullptr;
            size_t old_size = do_get_block_size(ptr);
            memcpy(moved, ptr, old_size < new_size ? old_size : new_size);
            do_dealloc(ptr);
            return moved;
        }
        return allocate_growing(new_size, [=] { return tlsf_realloc(ptr, new_size); });
    }

    void do_fork_prepare() override { pthread_mutex_lock(&lock_); }
    void do_fork_parent() override { pthread_mutex_unlock(&lock_); }
    void do_fork_child() override { pthread_mutex_init(&lock_, nullptr); }
};

GlobalAllocator &GlobalAllocator::get_instance() {
    static TlsfAllocator allocator;
    return allocator;
}
