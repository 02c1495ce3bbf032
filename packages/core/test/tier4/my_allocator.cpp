// my_allocator.cpp — the smallest allocator in tier4/heaphook's style (heaphook.hpp only: derive
// from GlobalAllocator, implement the three required members, define get_instance()), written
// for heaphook's tests. It never reuses memory: blocks are carved from one large reservation by
// an atomic bump pointer, each after a 16-byte header holding its size. Good for short runs.
#include <sys/mman.h>

#include <atomic>

#include "heaphook/heaphook.hpp"
using namespace heaphook;

class MyAllocator : public GlobalAllocator {
    static constexpr size_t kReserve = size_t(64) << 30;  // address space only (NORESERVE)
    static constexpr size_t kHeader = 16;

    char *base_ = nullptr;
    std::atomic<size_t> next_{0};

   public:
    MyAllocator() {
        void *area = mmap(nullptr, kReserve, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (area != MAP_FAILED) base_ = static_cast<char *>(area);
    }

   private:
    void *do_alloc(size_t bytes, size_t align) override {
        if (base_ == nullptr || bytes > kReserve) return nullptr;
        if (align < kHeader) align = kHeader;
        size_t need = (bytes + kHeader + align + 15) & ~size_t(15);
        size_t offset = next_.fetch_add(need, std::memory_order_relaxed);
        if (offset + need > kReserve) return nullptr;
        uintptr_t start = reinterpret_cast<uintptr_t>(base_ + offset) + kHeader;
        uintptr_t aligned = (start + align - 1) & ~(uintptr_t(align) - 1);
        reinterpret_cast<size_t *>(aligned)[-1] = need - kHeader - (aligned - start);
        return reinterpret_cast<void *>(aligned);
    }

    void do_dealloc(void *) override {}

    size_t do_get_block_size(void *ptr) override { return static_cast<size_t *>(ptr)[-1]; }
};

GlobalAllocator &GlobalAllocator::get_instance() {
    static MyAllocator allocator;
    return allocator;
}
