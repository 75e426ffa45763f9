#include "agent/cli/ag_interrupt.h"

#include <signal.h>
#include <string.h>

static volatile sig_atomic_t s_pressed;

static void
s_on_sigint(int sig)
{
    (void)sig;
    s_pressed = 1;
}

void
ag_interrupt_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = s_on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
}

bool
ag_interrupt_pressed(void)
{
    return s_pressed != 0;
}

bool
ag_interrupt_should_stop(void *arg)
{
    (void)arg;
    return s_pressed != 0;
}
