/* Unit tests for ag_markdown: currency renders as currency in Jupyter. */
#include "../tap.h"

#include "agent/loop/ag_markdown.h"

#include <stdlib.h>

static void
s_check(const char *in, const char *want, const char *what)
{
    char *got = ag_markdown_escape_currency(in);
    is_str(got, want, "%s", what);
    free(got);
}

int
main(void)
{
    s_check("spent $34.93M against a $34.56M budget",
            "spent \\$34.93M against a \\$34.56M budget",
            "dollar amounts are escaped so they are not read as LaTeX");
    s_check("**$1.8M** (+27%)", "**\\$1.8M** (+27%)",
            "amounts inside emphasis are escaped too");
    s_check("the area is $x^2$ and $$\\int f$$",
            "the area is $x^2$ and $$\\int f$$",
            "math the model writes on purpose stays math");
    s_check("already \\$5 escaped", "already \\$5 escaped",
            "an escaped dollar is not escaped twice");
    s_check("run `df[df.cost > $5]` now", "run `df[df.cost > $5]` now",
            "code spans are left exactly as written");
    s_check("``a ` $1 ``, then $2", "``a ` $1 ``, then \\$2",
            "a code span with a longer fence ends at the matching fence");
    s_check("```python\nprint('$100')\n```\nTotal $100\n",
            "```python\nprint('$100')\n```\nTotal \\$100\n",
            "fenced code blocks are left alone, text after them is not");
    s_check("~~~~\n```\n$1\n~~~~\n$2", "~~~~\n```\n$1\n~~~~\n\\$2",
            "a fence closes only with its own character and length");
    s_check("", "", "empty text stays empty");
    s_check("cost: $", "cost: $", "a trailing dollar sign is left alone");
    return done_testing();
}
