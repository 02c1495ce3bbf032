/*
 * heaphook/rt.h — mark a real-time section for `heaphook rtcheck`, in code whose thread is not
 * switched to a real-time policy (or to check a part of a thread's work only).
 *
 *     #include <heaphook/rt.h>
 *     for (;;) {
 *         wait_for_period();
 *         heaphook_rt_enter();   // from here every allocation or blocking call is reported
 *         control_step();
 *         heaphook_rt_exit();
 *     }
 *
 * Marks nest. The functions are declared weak and called only when defined: the same binary
 * runs unchanged without heaphook (the calls do nothing), and under `heaphook rtcheck` (or
 * LD_PRELOAD=libheaphook_rtcheck.so) libheaphook_rtcheck.so defines them. Code already marked
 * for RealtimeSanitizer (__rtsan_realtime_enter/exit, __rtsan_off/on) needs no change.
 * No link flag is needed; a static function-like macro keeps each call a null test and a call.
 */
#ifndef HEAPHOOK_RT_H
#define HEAPHOOK_RT_H

#ifdef __cplusplus
extern "C" {
#endif

void heaphook_rt_enter(void) __attribute__((weak));
void heaphook_rt_exit(void) __attribute__((weak));

/* A macro of the function's own name: inside its expansion the name is the function (no
 * recursion), so `heaphook_rt_enter();` calls it when it exists and does nothing otherwise. */
#define heaphook_rt_enter() (heaphook_rt_enter ? heaphook_rt_enter() : (void)0)
#define heaphook_rt_exit() (heaphook_rt_exit ? heaphook_rt_exit() : (void)0)

#ifdef __cplusplus
}

namespace heaphook {
/* The section of a scope: { heaphook::rt_scope rt; control_step(); } */
struct rt_scope {
    rt_scope() { heaphook_rt_enter(); }
    ~rt_scope() { heaphook_rt_exit(); }
    rt_scope(const rt_scope &) = delete;
    rt_scope &operator=(const rt_scope &) = delete;
};
}  // namespace heaphook
#endif

#endif /* HEAPHOOK_RT_H */
