/* tlsf2_rename.h — heaphook's TLSF (tlsf.c, tlsf.h) as compiled into the TLSF 2.x compat
 * library: its functions whose names TLSF 2.x uses with other signatures are renamed.
 * Force-included (-include) in every file of the heaphook::tlsf2 target (its tlsf.c and
 * tlsf2_compat.c), cmake/heaphook_tlsf.cmake; tlsf2_compat.c also includes it by name before
 * tlsf.h, to say so where the renamed names are used. */
#define tlsf_malloc heaphook_tlsf2_impl_malloc
#define tlsf_free heaphook_tlsf2_impl_free
#define tlsf_realloc heaphook_tlsf2_impl_realloc
#define tlsf_calloc heaphook_tlsf2_impl_calloc
