/*
 * pk_install: install wheels from a signed manifest into a running
 * sandboxed kernel, offline.
 *
 * The steps, each a refusal point before the next:
 *   1. verify: DIR's manifest.sig against the trusted keys, then the size
 *      and SHA-256 of every listed wheel (pk_manifest_load_verified), keeping
 *      an fd on each verified file;
 *   2. resolve: each requested "name" or "name==version" picks one release
 *      from the manifest (the highest version when several are listed);
 *      its dependencies come from the Requires-Dist headers of the wheel's
 *      METADATA, read on the host from the verified fd (pk_wheel), with
 *      environment markers evaluated for the kernel's Python; each
 *      dependency is satisfied from the manifest only, the highest listed
 *      version matching its specifier. Nothing outside the manifest is ever
 *      fetched: a dependency it lacks is refused by name;
 *   3. copy: the verified bytes of every wheel of the chosen releases go
 *      into a fresh directory in the sandbox's run dir (mode 0755, files
 *      0444, re-hashed as written: pk_manifest_entry_copy). The operator's
 *      DIR is never mounted or shown to the sandbox;
 *   4. install: pip runs inside the sandbox, as a subprocess of the
 *      kernel's own Python: `pip install --isolated --no-index --find-links
 *      COPY --only-binary :all: --require-hashes --target
 *      /mnt/data/.packages -r REQS`. REQS pins every release with its
 *      manifest hashes; its text travels inside the executed code (written
 *      to a private temporary file in the box), not through the shared run
 *      dir, so pip re-checks each wheel against hashes the host chose even
 *      if something in the box rewrote the copied files. The box has no
 *      network;
 *   5. import: /mnt/data/.packages is put on sys.path (it is also on the
 *      kernel's PYTHONPATH, so it survives a kernel restart) and the import
 *      caches are invalidated, so `import name` works at once. The copy
 *      directory is removed.
 *
 * The location is per session: /mnt/data is the session's own tmpfs.
 */
#ifndef PACKAGES_PK_INSTALL_H
#define PACKAGES_PK_INSTALL_H

#include "common/err.h"
#include "kernel-bridge/kb_kernel.h"
#include "packages/pk_trust.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* Where packages go inside the sandbox. */
#define PK_INSTALL_TARGET "/mnt/data/.packages"
/* Wall-clock limit for pip inside the sandbox. */
#define PK_INSTALL_TIMEOUT_MS (10 * 60 * 1000)

/*
 * Install `requirements[0..n)` ("name" or "name==version") from the signed
 * package directory `dir` into `kernel` (borrowed; started by a sandbox
 * launcher, whose run dir the box sees). On success returns 0 and, if
 * report_out is non-NULL, sets it to a new JSON object:
 *   {"dir": DIR, "signer": KEYID, "signer_label": L, "target": PATH,
 *    "requested": [...],
 *    "installed": [{"name", "version", "files": [{"filename", "sha256"}],
 *                   "required_by": NAME | null}]} (the caller records it:
 * ag_session_record_packages). Returns -1 with: ERR_VERIFY (signature, key or
 * hash refused; nothing was installed), ERR_USAGE (a name not in the manifest,
 * a dependency missing from it, conflicting versions, or pip's refusal; the
 * text names what and lists what the manifest offers), ERR_KERNEL / ERR_TIMEOUT
 * (the kernel failed while pip ran), ERR_IO / ERR_SANDBOX (copying failed).
 */
int pk_install(kb_kernel_t *kernel, const char *dir, const pk_trust_t *trust,
               const char *const *requirements, size_t n, json_t **report_out,
               err_t *err);

/* The checks that need no kernel, for failing fast before one starts: the
 * signature of DIR's manifest (not yet the wheels' hashes) and that each
 * requested name is in it. 0, or -1 with err as pk_install. */
int pk_install_precheck(const char *dir, const pk_trust_t *trust,
                        const char *const *requirements, size_t n, err_t *err);

/* One line for people: "installed demo-pkg 1.0, helper 2.0 (for demo-pkg)
 * from /srv/wheels (signed by key 1a2b... ops)". New string. */
char *pk_install_summary(const json_t *report);

#endif
