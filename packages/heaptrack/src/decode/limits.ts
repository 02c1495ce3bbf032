/**
 * The sizes FORMAT.md ("Blocks") allows a block, and so the most memory a reader spends on one.
 * They are the reference writer's own limits (native/writer.c): a block that claims or produces
 * more was not written by it, and is damage. Checking them before and while decompressing keeps a
 * reader's memory flat on any input (a 33 KB zstd block can otherwise inflate to gigabytes).
 */

/**
 * The most bytes a block's payload holds once decompressed: the writer's payload buffer
 * (HH_BLOCK_CAP = 6 streams of HH_STREAM_CAP = 192 KiB, plus 64 bytes for the stream table).
 */
export const MAX_BLOCK_PAYLOAD = 6 * 192 * 1024 + 64;

/**
 * The most bytes a block stores: a payload that did not compress, plus the codec's overhead
 * and the zstd length varint (the writer's compressed buffer is HH_BLOCK_CAP + 16 KiB).
 */
export const MAX_BLOCK_STORED = MAX_BLOCK_PAYLOAD + 16 * 1024;

/**
 * The largest thread index a THREAD record may declare (FORMAT.md). The writer numbers at most
 * 16,383 threads per log (HH_THREADS_CAP); readers keep tables by index, so a corrupt index of
 * millions would cost them hundreds of MB. native/analyze/scan.c has the same limit.
 */
export const MAX_THREAD_INDEX = 65535;

/**
 * The largest zstd window a log may declare. The writer compresses at level 1 (a 512 KiB
 * window, 2^19); this leaves room for other libzstd versions' choices while keeping the
 * decompressor's history buffer small.
 */
export const MAX_ZSTD_WINDOW = 8 * 1024 * 1024;
