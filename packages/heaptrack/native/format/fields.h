/*
 * fields.h — the fields of every event of the heap log, declared once (FORMAT.md, "events").
 *
 * An event is its tag byte, the common part (time, thread, stack: FORMAT.md) and then the
 * fields below, in the order of this table. The writer's encoder (track/writer.c,
 * hh_encode_fields), the C decoder (analyze/decode.c, decode_fields) and the TypeScript decoder
 * (src/decode/engine.ts, through the FIELD_<NAME>_OPS and _FLAG constants scripts/gen-format.mjs
 * generates from this file into src/decode/format.generated.ts) all walk this table; none of
 * them lists the fields of an operation again. native/format/README.md says which files a new field
 * touches.
 *
 * HH_EVENT_FIELDS(X) expands X(name, coding, ops, flag) once per field, in the order written:
 *   name    the field's name: the member of the codec's field structs and the TypeScript's
 *   coding  NUM: a varint in the num stream; ALIGN: the same, and the new block has no size
 *           class (FORMAT.md, "Addresses"); OLD: the address of a block that ends (FORMAT.md,
 *           "Addresses", a reference); NEW: the address of a block that begins
 *   ops     the operations whose events carry it, a set of HH_OPS_BIT(op)
 *   flag    the PROCESS flag (HH_PF_*) without which no event carries it; 0: always carried
 * A field whose flag is not 0 can be added to logs that older readers still read (they see the
 * flag unknown); one with flag 0 changes every event and needs HH_FORMAT_VERSION raised.
 *
 * The two address codings carry the heap's semantics, which every reader applies the same way:
 * the bytes of a new block are count × size (count is 1 when not carried); an OLD followed by a NEW
 * whose address is 0 for bytes > 0 is a failed realloc, which leaves the old block live; an OLD
 * with no NEW (free) ends its block, and the event's block is the one it ended.
 *
 * scripts/gen-format.mjs reads the table (its backslash-continued lines joined) and the
 * `#define HH_OPS_NAME <expression>` lines: keep each entry X(name, coding, ops, flag) with
 * ops and flag as expressions of HH_OPS_BIT, HH_OPS_ and HH_PF_ names.
 */
#ifndef HH_FIELDS_H
#define HH_FIELDS_H

#include <stdint.h>

#include "format/heaplog.h"

/* The set of operations holding only op (enum hh_op, without its HH_OP_ prefix). */
#define HH_OPS_BIT(op) (1u << HH_OP_##op)

#define HH_EVENT_FIELDS(X)                                                                         \
    X(count, NUM, HH_OPS_BIT(CALLOC) | HH_OPS_BIT(REALLOCARRAY), 0)                                \
    X(align, ALIGN, HH_OPS_BIT(POSIX_MEMALIGN) | HH_OPS_BIT(MEMALIGN) | HH_OPS_BIT(ALIGNED_ALLOC), \
      0)                                                                                           \
    X(size, NUM, HH_OPS_ALLOCATING, 0)                                                             \
    X(old, OLD, HH_OPS_BIT(REALLOC) | HH_OPS_BIT(REALLOCARRAY) | HH_OPS_BIT(FREE), 0)              \
    X(ptr, NEW, HH_OPS_ALLOCATING, 0)                                                              \
    X(duration, NUM, HH_OPS_CALLS, HH_PF_TIMING)                                                   \
    X(weight, NUM, HH_OPS_CALLS & ~HH_OPS_BIT(FREE), HH_PF_SAMPLING)                               \
    HH_EVENT_FIELDS_EXTRA(X)

/* The fields of an RT_VIOLATION record (FORMAT.md, "RT_VIOLATION"), all in the decl stream, in
 * the order written: HH_RT_VIOLATION_FIELDS(X) expands X(name, coding) per field, coding VAR (a
 * varint) or STR (a string: a varint length, then the bytes). The writer (track/writer.c,
 * hh_encode_rt_violation) and the TypeScript decoder (RT_VIOLATION_FIELDS, generated) walk it. */
#define HH_RT_VIOLATION_FIELDS(X) \
    X(time, VAR)                  \
    X(thread, VAR)                \
    X(stack, VAR)                 \
    X(site, VAR)                  \
    X(call, STR)                  \
    X(thread_name, STR)           \
    X(policy, VAR)                \
    X(priority, VAR)              \
    X(count, VAR)

/* Every operation that returns a block: all but free and realloc_done. */
#define HH_OPS_ALLOCATING (HH_OPS_CALLS & ~HH_OPS_BIT(FREE))
/* Every call of the allocation family: every operation but realloc_done (which is the second
 * half of a split realloc, not a call). */
#define HH_OPS_CALLS (((1u << HH_OP_COUNT) - 1) & ~HH_OPS_BIT(REALLOC_DONE))

/* Fields a test build adds through the table (test/native/synthetic_field.h); none otherwise. */
#ifndef HH_EVENT_FIELDS_EXTRA
#define HH_EVENT_FIELDS_EXTRA(X)
#endif

/* Whether an event of op, in a log whose PROCESS flags are flags, carries the field. */
#define HH_FIELD_CARRIED(op, flags, ops, flag) \
    ((((ops) >> (op)) & 1u) != 0 && ((flag) == 0 || ((flags) & (flag)) != 0))

/* The operations whose events carry a field of a coding, whatever the flags. */
#define HH_CODING_IS_NUM_NUM 1u
#define HH_CODING_IS_NUM_ALIGN 1u
#define HH_CODING_IS_NUM_OLD 0u
#define HH_CODING_IS_NUM_NEW 0u
#define HH_CODING_IS_ALIGN_NUM 0u
#define HH_CODING_IS_ALIGN_ALIGN 1u
#define HH_CODING_IS_ALIGN_OLD 0u
#define HH_CODING_IS_ALIGN_NEW 0u
#define HH_CODING_IS_OLD_NUM 0u
#define HH_CODING_IS_OLD_ALIGN 0u
#define HH_CODING_IS_OLD_OLD 1u
#define HH_CODING_IS_OLD_NEW 0u
#define HH_CODING_IS_NEW_NUM 0u
#define HH_CODING_IS_NEW_ALIGN 0u
#define HH_CODING_IS_NEW_OLD 0u
#define HH_CODING_IS_NEW_NEW 1u
#define HH_OPS_OF_ALIGN_(name, coding, ops, flag) | (HH_CODING_IS_ALIGN_##coding ? (ops) : 0u)
#define HH_OPS_OF_OLD_(name, coding, ops, flag) | (HH_CODING_IS_OLD_##coding ? (ops) : 0u)
#define HH_OPS_OF_NEW_(name, coding, ops, flag) | (HH_CODING_IS_NEW_##coding ? (ops) : 0u)
/* The operations whose new block has no size class (they carry an alignment). */
#define HH_OPS_ALIGNED (0u HH_EVENT_FIELDS(HH_OPS_OF_ALIGN_))
/* The operations that end a block (an OLD address) and that begin one (a NEW address). */
#define HH_OPS_ENDING (0u HH_EVENT_FIELDS(HH_OPS_OF_OLD_))
#define HH_OPS_BEGINNING (0u HH_EVENT_FIELDS(HH_OPS_OF_NEW_))

/* The values of an event's fields as the writer encodes them (track/writer.c). */
#define HH_FIELD_VALUE_MEMBER_(name, coding, ops, flag) uint64_t name;
typedef struct hh_field_values {
    HH_EVENT_FIELDS(HH_FIELD_VALUE_MEMBER_)
} hh_field_values;

/* The values of an event's fields as the decoder reads them (analyze/decode.c): the num
 * stream's values are the doubles the TypeScript computes (FORMAT.md, "varint"), addresses are
 * exact integers. A field the event does not carry: count 1, duration and weight NaN, else 0. */
#define HH_FIELD_DECODED_NUM double
#define HH_FIELD_DECODED_ALIGN double
#define HH_FIELD_DECODED_OLD uint64_t
#define HH_FIELD_DECODED_NEW uint64_t
#define HH_FIELD_DECODED_MEMBER_(name, coding, ops, flag) HH_FIELD_DECODED_##coding name;
typedef struct hh_field_decoded {
    HH_EVENT_FIELDS(HH_FIELD_DECODED_MEMBER_)
} hh_field_decoded;

/* The values of an RT_VIOLATION record as the writer encodes them (track/writer.c). */
typedef struct hh_field_str {
    const char *bytes;
    uint32_t len;
} hh_field_str;
#define HH_RT_FIELD_TYPE_VAR uint64_t
#define HH_RT_FIELD_TYPE_STR hh_field_str
#define HH_RT_FIELD_MEMBER_(name, coding) HH_RT_FIELD_TYPE_##coding name;
typedef struct hh_rt_violation_values {
    HH_RT_VIOLATION_FIELDS(HH_RT_FIELD_MEMBER_)
} hh_rt_violation_values;

#endif
