/*
 * kb_kernelspec: find Jupyter kernelspecs the way jupyter_client does. No
 * sockets; reads directories and kernel.json files.
 *
 * Search order (first match wins):
 *   1. each entry of JUPYTER_PATH (colon-separated, empty entries skipped)
 *      + "/kernels"
 *   2. the user data dir + "/kernels": JUPYTER_DATA_DIR, else
 *      $XDG_DATA_HOME/jupyter, else $HOME/.local/share/jupyter
 *   3. /usr/local/share/jupyter/kernels
 *   4. /usr/share/jupyter/kernels
 * Kernel names are case-insensitive (reported lowercased); a directory is a
 * kernel only if it holds a kernel.json.
 *
 * kb_kernelspec_t is embedded by the caller: kb_kernelspec_find() fills it,
 * kb_kernelspec_release() frees it (also safe after a failed find).
 */
#ifndef KERNEL_BRIDGE_KB_KERNELSPEC_H
#define KERNEL_BRIDGE_KB_KERNELSPEC_H

#include "common/err.h"
#include "common/strv.h"

#include <jansson.h>

typedef struct kb_kernelspec {
    char *name;           /* owned; lowercased kernel name */
    char *resource_dir;   /* owned; directory holding kernel.json */
    char **argv;          /* owned; NULL-terminated, at least one element */
    char *display_name;   /* owned; "" when kernel.json has none */
    char *language;       /* owned; "" when kernel.json has none */
    char *interrupt_mode; /* owned; "signal" (default) or "message" */
    json_t *env;          /* owned; object of string values, or NULL */
    json_t *metadata;     /* owned; object, or NULL */
} kb_kernelspec_t;

/* Find kernel `name` and parse its kernel.json into `out` (treated as
 * uninitialised; zeroed on failure). Errors: ERR_USAGE for an unknown name,
 * listing the kernels that exist ("no kernel named 'R'; available: agent,
 * python3 (see 'jupyter kernelspec list')"); ERR_KERNEL for a malformed
 * kernel.json, naming the file and the problem. */
int kb_kernelspec_find(const char *name, kb_kernelspec_t *out, err_t *err);

/* Parse `dir`/kernel.json directly (no search); `name` is stored as given,
 * lowercased. Same errors as above for a malformed file. */
int kb_kernelspec_load(const char *name, const char *dir, kb_kernelspec_t *out,
                       err_t *err);

/* Every kernel found, as a new object: lowercased name -> resource_dir
 * (first match wins, as in kb_kernelspec_find). Never NULL. */
json_t *kb_kernelspec_list(void);

/* The directories searched, in order, as a new array of strings (for
 * messages and `kernelspec list`). Never NULL. */
json_t *kb_kernelspec_dirs(void);

/* A new NULL-terminated copy of ks->argv with every "{connection_file}" and
 * "{resource_dir}" replaced (anywhere in an element, every occurrence).
 * Other "{...}" are kept as written (jupyter_client does the same). Free
 * with strv_free(). */
char **kb_kernelspec_expand_argv(const kb_kernelspec_t *ks,
                                 const char *connection_file);

/* Make ks->argv[0] an absolute path the way jupyter_client's launcher
 * finds it: "~/" is the user's home; "python" and "python3" are the
 * interpreter that runs the Jupyter stack (jupyter_client uses its own
 * sys.executable; ours is $JUPYTER_AGENT_PYTHON when absolute, else
 * /usr/bin/python3); any other name without '/' is looked up on PATH - the
 * kernelspec's env PATH if it sets one, else the caller's - like
 * subprocess.Popen does. Errors (ERR_KERNEL) name the kernel, the program
 * and the PATH searched. */
int kb_kernelspec_resolve_program(kb_kernelspec_t *ks, err_t *err);

/* Host paths the kernel's runtime reads besides its program, for a
 * sandbox to show read-only at the same place: the kernelspec's
 * resource_dir, every absolute argv entry after the program that exists,
 * and a per-language profile (by ks->language, case-insensitive) of the
 * interpreter's packaged configuration:
 *   R           /etc/R (R's ldpaths, Renviron, Rprofile.site), /usr/lib/R,
 *               /usr/local/lib/R, /usr/share/R
 *   julia       /etc/julia, and $JULIA_DEPOT_PATH's entries or ~/.julia
 *   javascript, typescript (ijavascript, tslab)  /etc/nodejs,
 *               /usr/lib/node_modules, /usr/local/lib/node_modules
 *   bash        /etc/bash.bashrc, /etc/inputrc, /etc/profile,
 *               /etc/profile.d
 * Only paths that exist on this host are listed. A new NULL-terminated
 * array; free with strv_free(). */
char **kb_kernelspec_runtime_paths(const kb_kernelspec_t *ks);

/* Free a NULL-terminated argv array (NULL is fine). */

/* Free everything and zero the struct. NULL is fine. */
void kb_kernelspec_release(kb_kernelspec_t *ks);

#endif
