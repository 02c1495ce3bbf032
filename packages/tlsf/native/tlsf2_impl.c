/* tlsf2_impl.c — heaphook's TLSF (tlsf.c) as the TLSF 2.x compat library uses it: with the
 * names TLSF 2.x gives other signatures renamed (tlsf2_rename.h), so that tlsf2_compat.c can
 * define tlsf_malloc(size), tlsf_free(ptr) ... */
#include "tlsf2_rename.h"
#include "tlsf.c"
