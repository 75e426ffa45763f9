/*
 * Text a box or a notebook controls, on its way to the terminal (escaped,
 * common/escape.h) and to the model (control sequences stripped,
 * ag_strip_ansi): each hostile sequence a terminal would act on.
 */
#include "agent/loop/ag_render.h"
#include "common/escape.h"
#include "tests/tap.h"

#include <stdlib.h>
#include <string.h>

/* No byte a terminal treats as control: C0, DEL, ESC, 8-bit C1. */
static int
s_inert(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p < 0x20 || *p == 0x7f)
            return 0;
        if (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f)
            return 0;
    }
    return 1;
}

static void
t_escape(void)
{
    char *e = esc_dup("plot\033]52;c;cHduZWQ=\007.png", ESC_NAME);
    is_str(e, "plot\\e]52;c;cHduZWQ=\\x07.png",
           "an OSC 52 clipboard write in a file name is shown, not run");
    free(e);
    e = esc_dup("a.csv\nfiles: fake.csv", ESC_NAME);
    is_str(e, "a.csv\\nfiles: fake.csv",
           "a newline in a name cannot forge a line of our output");
    free(e);
    e = esc_dup("t\xc2\x9b"
                "2J\xc2\x9d"
                "0;x\x07",
                ESC_NAME);
    ok(s_inert(e) && strstr(e, "\\xc2\\x9b"),
       "8-bit C1 CSI and OSC (U+009B, U+009D) are escaped: %s", e);
    free(e);
    e = esc_dup("bad\xff\xc0\xafutf8\xed\xa0\x80", ESC_NAME);
    is_str(e, "bad\\xff\\xc0\\xafutf8\\xed\\xa0\\x80",
           "invalid UTF-8 (stray, overlong, surrogate) is escaped byte by "
           "byte");
    free(e);
    e = esc_dup("r\xe2\x80\xae"
                "gnp.exe",
                ESC_NAME);
    ok(s_inert(e) && strstr(e, "\\xe2\\x80\\xae"),
       "a right-to-left override cannot disguise a name: %s", e);
    free(e);
    e = esc_dup("caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac.csv", ESC_NAME);
    is_str(e, "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac.csv",
           "printable UTF-8 passes unchanged");
    free(e);
    e = esc_dup("a\\x1b", ESC_NAME);
    is_str(e, "a\\\\x1b", "a backslash in a name is escaped (unambiguous)");
    free(e);
    e = esc_dup("Password\n\tfor \\\\srv\033[2J: \x7f", ESC_KEEP_LINES);
    is_str(e, "Password\n\tfor \\\\srv\\e[2J: \\x7f",
           "a prompt keeps its newlines and tabs, loses ESC and DEL");
    free(e);
}

static void
t_strip(void)
{
    char s1[] = "x\033]52;c;cHduZWQ=\007y\033]0;title\033\\z";
    is_str(ag_strip_ansi(s1), "xyz",
           "OSC (BEL- and ST-terminated) is stripped for the model");
    char s2[] =
        "a\033P1$r0m\033\\b\033_apc\033\\c\033^pm\033\\d\033Xsos\033\\e";
    is_str(ag_strip_ansi(s2), "abcde", "DCS, APC, PM and SOS are stripped");
    char s3[] = "\033[1;31mError\033[0m: \033(Bok\033c\0337";
    is_str(ag_strip_ansi(s3), "Error: ok",
           "CSI colours, charset and reset sequences are stripped");
    char s4[] = "p\xc2\x9b"
                "31mq\xc2\x9d"
                "0;t\xc2\x9cr";
    is_str(ag_strip_ansi(s4), "pqr", "8-bit CSI and OSC are stripped");
    char s5[] = "bell\007back\010del\177\ttab\nline\r";
    is_str(ag_strip_ansi(s5), "bellbackdel\ttab\nline\r",
           "other C0 controls and DEL go; tab, newline, CR stay");
    char s6[] = "trailing\033]52;c;unterminated";
    is_str(ag_strip_ansi(s6), "trailing",
           "an unterminated OSC is stripped to the end");
}

int
main(void)
{
    t_escape();
    t_strip();
    return done_testing();
}
