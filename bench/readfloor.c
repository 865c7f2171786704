/* The journal-read floor in C: what libsystemd itself costs to read one unit's lines, without
 * Python. `python -m bench.lowerbound` builds and runs it; see that module for why.
 *
 *     readfloor DIR UNIT MODE
 *
 * MODE: "next"    sd_journal_next() over the unit's entries (the match walk alone);
 *       "message" + MESSAGE (what any reader of the lines pays);
 *       "invocation" + _SYSTEMD_INVOCATION_ID, compared with the previous entry's (what telling
 *                    one service invocation from the next, line by line, adds);
 *       "cursor"  + the entry's cursor instead of its invocation id (the cheapest public way to
 *                    the entry's xor_hash, the other candidate for spotting a change).
 * Prints "<entries> <invocation changes>" on stdout.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <systemd/sd-journal.h>

enum mode { NEXT, MESSAGE, INVOCATION, CURSOR };

static int fail(const char *what, int r) {
        fprintf(stderr, "readfloor: %s: %s\n", what, strerror(-r));
        return 2;
}

int main(int argc, char **argv) {
        if (argc != 4) {
                fprintf(stderr, "usage: readfloor DIR UNIT next|message|invocation|cursor\n");
                return 2;
        }
        enum mode mode;
        if (strcmp(argv[3], "next") == 0)
                mode = NEXT;
        else if (strcmp(argv[3], "message") == 0)
                mode = MESSAGE;
        else if (strcmp(argv[3], "invocation") == 0)
                mode = INVOCATION;
        else if (strcmp(argv[3], "cursor") == 0)
                mode = CURSOR;
        else
                return fail("unknown mode", -EINVAL);

        sd_journal *j;
        int r = sd_journal_open_directory(&j, argv[1], 0);
        if (r < 0)
                return fail("open", r);
        r = sd_journal_set_data_threshold(j, 0); /* as the sentinel and bench/floor.py */
        if (r < 0)
                return fail("data threshold", r);
        char match[512];
        snprintf(match, sizeof match, "_SYSTEMD_UNIT=%s", argv[2]);
        r = sd_journal_add_match(j, match, 0);
        if (r < 0)
                return fail("match", r);

        unsigned long entries = 0, changes = 0;
        size_t bytes = 0;
        char last[64];
        size_t last_len = 0;
        while ((r = sd_journal_next(j)) > 0) {
                const void *data;
                size_t len;
                entries++;
                if (mode == NEXT)
                        continue;
                if (sd_journal_get_data(j, "MESSAGE", &data, &len) >= 0)
                        bytes += len;
                if (mode == INVOCATION &&
                    sd_journal_get_data(j, "_SYSTEMD_INVOCATION_ID", &data, &len) >= 0 &&
                    (len != last_len || memcmp(data, last, len) != 0) && len <= sizeof last) {
                        memcpy(last, data, len);
                        last_len = len;
                        changes++;
                }
                if (mode == CURSOR) {
                        char *cursor;
                        if (sd_journal_get_cursor(j, &cursor) < 0)
                                return fail("cursor", -EIO);
                        bytes += strlen(cursor);
                        free(cursor);
                }
        }
        if (r < 0)
                return fail("next", r);
        sd_journal_close(j);
        printf("%lu %lu\n", entries, changes);
        return bytes == 0 && entries > 0 && mode != NEXT ? 1 : 0;
}
