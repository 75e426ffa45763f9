/*
 * kb_mpl_cache: matplotlib's font cache, built once per machine instead of
 * once per sandbox.
 *
 * Every sandbox starts with an empty home, so matplotlib rebuilds its font
 * list (1-2 s) on the first import of pyplot in every session. The host
 * builds it once, running /usr/bin/python3 on matplotlib's own font manager
 * (trusted code, no user input), under $XDG_CACHE_HOME/jupyter-agent/
 * matplotlib; each box gets a private, writable copy in its run dir and
 * MPLCONFIGDIR pointing there. The list names font files under /usr and
 * /etc/fonts, which the box sees at the same paths. Rebuilt when the fonts
 * change (their directories are newer than the cache).
 */
#ifndef KERNEL_BRIDGE_POOL_KB_MPL_CACHE_H
#define KERNEL_BRIDGE_POOL_KB_MPL_CACHE_H

#include <sys/types.h>

/* Copy the cache into DIR/matplotlib (owned by uid:gid) and return the
 * "MPLCONFIGDIR=..." entry for the kernel's environment (caller frees), or
 * NULL when there is no cache to offer (no matplotlib, build failed):
 * matplotlib then simply builds its own, as before. Never fails harder. */
char *kb_mpl_cache_seed(const char *dir, uid_t uid, gid_t gid);

#endif
