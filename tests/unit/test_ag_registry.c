/*
 * ag_registry: the one session table behind the doors: ids, the state
 * machine (starting -> running -> ended, ended final), the limit that
 * counts ended sessions until their box is gone, deadlines, references.
 */
#include "agent/session/ag_registry.h"
#include "common/clock.h"
#include "tests/tap.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct payload {
    int ended;       /* times end ran */
    const char *why; /* its reason */
    int *freed;      /* incremented by free */
    ag_reg_entry_t *e;
    bool gone_on_end; /* end marks it gone at once */
} payload_t;

static void
p_end(void *arg, const char *why)
{
    payload_t *p = arg;
    p->ended++;
    p->why = why;
    if (p->gone_on_end)
        ag_reg_gone(p->e);
}

static void
p_free(void *arg)
{
    payload_t *p = arg;
    (*p->freed)++;
    free(p);
}

static const ag_reg_ops_t ops = {.end = p_end, .free = p_free};

static payload_t *
mk(int *freed, bool gone_on_end)
{
    payload_t *p = calloc(1, sizeof *p);
    p->freed = freed;
    p->gone_on_end = gone_on_end;
    return p;
}

typedef struct race {
    ag_registry_t *t;
    int made;
    int *freed;
} race_t;

static void *
s_adder(void *arg)
{
    race_t *r = arg;
    for (int i = 0; i < 50; i++) {
        payload_t *p = mk(r->freed, true);
        ag_reg_entry_t *e = ag_registry_add(r->t, "o", 0, p, &ops, NULL);
        if (!e) {
            free(p);
            continue;
        }
        p->e = e;
        __atomic_add_fetch(&r->made, 1, __ATOMIC_SEQ_CST);
        ag_reg_set_running(e);
        ag_reg_end(e, "killed");
        ag_reg_unref(&e);
    }
    return NULL;
}

int
main(void)
{
    int freed = 0;
    ag_registry_t *t = ag_registry_new(2);
    err_t err = {0};

    payload_t *pa = mk(&freed, false);
    ag_reg_entry_t *a = ag_registry_add(t, "alice", 0, pa, &ops, &err);
    pa->e = a;
    ok(a != NULL, "a session is added");
    ok(strlen(ag_reg_id(a)) == AG_REG_ID_LEN &&
           strspn(ag_reg_id(a), "0123456789abcdef") == AG_REG_ID_LEN,
       "its id is %d hex characters", AG_REG_ID_LEN);
    is_str(ag_reg_state_name(ag_reg_state(a)), "starting",
           "a new session is starting");
    is_str(ag_reg_owner(a), "alice", "its owner is kept");
    ok(ag_reg_set_running(a), "starting -> running");
    ok(!ag_reg_set_running(a), "running -> running is refused");

    payload_t *pb = mk(&freed, false);
    ag_reg_entry_t *b = ag_registry_add(t, "bob", 0, pb, &ops, &err);
    pb->e = b;
    ok(b && strcmp(ag_reg_id(a), ag_reg_id(b)) != 0, "ids differ");
    payload_t *pc = mk(&freed, false);
    ag_reg_entry_t *c = ag_registry_add(t, "carol", 0, pc, &ops, &err);
    ok(c == NULL && err.code == ERR_USAGE && strstr(err.text, "allows 2"),
       "past the limit a session is refused, saying the limit (%s)", err.text);
    free(pc);

    ag_reg_entry_t *got = ag_registry_get(t, ag_reg_id(a));
    ok(got == a, "a live session is found by its id");
    ag_reg_unref(&got);
    ok(ag_registry_get(t, "0123") == NULL &&
           ag_registry_get(t, "00000000000000000000000000000000") == NULL,
       "an unknown id is not found");

    char id[AG_REG_ID_LEN + 1];
    strcpy(id, ag_reg_id(a));
    ag_reg_end(a, "killed");
    ag_reg_end(a, "timeout");
    ok(pa->ended == 1 && strcmp(pa->why, "killed") == 0,
       "end runs once, with the first reason");
    is_str(ag_reg_state_name(ag_reg_state(a)), "ended", "it is ended");
    ok(!ag_reg_set_running(a) && !ag_reg_set_deadline(a, 1),
       "ended is final: no running, no new deadline");
    ok(ag_registry_get(t, id) == NULL, "an ended session's id is not found");
    is_int(ag_registry_count(t), 2,
           "an ended session counts until its box is gone");
    pc = mk(&freed, false);
    c = ag_registry_add(t, "carol", 0, pc, &ops, &err);
    ok(c == NULL, "so the limit still holds");
    free(pc);
    ag_reg_gone(a);
    is_int(ag_registry_count(t), 1, "gone: it stops counting");
    is_int(freed, 0, "the payload lives while a reference is held");
    ag_reg_unref(&a);
    is_int(freed, 1, "and is freed with the last reference");

    /* Deadlines. */
    ok(ag_reg_set_deadline(b, clock_mono_ms() - 1), "a deadline is set");
    ag_reg_set_running(b);
    is_int(ag_registry_expire(t), 1, "a session past its deadline expires");
    ok(pb->ended == 1 && strcmp(pb->why, "timeout") == 0,
       "with the reason \"timeout\"");
    is_int(ag_registry_expire(t), 0, "and only once");
    ag_reg_gone(b);
    ag_reg_unref(&b);

    /* The list holds references. */
    payload_t *pd = mk(&freed, true);
    ag_reg_entry_t *d = ag_registry_add(t, "dan", 0, pd, &ops, &err);
    pd->e = d;
    size_t n;
    ag_reg_entry_t **v = ag_registry_list(t, &n);
    is_int((int)n, 1, "the list has the live session");
    ag_reg_end(d, "killed");
    ag_reg_unref(&d);
    ok(freed == 2, "ended and gone, the list's reference keeps it (freed %d)",
       freed);
    ag_reg_unref(&v[0]);
    free(v);
    is_int(freed, 3, "the last reference frees it");
    ag_registry_destroy(&t, 1000);

    /* Threads adding and ending at once leak nothing and free nothing twice. */
    freed = 0;
    race_t r = {.t = ag_registry_new(3), .freed = &freed};
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&th[i], NULL, s_adder, &r);
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    is_int(ag_registry_count(r.t), 0, "after the race every session is gone");
    is_int(freed, r.made, "every payload was freed exactly once (%d)", r.made);
    ag_registry_destroy(&r.t, 1000);
    return done_testing();
}
