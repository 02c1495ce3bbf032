/*
 * sample_path.c — what a hook does with a sampled allocation: walk its stack, remember its
 * address, send one frame. Shared by both ways the client's hooks are reached: preloaded ahead
 * of the allocator (hooks.c) and redirected to by GOT patching (attach.c).
 */
#include <unwind.h>

#include "../frames.h"
#include "client.h"

typedef struct hh_walk {
    uintptr_t *pcs;
    int depth, max, skip;
} hh_walk;

static _Unwind_Reason_Code hh_walk_frame(struct _Unwind_Context *ctx, void *arg) {
    hh_walk *w = arg;
    uintptr_t pc = _Unwind_GetIP(ctx);
    if (pc == 0) return _URC_END_OF_STACK;
    if (w->skip > 0) { /* hh_agent_sampled and the hook itself */
        w->skip--;
        return _URC_NO_REASON;
    }
    w->pcs[w->depth++] = pc;
    return w->depth < w->max ? _URC_NO_REASON : _URC_END_OF_STACK;
}

/* Out of line and called by the hook directly, so that the frames to skip are always these
 * two: this one and the hook. */
__attribute__((noinline)) void hh_agent_sampled(void *ptr, size_t size) {
    hh_agent_busy++;
    hh_agent_link_ensure_thread(); /* a fork child starts its own on its first sample */
    uintptr_t pcs[HH_AGENT_MAX_DEPTH];
    hh_walk w = {pcs, 0, HH_AGENT_MAX_DEPTH, 2};
    _Unwind_Backtrace(hh_walk_frame, &w);
    if (!hh_agent_remember((uintptr_t)ptr) ||
        !hh_agent_send_alloc((uintptr_t)ptr, size, pcs, w.depth)) {
        hh_agent_forget((uintptr_t)ptr);
        hh_agent_count_dropped();
    }
    hh_agent_busy--;
}
