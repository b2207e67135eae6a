/* A probe for issue 24, not part of stream-split: how long a native one-pass scan takes to
   turn a trace's events array into the columns a columnar engine would read (each event's
   offsets, phase, category code, name span, ts, dur, integer pid and tid, args.correlation and
   args."External id"). It trusts its input as Kineto writes it: no validation, no escapes in
   keys, no UTF-8 check, numbers by strtod/strtoll. So it is a lower bound of what a native
   decoder giving columns would cost, for the decision that README "What limits the speed"
   describes. benchmarks/decoder.py --modes native compiles and times it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char *skip_ws(const char *p) { while (*p==' '||*p=='\n'||*p=='\r'||*p=='\t') p++; return p; }
static const char *skip_string(const char *p) { /* p at the opening quote: past the closing one */
    p++;
    for (;;) {
        const char *q = strchr(p, '"');  /* the buffer ends with a NUL (Python bytes) */
        if (q == NULL) return p + strlen(p);  /* unterminated: the end */
        const char *b = q;  /* an odd run of backslashes before it escapes it */
        int n = 0;
        while (b > p && b[-1] == '\\') { b--; n++; }
        if (!(n & 1)) return q + 1;
        p = q + 1;
    }
}
static const char *skip_value(const char *p) {
    p = skip_ws(p);
    if (*p == '"') return skip_string(p);
    if (*p == '{' || *p == '[') { int depth = 0;
        for (;;) { char c = *p;
            if (!c) return p;  /* the end, unclosed */
            if (c == '"') { p = skip_string(p); continue; }
            if (c == '{' || c == '[') depth++;
            else if (c == '}' || c == ']') { depth--; if (!depth) return p + 1; }
            p++; } }
    while (*p && *p!=',' && *p!='}' && *p!=']' && *p!=' ' && *p!='\n') p++;
    return p;
}
static int cat_code(const char *s, size_t n) {
    static const char *cats[] = {"python_function","cpu_op","ac2g","cuda_runtime","kernel","gpu_memcpy",
        "fwdbwd","gpu_memset","user_annotation","gpu_user_annotation","Trace", 0};
    for (int i = 0; cats[i]; i++) if (strlen(cats[i]) == n && !memcmp(cats[i], s, n)) return i;
    return 99;
}
/* The events of the first "traceEvents" array of buf into the columns (cap rows each), or,
   when inside, those of buf, a run of the array's events (the commas between them, and the
   array's end, if it is there): their number, or -1 (no array), -2 (not an object where one
   is due, or more than cap). Absent fields: ph 0, cat -1, name_at -1, ts 0, dur -1, integers
   INT64_MIN. */
long scan(const char *buf, long len, int inside, long cap, int64_t *starts, int64_t *ends, int8_t *ph, int8_t *cat,
          int64_t *name_at, int32_t *name_len, double *ts, double *dur, int64_t *pid, int64_t *tid,
          int64_t *corr, int64_t *ext) {
    const char *p = buf;
    if (!inside) {
        p = strstr(buf, "\"traceEvents\"");
        if (!p) return -1;
        p = strchr(p, '['); p++;
    }
    long n = 0;
    for (;;) {
        p = skip_ws(p);
        if (*p == ']' || *p == 0) break;
        if (*p == ',') { p++; continue; }
        if (*p != '{' || n >= cap) return -2;
        starts[n] = p - buf; ph[n] = 0; cat[n] = -1; name_at[n] = -1; name_len[n] = 0;
        ts[n] = 0; dur[n] = -1; pid[n] = tid[n] = corr[n] = ext[n] = INT64_MIN;
        p++;
        for (;;) {
            p = skip_ws(p);
            if (*p == '}') { p++; break; }
            if (*p == ',') { p++; continue; }
            if (*p != '"') return -2;
            const char *k = p + 1; p = skip_string(p); size_t kl = p - 1 - k;
            p = skip_ws(p); p++; p = skip_ws(p); /* colon */
            if (kl == 2 && !memcmp(k, "ph", 2)) { ph[n] = p[1]; p = skip_string(p); }
            else if (kl == 3 && !memcmp(k, "cat", 3)) { const char *e = skip_string(p); cat[n] = cat_code(p+1, e-p-2); p = e; }
            else if (kl == 4 && !memcmp(k, "name", 4)) { const char *e = skip_string(p); name_at[n] = p + 1 - buf; name_len[n] = e - p - 2; p = e; }
            else if (kl == 2 && !memcmp(k, "ts", 2)) { char *e; ts[n] = strtod(p, &e); p = e; }
            else if (kl == 3 && !memcmp(k, "dur", 3)) { char *e; dur[n] = strtod(p, &e); p = e; }
            else if (kl == 3 && !memcmp(k, "pid", 3) && *p != '"') { char *e; pid[n] = strtoll(p, &e, 10); p = e; }
            else if (kl == 3 && !memcmp(k, "tid", 3) && *p != '"') { char *e; tid[n] = strtoll(p, &e, 10); p = e; }
            else if (kl == 4 && !memcmp(k, "args", 4) && *p == '{') {
                p++;
                for (;;) { p = skip_ws(p);
                    if (*p == '}') { p++; break; }
                    if (*p == ',') { p++; continue; }
                    if (*p != '"') return -2;
                    const char *a = p + 1; p = skip_string(p); size_t al = p - 1 - a;
                    p = skip_ws(p); p++; p = skip_ws(p);
                    if (al == 11 && !memcmp(a, "correlation", 11)) { char *e; corr[n] = strtoll(p, &e, 10); p = e; }
                    else if (al == 11 && !memcmp(a, "External id", 11)) { char *e; ext[n] = strtoll(p, &e, 10); p = e; }
                    else p = skip_value(p);
                }
            }
            else p = skip_value(p);
        }
        ends[n] = p - buf; n++;
    }
    return n;
}
