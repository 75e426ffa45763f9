/*
 * ag_envlock: the environment a notebook ran in, as a report archive
 * records it (environment.json's "python" part).
 *
 * The kernel itself says what it has (ag_envlock_probe.py, run silently,
 * outside the kernel's history): the Python version and every loaded
 * top-level module with its file, distribution and version, after importing
 * whatever the notebook's code cells import. The host then asks dpkg which
 * Debian package owns each module file and at which version (the box sees
 * the host's /usr read-only, so the paths are the same).
 */
#ifndef AGENT_SESSION_AG_ENVLOCK_H
#define AGENT_SESSION_AG_ENVLOCK_H

#include "common/err.h"
#include "kernel-bridge/kb_kernel.h"
#include "notebook-io/nb_notebook.h"

#include <jansson.h>

/* {"python", "implementation", "executable", "platform",
 *  "notebook_imports": [...], "modules": {name: {"file", "distribution",
 *  "version", "debian_package"}}, "debian_packages": {pkg: version} or
 *  null when dpkg is not there}. New reference, or NULL with err set.
 * `k` and `nb` are borrowed. */
json_t *ag_envlock_capture(kb_kernel_t *k, const nb_notebook_t *nb,
                           int timeout_ms, err_t *err);

/* What a fresh kernel `k` has for the modules `recorded` (a lock, borrowed)
 * says the notebook imported, without importing them: {"python",
 * "modules": {name: {"version"} or {"missing": true}}}. New reference, or
 * NULL with err set. */
json_t *ag_envlock_now(kb_kernel_t *k, const json_t *recorded, int timeout_ms,
                       err_t *err);

/* Differences that matter for a re-run between a recorded lock and
 * ag_envlock_now's answer: "pandas 1.5.3 -> 2.0.0", "python 3.11.2 -> 3.12.1",
 * one per line, for modules the notebook imports and Python itself. New string,
 * "" when none. */
char *ag_envlock_diff(const json_t *recorded, const json_t *now);

#endif
