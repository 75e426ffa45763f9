/*
 * sb_drop: the one privilege drop. The sandbox's program (sb_sandbox.c)
 * and every kernel the factory forks (kernel-bridge/pool/kb_zygote.py,
 * through the same code built as a shared object, sb_drop_lib_memfd())
 * call these, so they cannot disagree.
 *
 * Async-signal-safe: raw system calls only, no allocation, so it runs
 * between clone and exec in a copy of a multi-threaded process, and in a
 * forked Python. Every failure is fatal to the caller: it reports -1 and
 * the step, and the caller must not run anything it was dropping for.
 */
#ifndef SANDBOX_SB_DROP_H
#define SANDBOX_SB_DROP_H

#include "common/err.h"

#include <sys/types.h>

/* Drop every capability but `keep` (a capability number such as CAP_KILL,
 * or 0 for none): the bounding set, the ambient set, then the effective,
 * permitted and inheritable sets. Returns 0 or -1 with errno. */
int sb_drop_caps(int keep);
/* The same keeping every capability whose bit is set in `keep`. */
int sb_drop_caps_mask(unsigned long long keep);

/* Become uid/gid `id` with nothing left, in this order: the bounding set
 * (a capability that is there but cannot be dropped is a failure),
 * supplementary groups (EPERM is tolerated: a user namespace with
 * setgroups denied has none to drop), setresgid, setresuid, every
 * capability (sb_drop_caps(0)), NO_NEW_PRIVS. Returns 0, or -1 with errno
 * and *step (static text) naming the step that failed. */
int sb_drop_to_user(unsigned id, const char **step);

/* A sealed memfd holding sb_drop.c built as a shared object (for ctypes
 * in the factory: CDLL("/proc/self/fd/N")); owned by the caller. -1 with
 * ERR_SANDBOX on failure. */
int sb_drop_lib_memfd(err_t *err);

#endif
