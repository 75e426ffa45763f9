/*
 * sb_egress_pump: copy bytes both ways between two connected sockets
 * until both sides are done, a cap is reached or time runs out. Neither
 * allocates nor locks (a stack buffer), so the box's relay runs it too.
 */
#ifndef SANDBOX_SB_EGRESS_PUMP_H
#define SANDBOX_SB_EGRESS_PUMP_H

#include <stdint.h>

typedef struct sb_egress_pump {
    int64_t
        deadline_ms; /* clock_mono_ms() (common/clock.h) to stop at; 0: none */
    int idle_ms;     /* stop after this long without a byte; 0: none */
    uint64_t max_up; /* bytes a -> b allowed (incl. *shared_up); 0: any */
    uint64_t max_down;   /* bytes b -> a allowed; 0: any */
    uint64_t *shared_up; /* session totals updated atomically, or NULL */
    uint64_t *shared_down;
    uint64_t up, down; /* out: bytes this pump moved each way */
} sb_egress_pump_t;

typedef enum sb_egress_pump_end {
    SB_PUMP_DONE = 0,     /* both sides closed */
    SB_PUMP_TIMEOUT = 1,  /* deadline reached */
    SB_PUMP_IDLE = 2,     /* no bytes for idle_ms */
    SB_PUMP_CAP_UP = 3,   /* max_up reached */
    SB_PUMP_CAP_DOWN = 4, /* max_down reached */
    SB_PUMP_ERROR = 5     /* a read or write failed */
} sb_egress_pump_end_t;

/* Copy between `a` (the client side) and `b` (the upstream side). */
sb_egress_pump_end_t sb_egress_pump_run(int a, int b, sb_egress_pump_t *pp);
/* Write all of buf (blocking, EINTR retried). 0 or -1. */
int sb_egress_write_all(int fd, const void *buf, uint64_t len);
/* What `end` means, in words ("the byte cap up was reached"). */
const char *sb_egress_pump_end_str(sb_egress_pump_end_t end);

#endif
