/* long double arithmetic for INCRBYFLOAT, matching Redis 7.0 exactly.
 *
 * Redis parses both operands with strtold (string2ld), adds them in long double precision
 * (80-bit extended on x86-64), rejects NaN/Inf results and formats with "%.17Lf", stripping
 * trailing zeros (ld2string, LD_STR_HUMAN). Rust has no long double, so this stays in C. */

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Redis MAX_LONG_DOUBLE_CHARS. */
#define DFLY_MAX_LD_CHARS (5 * 1024)

/* Redis string2ld. */
static int dfly_parse_ld(const char *s, size_t slen, long double *dp) {
    char buf[DFLY_MAX_LD_CHARS];
    long double value;
    char *eptr;

    if (slen == 0 || slen >= sizeof(buf)) return 0;
    memcpy(buf, s, slen);
    buf[slen] = '\0';

    errno = 0;
    value = strtold(buf, &eptr);
    if (isspace((unsigned char)buf[0]) || eptr[0] != '\0' || (size_t)(eptr - buf) != slen ||
        (errno == ERANGE &&
         (value == HUGE_VALL || value == -HUGE_VALL || fpclassify(value) == FP_ZERO)) ||
        errno == EINVAL || isnan(value))
        return 0;
    *dp = value;
    return 1;
}

/* Redis ld2string(..., LD_STR_HUMAN). Returns the length, 0 when it does not fit. */
static size_t dfly_fmt_ld_human(char *buf, size_t len, long double value) {
    int n = snprintf(buf, len, "%.17Lf", value);
    if (n < 0 || (size_t)n + 1 > len) {
        if (len) buf[0] = '\0';
        return 0;
    }
    size_t l = (size_t)n;
    if (strchr(buf, '.') != NULL) {
        char *p = buf + l - 1;
        while (*p == '0') {
            p--;
            l--;
        }
        if (*p == '.') l--;
    }
    if (l == 2 && buf[0] == '-' && buf[1] == '0') {
        buf[0] = '0';
        l = 1;
    }
    buf[l] = '\0';
    return l;
}

/* cur == NULL means the key does not exist (value 0).
 * Returns 0 and sets *out_len on success; 1 if the current value is not a valid float; 2 if
 * the increment is not; 3 if the result is NaN or infinite. `out` must hold
 * DFLY_MAX_LD_CHARS bytes. */
int dfly_incrbyfloat(const char *cur, size_t cur_len, const char *incr, size_t incr_len,
                     char *out, size_t out_cap, size_t *out_len) {
    long double value = 0, by;
    if (cur != NULL && !dfly_parse_ld(cur, cur_len, &value)) return 1;
    if (!dfly_parse_ld(incr, incr_len, &by)) return 2;
    value += by;
    if (isnan(value) || isinf(value)) return 3;
    *out_len = dfly_fmt_ld_human(out, out_cap, value);
    return 0;
}

size_t dfly_ld_max_chars(void) { return DFLY_MAX_LD_CHARS; }
