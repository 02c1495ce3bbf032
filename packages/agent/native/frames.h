/*
 * frames.h — the frames a process sends to `heaphook agent` over its Unix stream socket.
 *
 * Every frame starts with hh_agent_frame_header; `length` counts the whole frame, header
 * included, and is a multiple of 8 no larger than HH_AGENT_MAX_FRAME. All integers are
 * little-endian (the agent runs on the same host). A frame is written by one send(2) of fewer
 * bytes than one socket buffer segment, so frames from several threads never interleave.
 *
 * src/agent/frames.ts decodes the same layout and checks every length against it: the agent
 * trusts no byte of a frame, only the peer's SO_PEERCRED credentials.
 */
#ifndef HH_AGENT_FRAMES_H
#define HH_AGENT_FRAMES_H

#include <stdint.h>

#define HH_AGENT_VERSION 1u
#define HH_AGENT_MAX_FRAME 4096u
#define HH_AGENT_MAX_DEPTH 64u
#define HH_AGENT_COMM_BYTES 16u
#define HH_AGENT_BACKEND_BYTES 32u
#define HH_AGENT_MAX_NAME_BYTES 1024u   /* a symbol's name */
#define HH_AGENT_MAX_MODULE_BYTES 1024u /* a module's path */

enum hh_agent_frame_type {
    HH_AGENT_HELLO = 1, /* first frame of a connection */
    HH_AGENT_ALLOC = 2, /* a sampled allocation and its stack */
    HH_AGENT_FREE = 3,  /* a sampled block was freed */
    HH_AGENT_SYMBOL =
        4, /* a name for a return address the agent cannot name itself (JIT code); optional */
    HH_AGENT_STATS = 5, /* the process's counters and its allocator's figures, every second */
};

typedef struct hh_agent_frame_header {
    uint16_t type;
    uint16_t reserved; /* 0 */
    uint32_t length;
} hh_agent_frame_header;

typedef struct hh_agent_hello {
    hh_agent_frame_header h;
    uint32_t version;
    uint32_t reserved;
    uint64_t sample_bytes; /* mean bytes between samples */
    char comm[HH_AGENT_COMM_BYTES];
    char backend[HH_AGENT_BACKEND_BYTES]; /* NUL-padded; "" when unknown */
} hh_agent_hello;

typedef struct hh_agent_alloc {
    hh_agent_frame_header h;
    uint64_t address;
    uint64_t size;
    uint32_t depth; /* pcs that follow, at most HH_AGENT_MAX_DEPTH */
    uint32_t reserved;
    uint64_t pcs[]; /* innermost first: pcs[0] called malloc */
} hh_agent_alloc;

typedef struct hh_agent_free {
    hh_agent_frame_header h;
    uint64_t address;
} hh_agent_free;

typedef struct hh_agent_symbol {
    hh_agent_frame_header h;
    uint64_t pc;
    uint64_t function; /* start address of the function, 0 when unknown */
    uint16_t name_bytes;
    uint16_t module_bytes;
    uint32_t reserved;
    char text[]; /* name then module, not terminated, padded to 8 */
} hh_agent_symbol;

/* The process's own counters, cumulative since it started (so they survive an agent restart),
 * the backend's heaphook_stats (has_backend_stats = 0: the backend keeps none), and the
 * figures of other heaphook libraries loaded in the process (extras: HH_AGENT_EXTRA_*).
 * A client of before the extras sends the frame without them (HH_AGENT_STATS_V1_BYTES). */
#define HH_AGENT_EXTRA_VM 1u    /* ucm-hooks' VM_MAPPED / VM_UNMAPPED events are counted */
#define HH_AGENT_EXTRA_LEAKS 2u /* heaptrack's leak checking is on */
typedef struct hh_agent_stats {
    hh_agent_frame_header h;
    uint64_t allocs_total;
    uint64_t frees_total;
    uint64_t samples_total;
    uint64_t dropped_samples_total; /* samples not delivered: agent gone, slow or table full */
    uint64_t reconnects_total;
    uint64_t has_backend_stats;
    uint64_t pool_bytes, used_bytes, free_bytes, used_blocks, free_blocks, largest_free_block,
        mmapped_bytes, mmapped_blocks, growth_count, peak_used_bytes, largest_request;
    uint64_t extras;
    /* HH_AGENT_EXTRA_VM: bytes mapped and unmapped since the client started */
    uint64_t vm_mapped_bytes_total, vm_unmapped_bytes_total;
    /* HH_AGENT_EXTRA_LEAKS: checks so far, and the last one's leaked blocks and bytes */
    uint64_t leak_checks_total, leaked_blocks, leaked_bytes;
} hh_agent_stats;
#define HH_AGENT_STATS_V1_BYTES (sizeof(hh_agent_frame_header) + 17u * 8u)

#endif /* HH_AGENT_FRAMES_H */
