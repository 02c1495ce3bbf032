/**
 * What a site is named by: the first frame of its stack (innermost first) that is not inside an
 * allocator. A stack recorded at `malloc` starts in whatever called malloc, and that is often an
 * allocator of the program's own (`_PyObject_Malloc`, `g_malloc`, `operator new`, `xmalloc`):
 * naming the site by it puts one allocator's name on every row. Every view (the text and JSON
 * tables, `check`, `report --diff`, and the HTML page when it imports this module) names a site
 * by `siteIndex`, and keeps the whole stack beside it.
 *
 * The built-in list (ALLOCATOR_FRAMES) is documented in the README; `--skip-frames REGEX`
 * (pprof's `-drop_frames`) adds to it.
 */
import { HeaphookError } from '@heaphook/core';

/** One entry of the built-in list: the frames it matches (a function name) and what they are. */
export interface AllocatorFrames {
  readonly pattern: RegExp;
  readonly what: string;
}

/**
 * Allocator-internal and allocation-wrapper functions, matched against the whole demangled
 * function name (C++ names with their argument lists: the patterns allow them).
 */
export const ALLOCATOR_FRAMES: readonly AllocatorFrames[] = [
  {
    pattern:
      /^(__libc_|__GI___libc_|__)?(malloc|calloc|realloc|reallocarray|free|cfree|memalign|posix_memalign|aligned_alloc|valloc|pvalloc|malloc_usable_size)(_impl)?$/,
    what: 'the C library malloc family',
  },
  {
    pattern: /^(_int_malloc|_int_realloc|_int_free|_int_memalign|tcache_.*|sysmalloc)$/,
    what: 'glibc malloc internals',
  },
  {
    pattern: /^(__)?(strdup|strndup|wcsdup|asprintf|vasprintf|open_memstream)$/,
    what: "C library functions that return a malloc'd copy",
  },
  {
    pattern: /^operator (new|delete)(\[\])?(\(.*\))?$/,
    what: 'C++ operator new and delete',
  },
  {
    pattern:
      /^(__gnu_cxx::new_allocator|std::allocator|std::__new_allocator|__gnu_cxx::__alloc_traits|std::allocator_traits)<.*>::(allocate|deallocate|construct)/,
    what: 'the C++ standard allocator',
  },
  {
    pattern: /^(x|xm|xc|xre|xstr|xnm)(malloc|calloc|realloc|alloc|strdup|memdup|ndup)$/,
    what: 'GNU/BSD xmalloc wrappers (abort on failure)',
  },
  {
    pattern:
      /^(g_malloc|g_malloc0|g_realloc|g_try_malloc|g_try_malloc0|g_try_realloc|g_malloc_n|g_malloc0_n|g_realloc_n|g_slice_alloc|g_slice_alloc0|g_strdup|g_strndup|g_memdup2?|g_new.*)$/,
    what: 'GLib allocation',
  },
  {
    pattern:
      /^(_?PyObject_(Malloc|Calloc|Realloc|Free|GC_Malloc|GC_New|GC_NewVar|GC_Resize|New|NewVar|Init|InitVar)|_PyObject_GC_(Alloc|Link|New|NewVar|Resize)|gc_alloc|PyMem_.*|_PyMem_.*|pymalloc_.*|allocate_from_new_pool|_PyObject_MallocWithType|PyType_GenericAlloc|_PyType_AllocNoTrack|_PyMem_RawMalloc|_PyMem_DebugMalloc|_PyMem_DebugRawAlloc|new_arena|arena_map_get|arena_map_mark_used|_PyObject_ArenaMmap|_PyObject_ArenaMalloc)(\(.*\))?$/,
    what: 'CPython object and memory allocators',
  },
  {
    pattern:
      /^(v8::internal::)?(Malloced::New|AlignedAlloc|AllocWithRetry|Malloced::operator new|.*::AllocateRaw)|^v8::internal::(AllocAtLeastWithRetry|AlignedAllocWithRetry|Malloced::New|Zone::New|Zone::Expand|Zone::NewExpand|AccountingAllocator::AllocateSegment)|^node::(Malloc|UncheckedMalloc|Realloc|UncheckedRealloc|Calloc|UncheckedCalloc)/,
    what: 'V8 and Node.js allocation wrappers',
  },
  {
    pattern:
      /^(CRYPTO_(malloc|zalloc|realloc|clear_realloc|secure_malloc|secure_zalloc|strdup|strndup|memdup)|OPENSSL_sk_dup|OPENSSL_sk_deep_copy|BUF_MEM_grow|BUF_MEM_grow_clean)$/,
    what: 'OpenSSL allocation',
  },
  {
    pattern:
      /^(icu_\d+::)?(uprv_malloc|uprv_realloc|uprv_calloc)(_\d+)?|^icu_\d+::UMemory::operator new/,
    what: 'ICU allocation',
  },
  {
    pattern:
      /^llvm::(safe_malloc|safe_calloc|safe_realloc|allocate_buffer|MallocAllocator::Allocate|BumpPtrAllocatorImpl<.*>::(Allocate|StartNewSlab))/,
    what: 'LLVM allocation',
  },
  {
    pattern:
      /^(qMalloc|qRealloc|qCalloc|QArrayData::allocate|QArrayData::reallocateUnaligned|QtPrivate::QPodArrayOps<.*>::.*alloc.*)/,
    what: 'Qt allocation',
  },
  {
    pattern:
      /^(sqlite3MemMalloc|sqlite3MemRealloc|sqlite3Malloc|sqlite3MallocZero|sqlite3DbMallocRaw|sqlite3DbMallocRawNN|sqlite3DbMallocZero|sqlite3DbRealloc|sqlite3DbReallocOrFree|sqlite3Realloc|sqlite3_malloc|sqlite3_malloc64|sqlite3_realloc|sqlite3_realloc64|dbMallocRawFinish|dbReallocFinish|mallocWithAlarm|sqlite3DbStrDup|sqlite3DbStrNDup)$/,
    what: 'SQLite allocation',
  },
  {
    pattern:
      /^(ggc_internal_alloc|ggc_internal_cleared_alloc|ggc_alloc.*|ggc_realloc|xmalloc|xcalloc|xrealloc|obstack_.*|_obstack_newchunk|_obstack_begin|pool_allocator::allocate|base_pool_allocator<.*>::allocate|va_heap::reserve|vec_safe_grow.*|vec_safe_reserve.*|vec<.*>::(safe_push|quick_push|reserve))(\(.*\))?$/,
    what: 'GCC allocation (garbage-collected heap, obstacks, vec growth)',
  },
  {
    pattern: /^(je_|tc_|mi_|rpmalloc|tlsf_|heaphook_)/,
    what: 'other allocators (jemalloc, tcmalloc, mimalloc, TLSF, heaphook)',
  },
];

/** Frames of the modules of allocators and of heaphook itself (by module path). */
const ALLOCATOR_MODULES =
  /\/(libheaphook_[^/]*|libjemalloc[^/]*|libtcmalloc[^/]*|libmimalloc[^/]*)$/;

/** The function of the root frame a stack cut at HEAPHOOK_STACK_DEPTH gets. */
export const TRUNCATED_FRAME = '[truncated]';

/** A frame as the site naming needs it. */
export interface NamedFrame {
  readonly function: string;
  readonly module?: string;
  /** Source file, when debug information gave one. */
  readonly file?: string;
}

/** How far out an allocator frame makes a frame without source information the allocator's. */
const MISNAMED_REACH = 2;

/** Names sites by their first frame outside the allocators (the built-in list and --skip-frames). */
export class SiteNamer {
  constructor(private readonly extra: readonly RegExp[] = []) {}

  /** True for a frame inside an allocator (or one --skip-frames names). */
  isAllocator(frame: NamedFrame): boolean {
    const fn = frame.function.replace(/ \[inlined\]$/, '');
    if (fn === TRUNCATED_FRAME) return false;
    if (ALLOCATOR_FRAMES.some((a) => a.pattern.test(fn))) return true;
    if (frame.module !== undefined && ALLOCATOR_MODULES.test(frame.module)) return true;
    return this.extra.some((r) => r.test(fn));
  }

  /**
   * The index of the frame a stack is named by: the first that is not an allocator's; when
   * every frame is (a stack cut short inside the allocator), the outermost.
   *
   * In a stripped binary a static function takes the name of the nearest exported symbol
   * before it (sqlite's static malloc wrapper reads `sqlite3ApiExit`, CPython's pymalloc
   * `PyThread_init_thread`): a frame without source information whose caller, or its
   * caller's caller, is an allocator is taken for the allocator's own.
   */
  siteIndex(frames: readonly NamedFrame[]): number {
    const i = frames.findIndex(
      (f, at) => !this.isAllocator(f) && !this.insideAllocator(frames, at),
    );
    return i >= 0 ? i : Math.max(0, frames.length - 1);
  }

  private insideAllocator(frames: readonly NamedFrame[], at: number): boolean {
    const f = frames[at]!;
    if (f.file !== undefined && f.function !== '??') return false;
    for (let k = at + 1; k <= at + MISNAMED_REACH && k < frames.length; k++) {
      if (this.isAllocator(frames[k]!)) return true;
    }
    return false;
  }
}

/** `--skip-frames REGEX` (repeatable): a function-name regular expression, checked here. */
export function parseSkipFrames(text: string, previous: RegExp[] = []): RegExp[] {
  try {
    return [...previous, new RegExp(text)];
  } catch (error) {
    throw new HeaphookError(
      `--skip-frames ${text}: not a regular expression (${(error as Error).message}); e.g. --skip-frames '^my_alloc'`,
    );
  }
}
