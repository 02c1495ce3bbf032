// stdlib_backend.cpp — a C++ backend that uses the C++ standard library (built with
// heaphook_add_backend(stdlib CXX_STDLIB ...)): a std::unordered_map of the live blocks under a
// std::mutex, filled from the constructor and from every do_alloc; the memory itself comes from
// glibc (__libc_malloc / __libc_memalign). Its constructor also reads a global
// std::unordered_map<std::string, ...> (constructed by a static constructor, so the core must
// not initialise the backend before the library's constructors ran) and catches an exception.
// The map's own nodes are allocated through malloc too: a thread-local flag sends those nested
// calls straight to glibc, unrecorded. The map lives in storage that is never destroyed: the
// instance's destructor runs at exit (__cxa_finalize), while the program and other libraries'
// destructors still call free.
#include <stdlib.h>

#include <new>

#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "heaphook/heaphook.hpp"

extern "C" void *__libc_malloc(size_t size);
extern "C" void *__libc_memalign(size_t align, size_t size);
extern "C" void __libc_free(void *ptr);

namespace {

// Constructed by a static constructor: empty (and unusable) before it has run.
const std::unordered_map<std::string, size_t> settings = {{"reserve", 512}, {"factor", 2}};

thread_local bool nested = false;

class StdlibAllocator final : public heaphook::GlobalAllocator {
   public:
    StdlibAllocator() {
        auto found = settings.find("reserve");
        if (found == settings.end()) {
            write_error("stdlib backend: initialised before its static constructors ran\n");
            abort();
        }
        size_t converted = 0;
        try {
            converted = std::stoul("not a number");
        } catch (const std::invalid_argument &) {
            converted = found->second * settings.at("factor");
        }
        nested = true;
        new (&state_storage_) State();
        state().live.reserve(converted);
        state().live.emplace(&state_storage_, 0);  // the map is used from the constructor too
        nested = false;
    }

   private:
    struct State {
        std::mutex mutex;
        std::unordered_map<void *, size_t> live;
        size_t used = 0;
    };
    alignas(State) unsigned char state_storage_[sizeof(State)];
    State &state() { return *reinterpret_cast<State *>(state_storage_); }

    static void write_error(const char *text) {
        ssize_t written = write(STDERR_FILENO, text, strlen(text));
        (void)written;
    }

    void *do_alloc(size_t size, size_t align) override {
        void *ptr = align == 1 ? __libc_malloc(size) : __libc_memalign(align, size);
        if (ptr == nullptr || nested) return ptr;
        nested = true;
        {
            std::lock_guard<std::mutex> lock(state().mutex);
            state().live[ptr] = size;
            state().used += size;
        }
        nested = false;
        return ptr;
    }

    void do_dealloc(void *ptr) override {
        if (!nested) {
            nested = true;
            std::lock_guard<std::mutex> lock(state().mutex);
            auto found = state().live.find(ptr);
            if (found != state().live.end()) {
                state().used -= found->second;
                state().live.erase(found);
            }
            nested = false;
        }
        __libc_free(ptr);
    }

    size_t do_get_block_size(void *ptr) override {
        std::lock_guard<std::mutex> lock(state().mutex);
        auto found = state().live.find(ptr);
        return found == state().live.end() ? 0 : found->second;
    }

    void do_fork_prepare() override { state().mutex.lock(); }
    void do_fork_parent() override { state().mutex.unlock(); }
    // The child has one thread, the one that locked the mutex in prepare.
    void do_fork_child() override { state().mutex.unlock(); }

    bool do_get_stats(heaphook_stats *out) override {
        std::lock_guard<std::mutex> lock(state().mutex);
        out->used_bytes = state().used;
        out->used_blocks = state().live.size();
        return true;
    }
};

}  // namespace

heaphook::GlobalAllocator &heaphook::GlobalAllocator::get_instance() {
    static StdlibAllocator allocator;
    return allocator;
}
