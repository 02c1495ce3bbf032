// backtrace_allocator.cpp — an allocator in tier4/heaphook's style that counts, per call stack,
// the allocations a program makes and prints the busiest stacks at exit, written for heaphook's
// tests. As tier4's: memory comes from glibc (a "vanilla" allocator it derives from), the
// records live in a std::pmr::unordered_map over a fixed buffer (no malloc while recording),
// and get_instance() returns the vanilla allocator while a thread is inside the recording
// allocator (backtrace() itself allocates the first time), so those calls are not recorded.
// Beyond tier4's: a lock around the records (fork-safe through the fork hooks), the records in
// storage never destroyed (the program still allocates after this object's destructor ran),
// and the report written with write(2) to stderr, as:
//   backtrace: <n> stacks, <bytes> bytes in <calls> calls; busiest (calls bytes frames):
#include <dlfcn.h>
#include <execinfo.h>

#include <array>
#include <memory_resource>
#include <mutex>
#include <new>
#include <unordered_map>

#include "heaphook/heaphook.hpp"
#include "heaphook/hook_types.hpp"
#include "heaphook/utils.hpp"

extern "C" {
void *__libc_malloc(size_t size);
void __libc_free(void *ptr);
void *__libc_memalign(size_t align, size_t size);
}

using namespace heaphook;

namespace {

constexpr int kMaxFrames = 32;
thread_local bool use_vanilla = false;

struct Stack {
    void *frames[kMaxFrames];
    int depth;
    bool operator==(const Stack &other) const {
        if (depth != other.depth) return false;
        for (int i = 0; i < depth; i++)
            if (frames[i] != other.frames[i]) return false;
        return true;
    }
};

struct StackHash {
    size_t operator()(const Stack &stack) const {
        size_t hash = 0;
        for (int i = 0; i < stack.depth; i++)
            hash = hash * 31 + reinterpret_cast<uintptr_t>(stack.frames[i]);
        return hash;
    }
};

struct Record {
    size_t bytes = 0;
    size_t calls = 0;
};

}  // namespace

class VanillaAllocator : public GlobalAllocator {
    const malloc_usable_size_type usable_size_ =
        reinterpret_cast<malloc_usable_size_type>(dlsym(RTLD_NEXT, "malloc_usable_size"));

   protected:
    void *do_alloc(size_t bytes, size_t align) override {
        static const malloc_type plain = __libc_malloc;
        static const memalign_type aligned = __libc_memalign;
        return align == 1 ? plain(bytes) : aligned(align, bytes);
    }
    void do_dealloc(void *ptr) override { __libc_free(ptr); }
    size_t do_get_block_size(void *ptr) override { return usable_size_(ptr); }
};

class BacktraceAllocator : public VanillaAllocator {
    struct State {
        std::array<std::byte, 16 << 20> buffer;
        std::pmr::monotonic_buffer_resource resource{buffer.data(), buffer.size(),
                                                     std::pmr::null_memory_resource()};
        std::pmr::unordered_map<Stack, Record, StackHash> records{&resource};
        std::mutex lock;
        bool full = false;
    };
    alignas(State) static inline unsigned char storage_[sizeof(State)];
    State &state() { return *reinterpret_cast<State *>(storage_); }

   public:
    BacktraceAllocator() { new (storage_) State(); }

    ~BacktraceAllocator() {
        use_vanilla = true;
        std::lock_guard<std::mutex> hold(state().lock);
        size_t bytes = 0, calls = 0;
        const std::pair<const Stack, Record> *busiest = nullptr;
        for (const auto &entry : state().records) {
            bytes += entry.second.bytes;
            calls += entry.second.calls;
            if (busiest == nullptr || entry.second.calls > busiest->second.calls) busiest = &entry;
        }
        write_to_stderr("backtrace: ", state().records.size(), " stacks, ", bytes, " bytes in ",
                        calls, " calls");
        if (busiest != nullptr) {
            write_to_stderr("; busiest: ", busiest->second.calls, " calls ", busiest->second.bytes,
                            " bytes ", size_t(busiest->first.depth), " frames\n");
        } else {
            write_to_stderr("\n");
        }
        state().full = true;  // record nothing more
    }

   private:
    void *do_alloc(size_t bytes, size_t align) override {
        use_vanilla = true;  // backtrace() and the map may allocate: the vanilla one serves them
        Stack stack;
        stack.depth = backtrace(stack.frames, kMaxFrames);
        {
            std::lock_guard<std::mutex> hold(state().lock);
            if (!state().full) {
                try {
                    Record &record = state().records[stack];
                    record.bytes += bytes;
                    record.calls += 1;
                } catch (const std::bad_alloc &) {
                    state().full = true;  // the buffer is used up: stop recording
                }
            }
        }
        use_vanilla = false;
        return VanillaAllocator::do_alloc(bytes, align);
    }

    void do_fork_prepare() override { state().lock.lock(); }
    void do_fork_parent() override { state().lock.unlock(); }
    void do_fork_child() override { state().lock.unlock(); }
};

GlobalAllocator &GlobalAllocator::get_instance() {
    static VanillaAllocator vanilla;
    static BacktraceAllocator recording;
    return use_vanilla ? static_cast<GlobalAllocator &>(vanilla) : recording;
}
