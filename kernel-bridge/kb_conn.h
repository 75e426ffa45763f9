/*
 * kb_conn: Jupyter connection files (read, write, validate). No I/O on
 * sockets except kb_conn_init_tcp(), which binds port 0 to find free ports.
 *
 * The format is jupyter_client's: a JSON object with transport ("tcp" or
 * "ipc"), ip, shell_port, iopub_port, stdin_port, control_port, hb_port,
 * key, signature_scheme and kernel_name. Unknown fields are ignored.
 *
 * kb_conn_t is embedded by the caller (git style):
 *
 *     kb_conn_t c;
 *     if (kb_conn_load(&c, path, &err)) ...   // fills c (init included)
 *     ...
 *     kb_conn_release(&c);                    // safe after a failed load
 *
 * Invariants of a filled struct: transport is "tcp" or "ipc"; ip and key are
 * non-NULL (key "" means unsigned messages); signature_scheme is
 * "hmac-sha256"; ports are in 1..65535 and pairwise distinct; for ipc, every
 * "<ip>-<port>" fits a unix socket path (sun_path, 108 bytes with the NUL).
 * The key is a secret: it is never put into an error message.
 */
#ifndef KERNEL_BRIDGE_KB_CONN_H
#define KERNEL_BRIDGE_KB_CONN_H

#include "common/err.h"

#include <stddef.h>

typedef enum {
    KB_SHELL,
    KB_IOPUB,
    KB_STDIN,
    KB_CONTROL,
    KB_HB,
    KB_NCHANNELS
} kb_channel_t;

typedef struct kb_conn {
    char transport[8];       /* "tcp" or "ipc" ("" after kb_conn_init) */
    char *ip;                /* owned; address, or the ipc path prefix */
    int ports[KB_NCHANNELS]; /* indexed by kb_channel_t; 0 = unset */
    char *key;               /* owned; HMAC key as written, "" = unsigned */
    char *signature_scheme;  /* owned; "hmac-sha256" */
    char *kernel_name;       /* owned; "" when the file names none */
} kb_conn_t;

/* Bytes in a unix socket path, including the terminating NUL. */
#define KB_CONN_SUN_PATH_MAX 108
/* Largest connection file we read (they are a few hundred bytes). */
#define KB_CONN_MAX_FILE (64 * 1024)

/* Empty struct: no allocations, everything unset. */
void kb_conn_init(kb_conn_t *c);
/* Free the strings and return to the kb_conn_init() state. */
void kb_conn_release(kb_conn_t *c);

/* Read and validate the connection file at `path`. `c` is treated as
 * uninitialised (its old contents are not freed); on failure it is left in
 * the kb_conn_init() state and `err` names the file and the problem
 * (ERR_USAGE for bad contents, ERR_IO for an unreadable file). */
int kb_conn_load(kb_conn_t *c, const char *path, err_t *err);

/* The same, from `len` bytes of JSON in memory (need not be NUL-terminated).
 * `origin` names the source in messages (e.g. the path); NULL = "connection
 * info". This is the fuzz entry point. */
int kb_conn_parse(kb_conn_t *c, const char *json, size_t len,
                  const char *origin, err_t *err);

/* Validate `c` and write it to `path` with mode 0600, atomically: a
 * temporary file in the same directory, fsync, rename. An existing file is
 * replaced. Returns 0, or -1 with ERR_IO (or ERR_USAGE if `c` is invalid). */
int kb_conn_save(const kb_conn_t *c, const char *path, err_t *err);

/* A fresh ipc connection: transport "ipc", ip = `path_prefix`, ports 1..5
 * (like jupyter_client), key = 32 random bytes hex-encoded (64 chars),
 * hmac-sha256, kernel_name "". `c` is treated as uninitialised. Fails if
 * the prefix is too long for a unix socket path. */
int kb_conn_init_ipc(kb_conn_t *c, const char *path_prefix, err_t *err);

/* A fresh tcp connection on `ip` (numeric IPv4 or IPv6): five distinct free
 * ports found by binding port 0 (all five bound at once, then closed; a
 * race with other processes is possible, as with jupyter_client), fresh key
 * as above. `c` is treated as uninitialised. */
int kb_conn_init_tcp(kb_conn_t *c, const char *ip, err_t *err);

/* Write the ZeroMQ endpoint of channel `ch` into out[size]:
 * "tcp://127.0.0.1:5555", "tcp://[::1]:5555" or "ipc:///run/x/kernel-1"
 * (jupyter_client's ipc form is "ipc://{ip}-{port}"); a struct built in
 * code with transport "inproc" gives "inproc://{ip}-{port}" (a peer in this
 * process; connection files never say so). Returns 0, or -1 when
 * `ch` or the struct is invalid or the endpoint does not fit. */
int kb_conn_endpoint(const kb_conn_t *c, kb_channel_t ch, char *out,
                     size_t size);

/* "shell", "iopub", "stdin", "control", "hb"; "?" for anything else. */
const char *kb_channel_name(kb_channel_t ch);

#endif
