/*
 * ag_kernel_ask: what a plain (non-magic) cell of the agent kernel does:
 * it goes through the same tool loop as `ask` (agent/kernel/ag_loop_kernel.c),
 * with the conversation kept across cells until %reset.
 */
#include "agent/kernel/ag_kernel.h"
#include "agent/kernel/ag_loop_kernel.h"

int
ag_kernel_ask(ag_kernel_t *k, const char *request, err_t *err)
{
    return ag_loop_kernel_ask(k, request, err);
}
