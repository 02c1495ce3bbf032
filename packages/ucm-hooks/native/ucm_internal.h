/* ucm_internal.h — what native/ucm.c shares with the library's other files (not exported). */
#ifndef HEAPHOOK_UCM_INTERNAL_H
#define HEAPHOOK_UCM_INTERNAL_H

/* One line "heaphook-ucm[<pid>] <level>: ..." on the report fd when level (0 error .. 4 trace)
 * is enabled by HEAPHOOK_MEM_LOG_LEVEL. Safe inside hooks: no allocation, no stdio. */
void ucm_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif /* HEAPHOOK_UCM_INTERNAL_H */
