/*
 * writer.h — turns ring records into the log file (FORMAT.md). Used by the in-process drain
 * thread and by the collector, so it never allocates through malloc: its tables, its block
 * buffers and its compressors' memory are mmap'd.
 */
#ifndef HH_WRITER_H
#define HH_WRITER_H

#include <stdbool.h>
#include <stdint.h>

#include "format/heaplog.h" /* the END record's reasons (enum hh_end_reason) */
#include "ring.h"

typedef struct hh_writer hh_writer;

/* Opens dir/heaplog.<pid>.log (or heaplog.<pid>.<n>.log when taken) and writes the file
 * header. path_out (may be NULL) receives the path. Returns NULL (errno set) on failure (when
 * the header cannot be written, the file is removed again). */
hh_writer *hh_writer_open(const char *dir, int pid, char *path_out, size_t path_cap);
/* Creates the log file path (EEXIST when it exists: an existing file, or a link planted at the
 * path, is never written) and writes the file header; path_out as above. Returns NULL (errno
 * set) on failure. */
hh_writer *hh_writer_open_file(const char *path, char *path_out, size_t path_cap);

/* Loads the codec's library now (zstd: dlopen of libzstd.so.1), so that it does not happen
 * later on the drain thread while the program may be forking. */
void hh_writer_prepare(int codec);

/* The ring reader callback: encodes one record. */
void hh_writer_record(void *writer, uint64_t pos, unsigned type, const void *record, uint32_t len);
/* Checks one record a traced process wrote (a ring record of `type`, `len` bytes with its header)
 * against the format's limits and what the log holds so far (FORMAT.md, "Records from the traced
 * process"): its length holds its fields, a PROCESS record comes first and once, strings and
 * byte fields stay within HH_MAX_*_BYTES, operations, flags and addresses are the format's.
 * Returns NULL when the writer may encode it, else the reason (a constant string). */
const char *hh_writer_check(const hh_writer *w, unsigned type, const void *record, uint32_t len);
/* The collector's ring reader: hh_writer_check, then hh_writer_record. The first record that
 * fails the check ends the input: it and every later record are dropped, and
 * hh_writer_violation gives the reason (the collector then closes the log, HH_END_PROTOCOL). */
void hh_writer_record_checked(void *writer, uint64_t pos, unsigned type, const void *record,
                              uint32_t len);
/* Why hh_writer_record_checked stopped taking records (NULL: it did not). */
const char *hh_writer_violation(const hh_writer *w);
/* The pid the log's PROCESS record gives, whatever the record says (0: the record's): the
 * collector's kernel-checked view of the peer (SO_PEERCRED). */
void hh_writer_set_pid(hh_writer *w, uint32_t pid);

/* The ring's prefetcher (hh_ring_read): the table slots hh_writer_record will look up for a
 * record a few records ahead. Only from the thread that calls hh_writer_record. */
void hh_writer_prefetch(void *writer, unsigned type, const void *record);

/* Writes the buffered block to the file. */
void hh_writer_flush(hh_writer *w);

/* After a drain pass: writes the block when it has waited long enough (HH_FLUSH_NS), so the
 * file follows the process closely without cutting the stream into tiny blocks. */
void hh_writer_tick(hh_writer *w);

/* Milliseconds until hh_writer_tick has something to do (the buffered block's flush, the
 * clock's final calibration), 0 when it is due now, -1 when nothing is waiting: how long a
 * reader of an empty ring may sleep without delaying the log. */
int hh_writer_due_ms(const hh_writer *w);

/* Writes the END record (dropped = the ring's drop counter), flushes and closes. Returns the
 * events in the log; error (may be NULL) receives the errno of a write that failed, 0 when
 * none did. After a failed write (hh_writer_error) the END says HH_END_WRITE_ERROR and counts
 * the events in the log's whole blocks, whatever the reason given. */
uint64_t hh_writer_close(hh_writer *w, unsigned reason, uint64_t dropped, int *error);

/* Releases the writer's memory without writing (a fork child's copy of its parent's). */
void hh_writer_abandon(hh_writer *w);

/* Events encoded so far. */
uint64_t hh_writer_events(const hh_writer *w);
/* Events in the blocks that reached the file whole. */
uint64_t hh_writer_written(const hh_writer *w);
/* The errno of the write that failed (0: none): the log ended there, at its last whole block,
 * and the writer drops what it is given from then on. */
int hh_writer_error(const hh_writer *w);
bool hh_writer_saw_exit(const hh_writer *w);

#endif /* HH_WRITER_H */
