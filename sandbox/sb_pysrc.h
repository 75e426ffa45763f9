/* sb_pysrc: Python the sandbox puts into boxes (built in by tools/embed). */
#ifndef SANDBOX_SB_PYSRC_H
#define SANDBOX_SB_PYSRC_H

#include <stddef.h>

/* sb_gvisor_relay.py: pid 1 of a gVisor box (sb_gvisor.c). */
extern const char sb_gvisor_relay_py[];
extern const size_t sb_gvisor_relay_py_len;

#endif
