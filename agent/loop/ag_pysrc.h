/*
 * ag_pysrc: the tool loop's Python, built into the binary from the .py
 * files next to this header (scheme: kernel-bridge/pool/kb_pysrc.h). Each
 * defines one function the caller calls and deletes again, silently, in
 * the user's namespace.
 */
#ifndef AGENT_LOOP_AG_PYSRC_H
#define AGENT_LOOP_AG_PYSRC_H

#include <stddef.h>

/* ag_env_probe.py: __ja_env(sandboxed) prints the kernel's environment. */
extern const char ag_env_probe_py[];
extern const size_t ag_env_probe_py_len;

/* ag_list_files.py: __ja_ls() prints the working directory's files. */
extern const char ag_list_files_py[];
extern const size_t ag_list_files_py_len;

#endif
