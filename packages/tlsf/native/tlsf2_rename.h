/* tlsf2_rename.h — heaphook's TLSF (tlsf.c, tlsf.h) as compiled into the TLSF 2.x compat
 * library: its functions whose names TLSF 2.x uses with other signatures are renamed.
 * Included by tlsf2_impl.c before tlsf.c, and by tlsf2_compat.c before tlsf.h. */
#define tlsf_malloc heaphook_tlsf2_impl_malloc
#define tlsf_free heaphook_tlsf2_impl_free
#define tlsf_realloc heaphook_tlsf2_impl_realloc
#define tlsf_calloc heaphook_tlsf2_impl_calloc
