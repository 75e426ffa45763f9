/*
 * e2b_pysrc: the E2B server's Python, built into the binary from the .py
 * files next to this header (scheme: kernel-bridge/pool/kb_pysrc.h).
 */
#ifndef AGENT_E2B_E2B_PYSRC_H
#define AGENT_E2B_E2B_PYSRC_H

#include <stddef.h>

/* e2b_interp.py: the module _ja_e2b (contexts as namespaces, envVars). */
extern const char e2b_interp_py[];
extern const size_t e2b_interp_py_len;

#endif
