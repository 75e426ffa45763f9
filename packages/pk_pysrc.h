/*
 * pk_pysrc: the package installer's Python, built into the binary from the
 * .py files next to this header (scheme: kernel-bridge/pool/kb_pysrc.h).
 * Each defines one function; the caller appends the call with its
 * arguments as Python literals and runs the result in a private namespace
 * of the kernel.
 */
#ifndef PACKAGES_PK_PYSRC_H
#define PACKAGES_PK_PYSRC_H

#include <stddef.h>

/* pk_install_env.py: _ja_marker_env(mark) prints the PEP 508 environment
 * as one JSON line after `mark`. */
extern const char pk_install_env_py[];
extern const size_t pk_install_env_py_len;

/* pk_install_pip.py: _ja_install(req, wheels, target, mark) runs pip in
 * the box and prints its result after `mark`. */
extern const char pk_install_pip_py[];
extern const size_t pk_install_pip_py_len;

#endif
