// example_allocator.cpp — the `example` backend: the smallest real allocator that passes the
// heaphook conformance suite, and the template new backends start from.
//
// Design, in one paragraph. Small requests (up to 32 KiB) are served from twelve size classes,
// 16 B, 32 B, ... 32 KiB (powers of two). Each class owns chunks of memory (1 MiB by default,
// HEAPHOOK_EXAMPLE_CHUNK_SIZE) obtained from heaphook_os_map_aligned, aligned to their own
// size; a chunk starts with a ChunkHeader saying which class it serves. Blocks are carved
// from the newest chunk by a bump pointer and recycled through a per-class free list. Larger
// requests get a mapping of their own (a "large block") that also starts with a ChunkHeader.
//
// Two properties make the rest simple:
//   - Finding a block's header is arithmetic: it is at (ptr - 1) rounded down to the chunk
//     size, for small blocks (which never start at a chunk's first byte) and for large ones
//     (placed so that this holds, see allocate_large). No per-block header, no lookup table.
//   - A block of a power-of-two class is naturally aligned: it sits at a multiple of its own
//     size. So alloc(size, align) for align <= 32 KiB just picks the class of max(size, align);
//     larger alignments are large blocks placed at an aligned offset of their mapping.
//
// Misuse is named, as glibc names it, and stops the program (heaphook_fatal: one line, abort):
//   - a pointer whose chunk this heap never mapped ("invalid pointer (not a block of this
//     heap)"): every chunk base and large-block header address is kept in a lock-free hash set
//     (ChunkSet), looked up before any header is read, so a stack or global pointer is never
//     dereferenced;
//   - a pointer inside a chunk that is not the start of a block ("invalid pointer (not the
//     start of a block)"): small blocks sit at fixed multiples of their class size;
//   - a double free: a free block carries kFreeMark in its second word (cleared when handed
//     out); a block freed with the mark is looked for in its class's free list.
//
// Threads: one mutex per size class (large blocks need no lock; their statistics are atomics).
// Fork: fork_prepare takes every class lock in class order, fork_parent releases them,
// fork_child re-initialises them (the child is single-threaded, and every list is consistent
// because no thread was inside a critical section when the locks were taken).
//
// What a real backend would add: finer classes (this one wastes up to half of a block),
// returning empty chunks to the system (trim), per-thread caches. The contract it implements
// is in heaphook/heaphook.hpp and backend.h; the core has already normalised every argument.
#include <pthread.h>
#include <atomic>
#include <stdint.h>
#include <string.h>

#include "heaphook/config.h"
#include "heaphook/heaphook.hpp"
#include "heaphook/log.h"
#include "heaphook/os.h"

namespace {

// ---- Constants -------------------------------------------------------------------------------

constexpr size_t kMinBlockSize = 16;  // class 0; also HEAPHOOK_DEFAULT_ALIGNMENT
constexpr int kClassCount = 12;       // 16 B << 0 .. 16 B << 11
constexpr size_t kMaxSmallSize = kMinBlockSize << (kClassCount - 1);  // 32 KiB

constexpr size_t kDefaultChunkSize = size_t{1} << 20;  // 1 MiB
constexpr size_t kMinChunkSize = size_t{64} << 10;     // must hold a header and a 32 KiB block
constexpr size_t kMaxChunkSize = size_t{1} << 30;
constexpr const char *kChunkSizeVariable = "HEAPHOOK_EXAMPLE_CHUNK_SIZE";

constexpr uint32_t kHeaderMagic = 0x68656170;  // "heap": tells a header from a wild pointer
constexpr uint32_t kLargeKind = 0xffffffff;    // ChunkHeader::kind of a large block
// Second word of every free small block: a value program data does not hold by chance.
constexpr uintptr_t kFreeMark = 0x66726565'6d61726bULL;  // "freemark"
// Chunks and large blocks listed at once (ChunkSet): 2^20 slots, a mapping of 8 MiB touched
// only as far as it is used; 64 GiB of 1 MiB chunks, or that many large blocks at once.
constexpr size_t kChunkSetSlots = size_t{1} << 20;

static_assert(kMinBlockSize == HEAPHOOK_DEFAULT_ALIGNMENT, "class 0 gives the default alignment");

// ---- Layout ----------------------------------------------------------------------------------

// At the start of every chunk and (see allocate_large) at the chunk-aligned address just below
// every large block.
struct ChunkHeader {
    uint32_t magic;
    uint32_t kind;        // size class index, or kLargeKind
    char *block;          // large block: the pointer handed out
    char *mapping;        // large block: start of its mapping (for unmap)
    size_t mapping_size;  // large block: bytes mapped
    size_t usable_size;   // large block: bytes from the block's start to the mapping's end
};

// The first block of a chunk starts after the header, at a multiple of its class size.
constexpr size_t kChunkHeaderSpace = 64;
static_assert(sizeof(ChunkHeader) <= kChunkHeaderSpace, "the header fits its space");

// A free block holds the link to the next free block of its class, then kFreeMark.
struct FreeBlock {
    FreeBlock *next;
    uintptr_t mark;
};
static_assert(sizeof(FreeBlock) <= kMinBlockSize, "the smallest block holds the link and mark");

// The addresses of every chunk and large-block header, so that a pointer can be checked before
// its header is read: open addressing with linear probing over a mapping, lock-free (a slot
// goes from empty to an address with a compare-and-swap, and to kRemoved when a large block is
// unmapped; a later insert may reuse a removed slot).
class ChunkSet {
   public:
    bool init() {
        slots_ = static_cast<std::atomic<uintptr_t> *>(
            heaphook_os_map(kChunkSetSlots * sizeof(std::atomic<uintptr_t>)));
        return slots_ != nullptr;
    }
    bool insert(uintptr_t address) {
        for (size_t i = 0, at = hash(address); i < kChunkSetSlots; i++, at = next(at)) {
            uintptr_t seen = slots_[at].load(std::memory_order_relaxed);
            while (seen == kEmpty || seen == kRemoved) {
                if (slots_[at].compare_exchange_weak(seen, address, std::memory_order_release))
                    return true;
            }
        }
        return false;  // full: the allocation that needed it fails (ENOMEM)
    }
    bool contains(uintptr_t address) const {
        for (size_t i = 0, at = hash(address); i < kChunkSetSlots; i++, at = next(at)) {
            uintptr_t seen = slots_[at].load(std::memory_order_acquire);
            if (seen == address) return true;
            if (seen == kEmpty) return false;
        }
        return false;
    }
    void remove(uintptr_t address) {
        for (size_t i = 0, at = hash(address); i < kChunkSetSlots; i++, at = next(at)) {
            uintptr_t seen = slots_[at].load(std::memory_order_relaxed);
            if (seen == address) {
                slots_[at].store(kRemoved, std::memory_order_release);
                return;
            }
            if (seen == kEmpty) return;
        }
    }

   private:
    static constexpr uintptr_t kEmpty = 0, kRemoved = 1;
    static size_t hash(uintptr_t address) {
        return static_cast<size_t>(((address >> 16) * 0x9E3779B97F4A7C15ULL) >> 44) &
               (kChunkSetSlots - 1);
    }
    static size_t next(size_t at) { return (at + 1) & (kChunkSetSlots - 1); }
    std::atomic<uintptr_t> *slots_ = nullptr;
};

struct SizeClass {
    pthread_mutex_t lock;
    FreeBlock *free_list;  // recycled blocks
    char *bump;            // never-used space of the newest chunk: [bump, bump_end)
    char *bump_end;
    // Statistics, under lock.
    size_t chunk_count;
    size_t used_blocks;
    size_t free_blocks;  // on free_list
};

constexpr size_t class_block_size(int index) {
    return kMinBlockSize << index;
}

// The smallest class whose blocks hold size bytes (size <= kMaxSmallSize).
inline int class_index(size_t size) {
    if (size <= kMinBlockSize) return 0;
    return (64 - __builtin_clzll(size - 1)) - 4;  // ceil(log2(size)) - log2(16)
}

inline size_t round_up(size_t value, size_t multiple) {
    return (value + multiple - 1) & ~(multiple - 1);
}

// ---- The allocator -----------------------------------------------------------------------------

class ExampleAllocator final : public heaphook::GlobalAllocator {
   public:
    ExampleAllocator() : chunk_size_(read_chunk_size()), page_size_(heaphook_os_page_size()) {
        for (SizeClass &size_class : classes_) {
            pthread_mutex_init(&size_class.lock, nullptr);
        }
        if (!chunks_.init()) heaphook_fatal("example: cannot map the chunk set");
        heaphook_log_debug("example: chunk size %zu bytes, %d size classes up to %zu bytes",
                           chunk_size_, kClassCount, kMaxSmallSize);
    }

   private:
    // ---- The GlobalAllocator interface ---------------------------------------------------------

    void *do_alloc(size_t size, size_t align) override {
        // A power-of-two class block is aligned to its own size: ask for at least align bytes.
        size_t need = size > align ? size : align;
        if (need <= kMaxSmallSize) return allocate_small(class_index(need));
        return allocate_large(size, align);
    }

    void do_dealloc(void *ptr) override {
        ChunkHeader *header = header_of(ptr, "free");
        if (header->kind == kLargeKind) {
            release_large(header);
            return;
        }
        SizeClass &size_class = classes_[header->kind];
        FreeBlock *block = static_cast<FreeBlock *>(ptr);
        pthread_mutex_lock(&size_class.lock);
        if (block->mark == kFreeMark) {
            for (FreeBlock *free = size_class.free_list; free != nullptr; free = free->next) {
                if (free == block) heaphook_fatal("example: free(%p): double free", ptr);
            }
        }
        block->next = size_class.free_list;
        block->mark = kFreeMark;
        size_class.free_list = block;
        size_class.used_blocks--;
        size_class.free_blocks++;
        pthread_mutex_unlock(&size_class.lock);
    }

    size_t do_get_block_size(void *ptr) override { return usable_size(ptr, "malloc_usable_size"); }

    size_t usable_size(void *ptr, const char *operation) const {
        ChunkHeader *header = header_of(ptr, operation);
        if (header->kind == kLargeKind) return header->usable_size;
        return class_block_size(static_cast<int>(header->kind));
    }

    // Large blocks are fresh mappings, already zero: only small blocks need clearing.
    void *do_alloc_zeroed(size_t size) override {
        if (size > kMaxSmallSize) return allocate_large(size, 1);
        void *ptr = allocate_small(class_index(size));
        if (ptr != nullptr) memset(ptr, 0, size);
        return ptr;
    }

    // In place when the block is big enough and, for a large block, not more than twice too
    // big (so a shrunk 64 MiB buffer gives its memory back). Shrinking a small block never
    // moves it, which also keeps any alignment it was allocated with.
    void *do_realloc(void *ptr, size_t new_size) override {
        size_t usable = usable_size(ptr, "realloc");
        bool large = usable > kMaxSmallSize;
        if (new_size <= usable && (!large || new_size > usable / 2)) return ptr;
        void *moved = do_alloc(new_size, 1);
        if (moved == nullptr) return nullptr;
        memcpy(moved, ptr, usable < new_size ? usable : new_size);
        do_dealloc(ptr);
        return moved;
    }

    void do_fork_prepare() override {
        for (SizeClass &size_class : classes_) pthread_mutex_lock(&size_class.lock);
    }

    void do_fork_parent() override {
        for (int i = kClassCount - 1; i >= 0; i--) pthread_mutex_unlock(&classes_[i].lock);
    }

    void do_fork_child() override {
        for (SizeClass &size_class : classes_) pthread_mutex_init(&size_class.lock, nullptr);
    }

    bool do_get_stats(heaphook_stats *out) override {
        memset(out, 0, sizeof *out);
        size_t chunks = 0;
        for (int i = 0; i < kClassCount; i++) {
            SizeClass &size_class = classes_[i];
            size_t block_size = class_block_size(i);
            pthread_mutex_lock(&size_class.lock);
            size_t bump_blocks =
                static_cast<size_t>(size_class.bump_end - size_class.bump) / block_size;
            chunks += size_class.chunk_count;
            out->used_blocks += size_class.used_blocks;
            out->used_bytes += size_class.used_blocks * block_size;
            out->free_blocks += size_class.free_blocks;
            out->free_bytes += (size_class.free_blocks + bump_blocks) * block_size;
            if (size_class.free_blocks + bump_blocks > 0) out->largest_free_block = block_size;
            pthread_mutex_unlock(&size_class.lock);
        }
        out->pool_bytes = chunks * chunk_size_;
        out->growth_count = chunks > 0 ? chunks - 1 : 0;
        out->mmapped_blocks = large_blocks_.load(std::memory_order_relaxed);
        out->mmapped_bytes = large_bytes_.load(std::memory_order_relaxed);
        return true;
    }

    // ---- Small blocks
    // ----------------------------------------------------------------------------

    void *allocate_small(int index) {
        SizeClass &size_class = classes_[index];
        size_t block_size = class_block_size(index);
        pthread_mutex_lock(&size_class.lock);
        void *block = nullptr;
        if (size_class.free_list != nullptr) {
            block = size_class.free_list;
            size_class.free_list = size_class.free_list->next;
            size_class.free_blocks--;
        } else {
            if (size_class.bump == size_class.bump_end && !add_chunk(size_class, index)) {
                pthread_mutex_unlock(&size_class.lock);
                return nullptr;
            }
            block = size_class.bump;
            size_class.bump += block_size;
        }
        size_class.used_blocks++;
        pthread_mutex_unlock(&size_class.lock);
        static_cast<FreeBlock *>(block)->mark = 0;
        return block;
    }

    // Maps a chunk for the class and makes it the bump region. Called with the class lock held.
    bool add_chunk(SizeClass &size_class, int index) {
        char *chunk = static_cast<char *>(heaphook_os_map_aligned(chunk_size_, chunk_size_));
        if (chunk == nullptr) return false;
        if (!chunks_.insert(reinterpret_cast<uintptr_t>(chunk))) {
            heaphook_os_unmap(chunk, chunk_size_);
            return false;
        }
        ChunkHeader *header = reinterpret_cast<ChunkHeader *>(chunk);
        header->magic = kHeaderMagic;
        header->kind = static_cast<uint32_t>(index);
        size_t block_size = class_block_size(index);
        size_class.bump = chunk + round_up(kChunkHeaderSpace, block_size);
        size_class.bump_end = chunk + chunk_size_;
        size_class.chunk_count++;
        return true;
    }

    // ---- Large blocks
    // ----------------------------------------------------------------------------

    // A mapping of its own, laid out so that the header is at (block - 1) rounded down to the
    // chunk size, like a small block's:
    //
    //   mapping (aligned to max(chunk size, align))
    //   |<-------------- offset -------------->|<----- size, rounded to pages ----->|
    //   [header ...                            ][block                              ]
    //
    // offset = max(page, align). When offset < chunk size the header is at the mapping's
    // start; otherwise (align >= chunk size) it is at block - chunk size, inside the offset.
    void *allocate_large(size_t size, size_t align) {
        size_t offset = align > page_size_ ? align : page_size_;
        size_t usable = round_up(size, page_size_);  // no overflow: size <= PTRDIFF_MAX
        size_t mapping_size = offset + usable;
        size_t mapping_align = align > chunk_size_ ? align : chunk_size_;
        char *mapping = static_cast<char *>(heaphook_os_map_aligned(mapping_size, mapping_align));
        if (mapping == nullptr) return nullptr;
        char *block = mapping + offset;
        ChunkHeader *header = header_at(block);
        if (!chunks_.insert(reinterpret_cast<uintptr_t>(header))) {
            heaphook_os_unmap(mapping, mapping_size);
            return nullptr;
        }
        header->magic = kHeaderMagic;
        header->kind = kLargeKind;
        header->block = block;
        header->mapping = mapping;
        header->mapping_size = mapping_size;
        header->usable_size = usable;
        large_blocks_.fetch_add(1, std::memory_order_relaxed);
        large_bytes_.fetch_add(mapping_size, std::memory_order_relaxed);
        return block;
    }

    void release_large(ChunkHeader *header) {
        chunks_.remove(reinterpret_cast<uintptr_t>(header));
        large_blocks_.fetch_sub(1, std::memory_order_relaxed);
        large_bytes_.fetch_sub(header->mapping_size, std::memory_order_relaxed);
        heaphook_os_unmap(header->mapping, header->mapping_size);
    }

    // ---- Headers -------------------------------------------------------------------------------

    ChunkHeader *header_at(void *ptr) const {
        uintptr_t address = reinterpret_cast<uintptr_t>(ptr) - 1;
        return reinterpret_cast<ChunkHeader *>(address & ~(uintptr_t)(chunk_size_ - 1));
    }

    // The header of a block the program passes back, after checking that it is one: its
    // chunk is in the set (else it is not this heap's, or a large block already freed), the
    // header is intact, and the pointer is where a block starts. Stops with one line if not.
    ChunkHeader *header_of(void *ptr, const char *operation) const {
        ChunkHeader *header = header_at(ptr);
        if (!chunks_.contains(reinterpret_cast<uintptr_t>(header))) {
            heaphook_fatal(
                "example: %s(%p): invalid pointer (not a block of this heap, or a large block "
                "already freed)",
                operation, ptr);
        }
        if (header->magic != kHeaderMagic ||
            (header->kind != kLargeKind && header->kind >= static_cast<uint32_t>(kClassCount))) {
            heaphook_fatal("example: %s(%p): heap corruption: the header of its chunk is damaged",
                           operation, ptr);
        }
        uintptr_t offset = reinterpret_cast<uintptr_t>(ptr) - reinterpret_cast<uintptr_t>(header);
        bool start = header->kind == kLargeKind
                         ? header->block == ptr
                         : offset >= kChunkHeaderSpace &&
                               offset % class_block_size(static_cast<int>(header->kind)) == 0;
        if (!start) {
            heaphook_fatal("example: %s(%p): invalid pointer (not the start of a block)", operation,
                           ptr);
        }
        return header;
    }

    // ---- Configuration
    // ---------------------------------------------------------------------------

    static size_t read_chunk_size() {
        size_t size = heaphook_env_size(kChunkSizeVariable, nullptr, kDefaultChunkSize);
        if ((size & (size - 1)) != 0 || size < kMinChunkSize || size > kMaxChunkSize) {
            heaphook_config_fail(kChunkSizeVariable, heaphook_env_get(kChunkSizeVariable, nullptr),
                                 "a power of two from 64KiB to 1GiB", "1MiB");
        }
        return size;
    }

    const size_t chunk_size_;
    const size_t page_size_;
    SizeClass classes_[kClassCount] = {};
    ChunkSet chunks_;
    std::atomic<size_t> large_blocks_{0};
    std::atomic<size_t> large_bytes_{0};
};

}  // namespace

heaphook::GlobalAllocator &heaphook::GlobalAllocator::get_instance() {
    static ExampleAllocator allocator;
    return allocator;
}
