#include "secret.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>

void
secret_wipe(char *s)
{
    if (s)
        sodium_memzero(s, strlen(s));
}

void
secret_free(char *s)
{
    secret_wipe(s);
    free(s);
}
