/*
 * kb_output: the output model of one execution. No I/O.
 *
 * Fed the iopub messages of one execute_request (msg_type + content), it
 * keeps the ordered list of nbformat v4 output dicts exactly as nbclient 0.7
 * stores them in cell.outputs: one stream output per stream message, as
 * nbclient 0.7 keeps them. kb_output_merge_streams() coalesces consecutive
 * same-name streams instead (as the notebook frontend and nbconvert's
 * coalesce_streams do):
 *
 *   stream          {"output_type":"stream","name":N,"text":T}
 *   display_data    {"output_type":"display_data","data":{..},"metadata":{..}}
 *   execute_result  the same plus "execution_count"
 *   error           {"output_type":"error","ename":..,"evalue":..,
 *                    "traceback":[..]}
 *
 * "transient" is never stored. A display_id (content.transient.display_id)
 * on display_data / execute_result registers the stored output in a
 * session-wide kb_displays_t; update_display_data, and display_data or
 * execute_result with a known id, replace "data" and "metadata" of every
 * registered output of that id, including outputs of earlier executions
 * (nbclient's _display_id_map). update_display_data is never appended.
 * clear_output clears now (wait=false) or just before the next output
 * (wait=true); cleared outputs lose their registrations. execute_input
 * records execution_count; execute_reply (shell) records execution_count and
 * status; status, comm_* and unknown types are ignored.
 *
 * Hostile kernels: a message whose content lacks a required field or has one
 * of the wrong type is ignored and counted (kb_output_malformed). What the
 * stored outputs cost is capped (max_bytes): each output is charged the
 * larger of its memory and its JSON as written with ensure_ascii (a fixed
 * cost per output, JSON node and member, and every string as escaped), and
 * each display update is charged to the running execution once per output
 * it rewrites, earlier executions' outputs included. A message that would
 * pass the cap is refused (a stream keeps the prefix that fits), truncated
 * becomes true, one marker is appended as stderr stream text, and every
 * later output, update or clear of this execution is ignored.
 *
 * Ownership: outputs are json objects owned by the list; the registry holds
 * further references to the same objects, so a notebook cell that holds the
 * list (json_incref) sees later updates in place.
 */
#ifndef KERNEL_BRIDGE_KB_OUTPUT_H
#define KERNEL_BRIDGE_KB_OUTPUT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct kb_displays kb_displays_t;
typedef struct kb_output kb_output_t;

/* --max-output's default, the cap on stored output per execution: the one
 * definition kb_client, nb_run and ag_session use. */
#define KB_DEFAULT_MAX_OUTPUT ((size_t)64 << 20)

/* Text of the truncation marker; "%zu" is max_bytes. */
#define KB_OUTPUT_TRUNCATED_FMT                                                \
    "[jupyter-agent: output truncated after %zu bytes; raise --max-output]\n"

/* A session-wide display_id registry: display_id -> the stored outputs with
 * that id. One per kernel session, shared by that session's kb_output_t. */
kb_displays_t *kb_displays_new(void);
/* Drops the registry's references (the outputs themselves live on in
 * whoever else holds them). Accepts NULL; sets *p = NULL. */
void kb_displays_destroy(kb_displays_t **p);
/* Number of outputs registered under `display_id` (0 when unknown). */
size_t kb_displays_count(const kb_displays_t *d, const char *display_id);

/* A new, empty model. `displays` is borrowed and must outlive the model;
 * NULL gives a private registry (updates then reach this execution only).
 * max_bytes caps stored output bytes; 0 means no cap. */
kb_output_t *kb_output_new(kb_displays_t *displays, size_t max_bytes);
/* Coalesce consecutive same-name stream outputs into one (off by default:
 * nbclient 0.7 keeps each stream message as its own output). Set it before
 * the first message. */
void kb_output_merge_streams(kb_output_t *o, bool on);
void kb_output_destroy(kb_output_t **p);

/* True for the message types that add or change outputs (stream,
 * display_data, execute_result, update_display_data, error). */
bool kb_output_is_output_type(const char *msg_type);

/* Apply one message. `content` is borrowed (its values are copied).
 * Returns 0 when applied or ignored by design, -1 when malformed (counted,
 * nothing changed). Never fails otherwise. */
int kb_output_feed(kb_output_t *o, const char *msg_type, json_t *content);

/* Borrowed JSON array of output dicts, valid while `o` lives; json_incref
 * it to keep it longer. Do not modify it. */
json_t *kb_output_outputs(const kb_output_t *o);

/* execution_count: -1 until known. */
void kb_output_set_execution_count(kb_output_t *o, int count);
int kb_output_execution_count(const kb_output_t *o);
/* The execute_reply status: "ok", "error" or "aborted" (copied); NULL (the
 * default) until a reply arrived. */
void kb_output_set_status(kb_output_t *o, const char *status);
const char *kb_output_status(const kb_output_t *o);
/* The execute_reply's payloads (pager pages, set_next_input, ask_exit ...)
 * as a JSON array (borrowed; [] until a reply, malformed entries dropped).
 * The setter copies the references it keeps. */
void kb_output_set_payload(kb_output_t *o, json_t *payload);
json_t *kb_output_payload(const kb_output_t *o);
/* The execute_reply's user_expressions, as the kernel sent them (an
 * object; {} before a reply). Borrowed. */
json_t *kb_output_user_expressions(const kb_output_t *o);
/* Record the reply's user_expressions (borrowed, copied; ignored unless an
 * object). */
void kb_output_set_user_expressions(kb_output_t *o, json_t *expressions);
void kb_output_set_interrupted(kb_output_t *o, bool yes);
bool kb_output_interrupted(const kb_output_t *o);
void kb_output_set_timed_out(kb_output_t *o, bool yes);
bool kb_output_timed_out(const kb_output_t *o);
/* The kernel died; `reason` (copied, may be NULL) says how. */
void kb_output_set_died(kb_output_t *o, const char *reason);
bool kb_output_died(const kb_output_t *o);
const char *kb_output_death_reason(const kb_output_t *o); /* NULL if alive */
void kb_output_set_duration_ms(kb_output_t *o, int64_t ms);
int64_t kb_output_duration_ms(const kb_output_t *o);

/* Messages ignored because their content was malformed. */
size_t kb_output_malformed(const kb_output_t *o);
/* True once max_bytes was reached and the marker appended. */
bool kb_output_truncated(const kb_output_t *o);
/* What the stored outputs are charged now (the number max_bytes caps). */
size_t kb_output_bytes(const kb_output_t *o);

/* The `exec --json` shape, a new reference:
 *   {"status": S, "execution_count": N|null, "outputs": [...],
 *    "duration_ms": N}  plus "error": reason when S is "died".
 * S is the first that holds of: "died", "timeout", "interrupted", the reply
 * status ("aborted" becomes "error"), "error" if an error output was stored,
 * "ok". "outputs" is the same array as kb_output_outputs (shared). */
json_t *kb_output_to_json(const kb_output_t *o);

#endif
