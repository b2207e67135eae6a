/* stream_split._native: the decoder's hot passes in native code (issue 24). Optional: where
   it is not built, decode.py does the same with numpy and msgspec, to the same result (tests
   compare the two on any input).

   ``frame(buf, start, in_string, depth, escaped)`` finds the brackets of ``buf[start:]`` that
   lie outside strings, and the nesting depth after each, given the state at ``start``: the
   same answer as ``decode.Framing``'s numpy passes (that module's docstring says how). It
   returns ``(brackets, depths, end_in_string, end_depth, end_escaped)``: ``brackets`` a
   bytearray of int64 offsets in ``buf``, ``depths`` a bytearray of int32 (numpy views them
   without a copy), and the state at the end of ``buf``. The rules, byte for byte those of
   the numpy passes:
   - ``escaped``: the byte at ``start`` is skipped (an odd run of backslashes ended before it);
   - a quote is real unless an odd run of backslashes (counted from ``start``) is right
     before it, inside a string or not; each real quote enters or leaves a string;
   - ``{``, ``[``, ``}``, ``]`` outside strings are the brackets; a backslash never escapes a
     bracket;
   - ``end_escaped``: the last byte of ``buf`` is a backslash at or after ``start`` and the run
     of backslashes ending ``buf`` (counted over the whole of ``buf``) is odd.
   It reads 64 bytes at a time: their quotes, backslashes and brackets as bit masks (SSE2
   where the machine has it), the bytes inside strings as a prefix XOR of the real quotes.

   ``frame_times(text)`` reads a run of Python frames as Kineto writes them (``text``: a JSON
   array of objects with the keys ``ph`` "X", ``cat`` "python_function", ``name``, ``pid``,
   ``tid``, ``ts``, then ``dur`` and ``args`` or not, in that order) into two float64
   bytearrays, each frame's ``ts`` and ``dur`` (null as 0.0), or None. It answers only where
   ``decode._PLAIN_FRAMES`` (msgspec) would accept the text and read the same numbers: it
   says None, and msgspec reads the run, at anything else (another key or order, an escape
   in a string, a control character, an exponent, a number longer than it reads exactly,
   ``correlation`` or ``External id`` in ``args``, nesting deeper than 32).

   ``slices(buf, starts, ends)`` is ``[buf[s:e] for s, e in zip(starts, ends)]`` for int64
   arrays, without an int object per offset (each event's original bytes, ``keep_raws``);
   ``prefixed_runs`` is ``decode._frame_runs``'s search for runs of Python frames. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <math.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int64_t *at;
    int32_t *depth;
    Py_ssize_t size, cap;
} Brackets;

/* Two columns of ``*cap`` items (of ``size_a`` and ``size_b`` bytes) made twice as long (or
   ``first`` long): 0, or -1 when memory ran out (the columns are then as they were, or the
   first one longer: either is freed as it is). No Python object is touched (the GIL may be
   released). */
static int grow_columns(void **a, size_t size_a, void **b, size_t size_b, Py_ssize_t *cap,
                        Py_ssize_t first) {
    Py_ssize_t more = *cap ? 2 * *cap : first;
    void *grown = PyMem_RawRealloc(*a, (size_t)more * size_a);
    if (grown == NULL) return -1;
    *a = grown;
    grown = PyMem_RawRealloc(*b, (size_t)more * size_b);
    if (grown == NULL) return -1;
    *b = grown;
    *cap = more;
    return 0;
}

static int grow(Brackets *b) {
    return grow_columns((void **)&b->at, sizeof(int64_t), (void **)&b->depth, sizeof(int32_t),
                        &b->cap, 4096);
}

/* Bytes scanned at once: one bit of a 64-bit mask each. */
#define BLOCK 64

/* The masks of one block (bit i: byte i): quotes, backslashes, opening and closing brackets. */
typedef struct {
    uint64_t quote, slash, open, close;
} Masks;

#if defined(__SSE2__)
#include <emmintrin.h>
static inline uint64_t mask16(__m128i eq, int k) {
    return (uint64_t)(uint16_t)_mm_movemask_epi8(eq) << (16 * k);
}
static inline void classify(const unsigned char *block, Masks *m) {
    const __m128i quote = _mm_set1_epi8('"'), slash = _mm_set1_epi8('\\');
    const __m128i open = _mm_set1_epi8('{'), close = _mm_set1_epi8('}');
    const __m128i fold = _mm_set1_epi8(0x20); /* "[" | 0x20 is "{", "]" | 0x20 is "}" */
    m->quote = m->slash = m->open = m->close = 0;
    for (int k = 0; k < 4; k++) {
        __m128i v = _mm_loadu_si128((const __m128i *)(block + 16 * k));
        __m128i folded = _mm_or_si128(v, fold);
        m->quote |= mask16(_mm_cmpeq_epi8(v, quote), k);
        m->slash |= mask16(_mm_cmpeq_epi8(v, slash), k);
        m->open |= mask16(_mm_cmpeq_epi8(folded, open), k);
        m->close |= mask16(_mm_cmpeq_epi8(folded, close), k);
    }
}
#else
static inline void classify(const unsigned char *block, Masks *m) {
    m->quote = m->slash = m->open = m->close = 0;
    for (int i = 0; i < BLOCK; i++) {
        unsigned char c = block[i], folded = c | 0x20;
        uint64_t bit = (uint64_t)1 << i;
        if (c == '"') m->quote |= bit;
        else if (c == '\\') m->slash |= bit;
        else if (folded == '{') m->open |= bit;
        else if (folded == '}') m->close |= bit;
    }
}
#endif

/* Bit i set when an odd number of bits at or below i are set in x. */
static inline uint64_t prefix_xor(uint64_t x) {
    x ^= x << 1;
    x ^= x << 2;
    x ^= x << 4;
    x ^= x << 8;
    x ^= x << 16;
    x ^= x << 32;
    return x;
}

/* The real quotes of a block that holds a backslash (or follows an odd run of them):
   byte by byte, as rare in traces as backslashes are. ``odd``: an odd run of backslashes
   is right before the block; set to the same at its end. */
static uint64_t real_quotes(const Masks *m, int n, int *odd) {
    uint64_t real = 0;
    int o = *odd;
    for (int i = 0; i < n; i++) {
        uint64_t bit = (uint64_t)1 << i;
        if (m->slash & bit) {
            o ^= 1;
            continue;
        }
        if ((m->quote & bit) && !o) real |= bit;
        o = 0;
    }
    *odd = o;
    return real;
}

/* The scan itself: 0, or -1 when memory ran out. A block at a time: the quotes that are
   real, the bytes inside strings (a prefix XOR of those quotes), then the brackets outside
   them one bit at a time (about one in a hundred bytes of a trace). */
static int scan(const unsigned char *buf, Py_ssize_t start, Py_ssize_t len, int *in_string,
                int64_t *depth, Brackets *out) {
    int inside = *in_string, odd = 0;
    int64_t d = *depth;
    unsigned char tail[BLOCK];
    for (Py_ssize_t base = start; base < len; base += BLOCK) {
        const unsigned char *block = buf + base;
        int n = len - base < BLOCK ? (int)(len - base) : BLOCK;
        if (n < BLOCK) { /* the last bytes, padded with bytes that are nothing */
            memset(tail, ' ', BLOCK);
            memcpy(tail, block, (size_t)n);
            block = tail;
        }
        Masks m;
        classify(block, &m);
        uint64_t real = (m.slash || odd) ? real_quotes(&m, n, &odd) : m.quote;
        uint64_t strings = prefix_xor(real);
        if (inside) strings = ~strings;
        inside ^= __builtin_popcountll(real) & 1;
        uint64_t brackets = (m.open | m.close) & ~strings;
        if (!brackets) continue;
        if (out->cap - out->size < BLOCK && grow(out) < 0) return -1;
        Py_ssize_t k = out->size;
        do {
            int i = __builtin_ctzll(brackets);
            d += (m.open >> i) & 1 ? 1 : -1;
            out->at[k] = (int64_t)(base + i);
            out->depth[k] = (int32_t)d;
            k++;
            brackets &= brackets - 1;
        } while (brackets);
        out->size = k;
    }
    *in_string = inside;
    *depth = d;
    return 0;
}

static PyObject *frame(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t start;
    int in_string, escaped;
    long long depth0;
    if (!PyArg_ParseTuple(args, "y*npLp", &view, &start, &in_string, &depth0, &escaped))
        return NULL;
    const unsigned char *buf = view.buf;
    Py_ssize_t len = view.len;
    if (start < 0) start = 0;
    if (start > len) start = len;
    if (escaped && start < len) start++;
    Brackets out = {NULL, NULL, 0, 0};
    int inside = in_string;
    int64_t depth = depth0;
    int failed;
    Py_BEGIN_ALLOW_THREADS
    failed = scan(buf, start, len, &inside, &depth, &out);
    Py_END_ALLOW_THREADS
    int end_escaped = 0;
    if (start < len && buf[len - 1] == '\\') {
        Py_ssize_t last = len - 1;
        while (last >= 0 && buf[last] == '\\') last--;
        end_escaped = (int)((len - 1 - last) & 1);
    }
    PyBuffer_Release(&view);
    PyObject *result = NULL;
    if (failed) {
        PyErr_NoMemory();
    } else {
        PyObject *at = PyByteArray_FromStringAndSize((const char *)out.at,
                                                     out.size * (Py_ssize_t)sizeof(int64_t));
        PyObject *depths = PyByteArray_FromStringAndSize((const char *)out.depth,
                                                         out.size * (Py_ssize_t)sizeof(int32_t));
        if (at != NULL && depths != NULL)
            result = Py_BuildValue("(OONLN)", at, depths, PyBool_FromLong(inside),
                                   (long long)depth, PyBool_FromLong(end_escaped));
        Py_XDECREF(at);
        Py_XDECREF(depths);
    }
    PyMem_RawFree(out.at);
    PyMem_RawFree(out.depth);
    return result;
}

/* ---- frame_times: a run of plain Python frames ---- */

typedef struct {
    const unsigned char *p, *end;
} Cursor;

static inline void skip_ws(Cursor *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\n' || *c->p == '\r' || *c->p == '\t'))
        c->p++;
}

/* The literal ``lit`` (``n`` bytes) next, after whitespace. */
static inline int expect(Cursor *c, const char *lit, size_t n) {
    skip_ws(c);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, lit, n) != 0) return 0;
    c->p += n;
    return 1;
}

/* A string with no escape and no control character (UTF-8 is checked by the caller): its
   text in [*at, *at + *len). Sixteen bytes at a time where SSE2 is. */
static int string(Cursor *c, const unsigned char **at, size_t *len) {
    skip_ws(c);
    if (c->p >= c->end || *c->p != '"') return 0;
    const unsigned char *s = ++c->p, *q = s;
#if defined(__SSE2__)
    const __m128i quote = _mm_set1_epi8('"'), slash = _mm_set1_epi8('\\');
    const __m128i control = _mm_set1_epi8(0x1F);
    while (c->end - q >= 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)q);
        __m128i stop = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote),
                                                 _mm_cmpeq_epi8(v, slash)),
                                    _mm_cmpeq_epi8(_mm_min_epu8(v, control), v));
        int bits = _mm_movemask_epi8(stop);
        if (bits) {
            q += __builtin_ctz((unsigned)bits);
            break;
        }
        q += 16;
    }
#endif
    while (q < c->end && *q != '"' && *q != '\\' && *q >= 0x20) q++;
    if (q >= c->end || *q != '"') return 0;
    if (at) *at = s;
    if (len) *len = (size_t)(q - s);
    c->p = q + 1;
    return 1;
}

/* Longest number read here (a longer one is left to msgspec). */
#define MAX_NUMBER 40
/* Most digits of an integer read here: any such fits in 64 bits (msgspec reads it alike). */
#define MAX_INT_DIGITS 18

/* Powers of ten a double holds exactly. */
static const double exact_tens[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
                                    1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19,
                                    1e20, 1e21, 1e22};

static inline int is_digit(unsigned char b) { return (unsigned)(b - '0') <= 9; }

/* A JSON number, no exponent, at most MAX_NUMBER bytes (an integer at most MAX_INT_DIGITS
   digits); its value in *value when value is not NULL, correctly rounded as msgspec's is:
   where its digits make an integer below 2^53 and at most 22 of them follow the point, that
   integer over an exact power of ten (one division: Clinger's fast path), else strtod's. A
   negative zero, which msgspec reads as the integer 0 when it has no fraction, is refused. */
static int number(Cursor *c, double *value) {
    skip_ws(c);
    const unsigned char *s = c->p, *q = c->p, *e = c->end;
    if (q < e && *q == '-') q++;
    if (q >= e || !is_digit(*q)) return 0;
    uint64_t digits = 0; /* all of them, as one integer (wraps past 19: then unused) */
    int count = 1, after = 0;
    if (*q == '0') {
        q++;
    } else {
        digits = (uint64_t)(*q++ - '0');
        for (; q < e && is_digit(*q); q++, count++) digits = digits * 10 + (uint64_t)(*q - '0');
    }
    if (q < e && *q == '.') {
        q++;
        for (; q < e && is_digit(*q); q++, after++) digits = digits * 10 + (uint64_t)(*q - '0');
        if (after == 0) return 0;
    }
    if (q < e && (*q == 'e' || *q == 'E')) return 0;
    size_t n = (size_t)(q - s);
    if (n > MAX_NUMBER || (!after && count > MAX_INT_DIGITS)) return 0;
    if (value != NULL) {
        double v;
        if (count + after <= 16 && digits <= ((uint64_t)1 << 53) && after <= 22) {
            v = (double)digits;
            if (after) v /= exact_tens[after];
            if (*s == '-') v = -v;
        } else {
            char text[MAX_NUMBER + 1];
            memcpy(text, s, n);
            text[n] = 0;
            errno = 0;
            v = strtod(text, NULL);
            if (errno != 0 || !isfinite(v)) return 0;
        }
        if (v == 0.0 && *s == '-') return 0;
        *value = v;
    }
    c->p = q;
    return 1;
}

static int literal_null(Cursor *c) { return expect(c, "null", 4); }

/* Any JSON value (strings and numbers as above), nested at most ``depth`` more levels. */
static int value(Cursor *c, int depth) {
    skip_ws(c);
    if (c->p >= c->end) return 0;
    switch (*c->p) {
    case '"':
        return string(c, NULL, NULL);
    case 'n':
        return literal_null(c);
    case 't':
        return expect(c, "true", 4);
    case 'f':
        return expect(c, "false", 5);
    case '[':
        if (depth <= 0) return 0;
        c->p++;
        if (expect(c, "]", 1)) return 1;
        do {
            if (!value(c, depth - 1)) return 0;
        } while (expect(c, ",", 1));
        return expect(c, "]", 1);
    case '{':
        if (depth <= 0) return 0;
        c->p++;
        if (expect(c, "}", 1)) return 1;
        do {
            if (!string(c, NULL, NULL) || !expect(c, ":", 1) || !value(c, depth - 1)) return 0;
        } while (expect(c, ",", 1));
        return expect(c, "}", 1);
    default:
        return number(c, NULL);
    }
}

/* Deepest nesting read in a frame's ``args`` (deeper is left to msgspec). */
#define MAX_ARGS_DEPTH 32

/* ``args``: null, or an object without the keys ``correlation`` and ``External id`` (which
   would link the frame to GPU work or an annotation: ``decode._FrameArgs``). */
static int frame_args(Cursor *c) {
    skip_ws(c);
    if (c->p < c->end && *c->p == 'n') return literal_null(c);
    if (!expect(c, "{", 1)) return 0;
    if (expect(c, "}", 1)) return 1;
    do {
        const unsigned char *key;
        size_t n;
        if (!string(c, &key, &n)) return 0;
        if ((n == 11 && memcmp(key, "correlation", 11) == 0) ||
            (n == 11 && memcmp(key, "External id", 11) == 0))
            return 0;
        if (!expect(c, ":", 1) || !value(c, MAX_ARGS_DEPTH)) return 0;
    } while (expect(c, ",", 1));
    return expect(c, "}", 1);
}

/* ``pid`` or ``tid``: a number, a string or null (``decode._PlainFrame``). */
static int thread_id(Cursor *c) {
    skip_ws(c);
    if (c->p >= c->end) return 0;
    if (*c->p == '"') return string(c, NULL, NULL);
    if (*c->p == 'n') return literal_null(c);
    return number(c, NULL);
}

#define KEY(c, k) (expect((c), "\"" k "\"", sizeof(k) + 1) && expect((c), ":", 1))

/* One frame, its ``ts`` and ``dur`` out. */
static int one_frame(Cursor *c, double *ts, double *dur) {
    if (!expect(c, "{", 1)) return 0;
    if (!(KEY(c, "ph") && expect(c, "\"X\"", 3))) return 0;
    if (!(expect(c, ",", 1) && KEY(c, "cat") && expect(c, "\"python_function\"", 17))) return 0;
    if (!(expect(c, ",", 1) && KEY(c, "name"))) return 0;
    skip_ws(c);
    if (!(c->p < c->end && *c->p == 'n' ? literal_null(c) : string(c, NULL, NULL))) return 0;
    if (!(expect(c, ",", 1) && KEY(c, "pid") && thread_id(c))) return 0;
    if (!(expect(c, ",", 1) && KEY(c, "tid") && thread_id(c))) return 0;
    if (!(expect(c, ",", 1) && KEY(c, "ts") && number(c, ts))) return 0;
    *dur = 0.0;
    if (expect(c, "}", 1)) return 1;
    if (!expect(c, ",", 1)) return 0;
    skip_ws(c);
    if ((size_t)(c->end - c->p) >= 5 && memcmp(c->p, "\"dur\"", 5) == 0) {
        if (!KEY(c, "dur")) return 0;
        skip_ws(c);
        if (c->p < c->end && *c->p == 'n') {
            if (!literal_null(c)) return 0;
        } else if (!number(c, dur)) {
            return 0;
        }
        if (expect(c, "}", 1)) return 1;
        if (!expect(c, ",", 1)) return 0;
    }
    if (!(KEY(c, "args") && frame_args(c))) return 0;
    return expect(c, "}", 1);
}

typedef struct {
    double *ts, *dur;
    Py_ssize_t size, cap;
} Times;

static int more_times(Times *t) {
    return grow_columns((void **)&t->ts, sizeof(double), (void **)&t->dur, sizeof(double),
                        &t->cap, 1024);
}

/* 1: read; 0: not a run read here; -1: no memory. */
static int scan_frames(const unsigned char *text, Py_ssize_t len, Times *out) {
    Cursor c = {text, text + len};
    if (!expect(&c, "[", 1)) return 0;
    do {
        if (out->size == out->cap && more_times(out) < 0) return -1;
        if (!one_frame(&c, out->ts + out->size, out->dur + out->size)) return 0;
        out->size++;
    } while (expect(&c, ",", 1));
    if (!expect(&c, "]", 1)) return 0;
    skip_ws(&c);
    return c.p == c.end;
}

static PyObject *frame_times(PyObject *self, PyObject *args) {
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "y*", &view)) return NULL;
    Times out = {NULL, NULL, 0, 0};
    int got;
    Py_BEGIN_ALLOW_THREADS
    got = scan_frames(view.buf, view.len, &out);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    PyObject *result = NULL;
    if (got < 0) {
        PyErr_NoMemory();
    } else if (got == 0) {
        result = Py_NewRef(Py_None);
    } else {
        Py_ssize_t bytes = out.size * (Py_ssize_t)sizeof(double);
        PyObject *ts = PyByteArray_FromStringAndSize((const char *)out.ts, bytes);
        PyObject *dur = PyByteArray_FromStringAndSize((const char *)out.dur, bytes);
        if (ts != NULL && dur != NULL) result = PyTuple_Pack(2, ts, dur);
        Py_XDECREF(ts);
        Py_XDECREF(dur);
    }
    PyMem_RawFree(out.ts);
    PyMem_RawFree(out.dur);
    return result;
}

/* ---- slices: each event's original bytes ---- */

static PyObject *slices(PyObject *self, PyObject *args) {
    Py_buffer buf, starts, ends;
    if (!PyArg_ParseTuple(args, "y*y*y*", &buf, &starts, &ends)) return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = starts.len / (Py_ssize_t)sizeof(int64_t);
    if (starts.len != ends.len || starts.len % (Py_ssize_t)sizeof(int64_t) != 0) {
        PyErr_SetString(PyExc_ValueError, "starts and ends: int64 arrays of one length");
        goto done;
    }
    const int64_t *s = starts.buf, *e = ends.buf;
    for (Py_ssize_t k = 0; k < n; k++) {
        if (s[k] < 0 || e[k] < s[k] || e[k] > buf.len) {
            PyErr_SetString(PyExc_ValueError, "a slice out of the buffer");
            goto done;
        }
    }
    result = PyList_New(n);
    if (result == NULL) goto done;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *raw = PyBytes_FromStringAndSize((const char *)buf.buf + s[k], e[k] - s[k]);
        if (raw == NULL) {
            Py_CLEAR(result);
            goto done;
        }
        PyList_SET_ITEM(result, k, raw);
    }
done:
    PyBuffer_Release(&buf);
    PyBuffer_Release(&starts);
    PyBuffer_Release(&ends);
    return result;
}

/* ---- prefixed_runs: where runs of Python frames are ---- */

static PyObject *prefixed_runs(PyObject *self, PyObject *args) {
    Py_buffer buf, starts, ends, prefix;
    Py_ssize_t min_run;
    if (!PyArg_ParseTuple(args, "y*y*y*y*n", &buf, &starts, &ends, &prefix, &min_run))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = starts.len / (Py_ssize_t)sizeof(int64_t), width = prefix.len;
    if (starts.len != ends.len || starts.len % (Py_ssize_t)sizeof(int64_t) != 0) {
        PyErr_SetString(PyExc_ValueError, "starts and ends: int64 arrays of one length");
        goto done;
    }
    result = PyList_New(0);
    if (result == NULL) goto done;
    const int64_t *s = starts.buf, *e = ends.buf;
    const unsigned char *b = buf.buf;
    Py_ssize_t first = -1;
    for (Py_ssize_t k = 0; k <= n; k++) {
        int hit = k < n && e[k] - s[k] > width && s[k] >= 0 && s[k] + width <= buf.len &&
                  memcmp(b + s[k], prefix.buf, (size_t)width) == 0;
        if (hit && first < 0) first = k;
        if (!hit && first >= 0) {
            if (k - first >= min_run) {
                PyObject *run = Py_BuildValue("(nn)", first, k);
                if (run == NULL || PyList_Append(result, run) < 0) {
                    Py_XDECREF(run);
                    Py_CLEAR(result);
                    goto done;
                }
                Py_DECREF(run);
            }
            first = -1;
        }
    }
done:
    PyBuffer_Release(&buf);
    PyBuffer_Release(&starts);
    PyBuffer_Release(&ends);
    PyBuffer_Release(&prefix);
    return result;
}

static PyMethodDef methods[] = {
    {"frame", frame, METH_VARARGS,
     "frame(buf, start, in_string, depth, escaped) -> (brackets, depths, end_in_string, "
     "end_depth, end_escaped): the brackets outside strings of buf[start:] (int64 offsets) "
     "and the depth after each (int32), as bytearrays; see decode.Framing."},
    {"frame_times", frame_times, METH_VARARGS,
     "frame_times(text) -> (ts, dur) float64 bytearrays, or None: a run of plain Python "
     "frames as Kineto writes them (see decode._frame_columns)."},
    {"slices", slices, METH_VARARGS,
     "slices(buf, starts, ends) -> [buf[s:e] for s, e in zip(starts, ends)] (int64 arrays): "
     "each event's original bytes."},
    {"prefixed_runs", prefixed_runs, METH_VARARGS,
     "prefixed_runs(buf, starts, ends, prefix, min_run) -> [(i, j)]: the runs of min_run or "
     "more events in a row longer than prefix and beginning with it (decode._frame_runs)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_native",
    "The decoder's hot passes in native code (decode.py's numpy and msgspec passes are the "
    "fallback).",
    -1, methods,
};

PyMODINIT_FUNC PyInit__native(void) {
    return PyModule_Create(&module);
}
