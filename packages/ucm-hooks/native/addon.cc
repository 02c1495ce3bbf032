// addon.cc — lets a Node process watch its own memory events.
//
// The addon is linked with libheaphook_ucm.so, which Node loads after libc: the first
// subscription installs the hooks by GOT patching (Node, its libraries, and every library
// dlopen'ed later). The handler runs on whatever thread maps memory, inside the mmap call: it
// only copies the event into a fixed ring (no allocation); JavaScript drains the ring in batches
// on the event loop (src/watch.ts). A full ring drops events and counts them.
//
//   start(mask) -> install mode ("preload" | "reloc"), throws when events cannot be installed
//   setMask(mask)      events recorded from now on (0: none)
//   drain() -> { type: Uint32Array, address: BigUint64Array, size: Float64Array, dropped }
#include <napi.h>
#include <pthread.h>

#include <cstdint>
#include <cstring>

#include "heaphook/ucm.h"

namespace {

struct Record {
    uint32_t type;
    uint64_t address;
    uint64_t size;
};

constexpr size_t kRingSize = size_t(1) << 16;
Record ring[kRingSize];
size_t ring_head = 0, ring_count = 0;
uint64_t ring_dropped = 0;
pthread_mutex_t ring_lock = PTHREAD_MUTEX_INITIALIZER;
int current_mask = 0;
bool started = false;

void Handler(heaphook_ucm_event_type_t type, heaphook_ucm_event_t *ev, void *) {
    Record r{static_cast<uint32_t>(type), 0, 0};
    switch (type) {
        case HEAPHOOK_UCM_EVENT_MMAP:
            r.address = reinterpret_cast<uintptr_t>(ev->mmap.result);
            r.size = ev->mmap.size;
            break;
        case HEAPHOOK_UCM_EVENT_MUNMAP:
            r.address = reinterpret_cast<uintptr_t>(ev->munmap.address);
            r.size = ev->munmap.size;
            break;
        case HEAPHOOK_UCM_EVENT_MREMAP:
            r.address = reinterpret_cast<uintptr_t>(ev->mremap.result);
            r.size = ev->mremap.new_size;
            break;
        case HEAPHOOK_UCM_EVENT_SHMAT:
            r.address = reinterpret_cast<uintptr_t>(ev->shmat.result);
            break;
        case HEAPHOOK_UCM_EVENT_SHMDT:
            r.address = reinterpret_cast<uintptr_t>(ev->shmdt.shmaddr);
            break;
        case HEAPHOOK_UCM_EVENT_SBRK:
            r.address = reinterpret_cast<uintptr_t>(ev->sbrk.result);
            r.size = static_cast<uint64_t>(ev->sbrk.increment);
            break;
        case HEAPHOOK_UCM_EVENT_BRK:
            r.address = reinterpret_cast<uintptr_t>(ev->brk.addr);
            break;
        case HEAPHOOK_UCM_EVENT_MADVISE:
            r.address = reinterpret_cast<uintptr_t>(ev->madvise.addr);
            r.size = ev->madvise.length;
            break;
        default: /* VM_MAPPED, VM_UNMAPPED */
            r.address = reinterpret_cast<uintptr_t>(ev->vm_mapped.address);
            r.size = ev->vm_mapped.size;
            break;
    }
    pthread_mutex_lock(&ring_lock);
    if (ring_count == kRingSize) {
        ++ring_dropped;
    } else {
        ring[(ring_head + ring_count++) % kRingSize] = r;
    }
    pthread_mutex_unlock(&ring_lock);
}

const int kAllEvents = HEAPHOOK_UCM_NATIVE_EVENTS | HEAPHOOK_UCM_VM_EVENTS;

bool Install(Napi::Env env, int mask) {
    if (started) heaphook_ucm_unset_event_handler(kAllEvents, Handler, nullptr);
    started = false;
    current_mask = mask & kAllEvents;
    if (current_mask == 0) return true;
    heaphook_ucm_status_t status =
        heaphook_ucm_set_event_handler(current_mask, 1000, Handler, nullptr);
    if (status != HEAPHOOK_UCM_OK) {
        Napi::Error::New(env, "heaphook ucm-hooks: memory events unavailable (status " +
                                  std::to_string(static_cast<int>(status)) +
                                  "; see HEAPHOOK_MEM_EVENTS / HEAPHOOK_MEM_RELOC_HOOKS)")
            .ThrowAsJavaScriptException();
        return false;
    }
    started = true;
    return true;
}

Napi::Value Start(const Napi::CallbackInfo &info) {
    Napi::Env env = info.Env();
    if (!Install(env, info[0].As<Napi::Number>().Int32Value())) return env.Undefined();
    return Napi::String::New(env, heaphook_ucm_install_mode());
}

Napi::Value SetMask(const Napi::CallbackInfo &info) {
    Napi::Env env = info.Env();
    Install(env, info[0].As<Napi::Number>().Int32Value());
    return env.Undefined();
}

Napi::Value SelfTest(const Napi::CallbackInfo &info) {
    Napi::Env env = info.Env();
    int events = info[0].As<Napi::Number>().Int32Value();
    heaphook_ucm_test_events(events);
    return Napi::Number::New(env, heaphook_ucm_failed_events());
}

Napi::Value Drain(const Napi::CallbackInfo &info) {
    Napi::Env env = info.Env();
    static Record batch[kRingSize];
    pthread_mutex_lock(&ring_lock);
    size_t n = ring_count;
    for (size_t i = 0; i < n; ++i) batch[i] = ring[(ring_head + i) % kRingSize];
    ring_head = (ring_head + n) % kRingSize;
    ring_count = 0;
    uint64_t dropped = ring_dropped;
    ring_dropped = 0;
    pthread_mutex_unlock(&ring_lock);
    /* The JavaScript objects are made after the lock is released (they allocate). */
    Napi::Uint32Array types = Napi::Uint32Array::New(env, n);
    Napi::BigUint64Array addresses = Napi::BigUint64Array::New(env, n);
    Napi::Float64Array sizes = Napi::Float64Array::New(env, n);
    for (size_t i = 0; i < n; ++i) {
        types[i] = batch[i].type;
        addresses[i] = batch[i].address;
        sizes[i] = static_cast<double>(batch[i].size);
    }
    Napi::Object out = Napi::Object::New(env);
    out.Set("type", types);
    out.Set("address", addresses);
    out.Set("size", sizes);
    out.Set("dropped", Napi::Number::New(env, static_cast<double>(dropped)));
    return out;
}

/* A fork while the main thread drains must not leave the child's ring locked. */
void ForkPrepare() {
    pthread_mutex_lock(&ring_lock);
}
void ForkRelease() {
    pthread_mutex_unlock(&ring_lock);
}

Napi::Object Init(Napi::Env env, Napi::Object exports) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, [] { pthread_atfork(ForkPrepare, ForkRelease, ForkRelease); });
    exports.Set("start", Napi::Function::New(env, Start));
    exports.Set("setMask", Napi::Function::New(env, SetMask));
    exports.Set("selfTest", Napi::Function::New(env, SelfTest));
    exports.Set("drain", Napi::Function::New(env, Drain));
    return exports;
}

}  // namespace

NODE_API_MODULE(ucm_addon, Init)
