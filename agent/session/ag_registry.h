/*
 * ag_registry: one table of named sessions, behind every door (the E2B
 * server today; `mcp --http` and `serve` can move onto it). A session has
 * an id (128 random bits in hex), an owner (a label the door chooses, e.g.
 * the API key's hash), a deadline, a state and a door-specific payload:
 *
 *   STARTING --(ag_reg_set_running)--> RUNNING
 *       \                                 |
 *        `---(ag_registry_end, deadline, ag_reg_set_ended)--> ENDED
 *
 * ENDED is final: the id is never found again (ag_registry_get answers
 * NULL), and the payload's `end` op runs once, on the thread that ended
 * it, without the table's lock. The entry still counts against `max` until
 * the door calls ag_reg_gone() (its box is really removed: no process,
 * cgroup or run dir left), so a table of N never holds more than N boxes.
 * The payload's `free` op runs when the last reference is dropped after
 * ag_reg_gone(). Thread-safe.
 */
#ifndef AGENT_SESSION_AG_REGISTRY_H
#define AGENT_SESSION_AG_REGISTRY_H

#include "common/err.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define AG_REG_ID_LEN 32 /* hex characters */

typedef enum ag_reg_state {
    AG_REG_STARTING = 0,
    AG_REG_RUNNING = 1,
    AG_REG_ENDED = 2,
} ag_reg_state_t;

typedef struct ag_registry ag_registry_t;
typedef struct ag_reg_entry ag_reg_entry_t;

/* What the table does to a payload. Both may be NULL. */
typedef struct ag_reg_ops {
    /* The session ended (why: "killed", "timeout", "shutdown" ...): stop
     * it; call ag_reg_gone() once its box is removed (now or later, from
     * any thread). Runs once, without the table's lock. */
    void (*end)(void *payload, const char *why);
    /* The last reference is gone: free the payload. */
    void (*free)(void *payload);
    /* The deadline passed (ag_registry_expire): true when the door takes
     * care of it (an E2B autoPause sandbox pauses, and moves or clears the
     * deadline), false to end it ("timeout"). NULL: end it. */
    bool (*expire)(void *payload);
} ag_reg_ops_t;

/* A table for at most `max` sessions (ENDED ones not yet gone count). */
ag_registry_t *ag_registry_new(int max);
/* End every session ("shutdown"), wait up to `wait_ms` until every one is
 * gone, free the table. No reference may be used after. */
void ag_registry_destroy(ag_registry_t **p, int wait_ms);

/* A new STARTING session with `payload` (owned by the entry from now on:
 * ops->free releases it), ending at `deadline_ms` (clock_mono_ms; 0 =
 * never). Returns it with one reference held by the caller, or NULL + err
 * (ERR_USAGE "N sessions exist (the limit ...)") when the table is full:
 * then the payload is NOT taken. */
ag_reg_entry_t *ag_registry_add(ag_registry_t *t, const char *owner,
                                int64_t deadline_ms, void *payload,
                                const ag_reg_ops_t *ops, err_t *err);
/* The session `id` if it exists and has not ended, with a reference, or
 * NULL. */
ag_reg_entry_t *ag_registry_get(ag_registry_t *t, const char *id);
/* A new reference to an entry the caller already holds. */
ag_reg_entry_t *ag_reg_ref(ag_reg_entry_t *e);
/* Drop a reference (NULL accepted; *p set to NULL). */
void ag_reg_unref(ag_reg_entry_t **p);

/* End session `id` (see ag_reg_end). 0, or -1 when there is none. */
int ag_registry_end(ag_registry_t *t, const char *id, const char *why);
/* End `e` unless it already ended. */
void ag_reg_end(ag_reg_entry_t *e, const char *why);
/* End every session past its deadline ("timeout"); returns how many. */
int ag_registry_expire(ag_registry_t *t);

/* The live sessions (not ENDED), each with a reference: a new array of
 * *n entries (free it after ag_reg_unref on each). */
ag_reg_entry_t **ag_registry_list(ag_registry_t *t, size_t *n);
/* Sessions counted against max (live + ended, not yet gone). */
int ag_registry_count(ag_registry_t *t);
int ag_registry_max(const ag_registry_t *t);

/* STARTING -> RUNNING; false when the entry ended meanwhile. */
bool ag_reg_set_running(ag_reg_entry_t *e);
/* Its box is removed: it stops counting against max. Once. */
void ag_reg_gone(ag_reg_entry_t *e);
/* Move the deadline (clock_mono_ms; 0 = never); false when ended. */
bool ag_reg_set_deadline(ag_reg_entry_t *e, int64_t deadline_ms);

const char *ag_reg_id(const ag_reg_entry_t *e);    /* borrowed */
const char *ag_reg_owner(const ag_reg_entry_t *e); /* borrowed */
ag_reg_state_t ag_reg_state(ag_reg_entry_t *e);
int64_t ag_reg_deadline(ag_reg_entry_t *e);
void *ag_reg_payload(const ag_reg_entry_t *e); /* borrowed */
/* Why it ended ("" while live). Borrowed, static. */
const char *ag_reg_why(ag_reg_entry_t *e);
/* "starting", "running", "ended". */
const char *ag_reg_state_name(ag_reg_state_t s);

#endif
