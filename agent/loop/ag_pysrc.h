/*
 * ag_pysrc: the tool loop's Python sources, built into the binary from the
 * .py files next to this header (see kernel-bridge/pool/kb_pysrc.h for the
 * scheme). Each defines one function; the caller appends the call with its
 * arguments as Python literals and runs the result in a private namespace.
 */
#ifndef AGENT_LOOP_AG_PYSRC_H
#define AGENT_LOOP_AG_PYSRC_H

#include <stddef.h>

/* ag_pk_env.py: _ja_marker_env(mark) prints the PEP 508 environment. */
extern const char ag_pk_env_py[];
extern const size_t ag_pk_env_py_len;

/* ag_pk_install.py: _ja_install(req, wheels, target, mark) runs pip. */
extern const char ag_pk_install_py[];
extern const size_t ag_pk_install_py_len;

#endif
