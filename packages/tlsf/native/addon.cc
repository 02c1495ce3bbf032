// addon.cc — an in-process TLSF heap for TypeScript: the same C code as libheaphook_tlsf.so
// (tlsf.c for the blocks, tlsf_grow.c for the pool's growth), over memory of its own.
//
//   new TlsfHeap(size)                                     one pool of size bytes, no growth
//   new TlsfHeap({ initialPoolSize, additionalPoolSize })  grows like the preload library
//
// Addresses are offsets from the start of a reservation aligned to 1 GiB, so an offset is
// aligned exactly as the memory it names. Areas are carved from that reservation one after
// the other (a guard page between them: they are not contiguous), and are only touched where
// blocks are written, so a large pool costs address space, not memory.
#include <napi.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern "C" {
#include "tlsf.h"
#include "tlsf_grow.h"
}

namespace {

constexpr size_t kReserveAlign = size_t(1) << 30;
constexpr size_t kDefaultReserve = size_t(64) << 30;
constexpr double kDefaultPool = 100e6;

size_t PageSize() {
    return static_cast<size_t>(sysconf(_SC_PAGESIZE));
}
size_t PageRound(size_t n) {
    return (n + PageSize() - 1) & ~(PageSize() - 1);
}

class TlsfHeap : public Napi::ObjectWrap<TlsfHeap> {
   public:
    static Napi::Function Init(Napi::Env env) {
        return DefineClass(env, "TlsfHeap",
                           {
                               InstanceMethod("alloc", &TlsfHeap::Alloc),
                               InstanceMethod("free", &TlsfHeap::Free),
                               InstanceMethod("realloc", &TlsfHeap::Realloc),
                               InstanceMethod("usableSize", &TlsfHeap::UsableSize),
                               InstanceMethod("stats", &TlsfHeap::Stats),
                               InstanceMethod("check", &TlsfHeap::Check),
                               InstanceMethod("blocks", &TlsfHeap::Blocks),
                               InstanceMethod("fill", &TlsfHeap::Fill),
                               InstanceMethod("verify", &TlsfHeap::Verify),
                               InstanceMethod("destroy", &TlsfHeap::Destroy),
                               InstanceMethod("replay", &TlsfHeap::Replay),
                           });
    }

    explicit TlsfHeap(const Napi::CallbackInfo &info) : Napi::ObjectWrap<TlsfHeap>(info) {
        Napi::Env env = info.Env();
        double initial = 0, additional = 0, reserve = static_cast<double>(kDefaultReserve);
        if (info.Length() >= 1 && info[0].IsNumber()) {
            initial = info[0].As<Napi::Number>().DoubleValue();
        } else if (info.Length() >= 1 && info[0].IsObject()) {
            Napi::Object o = info[0].As<Napi::Object>();
            initial = NumberOr(o, "initialPoolSize", kDefaultPool);
            additional = NumberOr(o, "additionalPoolSize", kDefaultPool);
            reserve = NumberOr(o, "maxPoolSize", reserve);
        } else {
            Napi::TypeError::New(env, "TlsfHeap(size) or TlsfHeap({ initialPoolSize, ... })")
                .ThrowAsJavaScriptException();
            return;
        }
        if (!(initial >= 0) || !(additional >= 0) || !(reserve > 0) || initial > 0x1p52 ||
            additional > 0x1p52 || reserve > 0x1p46) {
            Napi::RangeError::New(env, "pool sizes must be non-negative byte counts")
                .ThrowAsJavaScriptException();
            return;
        }
        reserve_ = PageRound(static_cast<size_t>(reserve));
        void *raw = mmap(nullptr, reserve_ + kReserveAlign, PROT_NONE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (raw == MAP_FAILED) {
            Napi::Error::New(env, "cannot reserve address space for the heap")
                .ThrowAsJavaScriptException();
            return;
        }
        const uintptr_t start = reinterpret_cast<uintptr_t>(raw);
        const uintptr_t aligned = (start + kReserveAlign - 1) & ~(kReserveAlign - 1);
        if (aligned > start) munmap(raw, aligned - start);
        const size_t tail = (start + reserve_ + kReserveAlign) - (aligned + reserve_);
        if (tail) munmap(reinterpret_cast<void *>(aligned + reserve_), tail);
        base_ = reinterpret_cast<char *>(aligned);

        control_ = std::aligned_alloc(64, (tlsf_control_size() + 63) & ~size_t(63));
        tlsf_t *t = tlsf_create(control_, 0);
        tlsf_grow_ops ops = {&TlsfHeap::MapArea, &TlsfHeap::ProbeArea, &TlsfHeap::Grew, this};
        if (tlsf_growing_init(&grow_, t, static_cast<size_t>(initial),
                              static_cast<size_t>(additional), &ops) != 0) {
            Release();
            Napi::Error::New(env, "cannot create the initial pool (too small or too large)")
                .ThrowAsJavaScriptException();
        }
    }

    ~TlsfHeap() override { Release(); }

   private:
    static double NumberOr(const Napi::Object &o, const char *key, double fallback) {
        Napi::Value v = o.Get(key);
        return v.IsNumber() ? v.As<Napi::Number>().DoubleValue() : fallback;
    }

    static void *MapArea(void *ctx, size_t bytes) {
        auto *self = static_cast<TlsfHeap *>(ctx);
        const size_t len = PageRound(bytes);
        if (len > self->reserve_ || self->cursor_ > self->reserve_ - len) return nullptr;
        char *area = self->base_ + self->cursor_;
        if (mprotect(area, len, PROT_READ | PROT_WRITE) != 0) return nullptr;
        self->cursor_ += len + PageSize();  // a guard page: areas are not contiguous
        return area;
    }

    // Whether a growth ending with an area of bytes fits in what is left of the reservation
    // (the smaller areas before it add up to less than the last one).
    static int ProbeArea(void *ctx, size_t bytes) {
        auto *self = static_cast<TlsfHeap *>(ctx);
        const size_t len = PageRound(bytes);
        const size_t left = self->reserve_ - self->cursor_;
        return len <= left / 2 ? 1 : 0;
    }

    static void Grew(void *ctx, size_t added, size_t, size_t) {
        static_cast<TlsfHeap *>(ctx)->additions_.push_back(added);
    }

    void Release() {
        if (base_) munmap(base_, reserve_);
        base_ = nullptr;
        std::free(control_);
        control_ = nullptr;
        std::vector<void *>().swap(slots_);
    }

    bool Alive(Napi::Env env) {
        if (base_) return true;
        Napi::Error::New(env, "TlsfHeap was destroyed").ThrowAsJavaScriptException();
        return false;
    }

    // The pointer for an offset, or nullptr after throwing.
    void *PointerArg(const Napi::CallbackInfo &info, size_t i) {
        if (info.Length() <= i || !info[i].IsNumber()) {
            Napi::TypeError::New(info.Env(), "an offset (number) is required")
                .ThrowAsJavaScriptException();
            return nullptr;
        }
        const double off = info[i].As<Napi::Number>().DoubleValue();
        if (!(off >= 0) || off >= static_cast<double>(reserve_) ||
            off != static_cast<size_t>(off)) {
            Napi::RangeError::New(info.Env(), "offset outside the heap")
                .ThrowAsJavaScriptException();
            return nullptr;
        }
        return base_ + static_cast<size_t>(off);
    }

    // Validates a pointer about to be freed or resized; throws with the kind of error.
    bool Valid(Napi::Env env, void *ptr, const char *call) {
        const void *where = nullptr;
        const tlsf_error e = tlsf_validate(grow_.tlsf, ptr, &where);
        if (e == TLSF_OK) return true;
        std::string msg = std::string(call) + "(" + std::to_string(Offset(ptr)) +
                          "): " + tlsf_error_name(e) + " at offset " +
                          std::to_string(Offset(where));
        Napi::Error err = Napi::Error::New(env, msg);
        err.Set("code", Napi::String::New(env, e == TLSF_ERR_DOUBLE_FREE ? "DOUBLE_FREE"
                                               : e == TLSF_ERR_INTERIOR  ? "INTERIOR"
                                               : e == TLSF_ERR_FOREIGN   ? "FOREIGN"
                                                                         : "HEADER"));
        err.ThrowAsJavaScriptException();
        return false;
    }

    double Offset(const void *p) const {
        return static_cast<double>(static_cast<const char *>(p) - base_);
    }

    Napi::Value OffsetOrNull(Napi::Env env, void *p) {
        if (!p) return env.Null();
        const tlsf_stats s = Counters();
        if (s.used_bytes > peak_used_) peak_used_ = s.used_bytes;
        return Napi::Number::New(env, Offset(p));
    }

    tlsf_stats Counters() const {
        tlsf_stats s;
        tlsf_get_counters(grow_.tlsf, &s);
        return s;
    }

    bool SizeAlignArgs(const Napi::CallbackInfo &info, size_t first, size_t *size, size_t *align) {
        if (info.Length() <= first || !info[first].IsNumber()) {
            Napi::TypeError::New(info.Env(), "a size (number) is required")
                .ThrowAsJavaScriptException();
            return false;
        }
        const double s = info[first].As<Napi::Number>().DoubleValue();
        double a = 1;
        if (info.Length() > first + 1 && info[first + 1].IsNumber())
            a = info[first + 1].As<Napi::Number>().DoubleValue();
        if (!(s >= 0) || s > 0x1p60 || !(a >= 1) || a > 0x1p60) {
            Napi::RangeError::New(info.Env(), "size or alignment out of range")
                .ThrowAsJavaScriptException();
            return false;
        }
        const size_t ai = static_cast<size_t>(a);
        if (ai & (ai - 1)) {
            Napi::RangeError::New(info.Env(), "alignment must be a power of two")
                .ThrowAsJavaScriptException();
            return false;
        }
        *size = s < 1 ? 1 : static_cast<size_t>(s);
        *align = ai <= TLSF_ALIGN ? 1 : ai;
        return true;
    }

    Napi::Value Alloc(const Napi::CallbackInfo &info) {
        Napi::Env env = info.Env();
        size_t size, align;
        if (!Alive(env) || !SizeAlignArgs(info, 0, &size, &align)) return env.Undefined();
        return OffsetOrNull(env, tlsf_growing_alloc(&grow_, size, align));
    }

    Napi::Value Free(const Napi::CallbackInfo &info) {
        Napi::Env env = info.Env();
        if (!Alive(env)) return env.Undefined();
        void *ptr = PointerArg(info, 0);
        if (ptr && Valid(env, ptr, "free")) tlsf_free(grow_.tlsf, ptr);
        return env.Undefined();
    }

    Napi::Value Realloc(const Napi::CallbackInfo &info) {
        Napi::Env env = info.Env();
        size_t size, align;
        if (!Alive(env)) return env.Undefined();
        void *ptr = PointerArg(info, 0);
        if (!ptr || !SizeAlignArgs(info, 1, &size, &align) || !Valid(env, ptr, "realloc"))
            return env.Undefined();
        // The backend's policy (a quarter more room on growth; a small shrink keeps the block).
        void *q = tlsf_growing_realloc(&grow_, ptr, size, 1);
        if (!q) return env.Null();
        return OffsetOrNull(env, q);
    }

    Napi::Value UsableSize(const Napi::CallbackInfo &info) {
        Napi::Env env = info.Env();
        if (!Alive(env)) return env.Undefined();
        void *ptr = PointerArg(info, 0);
        if (!ptr || !Valid(env, ptr, "usableSize")) return env.Undefined();
        return Napi::Number::New(env, static_cast<double>(tlsf_block_size(ptr)));
    }

    Napi::Value Stats(const Napi::CallbackInfo &info) {
        Napi::Env env = info.Env();
        if (!Alive(env)) return env.Undefined();
        tlsf_stats s;
        tlsf_get_stats(grow_.tlsf, &s);
        Napi::Object o = Napi::Object::New(env);
        o.Set("poolSize", static_cast<double>(grow_.total));
        o.Set("areas", static_cast<double>(s.pool_count));
        o.Set("managedBytes", static_cast<double>(s.pool_bytes));
        o.Set("used", static_cast<double>(s.used_bytes));
        o.Set("usedBlocks", static_cast<double>(s.used_blocks));
        o.Set("free", static_cast<double>(s.free_bytes));
        o.Set("freeBlocks", static_cast<double>(s.free_blocks));
        o.Set("largestFree", static_cast<double>(s.largest_free));
        o.Set("peakUsed", static_cast<double>(peak_used_));
        o.Set("overhead", static_cast<double>(s.pool_bytes - s.used_bytes - s.free_bytes));
        o.Set("growthCount", static_cast<double>(grow_.growth_count));
        o.Set("highWater", static_cast<double>(high_water_));
        Napi::Array additions = Napi::Array::New(env, additions_.size());
        for (size_t i = 0; i < additions_.size(); i++)
            additions.Set(static_cast<uint32_t>(i), static_cast<double>(additions_[i]));
        o.Set("additions", additions);
        return o;
    }

    Napi::Value Check(const Napi::CallbackInfo &info) {
        Napi::Env env = info.Env();
        if (!Alive(env)) return env.Undefined();
        char msg[256];
        if (tlsf_check(grow_.tlsf, msg, sizeof msg) != 0) {
            Napi::Error::New(env, std::string("heap integrity: ") + msg)
                .ThrowAsJavaScriptException();
            return env.Undefined();
        }
        return Napi::Boolean::New(env, true);
    }

    struct WalkState {
        Napi::Env env;
        Napi::Array out;
        uint32_t n;
        const TlsfHeap *self;
    };

    static void WalkOne(void *ptr, size_t size, int used, void *user) {
        auto *w = static_cast<WalkState *>(user);
        Napi::Object b = Napi::Object::New(w->env);
        b.Set("offset", w->self->Offset(ptr));
        b.Set("size", static_cast<double>(size));
        b.Set("used", used != 0);
        w->out.Set(w->n++, b);
    }

    Napi::Value Blocks(const Napi::CallbackInfo &info) {
        Napi::Env env = info.Env();
        if (!Alive(env)) return env.Undefined();
        WalkState w{env, Napi::Array::New(env), 0, this};
        tlsf_walk(grow_.tlsf, &TlsfHeap::WalkOne, &w);
        return w.out;
    }

    // fill(offset, byte[, length]) / verify(offset, byte[, length]): write and check a
    // pattern inside a used block (length defaults to its usable size).
    bool PatternArgs(const Napi::CallbackInfo &info, unsigned char **p, int *byte, size_t *len) {
        void *ptr = PointerArg(info, 0);
        if (!ptr || !Valid(info.Env(), ptr, "fill")) return false;
        *p = static_cast<unsigned char *>(ptr);
        *byte =
            info.Length() > 1 && info[1].IsNumber() ? info[1].As<Napi::Number>().Int32Value() : 0;
        *len = tlsf_block_size(ptr);
        if (info.Length() > 2 && info[2].IsNumber()) {
            const double l = info[2].As<Napi::Number>().DoubleValue();
            if (l >= 0 && l < static_cast<double>(*len)) *len = static_cast<size_t>(l);
        }
        return true;
    }

    Napi::Value Fill(const Napi::CallbackInfo &info) {
        Napi::Env env = info.Env();
        unsigned char *p;
        int byte;
        size_t len;
        if (!Alive(env) || !PatternArgs(info, &p, &byte, &len)) return env.Undefined();
        std::memset(p, byte, len);
        return env.Undefined();
    }

    Napi::Value Verify(const Napi::CallbackInfo &info) {
        Napi::Env env = info.Env();
        unsigned char *p;
        int byte;
        size_t len;
        if (!Alive(env) || !PatternArgs(info, &p, &byte, &len)) return env.Undefined();
        for (size_t i = 0; i < len; i++)
            if (p[i] != static_cast<unsigned char>(byte)) return Napi::Boolean::New(env, false);
        return Napi::Boolean::New(env, true);
    }

    // replay(ops, count): runs count operations of 4 numbers each from ops (a Float64Array)
    // on blocks named by slot numbers, with one call for many operations (trace replay):
    //   [0, slot, size, align]    slot = alloc(size, align)
    //   [1, slot, 0, 0]           free(slot)
    //   [2, slot, size, newSlot]  newSlot = realloc(slot, size) (no copy); slot is emptied
    // Operations on an empty slot are skipped. Returns the index of the first operation the
    // heap could not serve (after growing, if it may), or -1; it stops there.
    Napi::Value Replay(const Napi::CallbackInfo &info) {
        Napi::Env env = info.Env();
        if (!Alive(env)) return env.Undefined();
        if (info.Length() < 2 || !info[0].IsTypedArray() || !info[1].IsNumber() ||
            info[0].As<Napi::TypedArray>().TypedArrayType() != napi_float64_array) {
            Napi::TypeError::New(env, "replay(ops: Float64Array, count: number)")
                .ThrowAsJavaScriptException();
            return env.Undefined();
        }
        Napi::Float64Array ops = info[0].As<Napi::Float64Array>();
        const double n = info[1].As<Napi::Number>().DoubleValue();
        if (!(n >= 0) || n * 4 > static_cast<double>(ops.ElementLength())) {
            Napi::RangeError::New(env, "replay: count exceeds the operations given")
                .ThrowAsJavaScriptException();
            return env.Undefined();
        }
        const double *op = ops.Data();
        const size_t count = static_cast<size_t>(n);
        for (size_t i = 0; i < count; i++, op += 4) {
            const double slot_d = op[1];
            if (!(slot_d >= 0) || slot_d > 0x1p32 || !(op[2] >= 0) || op[2] > 0x1p46 ||
                !(op[3] >= 0) || op[3] > 0x1p40) {
                Napi::RangeError::New(env,
                                      "replay: operation " + std::to_string(i) + " out of range")
                    .ThrowAsJavaScriptException();
                return env.Undefined();
            }
            const size_t slot = static_cast<size_t>(slot_d);
            const size_t size = op[2] < 1 ? 1 : static_cast<size_t>(op[2]);
            if (slot >= slots_.size()) slots_.resize(slot + 1024, nullptr);
            void *q = nullptr;
            switch (static_cast<int>(op[0])) {
                case 0: {
                    const size_t a = static_cast<size_t>(op[3]);
                    q = tlsf_growing_alloc(&grow_, size, a <= TLSF_ALIGN || (a & (a - 1)) ? 1 : a);
                    if (!q) return Napi::Number::New(env, static_cast<double>(i));
                    if (slots_[slot]) tlsf_free(grow_.tlsf, slots_[slot]);
                    slots_[slot] = q;
                    break;
                }
                case 1:
                    if (slots_[slot]) tlsf_free(grow_.tlsf, slots_[slot]);
                    slots_[slot] = nullptr;
                    continue;
                case 2: {
                    void *p = slots_[slot];
                    if (!p) continue;
                    const size_t to = static_cast<size_t>(op[3]);
                    if (to >= slots_.size()) slots_.resize(to + 1024, nullptr);
                    q = tlsf_growing_realloc(&grow_, p, size, 0);
                    if (!q) return Napi::Number::New(env, static_cast<double>(i));
                    slots_[slot] = nullptr;
                    if (slots_[to] && slots_[to] != q) tlsf_free(grow_.tlsf, slots_[to]);
                    slots_[to] = q;
                    break;
                }
                default:
                    Napi::RangeError::New(env, "replay: unknown operation " + std::to_string(op[0]))
                        .ThrowAsJavaScriptException();
                    return env.Undefined();
            }
            const size_t end = static_cast<size_t>(static_cast<char *>(q) - base_) + size;
            if (end > high_water_) high_water_ = end;
            const tlsf_stats s = Counters();
            if (s.used_bytes > peak_used_) peak_used_ = s.used_bytes;
        }
        return Napi::Number::New(env, -1);
    }

    Napi::Value Destroy(const Napi::CallbackInfo &info) {
        Release();
        return info.Env().Undefined();
    }

    char *base_ = nullptr;
    size_t reserve_ = 0;
    size_t cursor_ = 0;
    void *control_ = nullptr;
    tlsf_growing grow_{};
    std::vector<size_t> additions_;
    size_t peak_used_ = 0;
    std::vector<void *> slots_;  // replay(): the blocks by slot number
    size_t high_water_ = 0;      // replay(): the highest end (offset + size) of a block
};

Napi::Object InitModule(Napi::Env env, Napi::Object exports) {
    exports.Set("TlsfHeap", TlsfHeap::Init(env));
    exports.Set("blockOverhead", Napi::Number::New(env, TLSF_BLOCK_OVERHEAD));
    exports.Set("poolOverhead", Napi::Number::New(env, TLSF_POOL_OVERHEAD));
    exports.Set("alignment", Napi::Number::New(env, TLSF_ALIGN));
    return exports;
}

}  // namespace

NODE_API_MODULE(tlsf_addon, InitModule)
