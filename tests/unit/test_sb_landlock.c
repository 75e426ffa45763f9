/* Unit tests: the Landlock plan of a box, per ABI, without applying it. */
#include "sandbox/sb_landlock.h"
#include "tests/tap.h"

#include <stdlib.h>
#include <string.h>

static const sb_landlock_rule_t *
s_rule(const sb_landlock_plan_t *pl, const char *path)
{
    for (size_t i = 0; i < pl->n; i++)
        if (strcmp(pl->rules[i].path, path) == 0)
            return &pl->rules[i];
    return NULL;
}

int
main(void)
{
    sb_policy_t p;
    sb_policy_init_default(&p);
    sb_policy_add_bind(&p, "/etc/hostname", "/opt/data/hostname", NULL);
    sb_landlock_plan_t *pl = calloc(1, sizeof *pl);
    char words[8192];

    sb_landlock_plan_box(pl, 0, &p, "/tmp/ja-sb-x/run");
    ok(pl->n == 0 && sb_landlock_prepare(pl) == -2,
       "without Landlock the plan is empty and applying it does nothing");
    ok(sb_landlock_gap(0) &&
           strstr(sb_landlock_gap(0), "not available") != NULL,
       "a kernel without Landlock gets a warning that says so");
    ok(strstr(sb_landlock_describe(pl, words, sizeof words), "not available") !=
           NULL,
       "...and the description says no rule is in force");

    sb_landlock_plan_box(pl, 7, &p, "/tmp/ja-sb-x/run");
    const sb_landlock_rule_t *usr = s_rule(pl, "/usr"),
                             *ws = s_rule(pl, "/mnt/data"),
                             *run = s_rule(pl, "/tmp/ja-sb-x/run"),
                             *bind = s_rule(pl, "/opt/data/hostname"),
                             *null = s_rule(pl, "/dev/null");
    ok(usr && ws && run && bind && null && s_rule(pl, "/tmp") &&
           s_rule(pl, "/home/user") && s_rule(pl, "/dev/shm"),
       "ABI 7: rules for /usr, the workspace, /tmp, home, /dev/shm, the run "
       "dir, a --bind path and the device nodes");
    uint64_t write_bits = (1ULL << 1) | (1ULL << 4) | (1ULL << 5) |
                          (0x7FULL << 6) | (1ULL << 13) | (1ULL << 14);
    ok(usr && bind && !(sb_landlock_rule_access(pl, usr) & write_bits) &&
           !(sb_landlock_rule_access(pl, bind) & write_bits),
       "/usr and --bind paths are read and execute only");
    uint64_t ws_access = ws ? sb_landlock_rule_access(pl, ws) : 0;
    ok((ws_access & (1ULL << 1)) && (ws_access & (1ULL << 8)) &&
           (ws_access & (1ULL << 9)) && !(ws_access & (1ULL << 6)) &&
           !(ws_access & (1ULL << 11)),
       "the workspace allows writing, files and sockets, never device "
       "nodes");
    ok(run && sb_landlock_rule_access(pl, run) == ws_access,
       "the run dir (the kernel's sockets) is read-write like the "
       "workspace");
    ok(pl->handled_net == 3 && pl->scoped == 1,
       "ABI 7: TCP bind and connect are handled (none allowed), abstract "
       "sockets scoped");
    sb_landlock_describe(pl, words, sizeof words);
    ok(strstr(words, "read-write /mnt/data") &&
           strstr(words, "TCP bind and connect denied"),
       "the description says what is in force: %s", words);
    ok(sb_landlock_gap(7) == NULL && sb_landlock_gap(4) == NULL,
       "ABI >= 4 has nothing missing");

    sb_landlock_plan_box(pl, 1, &p, "/tmp/ja-sb-x/run");
    ok(pl->handled_net == 0 && !(pl->handled_fs & (1ULL << 13)) &&
           !(pl->handled_fs & (1ULL << 14)),
       "ABI 1: no network rules, no REFER or TRUNCATE (the kernel would "
       "refuse them)");
    ws = s_rule(pl, "/mnt/data");
    ok(ws && !(sb_landlock_rule_access(pl, ws) & ~pl->handled_fs),
       "every rule stays within the rights the ABI handles");
    ok(strstr(sb_landlock_describe(pl, words, sizeof words),
              "TCP not restricted") &&
           sb_landlock_gap(1) && strstr(sb_landlock_gap(1), "TCP"),
       "ABI 1: the description and the warning say TCP is not restricted");

    sb_landlock_plan_box(pl, 7, &p, "/tmp/ja-sb-x/run");
    json_t *j = sb_landlock_plan_json(pl);
    ok(json_integer_value(json_object_get(j, "abi")) == 7 &&
           json_array_size(json_object_get(j, "rules")) == pl->n &&
           json_integer_value(json_object_get(j, "attr_size")) == 24,
       "the plan as JSON (for the factory's children) carries every rule");
    json_decref(j);
    diag("this kernel's Landlock ABI: %d", sb_landlock_abi());
    free(pl);
    sb_policy_release(&p);
    return done_testing();
}
