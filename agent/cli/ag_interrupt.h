/*
 * ag_interrupt: Ctrl-C for the subcommands that run code (exec, run).
 *
 * SIGINT only sets a flag (async-signal-safe); the execution's wait loop
 * polls it through kb_exec_hooks.should_stop, interrupts the kernel and
 * collects what it printed, and the command exits 130.
 */
#ifndef AGENT_CLI_AG_INTERRUPT_H
#define AGENT_CLI_AG_INTERRUPT_H

#include <stdbool.h>

/* Route SIGINT to the flag (SA_RESTART not set: blocking calls return). */
void ag_interrupt_install(void);
/* True once Ctrl-C was pressed. */
bool ag_interrupt_pressed(void);
/* The same, with the kb_exec_hooks.should_stop signature (arg unused). */
bool ag_interrupt_should_stop(void *arg);

#endif
