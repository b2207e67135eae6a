/* stream_split._native: hot passes in native code (issues 22 and 24): the decoder's, the
   manifest's layout, the pieces of tiny iterations, the detector's op and name folding.
   Optional: where it is not built, each caller does the same in Python (decode.py with numpy
   and msgspec, write.py's ``_assemble``, skeleton.py's ``PyNode`` and ``family``), to the same
   result (tests compare the two on any input).

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
   where the machine has it), the bytes inside strings as a prefix XOR of the real quotes
   (one carry-less multiplication where the CPU has PCLMULQDQ; a sixth argument False
   asks for the shifts, to the same answer).

   ``frame_times(text)`` reads a run of Python frames as Kineto writes them (``text``: a JSON
   array of objects with the keys ``ph`` "X", ``cat`` "python_function", ``name``, ``pid``,
   ``tid``, ``ts``, then ``dur`` and ``args`` or not, in that order) into two float64
   bytearrays, each frame's ``ts`` and ``dur`` (null as 0.0), or None. It answers only where
   ``decode._PLAIN_FRAMES`` (msgspec) would accept the text and read the same numbers: it
   says None, and msgspec reads the run, at anything else (another key or order, an escape
   in a string, a control character, an exponent, a number longer than it reads exactly,
   ``correlation`` or ``External id`` in ``args``, nesting deeper than 32).
   ``frame_items(buf, start, end, prefix)`` reads the frames of ``buf[start:end]`` so, in
   place (no brackets around them, no copy), and says whether one of their strings begins
   with ``prefix`` (see its comment below); ``frame_fields(buf, start, end)`` makes each of
   those frames' (pid, tid) and name as msgspec would. ``kineto_events(buf, start, end, event_type,
   raw_type)`` reads the other events of ``buf[start:end]`` (ops, runtime calls, kernels,
   flows) into the structs ``decode``'s checked slim decoder (msgspec) makes of them, or says
   None, and msgspec reads them, at anything it does not read exactly as msgspec would.

   ``Node`` is the structural detector's op (``core.detect.skeleton.Node``), made without a
   Python frame (see its comment below).

   ``slices(buf, starts, ends)`` is ``[buf[s:e] for s, e in zip(starts, ends)]`` for int64
   arrays, without an int object per offset (each event's original bytes, ``keep_raws``);
   ``prefixed_runs`` is ``decode._frame_runs``'s search for runs of Python frames.

   ``small_pieces`` writes the pieces of a split whose events are a few bytes each, each a
   file of its own (``write.PieceWriter._assemble_small``: see there); ``joined_runs`` joins
   a batch of decided events into one part a run of one owner (``write.PieceWriter.add_many``);
   ``index_names`` makes the names of pieces named by their index (``write.PieceFiles``). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <fcntl.h>
#include <unistd.h>
#include <structmember.h>
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

/* The masks of one block (bit i: byte i): quotes, backslashes, brackets (opening or
   closing: which one, the byte's bit 1 tells, set in ``{`` and ``[`` alone). */
typedef struct {
    uint64_t quote, slash, bracket;
} Masks;

/* ---- dec44: one mask of brackets, the backslashes looked for once a block ---- */
/* (dec44: where an opening and a closing mask were made, and a backslash mask a 16 bytes,
   each a compare, a movemask, a shift and an or; backslashes are rare: their mask is made
   only where one block-wide movemask sees one) */
#if defined(__SSE2__)
#include <emmintrin.h>
static inline uint64_t mask16(__m128i eq, int k) {
    return (uint64_t)(uint16_t)_mm_movemask_epi8(eq) << (16 * k);
}
static inline void classify(const unsigned char *block, Masks *m) {
    const __m128i quote = _mm_set1_epi8('"'), slash = _mm_set1_epi8('\\');
    const __m128i open = _mm_set1_epi8('{'), close = _mm_set1_epi8('}');
    const __m128i fold = _mm_set1_epi8(0x20); /* "[" | 0x20 is "{", "]" | 0x20 is "}" */
    __m128i v[4], slashes = _mm_setzero_si128();
    m->quote = m->slash = m->bracket = 0;
    for (int k = 0; k < 4; k++) {
        v[k] = _mm_loadu_si128((const __m128i *)(block + 16 * k));
        __m128i folded = _mm_or_si128(v[k], fold);
        m->quote |= mask16(_mm_cmpeq_epi8(v[k], quote), k);
        m->bracket |= mask16(_mm_or_si128(_mm_cmpeq_epi8(folded, open),
                                          _mm_cmpeq_epi8(folded, close)), k);
        slashes = _mm_or_si128(slashes, _mm_cmpeq_epi8(v[k], slash));
    }
    if (_mm_movemask_epi8(slashes))
        for (int k = 0; k < 4; k++) m->slash |= mask16(_mm_cmpeq_epi8(v[k], slash), k);
}
#else
static inline void classify(const unsigned char *block, Masks *m) {
    m->quote = m->slash = m->bracket = 0;
    for (int i = 0; i < BLOCK; i++) {
        unsigned char c = block[i], folded = c | 0x20;
        uint64_t bit = (uint64_t)1 << i;
        if (c == '"') m->quote |= bit;
        else if (c == '\\') m->slash |= bit;
        else if (folded == '{' || folded == '}') m->bracket |= bit;
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

/* ---- dec44: the prefix XOR by one carry-less multiplication ---- */
/* Where the machine has PCLMULQDQ (x86-64 since 2010), ``prefix_xor`` is the low word of
   ``x`` multiplied carry-less by all ones: bit i the XOR of bits 0 to i. ``scan`` is made
   twice, once with each (``scan_body`` given the one it calls), and ``frame`` takes this one
   where the CPU has the instruction (``carryless_ok``): 12 instructions a block of 64 bytes
   where it took 3. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang_analyzer__)
#include <wmmintrin.h>
#define CARRYLESS 1
__attribute__((target("sse2,pclmul"))) static inline uint64_t prefix_xor_carryless(uint64_t x) {
    __m128i product = _mm_clmulepi64_si128(_mm_set_epi64x(0, (long long)x),
                                           _mm_set1_epi8((char)0xFF), 0);
    return (uint64_t)_mm_cvtsi128_si64(product);
}
#endif

/* Whether ``frame`` may take the carry-less scan (the CPU has the instruction). */
static int carryless_ok(void) {
#ifdef CARRYLESS
    static int known = -1;
    if (known < 0) {
        __builtin_cpu_init();
        known = __builtin_cpu_supports("pclmul") ? 1 : 0;
    }
    return known;
#else
    return 0;
#endif
}

/* The scan itself: 0, or -1 when memory ran out. A block at a time: the quotes that are
   real, the bytes inside strings (a prefix XOR of those quotes, ``prefix``), then the
   brackets outside them one bit at a time (about one in a hundred bytes of a trace). */
static inline __attribute__((always_inline)) int scan_body(
        const unsigned char *buf, Py_ssize_t start, Py_ssize_t len, int *in_string,
        int64_t *depth, Brackets *out, uint64_t (*prefix)(uint64_t)) {
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
        uint64_t strings = prefix(real);
        /* dec44: the parity of the block's real quotes is the prefix XOR's top bit (a
           popcount without the instruction was 12 more a block) */
        int odd_quotes = (int)(strings >> 63);
        if (inside) strings = ~strings;
        inside ^= odd_quotes;
        uint64_t brackets = m.bracket & ~strings;
        if (!brackets) continue;
        if (out->cap - out->size < BLOCK && grow(out) < 0) return -1;
        Py_ssize_t k = out->size;
        do {
            int i = __builtin_ctzll(brackets);
            d += (block[i] & 2) ? 1 : -1;  /* ("{" and "[" alone have bit 1: dec44) */
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

/* ``scan_body`` with each prefix XOR (dec44). */
static int scan(const unsigned char *buf, Py_ssize_t start, Py_ssize_t len, int *in_string,
                int64_t *depth, Brackets *out) {
    return scan_body(buf, start, len, in_string, depth, out, prefix_xor);
}

#ifdef CARRYLESS
__attribute__((target("sse2,pclmul"))) static int scan_carryless(
        const unsigned char *buf, Py_ssize_t start, Py_ssize_t len, int *in_string,
        int64_t *depth, Brackets *out) {
    return scan_body(buf, start, len, in_string, depth, out, prefix_xor_carryless);
}
#endif

/* Bytes of a trace a bracket at least, mostly (Kineto writes one every 36 or so): ``frame``
   makes room for that many at first. */
#define BYTES_PER_BRACKET 32

static PyObject *frame(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t start;
    int in_string, escaped, carryless = 1;
    long long depth0;
    if (!PyArg_ParseTuple(args, "y*npLp|p", &view, &start, &in_string, &depth0, &escaped,
                          &carryless))
        return NULL;
    carryless = carryless && carryless_ok();
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
    /* dec43: room at once for a bracket every BYTES_PER_BRACKET bytes, where it grew from
       4096 by doubling, each step a copy (on the 10x stripped resnet tile, 5 a call) */
    failed = grow_columns((void **)&out.at, sizeof(int64_t), (void **)&out.depth,
                          sizeof(int32_t), &out.cap, (len - start) / BYTES_PER_BRACKET + BLOCK);
#ifdef CARRYLESS
    if (!failed && carryless)
        failed = scan_carryless(buf, start, len, &inside, &depth, &out);
    else
#endif
    if (!failed) failed = scan(buf, start, len, &inside, &depth, &out);
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
    /* ``frame_items``: a string that begins with ``prefix`` (``prefix_len`` bytes, 0: none
       looked for) sets ``prefixed``. */
    const unsigned char *prefix;
    size_t prefix_len;
    int prefixed;
} Cursor;

/* JSON's whitespace. */
static inline int json_space(unsigned char b) {
    return b == ' ' || b == '\n' || b == '\r' || b == '\t';
}

static inline void skip_ws(Cursor *c) {
    if (c->p < c->end && *c->p > ' ') return;  /* (most often: no whitespace at all) */
    while (c->p < c->end && json_space(*c->p))
        c->p++;
}

/* The literal ``lit`` (``n`` bytes) next, after whitespace. */
static inline int expect(Cursor *c, const char *lit, size_t n) {
    skip_ws(c);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, lit, n) != 0) return 0;
    c->p += n;
    return 1;
}

/* The separator ``sep`` (':' or ','): as Kineto writes it, followed by one space (both
   compared at once: any whitespace read as ``expect`` reads it cost the 10x stripped resnet
   tile's ``boundaries`` 95 M instructions more), else after and before any whitespace. */
static inline int separator(Cursor *c, unsigned char sep) {
    if (c->end - c->p >= 2 && c->p[0] == sep && c->p[1] == ' ') {
        c->p += 2;
        return 1;
    }
    skip_ws(c);
    if (c->p >= c->end || *c->p != sep) return 0;
    c->p++;
    return 1;
}

/* A string with no escape and no control character (UTF-8 is checked by the caller): its
   text in [*at, *at + *len). Sixteen bytes at a time where SSE2 is. */
static inline __attribute__((always_inline)) int string(Cursor *c, const unsigned char **at, size_t *len) {
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
            goto stop;  /* (the byte there is the one that stops it: not looked at twice) */
        }
        q += 16;
    }
#endif
    while (q < c->end && *q != '"' && *q != '\\' && *q >= 0x20) q++;
    if (q >= c->end) return 0;
stop:
    if (*q != '"') return 0;
    if (c->prefix_len && *s == *c->prefix && (size_t)(q - s) >= c->prefix_len &&
        memcmp(s, c->prefix, c->prefix_len) == 0)  /* (its first byte first: no call) */
        c->prefixed = 1;
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

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
/* Eight digits at once (simdjson's SWAR tricks): the value of 8 bytes (little-endian) that
   are all ASCII digits (which they are: ``non_digits`` below). A Kineto time
   (``3743411230047.485``) is read so in three steps where it took sixteen. */
#define EIGHT_DIGITS 1
static inline uint64_t eight_digits_value(uint64_t v) {
    v -= 0x3030303030303030ull;
    v = v * 10 + (v >> 8);
    return (((v & 0x000000FF000000FFull) * 0x000F424000000064ull) +
            (((v >> 16) & 0x000000FF000000FFull) * 0x0000271000000001ull)) >> 32;
}
#endif

/* ---- dec44: a run of digits ended in one step ---- */
#ifdef EIGHT_DIGITS
/* The bytes of ``v`` (little-endian) that are not ASCII digits: a byte of the answer is 0
   where ``v``'s is a digit. Exact up to the first byte that is not one (a carry of ``+ 6``
   only leaves a byte of 0xFA or more, no digit, for the bytes after it). */
static inline uint64_t non_digits(uint64_t v) {
    return ((v & 0xF0F0F0F0F0F0F0F0ull) |
            (((v + 0x0606060606060606ull) & 0xF0F0F0F0F0F0F0F0ull) >> 4)) ^ 0x3333333333333333ull;
}

/* Integral powers of ten up to 10^7 (the value of a shorter run than eight digits). */
static const uint64_t int_tens[] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000};

/* The first ``k`` (1 to 7) bytes of ``v``, all digits, as their value: moved to the top of
   the word, '0's put before them, read as eight digits. */
static inline uint64_t leading_digits_value(uint64_t v, int k) {
    return eight_digits_value((v << (64 - 8 * k)) | (0x3030303030303030ull >> (8 * k)));
}
#endif

/* Where the run of digits from ``q`` on (before ``e``) ends: eight bytes looked at a step,
   the end found at once in the last (``non_digits``), where a byte at a time took four
   instructions a digit (the skipped ids and sizes of ``value`` and ``thread_id``). */
static inline const unsigned char *digit_run_end(const unsigned char *q, const unsigned char *e) {
#ifdef EIGHT_DIGITS
    while (e - q >= 8) {
        uint64_t word, other;
        memcpy(&word, q, 8);
        other = non_digits(word);
        if (other) return q + (__builtin_ctzll(other) >> 3);
        q += 8;
    }
#endif
    while (q < e && is_digit(*q)) q++;
    return q;
}

/* The digits from ``q`` on (before ``e``) added to ``*digits`` (wrapping: past 19 digits the
   value is not used), their count added to ``*count``; where they end. Eight at a time, the
   last fewer than eight in one step too (``leading_digits_value``: the same value, modulo
   2^64, as a digit at a time; a Kineto time's four and three last digits were 7 steps). */
static inline const unsigned char *digits_from(const unsigned char *q, const unsigned char *e,
                                               uint64_t *digits, int *count) {
    uint64_t d = *digits;
    int n = 0;
#ifdef EIGHT_DIGITS
    while (e - q >= 8) {
        uint64_t word, other;
        memcpy(&word, q, 8);
        other = non_digits(word);
        if (other) {
            int k = __builtin_ctzll(other) >> 3;
            if (k) {
                d = d * int_tens[k] + leading_digits_value(word, k);
                q += k;
                n += k;
            }
            *digits = d;
            *count += n;
            return q;
        }
        d = d * 100000000u + eight_digits_value(word);
        q += 8;
        n += 8;
    }
#endif
    for (; q < e && is_digit(*q); q++, n++) d = d * 10 + (uint64_t)(*q - '0');
    *digits = d;
    *count += n;
    return q;
}

/* A JSON number, no exponent, at most MAX_NUMBER bytes (an integer at most MAX_INT_DIGITS
   digits); its value in *value when value is not NULL, correctly rounded as msgspec's is:
   where its digits make an integer below 2^53 and at most 22 of them follow the point, that
   integer over an exact power of ten (one division: Clinger's fast path), else strtod's. A
   negative zero, which msgspec reads as the integer 0 when it has no fraction, is refused.
   ``integer`` (where not NULL): a number without a fraction is an integer, its value there
   (``value`` is then not set) and 2 returned (``kineto_events``: msgspec makes an int). */
static int number_parts(Cursor *c, double *value, long long *integer) {
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
        q = digits_from(q, e, &digits, &count);
    }
    if (q < e && *q == '.') {
        q = digits_from(q + 1, e, &digits, &after);
        if (after == 0) return 0;
    }
    if (q < e && (*q == 'e' || *q == 'E')) return 0;
    size_t n = (size_t)(q - s);
    if (n > MAX_NUMBER || (!after && count > MAX_INT_DIGITS)) return 0;
    if (integer != NULL && !after) {
        if (digits == 0 && *s == '-') return 0;
        *integer = *s == '-' ? -(long long)digits : (long long)digits;
        c->p = q;
        return 2;
    }
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

/* ``number(c, NULL)``: a number checked as ``number`` reads it, not valued (no digit kept
   nor double made; a negative zero accepted, as there): most numbers of a trace are ids and
   indices that are only checked (``value``, ``thread_id``). */
static inline __attribute__((always_inline)) int number_here(Cursor *c);

static int skip_number(Cursor *c) {
    skip_ws(c);
    return number_here(c);
}

/* ---- dec43: a number skipped where it begins ---- */
/* ``skip_number`` at the cursor (no whitespace before it), inlined in ``value``'s arrays and
   objects, where most numbers a trace skips are (``Input Strides``, ``Ev Idx``). */
static inline __attribute__((always_inline)) int number_here(Cursor *c) {
    const unsigned char *s = c->p, *q = c->p, *e = c->end;
    if (q < e && *q == '-') q++;
    if (q >= e || !is_digit(*q)) return 0;
    const unsigned char *first = q++;
    if (*first != '0')
        q = digit_run_end(q, e);  /* (dec44) */
    Py_ssize_t whole = q - first;
    if (q < e && *q == '.') {
        const unsigned char *fraction = ++q;
        while (q < e && is_digit(*q)) q++;
        if (q == fraction) return 0;
        whole = 0;
    }
    if (q < e && (*q | 0x20) == 'e') return 0;
    if (q - s > MAX_NUMBER || whole > MAX_INT_DIGITS) return 0;
    c->p = q;
    return 1;
}

static int number(Cursor *c, double *value) {
    return value == NULL ? skip_number(c) : number_parts(c, value, NULL) != 0;
}

static int literal_null(Cursor *c) { return expect(c, "null", 4); }

/* Any JSON value (strings and numbers as above), nested at most ``depth`` more levels. */
static int value(Cursor *c, int depth);

/* ``value`` of an array's item or an object's member: a string or a number read here at
   once (no call, no whitespace looked for twice), anything else by ``value``. */
static inline int item(Cursor *c, int depth) {
    skip_ws(c);
    if (c->p < c->end) {
        unsigned char b = *c->p;
        if (b == '"') return string(c, NULL, NULL);
        if (is_digit(b) || b == '-') return number_here(c);
    }
    return value(c, depth);
}

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
            if (!item(c, depth - 1)) return 0;
        } while (separator(c, ','));
        return expect(c, "]", 1);
    case '{':
        if (depth <= 0) return 0;
        c->p++;
        if (expect(c, "}", 1)) return 1;
        do {
            if (!string(c, NULL, NULL) || !separator(c, ':') || !item(c, depth - 1)) return 0;
        } while (separator(c, ','));
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
        if (!expect(c, ":", 1) || !item(c, MAX_ARGS_DEPTH)) return 0;
    } while (expect(c, ",", 1));
    return expect(c, "}", 1);
}

/* fields52: where a value of a frame lies in its text (``frame_fields``): ``kind`` 'n'
   (null), 's' (a string: its text, without the quotes) or '0' (a number: its text). */
typedef struct {
    const unsigned char *at;
    size_t len;
    char kind;
} Span;

/* Where a frame's name, pid and tid lie (``frame_fields``). */
typedef struct {
    Span name, pid, tid;
} FrameFields;

/* ``pid`` or ``tid``: a number, a string or null (``decode._PlainFrame``). A number is
   checked where it begins (dec44: ``number_here``, where ``number`` and ``skip_number`` were
   two calls more and whitespace looked for again: 80 instructions a frame's pid). Where
   ``s`` is not NULL, where it lies. */
static int thread_id(Cursor *c, Span *s) {
    skip_ws(c);
    if (c->p >= c->end) return 0;
    const unsigned char *at = c->p;
    if (*at == '"') {
        if (s == NULL) return string(c, NULL, NULL);
        s->kind = 's';
        return string(c, &s->at, &s->len);
    }
    int ok = *at == 'n' ? literal_null(c) : number_here(c);
    if (s != NULL) {
        s->kind = *at == 'n' ? 'n' : '0';
        s->at = at;
        s->len = (size_t)(c->p - at);
    }
    return ok;
}

/* A frame's ``name``: a string or null (where ``s`` is not NULL, where it lies). */
static inline int frame_name(Cursor *c, Span *s) {
    skip_ws(c);
    if (c->p < c->end && *c->p == 'n') {
        if (s != NULL) s->kind = 'n';
        return literal_null(c);
    }
    if (s == NULL) return string(c, NULL, NULL);
    s->kind = 's';
    return string(c, &s->at, &s->len);
}

#define KEY(c, k) (expect((c), "\"" k "\"", sizeof(k) + 1) && expect((c), ":", 1))

/* The bytes of the string constant ``lit`` at the cursor exactly, stepped over: a part of
   a frame as Kineto spells it, whitespace included (``kineto_frame``). */
#define EXACT(c, lit) ((size_t)((c)->end - (c)->p) >= sizeof(lit) - 1 && \
                       memcmp((c)->p, (lit), sizeof(lit) - 1) == 0 && \
                       ((c)->p += sizeof(lit) - 1, 1))

/* ``args`` as Kineto writes them: null, or an object of keys each followed by ``": "``, its
   items separated by ``", "``; the keys read as ``frame_args`` reads them, the values by
   ``value``. 0 where it is written otherwise (``frame_args`` then reads it). */
static int kineto_args(Cursor *c) {
    if (EXACT(c, "null")) return 1;
    if (!EXACT(c, "{")) return 0;
    do {
        const unsigned char *key;
        size_t n;
        if (!string(c, &key, &n)) return 0;
        if ((n == 11 && memcmp(key, "correlation", 11) == 0) ||
            (n == 11 && memcmp(key, "External id", 11) == 0))
            return 0;
        if (!(EXACT(c, ": ") && item(c, MAX_ARGS_DEPTH))) return 0;
    } while (EXACT(c, ", "));
    return EXACT(c, "}");
}

/* ``one_frame`` of a frame spelled exactly as Kineto writes it (``json.dumps``' separators,
   its keys in their order): each run of fixed bytes between two values compared at once,
   where ``one_frame`` reads a token at a time, each after any whitespace. 0 where the frame
   is written otherwise: ``one_frame`` then reads it from its start, so that this path only
   makes faster what that one accepts, to the same numbers. On the 10x stripped resnet
   tile's 344 k frames: 2,590 -> 1,760 instructions a frame (its ``boundaries``: 11,238.6 ->
   10,954.3 M). */
static int kineto_frame(Cursor *c, double *ts, double *dur, FrameFields *f) {
    skip_ws(c);
    if (!EXACT(c, "{\"ph\": \"X\", \"cat\": \"python_function\", \"name\": ")) return 0;
    if (!frame_name(c, f ? &f->name : NULL)) return 0;
    if (!(EXACT(c, ", \"pid\": ") && thread_id(c, f ? &f->pid : NULL) &&
          EXACT(c, ", \"tid\": ") && thread_id(c, f ? &f->tid : NULL) &&
          EXACT(c, ", \"ts\": ") && number(c, ts)))
        return 0;
    *dur = 0.0;
    if (EXACT(c, "}")) return 1;
    if (EXACT(c, ", \"dur\": ")) {
        if (!(EXACT(c, "null") || number(c, dur))) return 0;
        if (EXACT(c, "}")) return 1;
    }
    return EXACT(c, ", \"args\": ") && kineto_args(c) && EXACT(c, "}");
}

/* One frame, its ``ts`` and ``dur`` out (and where ``f`` is not NULL, where its name, pid
   and tid lie). */
static int one_frame(Cursor *c, double *ts, double *dur, FrameFields *f) {
    const unsigned char *start = c->p;
    if (kineto_frame(c, ts, dur, f)) return 1;
    c->p = start;
    if (!expect(c, "{", 1)) return 0;
    if (!(KEY(c, "ph") && expect(c, "\"X\"", 3))) return 0;
    if (!(expect(c, ",", 1) && KEY(c, "cat") && expect(c, "\"python_function\"", 17))) return 0;
    if (!(expect(c, ",", 1) && KEY(c, "name"))) return 0;
    if (!frame_name(c, f ? &f->name : NULL)) return 0;
    if (!(expect(c, ",", 1) && KEY(c, "pid") && thread_id(c, f ? &f->pid : NULL))) return 0;
    if (!(expect(c, ",", 1) && KEY(c, "tid") && thread_id(c, f ? &f->tid : NULL))) return 0;
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

/* The frames from ``c`` on, separated by commas, into ``out``: 1, 0 (not a run read here)
   or -1 (no memory). */
static int scan_items(Cursor *c, Times *out) {
    do {
        if (out->size == out->cap && more_times(out) < 0) return -1;
        if (!one_frame(c, out->ts + out->size, out->dur + out->size, NULL)) return 0;
        out->size++;
    } while (expect(c, ",", 1));
    return 1;
}

/* 1: read; 0: not a run read here; -1: no memory. */
static int scan_frames(const unsigned char *text, Py_ssize_t len, Times *out) {
    Cursor c = {text, text + len};
    if (!expect(&c, "[", 1)) return 0;
    int got = scan_items(&c, out);
    if (got <= 0) return got;
    if (!expect(&c, "]", 1)) return 0;
    skip_ws(&c);
    return c.p == c.end;
}

/* ``frame_times``' answer for what ``scan_frames`` or ``scan_items`` read (``got``): the two
   bytearrays as a tuple, with ``extra`` after them where not NULL (a new reference, taken),
   None (got 0), or NULL (an error set). ``out``'s columns are freed. */
static PyObject *times_result(int got, Times *out, PyObject *extra) {
    PyObject *result = NULL;
    if (got < 0) {
        PyErr_NoMemory();
    } else if (got == 0) {
        result = Py_NewRef(Py_None);
    } else {
        Py_ssize_t bytes = out->size * (Py_ssize_t)sizeof(double);
        PyObject *ts = PyByteArray_FromStringAndSize((const char *)out->ts, bytes);
        PyObject *dur = PyByteArray_FromStringAndSize((const char *)out->dur, bytes);
        if (ts != NULL && dur != NULL)
            result = extra ? PyTuple_Pack(3, ts, dur, extra) : PyTuple_Pack(2, ts, dur);
        Py_XDECREF(ts);
        Py_XDECREF(dur);
    }
    Py_XDECREF(extra);
    PyMem_RawFree(out->ts);
    PyMem_RawFree(out->dur);
    return result;
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
    return times_result(got, &out, NULL);
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

/* runs51: whether ``b[i:end]`` begins with ``p`` (``n`` bytes: JSON text without escapes) up
   to the whitespace between its tokens: outside ``p``'s strings any run of JSON whitespace,
   in ``b`` or in ``p``, is passed over (``{"ph": "X", `` begins ``{\n    "ph": "X",\n``, as
   libkineto and torch write events, and ``{"ph":"X",``), and something follows it in ``b``.
   ``decode._frame_prefix_pattern`` is the same test as a regular expression. */
static int spaced_prefix(const unsigned char *b, Py_ssize_t i, Py_ssize_t end,
                         const unsigned char *p, Py_ssize_t n) {
    int in_string = 0;
    for (Py_ssize_t j = 0; j < n; i++, j++) {
        if (!in_string) {
            while (j < n && json_space(p[j])) j++;
            if (j == n) break;
            while (i < end && json_space(b[i])) i++;
        }
        if (i >= end || b[i] != p[j]) return 0;
        if (p[j] == '"') in_string = !in_string;
    }
    return i < end;
}

/* Where ``a`` and ``b`` (``n`` bytes each) first differ (``n``: nowhere). */
static Py_ssize_t first_difference(const unsigned char *a, const unsigned char *b, Py_ssize_t n) {
    Py_ssize_t k = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    for (; k + 8 <= n; k += 8) {
        uint64_t x, y;
        memcpy(&x, a + k, 8);
        memcpy(&y, b + k, 8);
        if (x != y) return k + (__builtin_ctzll(x ^ y) >> 3);
    }
#endif
    for (; k < n; k++)
        if (a[k] != b[k]) return k;
    return n;
}

/* Whether the event ``b[start:end]`` begins with ``prefix`` (``spaced_prefix``). Most often
   its bytes are the prefix's as they are (a file written one event a line); where they
   differ first at a byte that is whitespace in neither, they differ so whatever the
   whitespace (the two read alike up to there), and the event is no frame without the walk
   of ``spaced_prefix`` (the ops and GPU work of such a file: they differ at their category). */
static int prefixed(const unsigned char *b, Py_ssize_t len, int64_t start, int64_t end,
                    const unsigned char *prefix, Py_ssize_t width) {
    if (start < 0 || end > len || start >= end) return 0;
    Py_ssize_t room = (Py_ssize_t)(end - start) < width ? (Py_ssize_t)(end - start) : width;
    Py_ssize_t at = first_difference(b + start, prefix, room);
    if (at == width) return end - start > width;
    if (at < room && !json_space(b[start + at]) && !json_space(prefix[at])) return 0;
    return spaced_prefix(b, start, end, prefix, width);
}

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
        int hit = k < n && prefixed(b, buf.len, s[k], e[k], prefix.buf, width);
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

/* ---- laid_out: a manifest's entries as json.dumps(indent=...) writes them ---- */

/* Strings remembered as plain (ASCII, nothing to escape) by ``text_string`` during one
   ``laid_out`` call, by address (the items it lays out hold them meanwhile): the keys, the
   same objects in every entry, are looked through once (60 % of the call's time was the
   look at each of their characters). */
#define PLAIN_SLOTS 128

/* The text that begins a dict's item, a comma first (left out before the first item), its
   line break and indent, its key quoted and ``": "`` (``",\n   \"index\": "``), made once a
   ``laid_out`` call for each plain key at each level (by the key's address, as ``plain``)
   and copied whole: a comma, a line, a key and a colon written apart were some 200
   instructions a key of a manifest's entry (39 keys an entry of a one-op iteration). */
#define KEY_SLOTS 512
#define KEY_TEXT_MAX 64
typedef struct {
    PyObject *key;
    int level;
    int size;
    char text[KEY_TEXT_MAX];
} KeyText;

/* The text grows in one buffer; ``laid_out`` makes the str of it at the end, or (fin45) it
   grows in the bytes object ``bytes`` that ``laid_out`` answers (no copy of it made). */
typedef struct {
    char *at;
    Py_ssize_t size, cap;
    PyObject *plain[PLAIN_SLOTS];
    KeyText *keys;  /* KEY_SLOTS of them (heap: 32 KB), made at the first key */
    PyObject *bytes;  /* NULL: ``at`` is PyMem's */
} Text;

/* Whether none of the ``n`` ASCII ``bytes`` needs an escape (a control, DEL, ``"``, ``\``),
   read 8 at a time. */
static int ascii_plain(const unsigned char *bytes, Py_ssize_t n) {
    const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t x;
        memcpy(&x, bytes + i, 8);
        uint64_t quote = x ^ (ones * '"'), slash = x ^ (ones * '\\'), del = x ^ (ones * 0x7f);
        /* a byte below 0x20, or zero after one of the XORs: its high bit set here */
        uint64_t hit = ((x - ones * 0x20) | (quote - ones) | (slash - ones) | (del - ones)) & ~x
                       & highs;
        if (hit) return 0;
    }
    for (; i < n; i++)
        if (bytes[i] < ' ' || bytes[i] == '\\' || bytes[i] == '"' || bytes[i] == 0x7f) return 0;
    return 1;
}

/* ``text_room``'s growth (rare: out of line, so that the check inlined where text is
   written stays small): 0, or -1 (MemoryError set). */
static __attribute__((noinline, cold)) int text_grow(Text *text, Py_ssize_t more) {
    Py_ssize_t cap = text->cap ? text->cap : 4096;
    while (cap < text->size + more) cap *= 2;
    if (text->bytes != NULL) {  /* (fin45) on failure it is released, NULL, MemoryError set */
        if (_PyBytes_Resize(&text->bytes, cap) < 0) return -1;
        text->at = PyBytes_AS_STRING(text->bytes);
        text->cap = cap;
        return 0;
    }
    char *grown = PyMem_Realloc(text->at, (size_t)cap);
    if (grown == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    text->at = grown;
    text->cap = cap;
    return 0;
}

/* Room for ``more`` bytes after ``text->size``: 0, or -1 (MemoryError set). */
static inline int text_room(Text *text, Py_ssize_t more) {
    if (text->size + more <= text->cap) return 0;
    return text_grow(text, more);
}

static int text_add(Text *text, const char *bytes, Py_ssize_t n) {
    if (text_room(text, n) < 0) return -1;
    memcpy(text->at + text->size, bytes, (size_t)n);
    text->size += n;
    return 0;
}

/* A line break and ``indent * level`` spaces. */
static int text_line(Text *text, Py_ssize_t indent, int level) {
    Py_ssize_t n = 1 + indent * level;
    if (text_room(text, n) < 0) return -1;
    text->at[text->size] = '\n';
    memset(text->at + text->size + 1, ' ', (size_t)(n - 1));
    text->size += n;
    return 0;
}

/* A str as the C encoder writes it with ensure_ascii (``json.encoder.encode_basestring_ascii``):
   quoted, ``"`` and ``\`` and the controls escaped (``\n``, ``\r``, ``\t``, ``\b``, ``\f`` by
   their letters, the others as ``\u00XX``), every code point beyond ``~`` as ``\uXXXX``
   (lowercase hex; beyond U+FFFF as a surrogate pair; a lone surrogate as itself). */
static int text_string(Text *text, PyObject *str) {
    static const char hex[] = "0123456789abcdef";
    if (PyUnicode_READY(str) < 0) return -1;
    Py_ssize_t n = PyUnicode_GET_LENGTH(str);
    if (text_room(text, 12 * n + 2) < 0) return -1;
    char *out = text->at + text->size, *start = out;
    *out++ = '"';
    if (PyUnicode_IS_ASCII(str)) {  /* (most: copied as they are) */
        const unsigned char *bytes = PyUnicode_1BYTE_DATA(str);
        PyObject **slot = &text->plain[((uintptr_t)str >> 4) % PLAIN_SLOTS];
        int plain = *slot == str;
        if (!plain && (plain = ascii_plain(bytes, n)))
            *slot = str;
        if (plain) {
            memcpy(out, bytes, (size_t)n);
            out[n] = '"';
            text->size += n + 2;
            return 0;
        }
    }
    int kind = PyUnicode_KIND(str);
    const void *data = PyUnicode_DATA(str);
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c >= ' ' && c <= '~' && c != '\\' && c != '"') {
            *out++ = (char)c;
            continue;
        }
        *out++ = '\\';
        switch (c) {
        case '\\': *out++ = '\\'; continue;
        case '"': *out++ = '"'; continue;
        case '\b': *out++ = 'b'; continue;
        case '\f': *out++ = 'f'; continue;
        case '\n': *out++ = 'n'; continue;
        case '\r': *out++ = 'r'; continue;
        case '\t': *out++ = 't'; continue;
        }
        if (c >= 0x10000) {
            Py_UCS4 v = c - 0x10000;
            Py_UCS4 high = 0xd800 | ((v >> 10) & 0x3ff);
            *out++ = 'u';
            *out++ = hex[(high >> 12) & 0xf];
            *out++ = hex[(high >> 8) & 0xf];
            *out++ = hex[(high >> 4) & 0xf];
            *out++ = hex[high & 0xf];
            *out++ = '\\';
            c = 0xdc00 | (v & 0x3ff);
        }
        *out++ = 'u';
        *out++ = hex[(c >> 12) & 0xf];
        *out++ = hex[(c >> 8) & 0xf];
        *out++ = hex[(c >> 4) & 0xf];
        *out++ = hex[c & 0xf];
    }
    *out++ = '"';
    text->size += out - start;
    return 0;
}

/* The text that begins an item of a dict at ``level`` whose key is ``key`` (a str), a comma
   first unless ``first``: from ``text->keys`` where the key is plain ASCII and short
   (``KeyText``), else written a part at a time. */
static int text_key(Text *text, PyObject *key, Py_ssize_t indent, int level, int first) {
    if (text->keys == NULL && (text->keys = PyMem_Calloc(KEY_SLOTS, sizeof(KeyText))) == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    uintptr_t at = (uintptr_t)key >> 4;
    KeyText *slot = &text->keys[(at ^ (at >> 9) ^ ((uintptr_t)level * 0x9e5)) % KEY_SLOTS];
    if (slot->key != key || slot->level != level) {
        if (PyUnicode_READY(key) < 0) return -1;
        Py_ssize_t n = PyUnicode_GET_LENGTH(key), spaces = indent * level;
        if (!PyUnicode_IS_ASCII(key) || 6 + spaces + n >= KEY_TEXT_MAX
            || !ascii_plain(PyUnicode_1BYTE_DATA(key), n)) {  /* (rare) a part at a time */
            if ((!first && text_add(text, ",", 1) < 0) || text_line(text, indent, level) < 0
                || text_string(text, key) < 0 || text_add(text, ": ", 2) < 0)
                return -1;
            return 0;
        }
        char *out = slot->text;
        *out++ = ',';
        *out++ = '\n';
        memset(out, ' ', (size_t)spaces);
        out += spaces;
        *out++ = '"';
        memcpy(out, PyUnicode_1BYTE_DATA(key), (size_t)n);
        out += n;
        memcpy(out, "\": ", 3);
        out += 3;
        slot->key = key;
        slot->level = level;
        slot->size = (int)(out - slot->text);
    }
    /* (a copy of a size known here, made inline: the bytes past the key's are not counted) */
    if (text_room(text, KEY_TEXT_MAX) < 0) return -1;
    memcpy(text->at + text->size, slot->text + first, KEY_TEXT_MAX - 1);
    text->size += slot->size - first;
    return 0;
}

/* The decimal digits of ``v`` (``"%lld"``), and ``tail``: snprintf took several times longer. */
static int text_integer(Text *text, long long v, const char *tail, Py_ssize_t tail_size) {
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    int n = v < 0;  /* its characters: written from the last, in place (no copy of them) */
    for (unsigned long long rest = u; ; rest /= 10) {
        n++;
        if (rest < 10) break;
    }
    if (text_room(text, n + tail_size) < 0) return -1;
    char *out = text->at + text->size + n;
    do {
        *--out = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0) *--out = '-';
    for (Py_ssize_t i = 0; i < tail_size; i++) text->at[text->size + n + i] = tail[i];
    text->size += n + tail_size;
    return 0;
}

/* A finite float as ``float.__repr__`` writes it: 0.0 and whole numbers below 2**53 written
   here, the others by ``PyOS_double_to_string`` (repr's own call). 1: not finite (the caller
   answers None: the encoder decides). */
static int text_float(Text *text, double v) {
    if (!isfinite(v)) return 1;
    if (v == 0.0)
        return text_add(text, signbit(v) ? "-0.0" : "0.0", signbit(v) ? 4 : 3);
    if (v == floor(v) && fabs(v) < 9007199254740992.0)  /* below 2**53: repr's "N.0" */
        return text_integer(text, (long long)v, ".0", 2);
    char *repr = PyOS_double_to_string(v, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
    if (repr == NULL) return -1;
    int result = text_add(text, repr, (Py_ssize_t)strlen(repr));
    PyMem_Free(repr);
    return result;
}

/* ``value`` at ``level`` (its first line already begun): 0, -1 (an error set), or 1: a value
   that is not of the exact types written here (dict with str keys, list, str, int, float,
   bool, None), a float not finite, or nesting deeper than ``LAID_OUT_DEPTH``: the caller
   answers None. */
#define LAID_OUT_DEPTH 64
/* The room made at once for the text of an item of ``laid_out``: a manifest's entry without
   GPU work takes some 900 bytes. */
#define LAID_OUT_ITEM_BYTES 1024
/* (fin45) An int beyond a long long, by its repr (rare: out of line). */
static __attribute__((noinline)) int text_big_integer(Text *text, PyObject *value) {
    PyObject *repr = PyObject_Repr(value);
    if (repr == NULL) return -1;
    Py_ssize_t n;
    const char *bytes = PyUnicode_AsUTF8AndSize(repr, &n);
    int result = bytes == NULL ? -1 : text_add(text, bytes, n);
    Py_DECREF(repr);
    return result;
}

/* (fin45) ``value`` of ``type``, not a dict nor a list, as ``text_value`` writes it (0, -1, or
   1), written where a dict's or a list's items are (no call a leaf: a manifest's entry of 39
   values holds 2 dicts); 2: a dict or a list, for ``text_value``. */
static inline __attribute__((always_inline)) int text_scalar(Text *text, PyObject *value,
                                                             PyTypeObject *type) {
    if (type == &PyUnicode_Type) return text_string(text, value);
    if (type == &PyFloat_Type) return text_float(text, PyFloat_AS_DOUBLE(value));
    if (value == Py_None) return text_add(text, "null", 4);
    if (value == Py_True) return text_add(text, "true", 4);
    if (value == Py_False) return text_add(text, "false", 5);
    if (type == &PyLong_Type) {
        int overflow;
        long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (overflow) return text_big_integer(text, value);
        if (v == -1 && PyErr_Occurred()) return -1;
        return text_integer(text, v, "", 0);
    }
    return type == &PyDict_Type || type == &PyList_Type ? 2 : 1;
}

static int text_value(Text *text, PyObject *value, Py_ssize_t indent, int level) {
    PyTypeObject *type = Py_TYPE(value);
    if (type != &PyDict_Type && type != &PyList_Type) return text_scalar(text, value, type);
    if (level >= LAID_OUT_DEPTH) return 1;
    if (type == &PyDict_Type) {
        if (PyDict_GET_SIZE(value) == 0) return text_add(text, "{}", 2);
        if (text_add(text, "{", 1) < 0) return -1;
        Py_ssize_t pos = 0;
        PyObject *key, *item;
        int first = 1;
        while (PyDict_Next(value, &pos, &key, &item)) {
            if (Py_TYPE(key) != &PyUnicode_Type) return 1;
            if (text_key(text, key, indent, level + 1, first) < 0) return -1;
            first = 0;
            int result = text_scalar(text, item, Py_TYPE(item));
            if (result == 2) result = text_value(text, item, indent, level + 1);
            if (result) return result;
        }
        if (text_line(text, indent, level) < 0) return -1;
        return text_add(text, "}", 1);
    }
    if (type == &PyList_Type) {
        Py_ssize_t n = PyList_GET_SIZE(value);
        if (n == 0) return text_add(text, "[]", 2);
        if (text_add(text, "[", 1) < 0) return -1;
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(value); i++) {
            if ((i && text_add(text, ",", 1) < 0) || text_line(text, indent, level + 1) < 0)
                return -1;
            PyObject *item = PyList_GET_ITEM(value, i);
            int result = text_scalar(text, item, Py_TYPE(item));
            if (result == 2) result = text_value(text, item, indent, level + 1);
            if (result) return result;
        }
        if (text_line(text, indent, level) < 0) return -1;
        return text_add(text, "]", 1);
    }
    return 1;
}

static PyObject *laid_out(PyObject *self, PyObject *args) {
    PyObject *items;
    Py_ssize_t indent;
    int level, as_bytes = 0;
    if (!PyArg_ParseTuple(args, "O!ni|p", &PyList_Type, &items, &indent, &level, &as_bytes))
        return NULL;
    if (indent < 0 || indent > 64 || level < 0 || level > LAID_OUT_DEPTH) {
        PyErr_SetString(PyExc_ValueError, "indent: 0 to 64; level: 0 to 64");
        return NULL;
    }
    Text text = {NULL, 0, 0, {NULL}, NULL, NULL};
    PyObject *result = NULL;
    /* (fin45) grown from the empty bytes, which ``_PyBytes_Resize`` replaces by a new one */
    if (as_bytes && (text.bytes = PyBytes_FromStringAndSize(NULL, 0)) == NULL) return NULL;
    /* room for the text of most items at once: grown from 4 KB by doubling, the text of 256
       entries (some 230 KB) was copied once more on the way (callgrind, a manifest of 30 k
       one-op iterations: 27.9 M instructions of realloc) */
    if (text_room(&text, LAID_OUT_ITEM_BYTES * PyList_GET_SIZE(items)) < 0) goto done;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(items); i++) {
        if ((i && text_add(&text, ",", 1) < 0) || text_line(&text, indent, level) < 0)
            goto done;
        PyObject *item = PyList_GET_ITEM(items, i);
        Py_INCREF(item);  /* (a str's repr, or a dict read, cannot drop it meanwhile) */
        int made = text_value(&text, item, indent, level);
        Py_DECREF(item);
        if (made < 0) goto done;
        if (made > 0) {
            result = Py_NewRef(Py_None);
            goto done;
        }
    }
    if (text.bytes != NULL) {  /* (fin45) its own size: shrunk in place */
        if (_PyBytes_Resize(&text.bytes, text.size) == 0) {
            result = text.bytes;
            text.bytes = NULL;
        }
        goto done;
    }
    result = PyUnicode_New(text.size, 127);
    if (result != NULL && text.size) memcpy(PyUnicode_1BYTE_DATA(result), text.at, (size_t)text.size);
done:
    if (as_bytes)
        Py_XDECREF(text.bytes);
    else
        PyMem_Free(text.at);
    PyMem_Free(text.keys);
    return result;
}


/* ---- small_pieces: many tiny compressed pieces, each a file created new ---- */

/* CRC-32 as zlib's ``crc32(data, crc)`` computes it (the gzip trailer's), eight bytes at a
   time by eight tables ("slicing by 8"), the bytes left one at a time: the parts it reads are
   a few hundred bytes (a byte at a time it took 690 instructions a piece of one-op
   iterations, 82 bytes each). */
static uint32_t crc_table[8][256];

static void crc_table_make(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320U ^ (c >> 1) : c >> 1;
        crc_table[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; n++)
        for (int t = 1; t < 8; t++)
            crc_table[t][n] = crc_table[0][crc_table[t - 1][n] & 0xFF]
                ^ (crc_table[t - 1][n] >> 8);
}

static uint32_t crc32_on(uint32_t crc, const unsigned char *at, Py_ssize_t n) {
    crc = ~crc;
    for (; n >= 8; n -= 8, at += 8) {
        uint32_t low = crc ^ ((uint32_t)at[0] | (uint32_t)at[1] << 8 | (uint32_t)at[2] << 16
                              | (uint32_t)at[3] << 24);
        crc = crc_table[7][low & 0xFF] ^ crc_table[6][(low >> 8) & 0xFF]
            ^ crc_table[5][(low >> 16) & 0xFF] ^ crc_table[4][low >> 24]
            ^ crc_table[3][at[4]] ^ crc_table[2][at[5]] ^ crc_table[1][at[6]]
            ^ crc_table[0][at[7]];
    }
    for (; n > 0; n--, at++) crc = crc_table[0][(crc ^ *at) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

static inline void put_le32(unsigned char *at, uint32_t v) {
    at[0] = (unsigned char)v; at[1] = (unsigned char)(v >> 8);
    at[2] = (unsigned char)(v >> 16); at[3] = (unsigned char)(v >> 24);
}

/* ``name`` created new in the folder open as ``folder_fd`` (``flags``), holding ``n`` bytes
   at ``data``: 0, or -1 with OSError set (the file closed). */
static int write_new(int folder_fd, const char *name, PyObject *name_obj, int flags,
                     const unsigned char *data, Py_ssize_t n) {
    int fd;
    do {
        fd = openat(folder_fd, name, flags, 0666);
    } while (fd < 0 && errno == EINTR && !PyErr_CheckSignals());
    if (fd < 0) {
        if (!PyErr_Occurred()) PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, name_obj);
        return -1;
    }
    while (n > 0) {
        ssize_t written = write(fd, data, (size_t)n);
        if (written < 0) {
            if (errno == EINTR && !PyErr_CheckSignals()) continue;
            int error = errno;
            close(fd);
            if (!PyErr_Occurred()) {
                errno = error;
                PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, name_obj);
            }
            return -1;
        }
        data += written;
        n -= written;
    }
    if (close(fd) < 0 && errno != EINTR) {
        PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, name_obj);
        return -1;
    }
    return 0;
}

static PyObject *small_pieces(PyObject *self, PyObject *args) {
    int folder_fd, flags;
    PyObject *names;
    Py_buffer data, sizes, lead, trail, tail;
    unsigned long lead_crc;
    Py_ssize_t head_size, stored_max;
    if (!PyArg_ParseTuple(args, "iiO!y*y*y*ky*y*nn", &folder_fd, &flags, &PyList_Type, &names,
                          &data, &sizes, &lead, &lead_crc, &trail, &tail, &head_size,
                          &stored_max))
        return NULL;
    PyObject *result = NULL;
    unsigned char *piece = NULL;
    Py_ssize_t count = PyList_GET_SIZE(names), done = 0, at = 0;
    if (sizes.itemsize != 4 || sizes.len / 4 < count || stored_max < 0 || stored_max > 0xFFFF) {
        PyErr_SetString(PyExc_ValueError, "sizes: int32, one a name; stored_max: 0 to 65535");
        goto end;
    }
    const int32_t *size_of = (const int32_t *)sizes.buf;
    piece = PyMem_Malloc((size_t)(lead.len + 5 + stored_max + trail.len + 8));
    if (piece == NULL) {
        PyErr_NoMemory();
        goto end;
    }
    memcpy(piece, lead.buf, (size_t)lead.len);
    for (; done < count; done++) {
        Py_ssize_t size = size_of[done];
        PyObject *name = PyList_GET_ITEM(names, done);
        if (size <= 0 || size > stored_max || at + size > data.len || !PyUnicode_Check(name)
                || !PyUnicode_IS_ASCII(name))
            break;  /* deflated, or named otherwise: the caller's */
        const unsigned char *part = (const unsigned char *)data.buf + at;
        unsigned char *p = piece + lead.len;
        /* one stored deflate block, not final: a byte, the length and its complement */
        p[0] = 0;
        p[1] = (unsigned char)size; p[2] = (unsigned char)(size >> 8);
        p[3] = (unsigned char)~size; p[4] = (unsigned char)(~size >> 8);
        memcpy(p + 5, part, (size_t)size);
        p += 5 + size;
        memcpy(p, trail.buf, (size_t)trail.len);
        p += trail.len;
        uint32_t crc = crc32_on(crc32_on((uint32_t)lead_crc, part, size),
                                (const unsigned char *)tail.buf, tail.len);
        put_le32(p, crc);
        put_le32(p + 4, (uint32_t)((uint64_t)(head_size + size + tail.len) & 0xFFFFFFFFU));
        p += 8;
        if (write_new(folder_fd, PyUnicode_AsUTF8(name), name, flags | O_CLOEXEC, piece,
                      p - piece) < 0)
            goto end;
        at += size;
    }
    result = Py_BuildValue("(nn)", done, at);
end:
    PyMem_Free(piece);
    PyBuffer_Release(&data); PyBuffer_Release(&sizes); PyBuffer_Release(&lead);
    PyBuffer_Release(&trail); PyBuffer_Release(&tail);
    return result;
}

/* ``Node``: an op of the structural detector's skeleton (``core.detect.skeleton.Node``, whose
   Python class is the fallback and says what each field holds). The same nine fields, each an
   object (a member of type T_OBJECT_EX, which the interpreter reads as fast as a Python slot),
   made by ``Node(sym, start, end, depth)`` with ``kids`` and ``opener`` None and ``gpu``,
   ``copies``, ``syncs`` 0, without a Python frame: the detector makes one for each op it keeps
   while it learns. */
typedef struct {
    PyObject_HEAD
    PyObject *sym, *start, *end, *kids, *depth, *gpu, *copies, *syncs, *opener;
} NodeObject;

static PyTypeObject NodeType;

static PyObject *node_vectorcall(PyObject *type, PyObject *const *args, size_t nargsf,
                                 PyObject *kwnames) {
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    if (kwnames != NULL && PyTuple_GET_SIZE(kwnames)) {
        PyErr_SetString(PyExc_TypeError, "Node() takes no keyword arguments");
        return NULL;
    }
    if (n != 4) {
        PyErr_Format(PyExc_TypeError, "Node() takes 4 arguments (sym, start, end, depth), "
                     "%zd given", n);
        return NULL;
    }
    NodeObject *node = PyObject_GC_New(NodeObject, (PyTypeObject *)type);
    if (node == NULL) return NULL;
    PyObject *zero = PyLong_FromLong(0);  /* (a small int: never fails) */
    node->sym = Py_NewRef(args[0]);
    node->start = Py_NewRef(args[1]);
    node->end = Py_NewRef(args[2]);
    node->kids = Py_NewRef(Py_None);
    node->depth = Py_NewRef(args[3]);
    node->gpu = zero;
    node->copies = Py_NewRef(zero);
    node->syncs = Py_NewRef(zero);
    node->opener = Py_NewRef(Py_None);
    PyObject_GC_Track(node);
    return (PyObject *)node;
}

static PyObject *node_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    if (kwds != NULL && PyDict_GET_SIZE(kwds)) {
        PyErr_SetString(PyExc_TypeError, "Node() takes no keyword arguments");
        return NULL;
    }
    return node_vectorcall((PyObject *)type, &PyTuple_GET_ITEM(args, 0),
                           (size_t)PyTuple_GET_SIZE(args), NULL);
}

static int node_traverse(NodeObject *node, visitproc visit, void *arg) {
    Py_VISIT(node->sym); Py_VISIT(node->start); Py_VISIT(node->end); Py_VISIT(node->kids);
    Py_VISIT(node->depth); Py_VISIT(node->gpu); Py_VISIT(node->copies); Py_VISIT(node->syncs);
    Py_VISIT(node->opener);
    return 0;
}

static int node_clear(NodeObject *node) {
    Py_CLEAR(node->sym); Py_CLEAR(node->start); Py_CLEAR(node->end); Py_CLEAR(node->kids);
    Py_CLEAR(node->depth); Py_CLEAR(node->gpu); Py_CLEAR(node->copies); Py_CLEAR(node->syncs);
    Py_CLEAR(node->opener);
    return 0;
}

static void node_dealloc(NodeObject *node) {
    PyObject_GC_UnTrack(node);
    Py_TRASHCAN_BEGIN(node, node_dealloc)
    node_clear(node);
    PyObject_GC_Del(node);
    Py_TRASHCAN_END
}

#define NODE_FIELD(name) {#name, T_OBJECT_EX, offsetof(NodeObject, name), 0, NULL}
static PyMemberDef node_members[] = {
    NODE_FIELD(sym), NODE_FIELD(start), NODE_FIELD(end), NODE_FIELD(kids), NODE_FIELD(depth),
    NODE_FIELD(gpu), NODE_FIELD(copies), NODE_FIELD(syncs), NODE_FIELD(opener),
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject NodeType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "stream_split._native.Node",
    .tp_basicsize = sizeof(NodeObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Node(sym, start, end, depth): an op of the detector's skeleton "
              "(core.detect.skeleton.Node).",
    .tp_new = node_new,
    .tp_vectorcall = node_vectorcall,
    .tp_traverse = (traverseproc)node_traverse,
    .tp_clear = (inquiry)node_clear,
    .tp_dealloc = (destructor)node_dealloc,
    .tp_members = node_members,
};


/* ``family(name)``: ``name`` with each run of decimal digits (``\d+`` of a ``str`` pattern:
   ``str.isdecimal``'s characters) folded into one ``N``; ``name`` itself where it holds none
   (``core.detect.skeleton.family``, whose Python fallback says why). */
static PyObject *family(PyObject *self, PyObject *name) {
    if (!PyUnicode_Check(name)) {
        PyErr_SetString(PyExc_TypeError, "family() takes a str");
        return NULL;
    }
    Py_ssize_t n = PyUnicode_GET_LENGTH(name), i, out = 0;
    int kind = PyUnicode_KIND(name);
    const void *data = PyUnicode_DATA(name);
    int ascii = PyUnicode_IS_ASCII(name), in_run = 0, digits = 0;
    for (i = 0; i < n; i++) {  /* the family's length */
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        int digit = ascii ? (c >= '0' && c <= '9') : Py_UNICODE_ISDECIMAL(c);
        if (digit) {
            digits = 1;
            if (!in_run) out++;
        } else {
            out++;
        }
        in_run = digit;
    }
    if (!digits) return Py_NewRef(name);
    Py_UCS4 *folded = PyMem_New(Py_UCS4, out ? out : 1);
    if (folded == NULL) return PyErr_NoMemory();
    Py_ssize_t k = 0;
    in_run = 0;
    for (i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        int digit = ascii ? (c >= '0' && c <= '9') : Py_UNICODE_ISDECIMAL(c);
        if (!digit) folded[k++] = c;
        else if (!in_run) folded[k++] = 'N';
        in_run = digit;
    }
    PyObject *result = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, folded, k);
    PyMem_Free(folded);
    return result;
}


/* ``ascii_without(name, words)``: whether ``name`` is ASCII and holds none of ``words`` (a
   tuple of lowercase ASCII ``str``) once lowered (``core.detect.search.ascii_without``, whose
   Python fallback says what it is for). */
static int without_words(PyObject *name, PyObject *words);

static PyObject *ascii_without(PyObject *self, PyObject *args) {
    PyObject *name, *words;
    if (!PyArg_ParseTuple(args, "UO!", &name, &PyTuple_Type, &words)) return NULL;
    int without = without_words(name, words);
    return without < 0 ? NULL : PyBool_FromLong(without);
}

/* ``ascii_without``'s answer for a ``str`` ``name`` and a tuple ``words``: 1, 0, or -1 with
   an error (also read by ``sym53_new``). */
static int without_words(PyObject *name, PyObject *words) {
    if (!PyUnicode_IS_ASCII(name)) return 0;
    const unsigned char *text = PyUnicode_1BYTE_DATA(name);
    Py_ssize_t n = PyUnicode_GET_LENGTH(name);
    for (Py_ssize_t w = 0; w < PyTuple_GET_SIZE(words); w++) {
        PyObject *word = PyTuple_GET_ITEM(words, w);
        if (!PyUnicode_Check(word) || !PyUnicode_IS_ASCII(word)) {
            PyErr_SetString(PyExc_TypeError, "ascii_without() takes ASCII words");
            return -1;
        }
        const unsigned char *sought = PyUnicode_1BYTE_DATA(word);
        Py_ssize_t m = PyUnicode_GET_LENGTH(word);
        for (Py_ssize_t i = 0; i + m <= n; i++) {
            Py_ssize_t j = 0;
            while (j < m) {
                unsigned char c = text[i + j];
                if (c >= 'A' && c <= 'Z') c += 'a' - 'A';
                if (c != sought[j]) break;
                j++;
            }
            if (j == m) return 0;
        }
    }
    return 1;
}

/* ``frame_items(buf, start, end, prefix)``: ``frame_times`` of the run of frames that
   ``buf[start:end]`` holds (the frames and the separators between them, no brackets), read
   in place: the run is not copied into an array of its own (on the 10x stripped resnet tile
   its frames are 80 of the 152 MB of text); and whether one of its strings begins with
   ``prefix`` (bytes; its first byte no JSON separator nor whitespace, and no key or fixed
   value of a frame, ``frame_words``, begins with it): ``(ts, dur,
   prefixed)``, or None. A run read here holds no backslash, and every quote in it opens or
   closes a string, so ``prefixed`` is whether ``b'"' + prefix`` is in its text
   (``decode.FrameRun._holds``): no search of the text is made for it. */
/* The strings of a frame that ``one_frame`` matches whole (not read by ``string``). */
static const char *const frame_words[] = {"ph", "X", "cat", "python_function", "name", "pid",
                                          "tid", "ts", "dur", "args", NULL};

static PyObject *frame_items(PyObject *self, PyObject *args) {
    Py_buffer view, prefix;
    Py_ssize_t start, end;
    if (!PyArg_ParseTuple(args, "y*nny*", &view, &start, &end, &prefix)) return NULL;
    int refused = start < 0 || end < start || end > view.len || prefix.len == 0 ||
                  strchr(",:}] \t\r\n", ((const char *)prefix.buf)[0]) != NULL;
    for (int k = 0; !refused && frame_words[k] != NULL; k++)
        refused = (size_t)prefix.len <= strlen(frame_words[k]) &&
                  memcmp(frame_words[k], prefix.buf, (size_t)prefix.len) == 0;
    if (refused) {
        PyBuffer_Release(&view);
        PyBuffer_Release(&prefix);
        PyErr_SetString(PyExc_ValueError, "frame_items() takes 0 <= start <= end <= len(buf) "
                        "and a prefix that begins with no separator nor any of a frame's "
                        "keys and fixed values");
        return NULL;
    }
    const unsigned char *text = (const unsigned char *)view.buf;
    Cursor c = {text + start, text + end, prefix.buf, (size_t)prefix.len, 0};
    Times out = {NULL, NULL, 0, 0};
    int got;
    Py_BEGIN_ALLOW_THREADS
    got = scan_items(&c, &out);
    if (got > 0) {
        skip_ws(&c);
        if (c.p != c.end) got = 0;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    PyBuffer_Release(&prefix);
    return times_result(got, &out, got > 0 ? PyBool_FromLong(c.prefixed) : NULL);
}

/* ---- frame_fields: each frame's thread and name ---- */

/* fields52: ``frame_fields(buf, start, end)`` reads the run of frames ``buf[start:end]`` as
   ``frame_items`` reads it (the same frames accepted, UTF-8 checked by the caller) and gives
   ``(threads, names)``: each frame's ``(pid, tid)`` and its name ("" for null), the values
   ``decode._PLAIN_FRAMES`` (msgspec) makes of them: an integer an int, a number with a
   fraction a float (correctly rounded, as ``number_parts`` reads it), a string a str, null
   None. None where the run is not read so, or a value is one this reader does not make as
   msgspec would (a negative zero, a string that is not UTF-8): the caller then decodes the
   frames with msgspec (``FrameRun._apart``). A thread like the frame's before is that
   frame's tuple, and a name seen lately in the run is the str made for it then
   (``NAME_CACHE`` slots): a run's frames share a few threads and repeat their names, and a
   name given again has its hash kept for the detector's lookups. */
#define NAME_CACHE 1024

typedef struct {
    const unsigned char *at;
    size_t len;
    PyObject *name;  /* borrowed: held by the list of names */
} CachedName;

static inline int same_span(const Span *a, const Span *b) {
    return a->kind == b->kind && a->len == b->len && memcmp(a->at, b->at, a->len) == 0;
}

/* A value of ``span`` ('n', 's' or '0'): a new reference; NULL with no error set where it
   is one that msgspec may make otherwise (the caller then refuses the run). */
static PyObject *span_value(const Span *span) {
    if (span->kind == 'n') return Py_NewRef(Py_None);
    if (span->kind == 's') {
        PyObject *text = PyUnicode_DecodeUTF8((const char *)span->at, (Py_ssize_t)span->len,
                                              NULL);
        if (text == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) PyErr_Clear();
        return text;
    }
    Cursor c = {span->at, span->at + span->len, NULL, 0, 0};
    double value;
    long long integer;
    int got = number_parts(&c, &value, &integer);
    if (got == 0 || c.p != c.end) return NULL;  /* (a negative zero: msgspec's own way) */
    return got == 2 ? PyLong_FromLongLong(integer) : PyFloat_FromDouble(value);
}

static inline size_t name_slot(const unsigned char *at, size_t len) {
    uint64_t head = 0, tail = 0;
    memcpy(&head, at, len < 8 ? len : 8);
    if (len > 8) memcpy(&tail, at + len - 8, 8);
    uint64_t h = (head * 0x9E3779B97F4A7C15ull) ^ (tail * 0xC2B2AE3D27D4EB4Full) ^ len;
    return (size_t)(h ^ (h >> 29)) & (NAME_CACHE - 1);
}

/* The name of ``span`` (a string): the one made for the same text lately, or a new one,
   remembered. A new reference; NULL with no error set where it is not UTF-8. */
static PyObject *frame_name_value(const Span *span, CachedName *cache, PyObject *empty) {
    if (span->kind == 'n') return Py_NewRef(empty);
    CachedName *slot = cache + name_slot(span->at, span->len);
    if (slot->name != NULL && slot->len == span->len &&
        memcmp(slot->at, span->at, span->len) == 0)
        return Py_NewRef(slot->name);
    PyObject *name = span_value(span);
    if (name != NULL) {
        slot->at = span->at;
        slot->len = span->len;
        slot->name = name;
    }
    return name;
}

static PyObject *frame_fields(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t start, end;
    if (!PyArg_ParseTuple(args, "y*nn", &view, &start, &end)) return NULL;
    if (start < 0 || end < start || end > view.len) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "frame_fields() takes 0 <= start <= end <= len(buf)");
        return NULL;
    }
    const unsigned char *text = (const unsigned char *)view.buf;
    Cursor c = {text + start, text + end, NULL, 0, 0};
    PyObject *threads = PyList_New(0), *names = PyList_New(0), *result = NULL;
    PyObject *empty = PyUnicode_FromStringAndSize("", 0);
    CachedName *cache = PyMem_Calloc(NAME_CACHE, sizeof(CachedName));
    FrameFields f, before;
    memset(&f, 0, sizeof f);
    memset(&before, 0, sizeof before);
    PyObject *thread = NULL;  /* borrowed: the frame before's, held by ``threads`` */
    double ts, dur;
    if (threads == NULL || names == NULL || empty == NULL || cache == NULL) {
        if (cache == NULL) PyErr_NoMemory();
        goto done;
    }
    do {
        if (!one_frame(&c, &ts, &dur, &f)) goto refused;
        if (thread != NULL && same_span(&f.pid, &before.pid) && same_span(&f.tid, &before.tid)) {
            if (PyList_Append(threads, thread) < 0) goto done;
        } else {
            PyObject *pid = span_value(&f.pid), *tid = pid ? span_value(&f.tid) : NULL;
            PyObject *pair = tid ? PyTuple_Pack(2, pid, tid) : NULL;
            Py_XDECREF(pid);
            Py_XDECREF(tid);
            if (pair == NULL) goto refused;
            int appended = PyList_Append(threads, pair);
            Py_DECREF(pair);
            if (appended < 0) goto done;
            thread = pair;
            before = f;
        }
        PyObject *name = frame_name_value(&f.name, cache, empty);
        if (name == NULL) goto refused;
        int appended = PyList_Append(names, name);
        Py_DECREF(name);
        if (appended < 0) goto done;
    } while (expect(&c, ",", 1));
    skip_ws(&c);
    if (c.p != c.end) goto refused;
    result = PyTuple_Pack(2, threads, names);
    goto done;
refused:
    if (!PyErr_Occurred()) result = Py_NewRef(Py_None);
done:
    PyMem_Free(cache);
    Py_XDECREF(empty);
    Py_XDECREF(threads);
    Py_XDECREF(names);
    PyBuffer_Release(&view);
    return result;
}

/* ---- slot_rows / with_slots: objects of a class with __slots__ to and from their values ---- */

/* The offsets of the slots ``names`` (a tuple of str) in the instances of ``type`` (its own
   ``__slots__``: ``tp_members`` of kind T_OBJECT_EX), in the order of ``names``; -1 and a
   ValueError where one is no such slot. */
#define SLOTS_MAX 64
#define SLOT_LAYOUTS 8

/* The offsets found last, by class and tuple of names (each held: neither can be freed and
   its address reused while it is here): a caller names its slots with one tuple, kept, and
   finding 26 names among 26 members by their text took some 7,000 instructions a call (a
   new record a boundary, ``records.made_of``). */
static struct {
    PyTypeObject *type;
    PyObject *names;
    Py_ssize_t offsets[SLOTS_MAX];
} slot_layouts[SLOT_LAYOUTS];
static int slot_layouts_next;

static int slot_offsets_found(PyTypeObject *type, PyObject *names, Py_ssize_t *offsets);

static int slot_offsets(PyTypeObject *type, PyObject *names, Py_ssize_t *offsets) {
    Py_ssize_t n = PyTuple_GET_SIZE(names);
    for (int k = 0; k < SLOT_LAYOUTS; k++) {
        if (slot_layouts[k].type == type && slot_layouts[k].names == names) {
            memcpy(offsets, slot_layouts[k].offsets, (size_t)n * sizeof(Py_ssize_t));
            return 0;
        }
    }
    if (slot_offsets_found(type, names, offsets) < 0) return -1;
    int k = slot_layouts_next;
    slot_layouts_next = (k + 1) % SLOT_LAYOUTS;
    Py_XDECREF(slot_layouts[k].type);
    Py_XDECREF(slot_layouts[k].names);
    slot_layouts[k].type = (PyTypeObject *)Py_NewRef((PyObject *)type);
    slot_layouts[k].names = Py_NewRef(names);
    memcpy(slot_layouts[k].offsets, offsets, (size_t)n * sizeof(Py_ssize_t));
    return 0;
}

/* ``slot_offsets`` found by their names among the type's members. */
static int slot_offsets_found(PyTypeObject *type, PyObject *names, Py_ssize_t *offsets) {
    Py_ssize_t n = PyTuple_GET_SIZE(names);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *name = PyTuple_GET_ITEM(names, i);
        const char *text = PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : NULL;
        if (text == NULL) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "slot names are str");
            return -1;
        }
        offsets[i] = -1;
        for (PyMemberDef *m = type->tp_members; m != NULL && m->name != NULL; m++) {
            if (m->type == T_OBJECT_EX && !(m->flags & READONLY) && strcmp(m->name, text) == 0) {
                offsets[i] = m->offset;
                break;
            }
        }
        if (offsets[i] < 0) {
            PyErr_Format(PyExc_ValueError, "%s has no slot %R", type->tp_name, name);
            return -1;
        }
    }
    return 0;
}

/* Whether each of the ``count`` objects of the list ``objects`` is of ``type`` exactly and
   holds a value in each slot at ``offsets`` (``names``' slots): 1, or 0 with a TypeError or an
   AttributeError (``caller`` names the function), as ``slot_rows`` and ``slot_columns`` read. */
static int all_slotted(PyObject *objects, Py_ssize_t count, PyTypeObject *type,
                       const Py_ssize_t *offsets, PyObject *names, const char *caller) {
    Py_ssize_t n = PyTuple_GET_SIZE(names);
    for (Py_ssize_t k = 0; k < count; k++) {
        PyObject *obj = PyList_GET_ITEM(objects, k);
        if (Py_TYPE(obj) != type) {
            PyErr_Format(PyExc_TypeError, "%s() takes objects of one class", caller);
            return 0;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            if (*(PyObject **)((char *)obj + offsets[i]) == NULL) {
                PyErr_Format(PyExc_AttributeError, "'%s' object has no attribute %R",
                             type->tp_name, PyTuple_GET_ITEM(names, i));
                return 0;
            }
        }
    }
    return 1;
}

/* slot_rows(objects, names): the tuple of each object's slots ``names``, in order (what
   ``operator.attrgetter(*names)`` gives, without a look-up in the type per value). Every
   object is of the class of the first, exactly (else TypeError); an unset slot raises
   AttributeError. */
static PyObject *slot_rows(PyObject *self, PyObject *args) {
    PyObject *objects, *names;
    if (!PyArg_ParseTuple(args, "O!O!", &PyList_Type, &objects, &PyTuple_Type, &names))
        return NULL;
    Py_ssize_t count = PyList_GET_SIZE(objects), n = PyTuple_GET_SIZE(names);
    Py_ssize_t offsets[SLOTS_MAX];
    if (n > SLOTS_MAX) {
        PyErr_SetString(PyExc_ValueError, "slot_rows() reads at most 64 slots");
        return NULL;
    }
    PyObject *rows = PyList_New(count);
    if (rows == NULL || count == 0) return rows;
    PyTypeObject *type = Py_TYPE(PyList_GET_ITEM(objects, 0));
    if (slot_offsets(type, names, offsets) < 0
        || !all_slotted(objects, count, type, offsets, names, "slot_rows"))
        goto fail;
    for (Py_ssize_t k = 0; k < count; k++) {
        PyObject *obj = PyList_GET_ITEM(objects, k);
        PyObject *row = PyTuple_New(n);
        if (row == NULL) goto fail;
        PyList_SET_ITEM(rows, k, row);
        for (Py_ssize_t i = 0; i < n; i++)
            PyTuple_SET_ITEM(row, i, Py_NewRef(*(PyObject **)((char *)obj + offsets[i])));
    }
    return rows;
fail:
    Py_DECREF(rows);
    return NULL;
}

/* Whether ``with_slots`` and ``one_with_slots`` can make objects of ``type`` with ``n`` slots
   set; a ValueError or TypeError where not. */
static int makes_slotted(PyTypeObject *type, Py_ssize_t n, const char *caller) {
    if (n > SLOTS_MAX) {
        PyErr_Format(PyExc_ValueError, "%s() sets at most 64 slots", caller);
        return 0;
    }
    if (!(type->tp_flags & Py_TPFLAGS_HEAPTYPE) || type->tp_alloc == NULL) {
        PyErr_Format(PyExc_TypeError, "%s() makes objects of a class of Python", caller);
        return 0;
    }
    return 1;
}

/* A new object of ``type`` (its ``tp_alloc``) whose slots at ``offsets`` hold ``values``
   (``n`` of them), in order. */
static PyObject *slotted(PyTypeObject *type, const Py_ssize_t *offsets, PyObject *const *values,
                         Py_ssize_t n) {
    PyObject *obj = type->tp_alloc(type, 0);
    if (obj == NULL) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject **slot = (PyObject **)((char *)obj + offsets[i]);
        Py_XSETREF(*slot, Py_NewRef(values[i]));
    }
    return obj;
}

/* with_slots(cls, names, rows): for each row (a tuple of len(names) values), a new object of
   ``cls`` (its ``tp_alloc``: no ``__new__`` nor ``__init__`` called) whose slots ``names``
   hold the row's values, in order: what a dataclass's ``__init__`` given every field makes,
   without a frame of Python per object. */
static PyObject *with_slots(PyObject *self, PyObject *args) {
    PyObject *cls, *names, *rows;
    if (!PyArg_ParseTuple(args, "O!O!O!", &PyType_Type, &cls, &PyTuple_Type, &names,
                          &PyList_Type, &rows))
        return NULL;
    PyTypeObject *type = (PyTypeObject *)cls;
    Py_ssize_t count = PyList_GET_SIZE(rows), n = PyTuple_GET_SIZE(names);
    Py_ssize_t offsets[SLOTS_MAX];
    if (!makes_slotted(type, n, "with_slots")) return NULL;
    if (slot_offsets(type, names, offsets) < 0) return NULL;
    PyObject *objects = PyList_New(count);
    if (objects == NULL) return NULL;
    for (Py_ssize_t k = 0; k < count; k++) {
        PyObject *row = PyList_GET_ITEM(rows, k);
        if (!PyTuple_Check(row) || PyTuple_GET_SIZE(row) != n) {
            PyErr_SetString(PyExc_ValueError, "with_slots() takes a tuple of a value a slot");
            goto fail;
        }
        PyObject *obj = slotted(type, offsets, &PyTuple_GET_ITEM(row, 0), n);
        if (obj == NULL) goto fail;
        PyList_SET_ITEM(objects, k, obj);
    }
    return objects;
fail:
    Py_DECREF(objects);
    return NULL;
}

/* one_with_slots(cls, names, *values): one object, as ``with_slots(cls, names, [values])[0]``
   makes it, its values given as arguments (vectorcall: no argument tuple parsed, no list made
   for one record): a new ``Boundary`` a boundary (``records.made_one``). */
static PyObject *one_with_slots(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 2 || !PyType_Check(args[0]) || !PyTuple_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "one_with_slots(cls, names, *values)");
        return NULL;
    }
    PyTypeObject *type = (PyTypeObject *)args[0];
    PyObject *names = args[1];
    Py_ssize_t n = PyTuple_GET_SIZE(names);
    Py_ssize_t offsets[SLOTS_MAX];
    if (!makes_slotted(type, n, "one_with_slots")) return NULL;
    if (nargs - 2 != n) {
        PyErr_SetString(PyExc_ValueError, "one_with_slots() takes a value a slot");
        return NULL;
    }
    if (slot_offsets(type, names, offsets) < 0) return NULL;
    return slotted(type, offsets, args + 2, n);
}

/* ---- slot_dicts: a dict of each object's slots (a manifest's entries) ---- */

/* ``round(value, 3)`` as the builtin gives it (``truthy``: ``value`` itself where it is
   false, ``round(v, 3) if v else v``): an exact int, a float that is 0, whole or not finite
   is its own rounding (a whole float's decimal rounding gives it back), without the call
   (``float.__round__`` with digits converts to decimal: some 2,000 instructions). New
   reference, or NULL with an error set. */
static PyObject *rounded3(PyObject *value, int truthy) {
    if (PyLong_CheckExact(value)) return Py_NewRef(value);
    if (PyFloat_CheckExact(value)) {
        double v = PyFloat_AS_DOUBLE(value);
        if (v == 0.0 || !isfinite(v) || v == floor(v)) return Py_NewRef(value);
    } else if (truthy) {
        int true_ = PyObject_IsTrue(value);
        if (true_ < 0) return NULL;
        if (!true_) return Py_NewRef(value);
    }
    return PyObject_CallMethod(value, "__round__", "i", 3);
}

/* The length shared by ``columns``, a tuple of ``(key, a list)`` pairs: each list's length,
   which must be ``count`` where ``count`` is not -1 (and is -1 where there is no column and
   ``count`` is -1); -2 with ``ValueError(message)`` where a pair is not so (``slot_dicts``,
   ``column_dicts``). */
static Py_ssize_t columns_length(PyObject *columns, Py_ssize_t count, const char *message) {
    for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(columns); j++) {
        PyObject *pair = PyTuple_GET_ITEM(columns, j);
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2
                || !PyList_Check(PyTuple_GET_ITEM(pair, 1))
                || (count >= 0 && PyList_GET_SIZE(PyTuple_GET_ITEM(pair, 1)) != count)) {
            PyErr_SetString(PyExc_ValueError, message);
            return -2;
        }
        count = PyList_GET_SIZE(PyTuple_GET_ITEM(pair, 1));
    }
    return count;
}

/* ---- fin43: the values every dict of a page shares, stored once ---- */

/* A copy of the dict ``template`` holding, for each ``(key, values)`` of ``columns`` (checked
   by ``columns_length``: ``count`` values each, ``count`` > 0) whose values are all the very
   same object and whose key ``template`` has, that value; ``shared[j]`` tells which columns
   it holds (``set_unshared_columns`` stores the others in each dict copied from it). A key
   not in ``template`` is stored in each dict instead, after the others, in the order of the
   columns (as a store a column at a time orders it; the keys of a call are distinct). At most
   ``SLOTS_MAX`` columns. New reference, or NULL with an error set. */
static PyObject *shared_template(PyObject *template, PyObject *columns, Py_ssize_t count,
                                 char *shared) {
    PyObject *base = PyDict_Copy(template);
    if (base == NULL) return NULL;
    for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(columns); j++) {
        PyObject *pair = PyTuple_GET_ITEM(columns, j);
        PyObject *key = PyTuple_GET_ITEM(pair, 0), *values = PyTuple_GET_ITEM(pair, 1);
        PyObject *value = PyList_GET_ITEM(values, 0);
        Py_ssize_t k = 1;
        while (k < count && PyList_GET_ITEM(values, k) == value) k++;
        int stored = k == count ? PyDict_Contains(template, key) : 0;
        if (stored > 0) stored = PyDict_SetItem(base, key, value) < 0 ? -1 : 1;
        if (stored < 0) {
            Py_DECREF(base);
            return NULL;
        }
        shared[j] = (char)stored;
    }
    return base;
}

/* ``d[key] = values[k]`` for each ``(key, values)`` of ``columns`` that ``shared`` (as
   ``shared_template`` set it) says its template does not hold; -1 where a store fails. */
static int set_unshared_columns(PyObject *d, PyObject *columns, const char *shared,
                                Py_ssize_t k) {
    for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(columns); j++) {
        if (shared[j]) continue;
        PyObject *pair = PyTuple_GET_ITEM(columns, j);
        if (PyDict_SetItem(d, PyTuple_GET_ITEM(pair, 0),
                           PyList_GET_ITEM(PyTuple_GET_ITEM(pair, 1), k)) < 0)
            return -1;
    }
    return 0;
}

/* ``d[name]`` = the slot at ``offset`` of ``obj`` (a value there, checked), ``rounded3``
   (truthy) where ``round``; -1 where it fails. */
static int store_slot(PyObject *d, PyObject *name, PyObject *obj, Py_ssize_t offset, int round) {
    PyObject *value = *(PyObject **)((char *)obj + offset);
    value = round ? rounded3(value, 1) : Py_NewRef(value);
    if (value == NULL) return -1;
    int set = PyDict_SetItem(d, name, value);
    Py_DECREF(value);
    return set;
}

/* slot_dicts(objects, template, names, rounded, columns): for each object (every one of the
   first one's class exactly), a copy of the dict ``template`` (its keys in the order wanted)
   whose key ``name`` holds the object's slot ``name`` for each of ``names``, the slot
   rounded (``rounded3``, truthy) for each of ``rounded``, and ``values[k]`` for each
   ``(key, values)`` of ``columns`` (a tuple; ``values`` a list of one value an object).
   A value that every object holds (the very same object: most of a page of records' fields
   are the same defaults) is stored once, in the copy of ``template`` that each dict is
   copied from (``shared_template``): 7 stores an entry, not 28, of a page of one-op
   iterations (a ``PyDict_SetItem`` is some 200 instructions). */
static PyObject *slot_dicts(PyObject *self, PyObject *args) {
    PyObject *objects, *template, *names, *rounded, *columns;
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!", &PyList_Type, &objects, &PyDict_Type, &template,
                          &PyTuple_Type, &names, &PyTuple_Type, &rounded, &PyTuple_Type,
                          &columns))
        return NULL;
    Py_ssize_t count = PyList_GET_SIZE(objects), n = PyTuple_GET_SIZE(names);
    Py_ssize_t m = PyTuple_GET_SIZE(rounded), width = PyTuple_GET_SIZE(columns);
    Py_ssize_t offsets[2 * SLOTS_MAX];
    char shared[2 * SLOTS_MAX], column_shared[SLOTS_MAX];
    if (n > SLOTS_MAX || m > SLOTS_MAX || width > SLOTS_MAX) {
        PyErr_SetString(PyExc_ValueError,
                        "slot_dicts() reads at most 64 slots of each kind, and 64 columns");
        return NULL;
    }
    if (columns_length(columns, count,
                       "slot_dicts() takes columns of (key, a list of a value an object)") < -1)
        return NULL;
    PyObject *dicts = PyList_New(count);
    if (dicts == NULL || count == 0) return dicts;
    PyObject *base = NULL;
    PyTypeObject *type = Py_TYPE(PyList_GET_ITEM(objects, 0));
    /* the slots of ``names`` then of ``rounded``: one list of offsets */
    if (slot_offsets(type, names, offsets) < 0 || slot_offsets(type, rounded, offsets + n) < 0)
        goto fail;
    /* every object checked (its class, its slots set) before a dict is made, and which
       slots hold the very same object in each */
    PyObject *first = PyList_GET_ITEM(objects, 0);
    memset(shared, 1, (size_t)(n + m));
    for (Py_ssize_t k = 0; k < count; k++) {
        PyObject *obj = PyList_GET_ITEM(objects, k);
        if (Py_TYPE(obj) != type) {
            PyErr_SetString(PyExc_TypeError, "slot_dicts() takes objects of one class");
            goto fail;
        }
        for (Py_ssize_t i = 0; i < n + m; i++) {
            PyObject *value = *(PyObject **)((char *)obj + offsets[i]);
            if (value == NULL) {
                PyErr_Format(PyExc_AttributeError, "'%s' object has no attribute %R",
                             type->tp_name, i < n ? PyTuple_GET_ITEM(names, i)
                                                  : PyTuple_GET_ITEM(rounded, i - n));
                goto fail;
            }
            if (value != *(PyObject **)((char *)first + offsets[i])) shared[i] = 0;
        }
    }
    base = shared_template(template, columns, count, column_shared);
    if (base == NULL) goto fail;
    for (Py_ssize_t i = 0; i < n + m; i++) {
        PyObject *name = i < n ? PyTuple_GET_ITEM(names, i) : PyTuple_GET_ITEM(rounded, i - n);
        int stored = shared[i] ? PyDict_Contains(template, name) : 0;
        if (stored < 0) goto fail;
        shared[i] = (char)stored;  /* (a key not in ``template`` goes in each dict, in order) */
        if (stored && store_slot(base, name, first, offsets[i], i >= n) < 0) goto fail;
    }
    for (Py_ssize_t k = 0; k < count; k++) {
        PyObject *obj = PyList_GET_ITEM(objects, k);
        PyObject *d = PyDict_Copy(base);
        if (d == NULL) goto fail;
        PyList_SET_ITEM(dicts, k, d);
        for (Py_ssize_t i = 0; i < n + m; i++) {
            if (!shared[i] && store_slot(d, i < n ? PyTuple_GET_ITEM(names, i)
                                                  : PyTuple_GET_ITEM(rounded, i - n),
                                         obj, offsets[i], i >= n) < 0)
                goto fail;
        }
        if (set_unshared_columns(d, columns, column_shared, k) < 0) goto fail;
    }
    Py_DECREF(base);
    return dicts;
fail:
    Py_XDECREF(base);
    Py_DECREF(dicts);
    return NULL;
}

/* rounded(values, truthy): ``[round(v, 3) for v in values]`` (a list), as ``rounded3`` makes
   each (``truthy``: ``v`` itself where it is false). */
static PyObject *rounded(PyObject *self, PyObject *args) {
    PyObject *values;
    int truthy;
    if (!PyArg_ParseTuple(args, "O!p", &PyList_Type, &values, &truthy)) return NULL;
    Py_ssize_t count = PyList_GET_SIZE(values);
    PyObject *out = PyList_New(count);
    if (out == NULL) return NULL;
    for (Py_ssize_t k = 0; k < count; k++) {
        PyObject *value = rounded3(PyList_GET_ITEM(values, k), truthy);
        if (value == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, k, value);
    }
    return out;
}

/* set_slots(objects, names, columns): for each object k (every one of the first one's class
   exactly), its slot ``names[i]`` set to ``columns[i][k]`` (each column a list of one value
   an object): what ``setattr`` a value at a time does, without a look-up in the type. */
static PyObject *set_slots(PyObject *self, PyObject *args) {
    PyObject *objects, *names, *columns;
    if (!PyArg_ParseTuple(args, "O!O!O!", &PyList_Type, &objects, &PyTuple_Type, &names,
                          &PyTuple_Type, &columns))
        return NULL;
    Py_ssize_t count = PyList_GET_SIZE(objects), n = PyTuple_GET_SIZE(names);
    Py_ssize_t offsets[SLOTS_MAX];
    if (n > SLOTS_MAX || PyTuple_GET_SIZE(columns) != n) {
        PyErr_SetString(PyExc_ValueError, "set_slots() sets at most 64 slots, a column each");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *column = PyTuple_GET_ITEM(columns, i);
        if (!PyList_Check(column) || PyList_GET_SIZE(column) != count) {
            PyErr_SetString(PyExc_ValueError, "set_slots() takes a list of a value an object");
            return NULL;
        }
    }
    if (count == 0) Py_RETURN_NONE;
    PyTypeObject *type = Py_TYPE(PyList_GET_ITEM(objects, 0));
    if (slot_offsets(type, names, offsets) < 0) return NULL;
    for (Py_ssize_t k = 0; k < count; k++) {
        if (Py_TYPE(PyList_GET_ITEM(objects, k)) != type) {
            PyErr_SetString(PyExc_TypeError, "set_slots() takes objects of one class");
            return NULL;
        }
    }
    for (Py_ssize_t k = 0; k < count; k++) {
        PyObject *obj = PyList_GET_ITEM(objects, k);
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject **slot = (PyObject **)((char *)obj + offsets[i]);
            Py_XSETREF(*slot, Py_NewRef(PyList_GET_ITEM(PyTuple_GET_ITEM(columns, i), k)));
        }
    }
    Py_RETURN_NONE;
}

/* column_dicts(template, columns): for each place k, a copy of the dict ``template`` (its
   keys in the order wanted) whose key ``key`` holds ``values[k]`` for each ``(key, values)``
   of ``columns`` (a tuple, at least one, at most 64; each ``values`` a list, all of one
   length). A column whose every value is the very same object is stored once
   (``shared_template``). */
static PyObject *column_dicts(PyObject *self, PyObject *args) {
    PyObject *template, *columns;
    char column_shared[SLOTS_MAX];
    if (!PyArg_ParseTuple(args, "O!O!", &PyDict_Type, &template, &PyTuple_Type, &columns))
        return NULL;
    if (PyTuple_GET_SIZE(columns) > SLOTS_MAX) {
        PyErr_SetString(PyExc_ValueError, "column_dicts() takes at most 64 columns");
        return NULL;
    }
    Py_ssize_t count = columns_length(
        columns, -1, "column_dicts() takes columns of (key, a list), all of one length");
    if (count == -2) return NULL;
    if (count < 0) {
        PyErr_SetString(PyExc_ValueError, "column_dicts() takes a column at least");
        return NULL;
    }
    PyObject *dicts = PyList_New(count);
    if (dicts == NULL || count == 0) return dicts;
    PyObject *base = shared_template(template, columns, count, column_shared);
    if (base == NULL) goto fail;
    for (Py_ssize_t k = 0; k < count; k++) {
        PyObject *d = PyDict_Copy(base);
        if (d == NULL) goto fail;
        PyList_SET_ITEM(dicts, k, d);
        if (set_unshared_columns(d, columns, column_shared, k) < 0) goto fail;
    }
    Py_DECREF(base);
    return dicts;
fail:
    Py_XDECREF(base);
    Py_DECREF(dicts);
    return NULL;
}

/* ---- joined_runs: a batch of decided events as one part an owner's run ---- */

/* ``joined_runs(pairs, started, base)`` -> ``(owners, parts, size)``, or None (nothing
   changed) where a pair is not a 2-tuple of an int above ``base`` and bytes: each run of
   pairs of one owner in a row as one part, its events joined by ",\n" with one before them
   where the owner's piece has begun (``started``, a bytearray, at owner - base: set for every
   run, grown as needed), and the parts' bytes in all (write.PieceWriter.add_many; the Python
   way is write._joined_parts). A run of one event whose piece has not begun is the event's
   own bytes object. */
static PyObject *joined_runs(PyObject *self, PyObject *args) {
    PyObject *pairs, *started;
    long long base;
    if (!PyArg_ParseTuple(args, "O!O!L", &PyList_Type, &pairs, &PyByteArray_Type, &started,
                          &base))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(pairs), most = 0;
    long long *at = PyMem_Malloc(sizeof(long long) * (size_t)(n ? n : 1));
    if (at == NULL) return PyErr_NoMemory();
    PyObject *owners = NULL, *parts = NULL, *result = NULL;
    for (Py_ssize_t i = 0; i < n; i++) {  /* all checked before anything changes */
        PyObject *pair = PyList_GET_ITEM(pairs, i);
        if (!PyTuple_CheckExact(pair) || PyTuple_GET_SIZE(pair) != 2
                || !PyLong_CheckExact(PyTuple_GET_ITEM(pair, 0))
                || !PyBytes_CheckExact(PyTuple_GET_ITEM(pair, 1))) {
            result = Py_NewRef(Py_None);
            goto end;
        }
        int overflow;
        long long owner = PyLong_AsLongLongAndOverflow(PyTuple_GET_ITEM(pair, 0), &overflow);
        if (overflow || owner <= base || owner - base > PY_SSIZE_T_MAX / 2) {
            result = Py_NewRef(Py_None);
            goto end;
        }
        at[i] = owner - base;
        if (at[i] >= most) most = (Py_ssize_t)at[i] + 1;
    }
    Py_ssize_t had = PyByteArray_GET_SIZE(started);
    if (most > had) {
        if (PyByteArray_Resize(started, most) < 0) goto end;
        memset(PyByteArray_AS_STRING(started) + had, 0, (size_t)(most - had));
    }
    char *begun = PyByteArray_AS_STRING(started);
    owners = PyList_New(0);
    parts = PyList_New(0);
    if (owners == NULL || parts == NULL) goto end;
    Py_ssize_t size = 0;
    for (Py_ssize_t i = 0, j; i < n; i = j) {
        Py_ssize_t length = PyBytes_GET_SIZE(PyTuple_GET_ITEM(PyList_GET_ITEM(pairs, i), 1));
        for (j = i + 1; j < n && at[j] == at[i]; j++)
            length += 2 + PyBytes_GET_SIZE(PyTuple_GET_ITEM(PyList_GET_ITEM(pairs, j), 1));
        int separated = begun[at[i]] != 0;
        begun[at[i]] = 1;
        PyObject *first = PyTuple_GET_ITEM(PyList_GET_ITEM(pairs, i), 1), *part;
        if (j == i + 1 && !separated) {
            part = Py_NewRef(first);
        } else {
            part = PyBytes_FromStringAndSize(NULL, length + (separated ? 2 : 0));
            if (part == NULL) goto end;
            char *to = PyBytes_AS_STRING(part);
            for (Py_ssize_t k = i; k < j; k++) {
                PyObject *event = PyTuple_GET_ITEM(PyList_GET_ITEM(pairs, k), 1);
                if (k > i || separated) {
                    to[0] = ',';
                    to[1] = '\n';
                    to += 2;
                }
                memcpy(to, PyBytes_AS_STRING(event), (size_t)PyBytes_GET_SIZE(event));
                to += PyBytes_GET_SIZE(event);
            }
        }
        size += PyBytes_GET_SIZE(part);
        int failed = PyList_Append(parts, part) < 0
            || PyList_Append(owners, PyTuple_GET_ITEM(PyList_GET_ITEM(pairs, i), 0)) < 0;
        Py_DECREF(part);
        if (failed) goto end;
    }
    result = Py_BuildValue("(OOn)", owners, parts, size);
end:
    PyMem_Free(at);
    Py_XDECREF(owners);
    Py_XDECREF(parts);
    return result;
}

/* ---- index_names: the names of pieces named by their index, a run of indices at once ---- */

/* ``index_names(head, first, count, digits, tail)`` -> ``[head + "%0<digits>d" % index +
   tail for index in range(first, first + count)]`` (``first`` >= 0, ``digits`` 1 to 20):
   each name made here, not by ``str.__mod__`` (some 2,000 instructions a name: a format
   parsed for each) (write.PieceFiles._run_names). */
static PyObject *index_names(PyObject *self, PyObject *args) {
    const char *head, *tail;
    Py_ssize_t head_len, tail_len, count;
    long long first;
    int digits;
    if (!PyArg_ParseTuple(args, "s#Lnis#", &head, &head_len, &first, &count, &digits, &tail,
                          &tail_len))
        return NULL;
    if (first < 0 || count < 0 || digits < 1 || digits > 20 || first > LLONG_MAX - count) {
        PyErr_SetString(PyExc_ValueError, "first and count: 0 or more; digits: 1 to 20");
        return NULL;
    }
    int ascii = 1;
    for (Py_ssize_t k = 0; k < head_len; k++) ascii &= (unsigned char)head[k] < 128;
    for (Py_ssize_t k = 0; k < tail_len; k++) ascii &= (unsigned char)tail[k] < 128;
    char *name = PyMem_Malloc((size_t)(head_len + 20 + tail_len));
    PyObject *names = PyList_New(count);
    if (name == NULL || names == NULL) {
        PyMem_Free(name);
        Py_XDECREF(names);
        return name == NULL ? PyErr_NoMemory() : NULL;
    }
    memcpy(name, head, (size_t)head_len);
    for (Py_ssize_t i = 0; i < count; i++) {
        char number[20];
        int length = 0;
        for (unsigned long long v = (unsigned long long)(first + i); v; v /= 10)
            number[length++] = (char)('0' + v % 10);
        char *at = name + head_len;
        for (int k = length; k < digits; k++) *at++ = '0';
        while (length) *at++ = number[--length];
        memcpy(at, tail, (size_t)tail_len);
        Py_ssize_t size = at + tail_len - name;
        PyObject *text;
        if (ascii) {
            text = PyUnicode_New(size, 127);
            if (text != NULL) memcpy(PyUnicode_DATA(text), name, (size_t)size);
        } else {
            text = PyUnicode_DecodeUTF8(name, size, NULL);
        }
        if (text == NULL) {
            PyMem_Free(name);
            Py_DECREF(names);
            return NULL;
        }
        PyList_SET_ITEM(names, i, text);
    }
    PyMem_Free(name);
    return names;
}

/* ---- fin42 ---- */

/* slot_columns(objects, names, alike=True): for each of the slots ``names``, the column of
   every object's value there (a list, objects in order), or, where every object holds the
   very same object there and ``alike``, that one in a 1-tuple: a page of iteration records as a file holds it
   (``records.pack_page``: most of a page's values are the same defaults, each pickled once
   then, not once a record). Every object is of the class of the first, exactly (else
   TypeError); an unset slot raises AttributeError. */
static PyObject *slot_columns(PyObject *self, PyObject *args) {
    PyObject *objects, *names;
    int alike = 1;
    if (!PyArg_ParseTuple(args, "O!O!|p", &PyList_Type, &objects, &PyTuple_Type, &names, &alike))
        return NULL;
    Py_ssize_t count = PyList_GET_SIZE(objects), n = PyTuple_GET_SIZE(names);
    Py_ssize_t offsets[SLOTS_MAX];
    if (n > SLOTS_MAX) {
        PyErr_SetString(PyExc_ValueError, "slot_columns() reads at most 64 slots");
        return NULL;
    }
    if (count == 0) {
        PyErr_SetString(PyExc_ValueError, "slot_columns() takes at least one object");
        return NULL;
    }
    PyTypeObject *type = Py_TYPE(PyList_GET_ITEM(objects, 0));
    if (slot_offsets(type, names, offsets) < 0
        || !all_slotted(objects, count, type, offsets, names, "slot_columns"))
        return NULL;
    PyObject *columns = PyList_New(n);
    if (columns == NULL) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t at = offsets[i];
        PyObject *first = *(PyObject **)((char *)PyList_GET_ITEM(objects, 0) + at);
        Py_ssize_t k = 1;
        while (alike && k < count
               && *(PyObject **)((char *)PyList_GET_ITEM(objects, k) + at) == first)
            k++;
        PyObject *column;
        if (alike && k == count) {
            column = PyTuple_Pack(1, first);
        } else {
            column = PyList_New(count);
            if (column != NULL)
                for (k = 0; k < count; k++)
                    PyList_SET_ITEM(column, k, Py_NewRef(
                        *(PyObject **)((char *)PyList_GET_ITEM(objects, k) + at)));
        }
        if (column == NULL) {
            Py_DECREF(columns);
            return NULL;
        }
        PyList_SET_ITEM(columns, i, column);
    }
    return columns;
}

/* with_slot_columns(cls, names, columns, count): ``count`` new objects of ``cls``, as
   ``with_slots`` makes them, object ``k``'s slot ``names[i]`` holding ``columns[i][k]``, or
   ``columns[i][0]`` where that is a 1-tuple (``slot_columns``' value). */
static PyObject *with_slot_columns(PyObject *self, PyObject *args) {
    PyObject *cls, *names, *columns;
    Py_ssize_t count;
    if (!PyArg_ParseTuple(args, "O!O!O!n", &PyType_Type, &cls, &PyTuple_Type, &names,
                          &PyList_Type, &columns, &count))
        return NULL;
    PyTypeObject *type = (PyTypeObject *)cls;
    Py_ssize_t n = PyTuple_GET_SIZE(names);
    Py_ssize_t offsets[SLOTS_MAX];
    if (!makes_slotted(type, n, "with_slot_columns")) return NULL;
    if (PyList_GET_SIZE(columns) != n || count < 0) {
        PyErr_SetString(PyExc_ValueError, "with_slot_columns() takes a column a slot");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *column = PyList_GET_ITEM(columns, i);
        if (!(PyTuple_CheckExact(column) && PyTuple_GET_SIZE(column) == 1)
            && !(PyList_CheckExact(column) && PyList_GET_SIZE(column) == count)) {
            PyErr_SetString(PyExc_ValueError, "with_slot_columns() takes a list of a value an "
                                              "object, or a 1-tuple, a slot");
            return NULL;
        }
    }
    if (slot_offsets(type, names, offsets) < 0) return NULL;
    PyObject *objects = PyList_New(count);
    if (objects == NULL) return NULL;
    PyObject *values[SLOTS_MAX];
    for (Py_ssize_t k = 0; k < count; k++) {
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *column = PyList_GET_ITEM(columns, i);
            values[i] = PyTuple_CheckExact(column) ? PyTuple_GET_ITEM(column, 0)
                                                   : PyList_GET_ITEM(column, k);
        }
        PyObject *obj = slotted(type, offsets, values, n);
        if (obj == NULL) {
            Py_DECREF(objects);
            return NULL;
        }
        PyList_SET_ITEM(objects, k, obj);
    }
    return objects;
}

/* ---- par42 ---- */

/* ---- pair_columns: decided (owner, place) pairs as two int64 columns ---- */

/* ``pair_columns(pairs, metadata)`` -> a bytearray of 2 * len(pairs) int64: the owners, then
   the places (-1 for a metadata event's, its bytes), or None where a pair is not a 2-tuple of
   an int and an int >= 0 (or bytes, its owner ``metadata``), or an int does not fit 64 bits
   (parallel._pair_columns; the Python way is two numpy.fromiter over the pairs). */
static PyObject *pair_columns(PyObject *self, PyObject *args) {
    PyObject *pairs;
    long long metadata;
    if (!PyArg_ParseTuple(args, "O!L", &PyList_Type, &pairs, &metadata)) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(pairs);
    PyObject *out = PyByteArray_FromStringAndSize(NULL, 2 * n * (Py_ssize_t)sizeof(int64_t));
    if (out == NULL) return NULL;
    int64_t *owners = (int64_t *)PyByteArray_AS_STRING(out), *places = owners + n;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pair = PyList_GET_ITEM(pairs, i);
        if (!PyTuple_CheckExact(pair) || PyTuple_GET_SIZE(pair) != 2
                || !PyLong_CheckExact(PyTuple_GET_ITEM(pair, 0)))
            goto refuse;
        int overflow;
        long long owner = PyLong_AsLongLongAndOverflow(PyTuple_GET_ITEM(pair, 0), &overflow);
        if (overflow) goto refuse;
        PyObject *place = PyTuple_GET_ITEM(pair, 1);
        long long at = -1;
        if (PyLong_CheckExact(place)) {
            at = PyLong_AsLongLongAndOverflow(place, &overflow);
            if (overflow || at < 0) goto refuse;
        } else if (!PyBytes_CheckExact(place) || owner != metadata) {
            goto refuse;
        }
        owners[i] = (int64_t)owner;
        places[i] = (int64_t)at;
    }
    return out;
refuse:
    Py_DECREF(out);
    Py_RETURN_NONE;
}

/* ---- op42 ---- */
/* kineto_events: a stretch of the other events (ops, runtime calls, kernels, flows), read
   into the structs msgspec makes of them (``validate.SlimEvent``) where they are written as
   Kineto (or ``json.dumps``, compact or not) writes them: no escape, no exponent, no number
   longer than ``number`` reads; anything else is left to msgspec. On the 10x stripped resnet
   tile's 220 k such events, 6,400 instructions an event where msgspec took 7,000, and each
   name made once (``cached_str``): ``boundaries`` 10,680.9 -> 10,326.1 M. */

/* Direct-mapped cache of the ASCII strings ``kineto_events`` made (names, categories,
   phases: a few hundred in a trace, each met thousands of times): a string met again is the
   same object, not made again, and its hash, once computed by the engine's look-ups, is
   kept. Strings longer than STR_CACHE_LONGEST are not kept (the cache holds at most
   STR_CACHE_SLOTS * STR_CACHE_LONGEST bytes, for the life of the process). */
#define STR_CACHE_BITS 11
#define STR_CACHE_SLOTS (1 << STR_CACHE_BITS)
/* (dec43: 512 -> 2048, at most 4 MiB then: the kernel names of the 10x stripped resnet tile,
   up to 2,004 bytes, were made again 7.3 k times, and hashed again by the engine) */
#define STR_CACHE_LONGEST 2048
static PyObject *str_cache[STR_CACHE_SLOTS];

static inline uint64_t load8(const unsigned char *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* ---- dec43: the cache slot of a string from all its bytes ---- */
/* Strings up to this many bytes are hashed whole for their slot (``str_slot``). */
#define STR_HASHED_WHOLE 64

/* The cache slot of the ``n`` bytes at ``s``: their length and their bytes mixed, 8 at a
   time (all of them up to STR_HASHED_WHOLE, else 5 words spread over them), each step a
   multiplication whose top bits (the slot) depend on every bit before (a slot shared by two
   strings only costs a miss: the bytes are compared). Where each byte of a short string was
   mixed in by FNV's prime, the top bits saw only the low bits of each step: every
   one-byte string (the phases ``X``, ``f``, ``s``) took one slot, and the 10x stripped resnet
   tile's 659 k names, categories and phases missed 150 k times; 8 k now. */
static inline size_t str_slot(const unsigned char *s, size_t n) {
    const uint64_t mix = 0xff51afd7ed558ccdull;
    uint64_t h = (uint64_t)n * 0x9E3779B97F4A7C15ull;
    if (n < 8) {
        uint64_t word = 0;
        memcpy(&word, s, n);
        h = (h ^ word) * mix;
    } else {
        if (n <= STR_HASHED_WHOLE) {
            for (size_t k = 0; k + 8 < n; k += 8) h = (h ^ load8(s + k)) * mix;
        } else {
            h = (h ^ load8(s)) * mix;
            h = (h ^ load8(s + n / 4)) * mix;
            h = (h ^ load8(s + n / 2 - 4)) * mix;
            h = (h ^ load8(s + 3 * n / 4 - 8)) * mix;
        }
        h = (h ^ load8(s + n - 8)) * 0xc4ceb9fe1a85ec53ull;
    }
    return (size_t)(h >> (64 - STR_CACHE_BITS));
}

/* The str of the UTF-8 bytes ``s`` (``n``): 1 (``*out`` a new reference), 0 (not UTF-8: not
   read here) or -1 (an error set). */
static int cached_str(const unsigned char *s, size_t n, PyObject **out) {
    size_t slot = str_slot(s, n);
    PyObject *hit = str_cache[slot];
    if (hit != NULL && (size_t)PyUnicode_GET_LENGTH(hit) == n &&
        memcmp(PyUnicode_1BYTE_DATA(hit), s, n) == 0) {
        *out = Py_NewRef(hit);
        return 1;
    }
    PyObject *str = PyUnicode_DecodeUTF8((const char *)s, (Py_ssize_t)n, NULL);
    if (str == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) return -1;
        PyErr_Clear();
        return 0;
    }
    if (PyUnicode_IS_COMPACT_ASCII(str) && n <= STR_CACHE_LONGEST)
        Py_XSETREF(str_cache[slot], Py_NewRef(str));
    *out = str;
    return 1;
}

/* A string value (no escape, no control character: ``string``) as a str: as ``cached_str``. */
static int str_value(Cursor *c, PyObject **out) {
    const unsigned char *s;
    size_t n;
    if (!string(c, &s, &n)) return 0;
    return cached_str(s, n, out);
}

/* ---- dec43: the last int of a field kept ---- */
/* The int made last for a field (``kineto_events``: the pid and the tid, the same in event
   after event), made again only where the value changed. */
typedef struct {
    PyObject *made;  /* (a reference owned; NULL: none yet) */
    long long value;
} LastInt;

/* ``value`` as an int: ``last``'s where it holds the same value (then kept there), else made. */
static PyObject *int_of(long long value, LastInt *last) {
    if (last == NULL) return PyLong_FromLongLong(value);
    if (last->made == NULL || last->value != value) {
        PyObject *made = PyLong_FromLongLong(value);
        if (made == NULL) return NULL;
        Py_XSETREF(last->made, made);
        last->value = value;
    }
    return Py_NewRef(last->made);
}

/* A number as ``number`` reads it, as msgspec makes it: an int where it has no fraction (at
   most MAX_INT_DIGITS digits: exact; ``int_of``, with ``last`` where not NULL), else a
   float. 1, 0 (not read here) or -1. ``whole``: only an integer is read. */
static inline __attribute__((always_inline)) int number_value(Cursor *c, int whole, LastInt *last, PyObject **out) {
    double real;
    long long integer;
    int got = number_parts(c, &real, &integer);
    if (got == 2) {
        *out = int_of(integer, last);
    } else if (got == 1 && !whole) {
        *out = PyFloat_FromDouble(real);
    } else {
        return 0;
    }
    return *out == NULL ? -1 : 1;
}

/* ``null``, as None: 1, or 0 where the value is not null. */
static inline int null_value(Cursor *c, PyObject **out) {
    if (!EXACT(c, "null")) return 0;
    *out = Py_NewRef(Py_None);
    return 1;
}

/* An object's member up to its value: its key (a string without escapes: ``*key``, ``*n``),
   the colon and the whitespace after it. 0 where they are not there. */
static inline int member_key(Cursor *c, const unsigned char **key, size_t *n) {
    if (!string(c, key, n) || !separator(c, ':')) return 0;
    skip_ws(c);
    return 1;
}

/* The ``args`` keys that a slim event keeps (``validate.ARG_TYPES`` and ``Input Dims``). */
static PyObject *arg_correlation, *arg_external_id, *arg_dims;

/* ``args`` as ``validate.SlimEvent`` types them: null, or an object whose ``correlation`` and ``External id`` are integers or null and whose ``Input Dims``
   is kept as its text (``raw_type``: ``msgspec.Raw``), the other keys' values checked and
   dropped; a dict of the keys kept, in their order. 1, 0 (not read here: another type, a key
   twice, a value ``value`` does not read) or -1. */
static inline __attribute__((always_inline)) int args_value(Cursor *c, PyObject *raw_type, PyObject **out) {
    if (null_value(c, out)) return 1;
    if (!EXACT(c, "{")) return 0;
    PyObject *d = PyDict_New();
    if (d == NULL) return -1;
    int got = 1, seen = 0;  /* (bits: the keys kept so far) */
    if (!expect(c, "}", 1)) {
        do {
            const unsigned char *key;
            size_t n;
            if (!member_key(c, &key, &n)) {
                got = 0;
                break;
            }
            PyObject *name = NULL, *v = NULL;
            int bit = 0;
            if (n == 11 && memcmp(key, "correlation", 11) == 0)
                name = arg_correlation, bit = 1;
            else if (n == 11 && memcmp(key, "External id", 11) == 0)
                name = arg_external_id, bit = 2;
            else if (n == 10 && memcmp(key, "Input Dims", 10) == 0)
                name = arg_dims, bit = 4;
            if (name == NULL) {
                if (!item(c, MAX_ARGS_DEPTH)) got = 0;
                continue;
            }
            if (seen & bit) {
                got = 0;
                break;
            }
            seen |= bit;
            if (name == arg_dims) {
                const unsigned char *s = c->p;
                if (!value(c, MAX_ARGS_DEPTH)) {
                    got = 0;
                    break;
                }
                PyObject *text = PyBytes_FromStringAndSize((const char *)s, c->p - s);
                if (text != NULL) {
                    v = PyObject_CallOneArg(raw_type, text);
                    Py_DECREF(text);
                }
                got = v == NULL ? -1 : 1;
            } else if (!null_value(c, &v)) {
                got = number_value(c, 1, NULL, &v);
            }
            if (got > 0 && PyDict_SetItem(d, name, v) < 0) got = -1;
            Py_XDECREF(v);
        } while (got > 0 && separator(c, ','));
        if (got > 0 && !expect(c, "}", 1)) got = 0;
    }
    if (got <= 0) {
        Py_DECREF(d);
        return got;
    }
    *out = d;
    return 1;
}

/* A slim event's fields, in the order of its struct (``validate.FIELD_TYPES``, ``args``). */
enum { F_PH, F_CAT, F_NAME, F_PID, F_TID, F_TS, F_DUR, F_ID, F_ARGS, F_COUNT };

/* Which field the key ``key`` (``n`` bytes) names, or -1: one the engine does not read. */
static int field_of(const unsigned char *key, size_t n) {
    if (n == 2) {
        if (key[0] == 'p' && key[1] == 'h') return F_PH;
        if (key[0] == 't' && key[1] == 's') return F_TS;
        if (key[0] == 'i' && key[1] == 'd') return F_ID;
    } else if (n == 3) {
        if (memcmp(key, "cat", 3) == 0) return F_CAT;
        if (memcmp(key, "pid", 3) == 0) return F_PID;
        if (memcmp(key, "tid", 3) == 0) return F_TID;
        if (memcmp(key, "dur", 3) == 0) return F_DUR;
    } else if (n == 4) {
        if (memcmp(key, "name", 4) == 0) return F_NAME;
        if (memcmp(key, "args", 4) == 0) return F_ARGS;
    }
    return -1;
}

/* The value of field ``f``, of a type ``validate.SlimEvent`` takes there: 1, 0 or -1.
   ``threads``: the last pid and tid made (``LastInt``). */
static inline __attribute__((always_inline)) int field_value(Cursor *c, int f, PyObject *raw_type,
                                                       LastInt *threads, PyObject **out) {
    switch (f) {
    case F_PH:
        return str_value(c, out);
    case F_CAT:
    case F_NAME:
        return null_value(c, out) ? 1 : str_value(c, out);
    case F_PID:
    case F_TID:
    case F_ID:  /* (``Any``: read here when a number, a string or null) */
        if (null_value(c, out)) return 1;
        if (c->p < c->end && *c->p == '"') return str_value(c, out);
        return number_value(c, 0, f == F_ID ? NULL : &threads[f - F_PID], out);
    case F_TS:
        return number_value(c, 0, NULL, out);
    case F_DUR:
        return null_value(c, out) ? 1 : number_value(c, 0, NULL, out);
    default:
        return args_value(c, raw_type, out);
    }
}

/* ---- dec43: an event's keys foreseen ---- */
/* Each field's key as Kineto writes it, quotes, colon and the space after it included: at
   most 8 bytes, compared as one word (``key_word``, the bytes beyond the key masked off by
   ``key_mask``). */
static const char *const field_keys[F_COUNT] = {
    "\"ph\": ", "\"cat\": ", "\"name\": ", "\"pid\": ", "\"tid\": ", "\"ts\": ", "\"dur\": ",
    "\"id\": ", "\"args\": "};
static uint64_t key_word[F_COUNT], key_mask[F_COUNT];
static unsigned char key_length[F_COUNT];

static void key_words_make(void) {
    for (int f = 0; f < F_COUNT; f++) {
        unsigned char word[8] = {0}, mask[8] = {0};
        size_t n = strlen(field_keys[f]);
        memcpy(word, field_keys[f], n);
        memset(mask, 0xFF, n);
        key_word[f] = load8(word);
        key_mask[f] = load8(mask);
        key_length[f] = (unsigned char)n;
    }
}

/* The slots of ``Foresight.next``: the field after each field, and after an object's start
   and after a key of no field. */
enum { AT_START = F_COUNT, AFTER_OTHER, AFTER_COUNT };

/* Which fields' keys are expected after each: the two met there last (at first Kineto's
   order for ops, kernels and runtime calls, then for flows: ``ph``, ``id``, ``pid``, ``tid``,
   ``ts``, ``cat``, ``name``), for ``foreseen_key`` to compare at once; -1: none. */
typedef struct {
    signed char next[AFTER_COUNT], also[AFTER_COUNT];
} Foresight;

static void foresight_init(Foresight *sight) {
    static const signed char kineto_next[AFTER_COUNT] = {
        [F_PH] = F_CAT, [F_CAT] = F_NAME, [F_NAME] = F_PID, [F_PID] = F_TID, [F_TID] = F_TS,
        [F_TS] = F_DUR, [F_DUR] = F_ARGS, [F_ID] = F_PID, [F_ARGS] = -1, [AT_START] = F_PH,
        [AFTER_OTHER] = -1};
    static const signed char flow_next[AFTER_COUNT] = {
        [F_PH] = F_ID, [F_CAT] = -1, [F_NAME] = -1, [F_PID] = -1, [F_TID] = -1,
        [F_TS] = F_CAT, [F_DUR] = -1, [F_ID] = -1, [F_ARGS] = -1, [AT_START] = -1,
        [AFTER_OTHER] = -1};
    memcpy(sight->next, kineto_next, sizeof kineto_next);
    memcpy(sight->also, flow_next, sizeof flow_next);
}

/* Whether field ``f``'s key is next, exactly as Kineto writes it: then the cursor past it and
   the whitespace after it (as ``member_key`` leaves it). */
static inline int key_next(Cursor *c, int f) {
    if (f < 0 || (load8(c->p) & key_mask[f]) != key_word[f]) return 0;
    c->p += key_length[f];
    skip_ws(c);
    return 1;
}

/* The field of the key at the cursor when it is one ``sight`` expects after ``after`` (a
   field, ``AT_START`` or ``AFTER_OTHER``), the cursor past it; else -1, the cursor where it
   was. */
static inline int foreseen_key(Cursor *c, const Foresight *sight, int after) {
    if (c->end - c->p < 8) return -1;
    if (key_next(c, sight->next[after])) return sight->next[after];
    if (key_next(c, sight->also[after])) return sight->also[after];
    return -1;
}

/* ``sight`` told that field ``f`` (not -1) came after ``after`` where it was not foreseen. */
static inline void foresight_learn(Foresight *sight, int after, int f) {
    sight->also[after] = sight->next[after];
    sight->next[after] = (signed char)f;
}

/* One event (any keys in any order) as ``event_type`` (its fields ``F_*``, in order; None
   where absent): 1 (``*out``), 0 or -1. Each key is first compared with the one ``sight``
   expects there (``foreseen_key``), else read and looked up (``field_of``), and then
   expected there next time: on the 10x stripped resnet tile's 220 k events, ??? -> ???
   instructions an event. */
static int kineto_event(Cursor *c, Foresight *sight, LastInt *threads, PyObject *event_type,
                        PyObject *raw_type, PyObject **out) {
    PyObject *fields[F_COUNT] = {NULL};
    if (!expect(c, "{", 1)) return 0;
    int got = 1, after = AT_START;
    if (!expect(c, "}", 1)) {
        do {
            int f = foreseen_key(c, sight, after);
            if (f < 0) {
                const unsigned char *key;
                size_t n;
                if (!member_key(c, &key, &n)) {
                    got = 0;
                    break;
                }
                f = field_of(key, n);
                if (f >= 0) foresight_learn(sight, after, f);
            }
            if (f < 0) {
                if (!item(c, MAX_ARGS_DEPTH)) got = 0;
            } else if (fields[f] != NULL) {
                got = 0;  /* a key twice */
            } else {
                got = field_value(c, f, raw_type, threads, &fields[f]);
            }
            after = f < 0 ? AFTER_OTHER : f;
        } while (got > 0 && separator(c, ','));
        if (got > 0 && !expect(c, "}", 1)) got = 0;
    }
    if (got > 0) {
        for (int k = 0; k < F_COUNT; k++)
            if (fields[k] == NULL) fields[k] = Py_NewRef(Py_None);
        *out = PyObject_Vectorcall(event_type, fields, F_COUNT, NULL);
        if (*out == NULL) got = -1;
    }
    for (int k = 0; k < F_COUNT; k++) Py_XDECREF(fields[k]);
    return got;
}

/* What ``kineto_event`` reads with made once: the keys' words, the ``args`` keys kept. 0, or
   -1 with an error. */
static int kineto_ready(void) {
    if (arg_correlation != NULL) return 0;
    key_words_make();
    arg_correlation = PyUnicode_InternFromString("correlation");
    arg_external_id = PyUnicode_InternFromString("External id");
    arg_dims = PyUnicode_InternFromString("Input Dims");
    if (arg_correlation == NULL || arg_external_id == NULL || arg_dims == NULL) {
        Py_CLEAR(arg_correlation);
        return -1;
    }
    return 0;
}

/* The list of events read, ``events``, as ``kineto_events`` answers, once the reading ended
   at ``c`` (``got``: 1, 0 or -1 as ``kineto_event`` says): ``events`` where nothing but
   whitespace follows, None where not read, NULL with an error; the buffer read released. */
static PyObject *kineto_list_made(Cursor *c, int got, Py_buffer *view, LastInt *threads,
                                  PyObject *events) {
    if (got > 0) {
        skip_ws(c);
        if (c->p != c->end) got = 0;
    }
    PyBuffer_Release(view);
    Py_XDECREF(threads[0].made);
    Py_XDECREF(threads[1].made);
    if (got <= 0) {
        Py_XDECREF(events);
        if (got < 0) return NULL;
        Py_RETURN_NONE;
    }
    return events;
}

/* kineto_events(buf, start, end, event_type, raw_type): the events of ``buf[start:end]``
   (UTF-8; separated by commas, no brackets around them) as ``event_type`` (``SlimEvent``)
   made of what msgspec would read of each, or None where one is not read here (a key
   twice, an escape, an exponent, another type: msgspec then reads the stretch). */
static PyObject *kineto_events(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t start, end;
    PyObject *event_type, *raw_type;
    if (!PyArg_ParseTuple(args, "y*nnOO", &view, &start, &end, &event_type, &raw_type))
        return NULL;
    if (start < 0 || end < start || end > view.len) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "kineto_events() takes 0 <= start <= end <= len(buf)");
        return NULL;
    }
    if (kineto_ready() < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    const unsigned char *text = (const unsigned char *)view.buf;
    Cursor c = {text + start, text + end, NULL, 0, 0};
    Foresight sight;
    foresight_init(&sight);
    LastInt threads[2] = {{NULL, 0}, {NULL, 0}};  /* (the pid's, the tid's) */
    PyObject *events = PyList_New(0);
    int got = events == NULL ? -1 : 1;
    while (got > 0) {
        PyObject *event = NULL;
        got = kineto_event(&c, &sight, threads, event_type, raw_type, &event);
        if (got <= 0) break;
        if (PyList_Append(events, event) < 0) got = -1;
        Py_DECREF(event);
        if (!expect(&c, ",", 1)) break;
    }
    return kineto_list_made(&c, got, &view, threads, events);
}


/* ---- par48: event_rows: the events split --workers' workers write (parallel.EventRow arrays), read as kineto_events reads ---- */

/* One event written as a JSON array of its fields in ``event_type``'s order (``F_*``: a
   ``parallel.EventRow``), each read as ``field_value`` reads it: 1 (``*out``), 0 (not read
   here: msgspec then reads the events) or -1. */
static int par48_row(Cursor *c, LastInt *threads, PyObject *event_type, PyObject *raw_type,
                     PyObject **out) {
    PyObject *fields[F_COUNT] = {NULL};
    int got = expect(c, "[", 1);
    for (int f = 0; got > 0 && f < F_COUNT; f++) {
        if (f > 0 && !separator(c, ',')) got = 0;
        if (got > 0) {
            skip_ws(c);
            got = field_value(c, f, raw_type, threads, &fields[f]);
        }
    }
    if (got > 0 && !expect(c, "]", 1)) got = 0;
    if (got > 0) {
        *out = PyObject_Vectorcall(event_type, fields, F_COUNT, NULL);
        if (*out == NULL) got = -1;
    }
    for (int k = 0; k < F_COUNT; k++) Py_XDECREF(fields[k]);
    return got;
}

/* event_rows(buf, event_type, raw_type): the events of ``buf``, a JSON array of events
   written as arrays of their fields (``parallel.EventRow``, msgspec's compact JSON) or null,
   as ``event_type`` (``validate.SlimEvent``, the struct the one-stream decoder makes) or
   None, each field read as ``kineto_events`` reads it (its strings from the cache of
   strings: the engine's process hashes a name once, not once an event); None where one is
   not read here (msgspec then reads them). */
static PyObject *event_rows(PyObject *self, PyObject *args) {
    Py_buffer view;
    PyObject *event_type, *raw_type;
    if (!PyArg_ParseTuple(args, "y*OO", &view, &event_type, &raw_type)) return NULL;
    if (kineto_ready() < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    const unsigned char *text = (const unsigned char *)view.buf;
    Cursor c = {text, text + view.len, NULL, 0, 0};
    LastInt threads[2] = {{NULL, 0}, {NULL, 0}};  /* (the pid's, the tid's) */
    PyObject *events = PyList_New(0);
    int got = events == NULL ? -1 : expect(&c, "[", 1);
    if (got > 0 && !expect(&c, "]", 1)) {
        do {
            PyObject *event = NULL;
            if (literal_null(&c))
                event = Py_NewRef(Py_None);
            else
                got = par48_row(&c, threads, event_type, raw_type, &event);
            if (got > 0 && PyList_Append(events, event) < 0) got = -1;
            Py_XDECREF(event);
        } while (got > 0 && separator(&c, ','));
        if (got > 0 && !expect(&c, "]", 1)) got = 0;
    }
    return kineto_list_made(&c, got, &view, threads, events);
}


/* ---- names44: a main thread's new top-level op, counted (skeleton.add_root) ---- */

/* The slots ``add_root`` reads and sets: of the skeleton (``skeleton.ThreadSkeleton``) and
   of its counts (``skeleton.RootCounts``), found by name once per class (``slot_offsets``). */
enum { ROOT_ROOTS, ROOT_BUSY, ROOT_SEEN, ROOT_KID_SEEN, ROOT_SIFT_AT, ROOT_MAIN, ROOT_FRAMES,
       ROOT_STACK, ROOT_SLOTS };
enum { COUNT_SEEN, COUNT_PAIRS, COUNT_LAST, COUNT_LAST_COUNT, COUNT_EXACT, COUNT_MARKED,
       COUNT_SINGLES, COUNT_SLOTS };
static PyObject *root_slot_names, *count_slot_names;

#define SLOT_AT(obj, offset) (*(PyObject **)((char *)(obj) + (offset)))

/* The slot at ``offset`` of ``obj`` set to ``value`` (a new reference, taken). */
static void slot_set(PyObject *obj, Py_ssize_t offset, PyObject *value) {
    PyObject *old = SLOT_AT(obj, offset);
    SLOT_AT(obj, offset) = value;
    Py_XDECREF(old);
}

/* The pair (``before``, ``sym``) counted once more in ``counts``' pairs (``RootCounts._pair``):
   once some pair is seen ``least`` times (one of a kind with itself, ``least - 1``), the row is
   exact and the pairs are dropped. 0, or -1 with an exception. */
static int count_pair(PyObject *counts, const Py_ssize_t *at, PyObject *before, PyObject *sym,
                      Py_ssize_t least) {
    PyObject *pairs = SLOT_AT(counts, at[COUNT_PAIRS]);
    if (pairs == Py_None) {
        pairs = PyDict_New();
        if (pairs == NULL) return -1;
        slot_set(counts, at[COUNT_PAIRS], pairs);
    }
    PyObject *key = PyTuple_Pack(2, before, sym);
    if (key == NULL) return -1;
    PyObject *had = PyDict_GetItemWithError(pairs, key);
    Py_ssize_t n = 1;
    if (had != NULL) {
        n = PyLong_AsSsize_t(had) + 1;
        if (n == 0 && PyErr_Occurred()) { Py_DECREF(key); return -1; }
    } else if (PyErr_Occurred()) { Py_DECREF(key); return -1; }
    PyObject *count = PyLong_FromSsize_t(n);
    int failed = count == NULL || PyDict_SetItem(pairs, key, count) < 0;
    Py_XDECREF(count);
    Py_DECREF(key);
    if (failed) return -1;
    int alike = 0;
    if (n == least - 1 && (alike = PyObject_RichCompareBool(before, sym, Py_EQ)) < 0) return -1;
    if (n >= least || alike) {
        slot_set(counts, at[COUNT_EXACT], Py_NewRef(Py_True));
        slot_set(counts, at[COUNT_PAIRS], Py_NewRef(Py_None));
    }
    return 0;
}

/* ``counts`` (a ``RootCounts``) takes the next top-level op ``node`` (``RootCounts.add``, the
   fallback; ``marker``: its kind is a loop marker). 0, or -1 with an exception. */
static int count_root(PyObject *counts, const Py_ssize_t *at, PyObject *node, int marker,
                      Py_ssize_t least, PyObject *repeat) {
    PyObject *seen = SLOT_AT(counts, at[COUNT_SEEN]);
    if (!PyDict_CheckExact(seen)) {
        PyErr_SetString(PyExc_TypeError, "add_root: the counts' _seen is not a dict");
        return -1;
    }
    PyObject *sym = ((NodeObject *)node)->sym, *before = SLOT_AT(counts, at[COUNT_LAST]);
    if (before != Py_None) {
        Py_ssize_t last = PyLong_AsSsize_t(SLOT_AT(counts, at[COUNT_LAST_COUNT]));
        if (last == -1 && PyErr_Occurred()) return -1;
        if (last == 1) {  /* its only occurrence, just before: ``node`` follows it */
            if (PyDict_SetItem(seen, before, node) < 0) return -1;
        } else if (SLOT_AT(counts, at[COUNT_EXACT]) != Py_True) {
            if (count_pair(counts, at, before, sym, least) < 0) return -1;
        }
    }
    PyObject *count = PyDict_GetItemWithError(seen, sym), *now;
    Py_ssize_t singles = PyLong_AsSsize_t(SLOT_AT(counts, at[COUNT_SINGLES]));
    if (singles == -1 && PyErr_Occurred()) return -1;
    if (count == NULL && PyErr_Occurred()) return -1;
    PyObject *first = NULL;  /* the node that followed its first occurrence */
    if (count == NULL || PyLong_CheckExact(count)) {
        Py_ssize_t n = count == NULL ? 0 : PyLong_AsSsize_t(count);
        if (n == -1 && PyErr_Occurred()) return -1;
        now = PyLong_FromSsize_t(n + 1);
        singles += n == 0 ? 1 : n == 1 ? -1 : 0;
    } else {  /* its second occurrence: the pair of its first is counted now */
        first = Py_NewRef(count);
        now = Py_NewRef(repeat);
        singles -= 1;
    }
    if (now == NULL || PyDict_SetItem(seen, sym, now) < 0) {
        Py_XDECREF(now); Py_XDECREF(first);
        return -1;
    }
    slot_set(counts, at[COUNT_LAST_COUNT], now);
    PyObject *left = PyLong_FromSsize_t(singles);
    if (left == NULL) { Py_XDECREF(first); return -1; }
    slot_set(counts, at[COUNT_SINGLES], left);
    if (first != NULL) {
        int failed = 0;
        if (SLOT_AT(counts, at[COUNT_EXACT]) != Py_True) {
            PyObject *after = PyObject_GetAttrString(first, "sym");
            failed = after == NULL || count_pair(counts, at, sym, after, least) < 0;
            Py_XDECREF(after);
        }
        Py_DECREF(first);
        if (failed) return -1;
    }
    slot_set(counts, at[COUNT_LAST], Py_NewRef(sym));
    if (marker) slot_set(counts, at[COUNT_MARKED], Py_NewRef(Py_True));
    return 0;
}

/* The offsets of the slots of the skeleton ``state`` (``at``) and of its counts
   (``count_at``; NULL: not asked), every one of them set: 0, or -1 with an exception. */
static int root_offsets(PyObject *state, Py_ssize_t *at, Py_ssize_t *count_at) {
    if (root_slot_names == NULL) {
        root_slot_names = Py_BuildValue("(ssssssss)", "roots", "busy", "seen", "kid_seen",
                                        "sift_at", "main", "frames", "stack");
        count_slot_names = Py_BuildValue("(sssssss)", "_seen", "_pairs", "_last", "last_count",
                                         "exact", "marked", "singles");
        if (root_slot_names == NULL || count_slot_names == NULL) {
            Py_CLEAR(root_slot_names); Py_CLEAR(count_slot_names);
            return -1;
        }
    }
    if (slot_offsets(Py_TYPE(state), root_slot_names, at) < 0) return -1;
    for (int i = 0; i < ROOT_SLOTS; i++) {
        if (SLOT_AT(state, at[i]) == NULL) {
            PyErr_SetString(PyExc_AttributeError, "add_root: a slot of the skeleton is unset");
            return -1;
        }
    }
    if (count_at == NULL) return 0;  /* (the skeleton's alone) */
    PyObject *counts = SLOT_AT(state, at[ROOT_SEEN]);
    if (slot_offsets(Py_TYPE(counts), count_slot_names, count_at) < 0) return -1;
    for (int i = 0; i < COUNT_SLOTS; i++) {
        if (SLOT_AT(counts, count_at[i]) == NULL) {
            PyErr_SetString(PyExc_AttributeError, "add_root: a slot of the counts is unset");
            return -1;
        }
    }
    return 0;
}

/* ``add_root``'s work on ``state`` (its slots and its counts' at ``at`` and ``count_at``):
   the answer (a new reference), or NULL with an exception. */
static PyObject *root_added(PyObject *state, const Py_ssize_t *at, const Py_ssize_t *count_at,
                            PyObject *node, int marker, Py_ssize_t least, PyObject *repeat) {
    PyObject *counts = SLOT_AT(state, at[ROOT_SEEN]), *roots = SLOT_AT(state, at[ROOT_ROOTS]);
    if (!PyList_Check(roots) || PyList_Append(roots, node) < 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "add_root: roots not a list");
        return NULL;
    }
    NodeObject *op = (NodeObject *)node;
    PyObject *took = PyNumber_Subtract(op->end, op->start);
    if (took == NULL) return NULL;
    PyObject *busy = PyNumber_InPlaceAdd(SLOT_AT(state, at[ROOT_BUSY]), took);
    Py_DECREF(took);
    if (busy == NULL) return NULL;
    slot_set(state, at[ROOT_BUSY], busy);
    Py_INCREF(counts);  /* (held while it is changed) */
    int failed = count_root(counts, count_at, node, marker, least, repeat) < 0;
    PyObject *singles = Py_NewRef(SLOT_AT(counts, count_at[COUNT_SINGLES]));
    Py_DECREF(counts);
    if (failed) { Py_DECREF(singles); return NULL; }
    PyObject *kid_seen = SLOT_AT(state, at[ROOT_KID_SEEN]);
    if (kid_seen != Py_None) {
        if (!PyDict_Check(kid_seen)) {
            Py_DECREF(singles);
            PyErr_SetString(PyExc_TypeError, "add_root: kid_seen is neither None nor a dict");
            return NULL;
        }
        PyDict_Clear(kid_seen);
    }
    PyObject *sift = PyObject_RichCompare(singles, SLOT_AT(state, at[ROOT_SIFT_AT]), Py_GT);
    Py_DECREF(singles);
    return sift;
}

/* ``least`` and ``repeat`` (``Rules.min_instances``, ``REPEAT``) of an argument list: 0, or
   -1 with an exception. */
static int root_rules(PyObject *least_arg, PyObject *repeat, Py_ssize_t *least) {
    if (!PyLong_CheckExact(repeat)) {
        PyErr_SetString(PyExc_TypeError, "repeat is an int");
        return -1;
    }
    *least = PyLong_AsSsize_t(least_arg);
    return *least == -1 && PyErr_Occurred() ? -1 : 0;
}

/* add_root(state, node, marker, least, repeat) -> bool: see the method table. */
static PyObject *add_root(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "add_root(state, node, marker, least, repeat)");
        return NULL;
    }
    PyObject *state = args[0], *node = args[1];
    Py_ssize_t least, at[ROOT_SLOTS], count_at[COUNT_SLOTS];
    if (Py_TYPE(node) != &NodeType) {
        PyErr_SetString(PyExc_TypeError, "add_root takes a native Node");
        return NULL;
    }
    int marker = PyObject_IsTrue(args[2]);
    if (marker < 0 || root_rules(args[3], args[4], &least) < 0) return NULL;
    if (root_offsets(state, at, count_at) < 0) return NULL;
    return root_added(state, at, count_at, node, marker, least, args[4]);
}

/* sym53: the symbol of ``name``, not in ``sym_of`` (``Symbols.sym_of``; ``names``, its
   ``names``), that makes a family of its own (``Symbols.new``'s common case: a name without
   digits, or whose family is not known yet), made here as ``new`` makes it: its family (as
   ``family``) appended to ``names``, entered in ``sym_of``, and where it may be a loop
   marker (``marks``: ``(LOOP_MARKER_SHORTEST, LOOP_MARKER_WORDS, marker_match)``; no
   ``ascii_without`` answer first) asked of ``marker_match``, added to ``markers`` if it is.
   A name whose family is known (it joins the table: ``Symbols._digit_names``), or not a
   ``str``, is ``symbols.new``'s (``new_name``). A new reference, or NULL with an error.
   (100 k numbered names, each its own family: ``new`` took 5.8 k instructions each,
   callgrind.) */
static PyObject *sym53_new(PyObject *symbols, PyObject *name, PyObject *sym_of,
                           PyObject *markers, PyObject *marks, PyObject *new_name) {
    static PyObject *names_name;
    if (names_name == NULL && (names_name = PyUnicode_InternFromString("names")) == NULL)
        return NULL;
    if (!PyUnicode_Check(name) || !PyTuple_Check(marks) || PyTuple_GET_SIZE(marks) != 3
        || !PyTuple_Check(PyTuple_GET_ITEM(marks, 1)))
        return PyObject_CallMethodOneArg(symbols, new_name, name);
    PyObject *fam = family(NULL, name);
    if (fam == NULL) return NULL;
    if (fam != name) {  /* it has digits: its family may be known */
        int known = PyDict_Contains(sym_of, fam);
        if (known != 0) {
            Py_DECREF(fam);
            return known < 0 ? NULL : PyObject_CallMethodOneArg(symbols, new_name, name);
        }
    }
    PyObject *names = PyObject_GetAttr(symbols, names_name), *sym = NULL;
    if (names == NULL || !PyList_CheckExact(names)) {
        if (names != NULL) PyErr_SetString(PyExc_TypeError, "root_op: names is a list");
        goto done;
    }
    sym = PyLong_FromSsize_t(PyList_GET_SIZE(names));
    if (sym == NULL || PyList_Append(names, fam) < 0 || PyDict_SetItem(sym_of, fam, sym) < 0)
        goto failed;
    Py_ssize_t shortest = PyLong_AsSsize_t(PyTuple_GET_ITEM(marks, 0));
    if (shortest == -1 && PyErr_Occurred()) goto failed;
    if (PyUnicode_GET_LENGTH(fam) >= shortest) {
        int without = without_words(fam, PyTuple_GET_ITEM(marks, 1));
        if (without < 0) goto failed;
        if (!without) {  /* maybe a marker: the pattern's search */
            PyObject *found = PyObject_CallOneArg(PyTuple_GET_ITEM(marks, 2), fam);
            int marker = found == NULL ? -1 : PyObject_IsTrue(found);
            Py_XDECREF(found);
            if (marker < 0 || (marker && PySet_Add(markers, sym) < 0)) goto failed;
        }
    }
    goto done;
failed:
    Py_CLEAR(sym);
done:
    Py_XDECREF(names);
    Py_DECREF(fam);
    return sym;
}

/* root_op(skeletons, state, start, end, name, least, repeat[, marks]) -> Node: see the
   method table. */
static PyObject *root_op(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    static PyObject *add_name, *symbols_name, *sym_of_name, *markers_name, *new_name,
        *sift_name;
    if (nargs != 7 && nargs != 8) {
        PyErr_SetString(PyExc_TypeError,
                        "root_op(skeletons, state, start, end, name, least, repeat[, marks])");
        return NULL;
    }
    if (add_name == NULL) {
        add_name = PyUnicode_InternFromString("add");
        symbols_name = PyUnicode_InternFromString("symbols");
        sym_of_name = PyUnicode_InternFromString("sym_of");
        markers_name = PyUnicode_InternFromString("markers");
        new_name = PyUnicode_InternFromString("new");
        sift_name = PyUnicode_InternFromString("forget_singles");
        if (!add_name || !symbols_name || !sym_of_name || !markers_name || !new_name ||
            !sift_name)
            return NULL;
    }
    PyObject *skeletons = args[0], *state = args[1], *start = args[2], *end = args[3],
        *name = args[4];
    Py_ssize_t least, at[ROOT_SLOTS], count_at[COUNT_SLOTS];
    if (root_rules(args[5], args[6], &least) < 0 || root_offsets(state, at, NULL) < 0)
        return NULL;
    int frames = PyObject_IsTrue(SLOT_AT(state, at[ROOT_FRAMES]));
    if (frames < 0) return NULL;
    if (SLOT_AT(state, at[ROOT_MAIN]) != Py_True || frames) {  /* the general way */
        PyObject *call[] = {skeletons, state, Py_None, start, end, name};
        return PyObject_VectorcallMethod(add_name, call, 6, NULL);
    }
    if (root_offsets(state, at, count_at) < 0) return NULL;
    PyObject *symbols = PyObject_GetAttr(skeletons, symbols_name);
    if (symbols == NULL) return NULL;
    PyObject *sym_of = PyObject_GetAttr(symbols, sym_of_name), *sym = NULL, *node = NULL;
    PyObject *markers = sym_of == NULL ? NULL : PyObject_GetAttr(symbols, markers_name);
    if (markers == NULL) goto done;
    if (!PyDict_Check(sym_of) || !PyAnySet_Check(markers)) {
        PyErr_SetString(PyExc_TypeError, "root_op: sym_of is a dict, markers a set");
        goto done;
    }
    sym = Py_XNewRef(PyDict_GetItemWithError(sym_of, name));
    if (sym == NULL) {
        if (PyErr_Occurred()) goto done;
        sym = nargs == 8 ? sym53_new(symbols, name, sym_of, markers, args[7], new_name)
            : PyObject_CallMethodOneArg(symbols, new_name, name);
        if (sym == NULL) goto done;
    }
    int marker = PySet_Contains(markers, sym);
    if (marker < 0) goto done;
    PyObject *fields[] = {sym, start, end, PyLong_FromLong(0)};  /* (a small int) */
    node = node_vectorcall((PyObject *)&NodeType, fields, 4, NULL);
    Py_DECREF(fields[3]);
    if (node == NULL) goto done;
    PyObject *sift = root_added(state, at, count_at, node, marker, least, args[6]);
    if (sift == NULL) { Py_CLEAR(node); goto done; }
    if (sift == Py_True) {
        PyObject *done_sifting = PyObject_CallMethodOneArg(skeletons, sift_name, state);
        if (done_sifting == NULL) { Py_DECREF(sift); Py_CLEAR(node); goto done; }
        Py_DECREF(done_sifting);
    }
    Py_DECREF(sift);
    PyObject *stack = SLOT_AT(state, at[ROOT_STACK]);  /* (read again: a sift may set it) */
    if (!PyList_Check(stack) || PyList_Append(stack, node) < 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "root_op: stack not a list");
        Py_CLEAR(node);
    }
done:
    Py_XDECREF(sym); Py_XDECREF(markers); Py_XDECREF(sym_of); Py_DECREF(symbols);
    return node;
}

/* ---- rec46: fresh_slotted: a new object's slots, defaults then the values given ---- */

/* A new object of ``type`` (its ``tp_alloc``) whose slots at ``offsets`` (as many as
   ``defaults``) hold ``defaults`` (the objects themselves) or, where ``factories`` has a
   callable, what it gives called with nothing (``dict`` and ``list``: a new empty one, no
   call), then those at ``offsets[at[j]]`` ``values[j]`` (``g`` of them): what
   ``fresh_with_slots`` and a ``slot_maker`` of defaults make. */
static PyObject *fresh_slotted(PyTypeObject *type, const Py_ssize_t *offsets, PyObject *defaults,
                               PyObject *factories, const Py_ssize_t *at,
                               PyObject *const *values, Py_ssize_t g) {
    PyObject *obj = type->tp_alloc(type, 0);
    if (obj == NULL) return NULL;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(defaults); i++) {
        PyObject *factory = PyTuple_GET_ITEM(factories, i), *value;
        if (factory == Py_None) value = Py_NewRef(PyTuple_GET_ITEM(defaults, i));
        else if (factory == (PyObject *)&PyDict_Type) value = PyDict_New();
        else if (factory == (PyObject *)&PyList_Type) value = PyList_New(0);
        else value = PyObject_CallNoArgs(factory);
        if (value == NULL) {
            Py_DECREF(obj);
            return NULL;
        }
        Py_XSETREF(*(PyObject **)((char *)obj + offsets[i]), value);
    }
    for (Py_ssize_t j = 0; j < g; j++)
        Py_XSETREF(*(PyObject **)((char *)obj + offsets[at[j]]), Py_NewRef(values[j]));
    return obj;
}

/* ---- eng45: a new object of a class with __slots__, given values and defaults ---- */

/* fresh_with_slots(cls, names, defaults, factories, given, *values): a new object of ``cls``
   (its ``tp_alloc``: no ``__init__`` called) whose slots ``names`` hold ``defaults`` (the
   objects themselves), or where ``factories`` (a tuple as long, None where the default is
   taken) has a callable, what it gives called with nothing (``dict`` and ``list``: a new
   empty one, no call), then the slots at the indices ``given`` (into ``names``) ``values``,
   in order: a new ``IterationRecord`` or ``IterationBreakdown`` a boundary without a frame
   of Python (``records.made_fresh``, ``breakdown.new_breakdown``). */
static PyObject *fresh_with_slots(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 5 || !PyType_Check(args[0]) || !PyTuple_Check(args[1])
        || !PyTuple_Check(args[2]) || !PyTuple_Check(args[3]) || !PyTuple_Check(args[4])) {
        PyErr_SetString(PyExc_TypeError,
                        "fresh_with_slots(cls, names, defaults, factories, given, *values)");
        return NULL;
    }
    PyTypeObject *type = (PyTypeObject *)args[0];
    PyObject *names = args[1], *defaults = args[2], *factories = args[3], *given = args[4];
    Py_ssize_t n = PyTuple_GET_SIZE(names), g = PyTuple_GET_SIZE(given);
    Py_ssize_t offsets[SLOTS_MAX];
    if (!makes_slotted(type, n, "fresh_with_slots")) return NULL;
    if (PyTuple_GET_SIZE(defaults) != n || PyTuple_GET_SIZE(factories) != n || nargs - 5 != g) {
        PyErr_SetString(PyExc_ValueError, "fresh_with_slots() takes a default and a factory "
                        "a slot, and a value an index given");
        return NULL;
    }
    Py_ssize_t at[SLOTS_MAX];
    for (Py_ssize_t j = 0; j < g; j++) {
        PyObject *index = PyTuple_GET_ITEM(given, j);
        at[j] = PyLong_Check(index) ? PyLong_AsSsize_t(index) : -1;
        if (at[j] < 0 || at[j] >= n) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "fresh_with_slots() given: slot indices");
            return NULL;
        }
    }
    if (slot_offsets(type, names, offsets) < 0) return NULL;
    return fresh_slotted(type, offsets, defaults, factories, at, args + 5, g);
}

/* ---- eng45: held ops of the iteration at hand, owned in one call (engine._own_each) ---- */

/* The slots ``own_held_ops`` reads and sets of one class (found by name at its first object
   of a class, ``slot_offsets_found``; read at their offsets, no look-up in the type). */
typedef struct {
    const char *names;
    PyObject *names_tuple;
    PyTypeObject *type;
    Py_ssize_t at[3];
} eng45_layout;

static eng45_layout eng45_record = {"events cpu_ops end_ts"},
    eng45_breakdown = {"cpu_ops"}, eng45_union = {"starts ends"},
    eng45_windows = {"cached_lo cached_hi cached_owner"};
static PyObject *eng45_add, *eng45_one, *eng45_no_time;

/* Whether ``obj``'s class has the slots of ``layout`` (found once a class): 1, 0 where not
   (no error: the engine's loop owns the items then), -1 with an error. */
static int eng45_laid_out(eng45_layout *layout, PyObject *obj) {
    if (Py_TYPE(obj) == layout->type) return 1;
    if (layout->names_tuple == NULL) {
        PyObject *text = PyUnicode_FromString(layout->names);
        PyObject *list = text == NULL ? NULL : PyUnicode_Split(text, NULL, -1);
        Py_XDECREF(text);
        layout->names_tuple = list == NULL ? NULL : PyList_AsTuple(list);
        Py_XDECREF(list);
        if (layout->names_tuple == NULL) return -1;
    }
    Py_ssize_t at[3];
    if (slot_offsets_found(Py_TYPE(obj), layout->names_tuple, at) < 0) {
        PyErr_Clear();
        return 0;
    }
    Py_XSETREF(layout->type, (PyTypeObject *)Py_NewRef((PyObject *)Py_TYPE(obj)));
    memcpy(layout->at, at, sizeof(at));
    return 1;
}

/* The slot ``k`` of ``layout`` of ``obj`` (of its class: ``eng45_laid_out``), borrowed; NULL
   with an AttributeError where it is unset. */
static PyObject *eng45_get(PyObject *obj, const eng45_layout *layout, int k) {
    PyObject *value = SLOT_AT(obj, layout->at[k]);
    if (value == NULL)
        PyErr_Format(PyExc_AttributeError, "'%s' object has no attribute %R",
                     Py_TYPE(obj)->tp_name, PyTuple_GET_ITEM(layout->names_tuple, k));
    return value;
}

/* Slot ``k`` of ``obj`` plus one; -1 with an error where it fails. */
static int eng45_count(PyObject *obj, const eng45_layout *layout, int k) {
    PyObject *value = eng45_get(obj, layout, k);
    PyObject *more = value == NULL ? NULL : PyNumber_Add(value, eng45_one);
    if (more == NULL) return -1;
    slot_set(obj, layout->at[k], more);
    return 0;
}

/* Whether ``value`` compares ``op`` with the last item of ``list`` (a list, or not: 0);
   -1 with an error. */
static int eng45_last(PyObject *list, PyObject *value, int op) {
    if (!PyList_CheckExact(list) || PyList_GET_SIZE(list) == 0) return 0;
    PyObject *last = Py_NewRef(PyList_GET_ITEM(list, PyList_GET_SIZE(list) - 1));
    int result = PyObject_RichCompareBool(value, last, op);
    Py_DECREF(last);
    return result;
}

/* ``breakdown.add_op(thread, start, end)`` (``core.breakdown.IterationBreakdown``, its
   ``cpu_ops`` a dict): the thread's first op a union made by ``union_with([start], [end],
   0.0, False)``, an op inside the latest interval of lists nothing, else ``union.add(start,
   end)``. 0, or -1 with an error. */
static int eng45_add_op(PyObject *unions, PyObject *thread, PyObject *start, PyObject *end,
                        PyObject *union_with) {
    PyObject *unit = PyDict_GetItemWithError(unions, thread), *made;
    if (unit == NULL) {
        if (PyErr_Occurred()) return -1;
        PyObject *starts = PyList_New(1), *ends = PyList_New(1);
        if (starts == NULL || ends == NULL) {
            Py_XDECREF(starts);
            Py_XDECREF(ends);
            return -1;
        }
        PyList_SET_ITEM(starts, 0, Py_NewRef(start));
        PyList_SET_ITEM(ends, 0, Py_NewRef(end));
        made = PyObject_CallFunctionObjArgs(union_with, starts, ends, eng45_no_time, Py_False,
                                            NULL);
        Py_DECREF(starts);
        Py_DECREF(ends);
        int failed = made == NULL ? -1 : PyDict_SetItem(unions, thread, made);
        Py_XDECREF(made);
        return failed;
    }
    Py_INCREF(unit);
    int inside = eng45_laid_out(&eng45_union, unit);
    if (inside == 1) {
        PyObject *starts = eng45_get(unit, &eng45_union, 0);
        PyObject *ends = starts == NULL ? NULL : eng45_get(unit, &eng45_union, 1);
        inside = ends == NULL ? -1 : eng45_last(starts, start, Py_GE);
        inside = inside == 1 ? eng45_last(ends, end, Py_LE) : inside;
    }
    if (inside == 0) {
        made = PyObject_CallMethodObjArgs(unit, eng45_add, start, end, NULL);
        inside = made == NULL ? -1 : 0;
        Py_XDECREF(made);
    }
    Py_DECREF(unit);
    return inside < 0 ? -1 : 0;
}

/* ---- iter47: a held step annotation owned with the held ops (own_held_ops) ---- */

/* Whether a held event from ``start`` to ``end`` lies in the window ``lo``..``hi`` that
   ``own_held_ops`` owns (``lo <= start <= end < hi``): 1, 0, or -1 with an error. */
static int iter47_in_window(PyObject *lo, PyObject *start, PyObject *end, PyObject *hi) {
    int in = PyObject_RichCompareBool(lo, start, Py_LE);
    in = in == 1 ? PyObject_RichCompareBool(start, end, Py_LE) : in;
    return in == 1 ? PyObject_RichCompareBool(end, hi, Py_LT) : in;
}

/* N of ``name``, which begins with ``prefix`` (the caller tested it), where the rest is
   ASCII digits of a number up to 2**63 - 1 (``trace_format.profiler_step_number``), a new
   int; NULL where it is not (no error), or with an error. */
static PyObject *iter47_step_number(PyObject *name, PyObject *prefix) {
    Py_ssize_t at = PyUnicode_GET_LENGTH(prefix), n = PyUnicode_GET_LENGTH(name) - at;
    if (!PyUnicode_IS_ASCII(name) || n < 1 || n > 19)
        return NULL;
    const char *digits = (const char *)PyUnicode_DATA(name) + at;
    unsigned long long number = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (digits[i] < '0' || digits[i] > '9') return NULL;
        number = number * 10 + (unsigned long long)(digits[i] - '0');  /* (19 digits fit) */
    }
    return number > (unsigned long long)PY_LLONG_MAX ? NULL : PyLong_FromUnsignedLongLong(number);
}

static eng45_layout iter47_record = {"step"};

/* One held annotation ``item`` (``(end, seq, start, name, None, raw)``) of the window
   ``lo``..``hi``, owned by ``owner`` as ``engine.Splitter._own_each`` owns it where it is
   the first ``ProfilerStep#N`` of its iteration (``record.step`` None; ``prefix`` the
   steps' prefix): ``(owner, raw or name)`` appended to ``assigned`` (None: not kept),
   ``record.events`` counted, ``record.step`` its N, ``record.end_ts`` the later of it and
   ``end``. 1, else 0 (not owned here: the engine owns it, what else its name tells), -1
   with an error. */
static int iter47_own_step(PyObject *item, PyObject *lo, PyObject *hi, PyObject *owner,
                           PyObject *record, PyObject *assigned, PyObject *prefix) {
    PyObject *end = PyTuple_GET_ITEM(item, 0), *start = PyTuple_GET_ITEM(item, 2);
    PyObject *name = PyTuple_GET_ITEM(item, 3), *raw = PyTuple_GET_ITEM(item, 5);
    int in = PyUnicode_Tailmatch(name, prefix, 0, PY_SSIZE_T_MAX, -1);  /* (first: most
        annotations of a trace without steps are no step, and the engine owns them) */
    if (in == 1) in = iter47_in_window(lo, start, end, hi);
    if (in != 1) return in;
    if ((in = eng45_laid_out(&iter47_record, record)) != 1) return in;
    if (SLOT_AT(record, iter47_record.at[0]) != Py_None) return 0;  /* (its step known) */
    PyObject *number = iter47_step_number(name, prefix);
    if (number == NULL) return PyErr_Occurred() ? -1 : 0;
    if (assigned != Py_None) {
        PyObject *pair = PyTuple_Pack(2, owner, raw == Py_None ? name : raw);
        int failed = pair == NULL ? -1 : PyList_Append(assigned, pair);
        Py_XDECREF(pair);
        if (failed < 0) {
            Py_DECREF(number);
            return -1;
        }
    }
    if (eng45_count(record, &eng45_record, 0) < 0) {
        Py_DECREF(number);
        return -1;
    }
    slot_set(record, iter47_record.at[0], number);
    PyObject *latest = eng45_get(record, &eng45_record, 2);
    int later = latest == NULL ? -1 : PyObject_RichCompareBool(end, latest, Py_GT);
    if (later == 1) slot_set(record, eng45_record.at[2], Py_NewRef(end));
    return later < 0 ? -1 : 1;
}

/* ---- eng45 (continued) ---- */

/* One held op ``item`` (``(end, seq, start, event, None, raw)``, ``event`` its thread) of the
   window ``lo``..``hi`` (1, else 0: not owned here), owned by ``owner`` (``own_held_ops``);
   -1 with an error. */
static int eng45_own(PyObject *item, PyObject *lo, PyObject *hi, PyObject *owner,
                     PyObject *record, PyObject *unions, PyObject *assigned,
                     PyObject *union_with) {
    PyObject *end = PyTuple_GET_ITEM(item, 0), *start = PyTuple_GET_ITEM(item, 2);
    PyObject *event = PyTuple_GET_ITEM(item, 3), *raw = PyTuple_GET_ITEM(item, 5);
    int in = iter47_in_window(lo, start, end, hi);
    if (in != 1) return in;
    if (assigned != Py_None) {
        PyObject *pair = PyTuple_Pack(2, owner, raw == Py_None ? event : raw);
        int failed = pair == NULL ? -1 : PyList_Append(assigned, pair);
        Py_XDECREF(pair);
        if (failed < 0) return -1;
    }
    if (eng45_count(record, &eng45_record, 0) < 0 || eng45_count(record, &eng45_record, 1) < 0
        || eng45_add_op(unions, event, start, end, union_with) < 0)
        return -1;
    PyObject *latest = eng45_get(record, &eng45_record, 2);
    int later = latest == NULL ? -1 : PyObject_RichCompareBool(end, latest, Py_GT);
    if (later == 1) slot_set(record, eng45_record.at[2], Py_NewRef(end));
    return later < 0 ? -1 : 1;
}

/* own_held_ops(items, windows, hot, assigned, union_with[, step_prefix]) -> int: of the held items
   ``(end, seq, start, event, None, raw)`` a boundary decides, in order, how many at the head
   it owned, as ``engine.Splitter._own_each`` owns each: an op held as its thread (``event``
   a pair) in the window found last (``windows.cached_lo <= start <= end < cached_hi``),
   whose iteration (``cached_owner``, not below 0) is the one at hand (``hot``: ``(owner,
   record, breakdown, ...)``): ``(owner, raw, or event where raw is None)`` appended to
   ``assigned`` (None: nothing kept), ``record.events`` and ``record.cpu_ops`` counted, the
   op in the breakdown (``eng45_add_op``), ``record.end_ts`` the later of it and ``end``. It
   stops at the first item that is not such (the engine owns it and the rest), and owns none
   where a class lacks a slot it reads. With ``step_prefix`` (iter47), an annotation held as
   its name that is its iteration's first ``ProfilerStep#N`` is owned too
   (``iter47_own_step``): a loop of annotated steps holds one a boundary. */
/* ``own_held_ops``' names made (once a process): 0, or -1 with an error. */
static int eng45_names_ready(void) {
    if (eng45_no_time == NULL) {
        eng45_add = PyUnicode_InternFromString("add");
        eng45_one = PyLong_FromLong(1);
        eng45_no_time = eng45_add == NULL || eng45_one == NULL ? NULL : PyFloat_FromDouble(0.0);
    }
    return eng45_no_time == NULL ? -1 : 0;
}

static PyObject *own_held_ops(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 5 || nargs > 6 || !PyList_Check(args[0]) || !PyTuple_Check(args[2])
        || PyTuple_GET_SIZE(args[2]) < 3 || (nargs == 6 && !PyUnicode_CheckExact(args[5]))) {
        PyErr_SetString(PyExc_TypeError,
                        "own_held_ops(items, windows, hot, assigned, union_with[, step_prefix])");
        return NULL;
    }
    PyObject *prefix = nargs == 6 ? args[5] : NULL;
    if (eng45_names_ready() < 0) return NULL;
    PyObject *items = args[0], *windows = args[1], *hot = args[2], *assigned = args[3];
    PyObject *record = PyTuple_GET_ITEM(hot, 1), *breakdown = PyTuple_GET_ITEM(hot, 2);
    int ready = eng45_laid_out(&eng45_windows, windows);
    ready = ready == 1 ? eng45_laid_out(&eng45_record, record) : ready;
    ready = ready == 1 ? eng45_laid_out(&eng45_breakdown, breakdown) : ready;
    if (ready != 1) return ready < 0 ? NULL : PyLong_FromLong(0);
    PyObject *lo = eng45_get(windows, &eng45_windows, 0);
    PyObject *hi = eng45_get(windows, &eng45_windows, 1);
    PyObject *owner = eng45_get(windows, &eng45_windows, 2);
    PyObject *unions = eng45_get(breakdown, &eng45_breakdown, 0);
    if (lo == NULL || hi == NULL || owner == NULL || unions == NULL) return NULL;
    if (!PyLong_Check(owner) || !PyDict_CheckExact(unions)) return PyLong_FromLong(0);
    int ours = PyLong_AsLong(owner) >= 0;
    if (PyErr_Occurred()) return NULL;
    ours = ours ? PyObject_RichCompareBool(PyTuple_GET_ITEM(hot, 0), owner, Py_EQ) : 0;
    if (ours < 0) return NULL;
    /* held here: a call may run code of Python */
    PyObject *held[4] = {Py_NewRef(lo), Py_NewRef(hi), Py_NewRef(owner), Py_NewRef(unions)};
    Py_ssize_t done = 0;
    for (; ours == 1 && done < PyList_GET_SIZE(items); done += ours) {
        PyObject *item = PyList_GET_ITEM(items, done), *event;
        if (!PyTuple_CheckExact(item) || PyTuple_GET_SIZE(item) != 6)
            break;
        event = PyTuple_GET_ITEM(item, 3);
        int op = PyTuple_CheckExact(event) && PyTuple_GET_SIZE(event) == 2;
        if (!op && (prefix == NULL || !PyUnicode_CheckExact(event)))
            break;
        Py_INCREF(item);
        ours = op ? eng45_own(item, lo, hi, owner, record, unions, assigned, args[4])
                  : iter47_own_step(item, lo, hi, owner, record, assigned, prefix);
        Py_DECREF(item);
    }
    for (int k = 0; k < 4; k++) Py_DECREF(held[k]);
    return ours < 0 ? NULL : PyLong_FromSsize_t(done);
}

/* ---- tries50: two times or counts compared without a call where both are exact floats or ints (tries50_compare) ---- */

/* ``PyObject_RichCompareBool(a, b, op)``'s answer where it follows from the values alone,
   without running code of Python: ``==`` and ``!=`` of one object (answered first, as
   ``PyObject_RichCompareBool`` does: a NaN is equal to itself there), two exact floats
   compared as their doubles (as ``float``'s comparisons do: IEEE 754, a NaN unordered), two
   exact ints that fit a long long as those. 1, 0, or -2 where it does not follow. */
static inline int tries50_plain_compare(PyObject *a, PyObject *b, int op) {
    if (a == b && (op == Py_EQ || op == Py_NE)) return op == Py_EQ;
    if (PyFloat_CheckExact(a) && PyFloat_CheckExact(b)) {
        double x = PyFloat_AS_DOUBLE(a), y = PyFloat_AS_DOUBLE(b);
        return op == Py_LT ? x < y : op == Py_LE ? x <= y : op == Py_EQ ? x == y
            : op == Py_NE ? x != y : op == Py_GT ? x > y : x >= y;
    }
    if (!PyLong_CheckExact(a) || !PyLong_CheckExact(b)) return -2;
    int over_a, over_b;
    long long i = PyLong_AsLongLongAndOverflow(a, &over_a);
    long long j = PyLong_AsLongLongAndOverflow(b, &over_b);
    if (over_a || over_b) return -2;
    return op == Py_LT ? i < j : op == Py_LE ? i <= j : op == Py_EQ ? i == j
        : op == Py_NE ? i != j : op == Py_GT ? i > j : i >= j;
}

/* ``PyObject_RichCompareBool(a, b, op)``: ``tries50_plain_compare``, else the call. 1, 0, or
   -1 with an exception. */
static inline int tries50_compare(PyObject *a, PyObject *b, int op) {
    int answer = tries50_plain_compare(a, b, op);
    return answer != -2 ? answer : PyObject_RichCompareBool(a, b, op);
}

/* ---- tries50: two keys compared without a call where they are ints, floats or tuples of them (equal) ---- */

/* ``a == b`` where Python's answer follows from the values alone, without running code of
   Python: ``tries50_plain_compare``'s, or two exact tuples of one length whose items pairwise
   are its cases (a thread's key: (pid, tid); the tuple's ``==`` compares its items in order
   and answers False at the first that differs, as this does). 1, 0, or -2 where it does not
   follow (the caller asks Python). */
static int tries50_plain_equal(PyObject *a, PyObject *b) {
    int same = tries50_plain_compare(a, b, Py_EQ);
    if (same != -2 || !PyTuple_CheckExact(a) || !PyTuple_CheckExact(b) ||
            PyTuple_GET_SIZE(a) != PyTuple_GET_SIZE(b))
        return same;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(a); i++)
        if ((same = tries50_plain_compare(PyTuple_GET_ITEM(a, i), PyTuple_GET_ITEM(b, i),
                                          Py_EQ)) != 1)
            return same;
    return 1;
}

/* Whether ``a == b`` (1), not (0), or -1 with an exception: ``tries50_plain_equal``, else
   ``PyObject_RichCompareBool``. */
static int tries50_equal(PyObject *a, PyObject *b) {
    int same = tries50_plain_equal(a, b);
    return same != -2 ? same : PyObject_RichCompareBool(a, b, Py_EQ);
}

/* Whether ``a != b`` (1), not (0), or -1 with an exception: ``tries50_plain_equal``'s answer
   negated (``!=`` of ints, floats and tuples of them is ``==`` negated), else
   ``PyObject_RichCompareBool``. */
static int tries50_differ(PyObject *a, PyObject *b) {
    int same = tries50_plain_equal(a, b);
    return same != -2 ? !same : PyObject_RichCompareBool(a, b, Py_NE);
}

/* ``compared(a, b, op)``: what the feed lane and the readers' pushes find of ``a op b``
   (``op``: 0 to 5, ``Py_LT`` to ``Py_GE``; 6: ``tries50_equal``, 7: ``tries50_differ``), for the
   tests that tie them to Python's comparisons. */
static PyObject *tries50_compared(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    long op = n == 3 ? PyLong_AsLong(args[2]) : -1;
    if (n != 3 || op < 0 || op > 7) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "compared(a, b, op): op from 0 to 7");
        return NULL;
    }
    int truth = op == 6 ? tries50_equal(args[0], args[1]) : op == 7
        ? tries50_differ(args[0], args[1]) : tries50_compare(args[0], args[1], (int)op);
    return truth < 0 ? NULL : PyBool_FromLong(truth);
}

/* ---- feed46: the feed loop's common cases, a run of events in one call (engine._feed_checked) ---- */

/* The slots ``feed_lane`` reads of an event (``validate.SlimEvent``), of an
   ``IterationRecord`` beyond ``eng45_record``'s, of the launches' ``MonotonicOwnerMap`` and of
   the ``LaunchTimes`` (found by name at the first object of a class: ``eng45_laid_out``). */
static eng45_layout feed46_names = {"ph cat name"}, feed46_times = {"ts dur id"},
    feed46_args = {"args"}, feed46_thread = {"pid tid"}, feed46_launched = {"launches graph_launches"},
    feed46_ranges = {"_los _his _owners"}, feed46_hit = {"hit_lo hit_hi hit_owner"},
    feed46_launch_ends = {"ends early"}, feed46_gpu_counts = {"gpu_events kernels gpu_busy_us"},
    feed46_gpu_span = {"gpu_active_us gpu_start_ts gpu_end_ts"},
    feed46_work = {"stream_work gpu_work"};
static PyObject *feed46_zero, *feed46_no_time, *feed46_empty, *feed46_add_gpu, *feed46_add_delay;

/* What one ``feed_lane`` call reads, borrowed: the iteration at hand (``hot``), where its
   events go, the windows' cached window, the launches, the rules (``engine._LANE_RULES``). */
typedef struct {
    PyObject *owner, *record, *breakdown, *gpu_latest, *kernel_cats;
    PyObject *assigned, *windows, *launches, *launch_times, *waiting;
    PyObject *order, *detector, *routes, *flow_phases, *launch_names, *graph_names;
    PyObject *frame_cat, *x_phase, *correlation;
    PyObject *flush_below; /* ``order.flush_below``, NULL until read (a new reference) */
    Py_ssize_t kept_launches;
    long by_flow_id, by_window, by_correlation;
    int wants_evidence; /* -2 until read (once a call: no code of Python runs meanwhile) */
    int hot_ready; /* the iteration at hand is one, of the classes read: the cases above */
    /* lane47: the structural ops of a run (``lane47_op``): whether they are taken, whether
       one was read (the cases above are not taken after it), and what they read */
    int ops_ready, read_ops;
    PyObject *splitter, *read_op, *feed_fields, *bound_held, *read_route, *cpu_op_cats;
    PyObject *roles, *role_of, *dims, *step_prefix, *gpu_rules;
    Py_ssize_t pending_limit;
    /* held48: what an op is read with in C (``held48_read``) */
    PyObject *stacks, *add_boundary;
    int reads_stacks;
    Py_ssize_t live_threads;
    long by_structure, gemm, waiting_limit;
} feed46_state;

/* Whether ``a`` compares ``op`` with ``b`` and with ``c`` (``a <= b <= c``-like chains are
   two such calls); -1 with an error. */
static int feed46_both(PyObject *a, PyObject *b, int op_ab, PyObject *c, int op_bc) {
    int result = tries50_compare(a, b, op_ab);
    return result == 1 ? tries50_compare(b, c, op_bc) : result;
}

/* ``(owner, raw, or event where raw is None)`` appended to the events handed out (none kept:
   ``assigned`` None), and the record's ``events`` counted. 0, or -1 with an error. */
static int feed46_count(feed46_state *s, PyObject *event, PyObject *raw) {
    if (s->assigned != Py_None) {
        PyObject *pair = PyTuple_Pack(2, s->owner, raw == Py_None ? event : raw);
        int failed = pair == NULL ? -1 : PyList_Append(s->assigned, pair);
        Py_XDECREF(pair);
        if (failed < 0) return -1;
    }
    return eng45_count(s->record, &eng45_record, 0);
}

/* A launch flow (``ph`` a flow phase, its category routed by flow id) whose launch is in the
   launches' range found last, owned by the iteration at hand: counted in (1), as
   ``_feed_checked``'s inline case; else 0 (the engine routes it); -1 with an error. */
static int feed46_flow(feed46_state *s, PyObject *event, PyObject *raw) {
    PyObject *key = SLOT_AT(event, feed46_times.at[2]);
    if (key == NULL || !PyLong_CheckExact(key)) return 0;
    PyObject *lo = SLOT_AT(s->launches, feed46_hit.at[0]), *hi = SLOT_AT(s->launches, feed46_hit.at[1]);
    PyObject *owner = SLOT_AT(s->launches, feed46_hit.at[2]);
    if (lo == NULL || hi == NULL || owner == NULL || !PyLong_CheckExact(owner)) return 0;
    int in = feed46_both(lo, key, Py_LE, hi, Py_LE);
    in = in == 1 ? tries50_compare(owner, s->owner, Py_EQ) : in;
    if (in != 1) return in;
    return feed46_count(s, event, raw) < 0 ? -1 : 1;
}

/* Whether a runtime call with correlation id ``corr`` (an int) can be owned here without
   ``_own_launch``'s rarer cases: no GPU work of it decided before it (``LaunchTimes.early``),
   its id past every range (``MonotonicOwnerMap.add``'s first case), none of its GPU work
   waiting for it. 1, 0, or -1 with an error. */
static int feed46_plain_launch(feed46_state *s, PyObject *corr, int named) {
    PyObject *early = SLOT_AT(s->launch_times, feed46_launch_ends.at[1]);
    PyObject *his = SLOT_AT(s->launches, feed46_ranges.at[1]);
    if (early == NULL || !PyDict_CheckExact(early) || his == NULL || !PyList_CheckExact(his)
        || SLOT_AT(s->launches, feed46_ranges.at[0]) == NULL
        || SLOT_AT(s->launches, feed46_ranges.at[2]) == NULL)
        return 0;
    int found = named && PyDict_GET_SIZE(early) ? PyDict_Contains(early, corr) : 0;
    if (found == 0 && PyDict_GET_SIZE(s->waiting)) found = PyDict_Contains(s->waiting, corr);
    if (found != 0) return found < 0 ? -1 : 0;
    if (PyList_GET_SIZE(his) == 0) return 1;
    return tries50_compare(corr, PyList_GET_ITEM(his, PyList_GET_SIZE(his) - 1), Py_GT);
}

/* The oldest key of ``table`` dropped where it holds more than ``kept`` (``breakdown``'s
   ``_bounded_put``, once the key is put); 0, or -1 with an error. */
static int feed46_bound(PyObject *table, Py_ssize_t kept) {
    Py_ssize_t pos = 0;
    PyObject *first, *value;
    if (PyDict_GET_SIZE(table) <= kept || !PyDict_Next(table, &pos, &first, &value)) return 0;
    Py_INCREF(first);
    int failed = PyDict_DelItem(table, first);
    Py_DECREF(first);
    return failed;
}

/* ``_own_launch``'s common case (``feed46_plain_launch``): a launch's end kept for its delay
   (``LaunchTimes.add``: at most ``kept_launches``, the oldest dropped) and counted, then its
   id added to the launches (``MonotonicOwnerMap.add``, its first case). 0, or -1. */
static int feed46_launch(feed46_state *s, PyObject *corr, PyObject *end, PyObject *name,
                         int named) {
    if (named) {
        PyObject *ends = SLOT_AT(s->launch_times, feed46_launch_ends.at[0]);
        if (ends == NULL || !PyDict_CheckExact(ends)) {
            PyErr_SetString(PyExc_TypeError, "feed_lane: LaunchTimes.ends is a dict");
            return -1;
        }
        if (PyDict_SetItem(ends, corr, end) < 0 || feed46_bound(ends, s->kept_launches) < 0)
            return -1;
        int graph = PySet_Contains(s->graph_names, name);
        if (graph < 0 || eng45_count(s->record, &feed46_launched, 0) < 0
            || (graph && eng45_count(s->record, &feed46_launched, 1) < 0))
            return -1;
    }
    PyObject *los = SLOT_AT(s->launches, feed46_ranges.at[0]);
    PyObject *his = SLOT_AT(s->launches, feed46_ranges.at[1]);
    PyObject *owners = SLOT_AT(s->launches, feed46_ranges.at[2]);
    if (!PyList_CheckExact(los) || !PyList_CheckExact(owners)) {
        PyErr_SetString(PyExc_TypeError, "feed_lane: MonotonicOwnerMap's ranges are lists");
        return -1;
    }
    Py_ssize_t n = PyList_GET_SIZE(los);
    int same = n && PyList_GET_SIZE(owners) == n && PyList_GET_SIZE(his) == n
        ? tries50_compare(PyList_GET_ITEM(owners, n - 1), s->owner, Py_EQ) : 0;
    if (same < 0) return -1;
    if (!same)
        return PyList_Append(los, corr) < 0 || PyList_Append(his, corr) < 0
            || PyList_Append(owners, s->owner) < 0 ? -1 : 0;
    PyObject *hit_lo = SLOT_AT(s->launches, feed46_hit.at[0]);
    PyObject *hit_owner = SLOT_AT(s->launches, feed46_hit.at[2]);
    int grows = hit_lo == NULL || hit_owner == NULL ? 0
        : tries50_compare(hit_lo, PyList_GET_ITEM(los, n - 1), Py_EQ);
    grows = grows == 1 ? tries50_compare(hit_owner, s->owner, Py_EQ) : grows;
    if (grows < 0) return -1;
    if (grows) slot_set(s->launches, feed46_hit.at[1], Py_NewRef(corr));
    return PyList_SetItem(his, n - 1, Py_NewRef(corr));
}

/* Whether an event at ``ts`` can be fed here: for an ``X`` event (``flush``), no op held in
   order ends its section (``order.flush_below``, ``_feed_fields``' first test) and, for one
   the detector reads as evidence while it wants some (``evidence``), the detector wants none
   (``wants_evidence``: read once a call, as ``flush_below``). 1, 0, or -1. */
static int feed46_calm(feed46_state *s, PyObject *ts, int flush, int evidence) {
    if (evidence) {
        if (s->wants_evidence == -2) {
            PyObject *wants = PyObject_GetAttrString(s->detector, "wants_evidence");
            s->wants_evidence = wants == NULL ? -1 : PyObject_IsTrue(wants);
            Py_XDECREF(wants);
            if (s->wants_evidence < 0) return -1;
        }
        if (s->wants_evidence) return 0;
    }
    if (!flush) return 1;
    if (s->flush_below == NULL
        && (s->flush_below = PyObject_GetAttrString(s->order, "flush_below")) == NULL)
        return -1;
    int early = tries50_compare(ts, s->flush_below, Py_LT);
    return early < 0 ? -1 : !early;
}

/* A CPU-side event (its category routed by its window) in the windows' cached window, owned
   by the iteration at hand, that links nothing or is a runtime call (``feed46_plain_launch``)
   and is no Python frame, read while the detector wants no evidence and before any op held
   in order (``_feed_fields``'s inline case): counted in, its end the record's latest, a
   runtime call owned as ``_own_launch`` owns it (1); else 0 (the engine feeds it); -1. */
static int feed46_window(feed46_state *s, PyObject *event, PyObject *raw, PyObject *ph,
                         PyObject *ts, PyObject *cat) {
    int is_x = PyUnicode_CheckExact(ph) && PyUnicode_Compare(ph, s->x_phase) == 0;
    if (is_x) {
        int calm = feed46_calm(s, ts, 1, 1);
        if (calm != 1) return calm;
        int frame = cat == Py_None ? 0 : tries50_compare(cat, s->frame_cat, Py_EQ);
        if (frame != 0) return frame < 0 ? -1 : 0;
    }
    PyObject *dur = SLOT_AT(event, feed46_times.at[1]), *args = SLOT_AT(event, feed46_args.at[0]);
    PyObject *name = SLOT_AT(event, feed46_names.at[2]);
    if (dur == NULL || args == NULL || name == NULL) return 0;
    PyObject *corr = NULL;
    int launch = 0;
    if (args != Py_None) {
        if (!PyDict_CheckExact(args)) return 0;
        if (PyDict_GET_SIZE(args)) {
            corr = PyDict_GetItemWithError(args, s->correlation);
            if (corr == NULL && PyErr_Occurred()) return -1;
            launch = corr != NULL && is_x ? PyObject_IsTrue(corr) : 0;
            if (launch < 0) return -1;
            if (corr != NULL && !launch) return 0; /* ``_own_cpu``: it may link */
            if (launch && !PyLong_CheckExact(corr)) return 0;
        }
    }
    int timed = is_x ? PyObject_IsTrue(dur) : 0;
    if (timed < 0) return -1;
    PyObject *end = timed ? PyNumber_Add(ts, dur) : Py_NewRef(ts);
    if (end == NULL) return -1;
    PyObject *lo = eng45_get(s->windows, &eng45_windows, 0);
    PyObject *hi = lo == NULL ? NULL : eng45_get(s->windows, &eng45_windows, 1);
    PyObject *owner = hi == NULL ? NULL : eng45_get(s->windows, &eng45_windows, 2);
    int ours = owner == NULL ? -1 : feed46_both(lo, ts, Py_LE, end, Py_LE);
    ours = ours == 1 ? tries50_compare(end, hi, Py_LT) : ours;
    ours = ours == 1 ? tries50_compare(owner, s->owner, Py_EQ) : ours;
    int named = 0;
    if (ours == 1 && launch) {
        named = PySet_Contains(s->launch_names, name);
        ours = named < 0 ? -1 : feed46_plain_launch(s, corr, named);
    }
    if (ours == 1) {
        PyObject *latest = eng45_get(s->record, &eng45_record, 2);
        int later = latest == NULL ? -1 : tries50_compare(end, latest, Py_GT);
        if (later < 0 || feed46_count(s, event, raw) < 0) ours = -1;
        else if (later == 1) slot_set(s->record, eng45_record.at[2], Py_NewRef(end));
        if (ours == 1 && launch && feed46_launch(s, corr, end, name, named) < 0) ours = -1;
    }
    Py_DECREF(end);
    return ours;
}

/* ``engine._extend_union(seen, start, end)``: the new ``seen`` (a new reference), the time
   it adds in ``*added`` (a new reference); NULL with an error. */
static PyObject *feed46_union(PyObject *seen, PyObject *start, PyObject *end, PyObject **added) {
    *added = NULL;
    if (seen == NULL || seen == Py_None) {
        *added = PyNumber_Subtract(end, start);
        return *added == NULL ? NULL : PyTuple_Pack(2, start, end);
    }
    if (!PyTuple_CheckExact(seen) || PyTuple_GET_SIZE(seen) != 2) {
        PyErr_SetString(PyExc_TypeError, "feed_lane: GPU work kept as (start, end)");
        return NULL;
    }
    PyObject *first = PyTuple_GET_ITEM(seen, 0), *latest = PyTuple_GET_ITEM(seen, 1);
    int ordered = tries50_compare(start, first, Py_GE);
    if (ordered < 0) return NULL;
    if (ordered) { /* in time order (``max``'s comparisons, ties and all) */
        int past = tries50_compare(latest, start, Py_GT);
        int longer = past < 0 ? -1 : tries50_compare(latest, end, Py_GT);
        if (longer < 0) return NULL;
        PyObject *gain = PyNumber_Subtract(end, past ? latest : start);
        int some = gain == NULL ? -1 : tries50_compare(gain, feed46_no_time, Py_GT);
        if (some < 0) {
            Py_XDECREF(gain);
            return NULL;
        }
        if (!some) Py_SETREF(gain, Py_NewRef(feed46_no_time));
        *added = gain;
        return PyTuple_Pack(2, start, longer ? latest : end);
    }
    int later = tries50_compare(end, latest, Py_GT);
    *added = later < 0 ? NULL : PyNumber_Subtract(end, start);
    if (*added == NULL) return NULL;
    return later ? PyTuple_Pack(2, first, end) : Py_NewRef(seen);
}

/* The record's slot ``k`` of ``layout`` plus ``value`` (``+=``); 0, or -1 with an error. */
static int feed46_add_to(PyObject *record, eng45_layout *layout, int k, PyObject *value) {
    PyObject *was = eng45_get(record, layout, k);
    PyObject *sum = was == NULL ? NULL : PyNumber_Add(was, value);
    if (sum == NULL) return -1;
    slot_set(record, layout->at[k], sum);
    return 0;
}

/* The record's slot ``k`` of ``layout`` set to ``value`` where it is None or ``value``
   compares ``op`` with it; 0, or -1 with an error. */
static int feed46_extreme(PyObject *record, eng45_layout *layout, int k, PyObject *value,
                          int op) {
    PyObject *was = SLOT_AT(record, layout->at[k]);
    int beyond = was == NULL || was == Py_None ? 1 : tries50_compare(value, was, op);
    if (beyond == 1) slot_set(record, layout->at[k], Py_NewRef(value));
    return beyond < 0 ? -1 : 0;
}

/* ---- held48: a kernel's launch delay added in C (breakdown.IterationBreakdown.add_launch_delay) ---- */

/* The slots ``add_launch_delay`` sets of an ``IterationBreakdown``. */
static eng45_layout held48_delays = {"delay_sum_us delays delay_max_us"};

/* ``breakdown.add_launch_delay(delay)``: clipped at 0 (a delay not above 0.0 is 0.0), added
   to the sum, counted, and the largest kept; where the class lacks those slots the method is
   called. 0, or -1 with an error. */
static int held48_add_delay(PyObject *breakdown, PyObject *delay) {
    int ready = eng45_laid_out(&held48_delays, breakdown);
    if (ready != 1) {
        PyObject *done = ready < 0 ? NULL
            : PyObject_CallMethodOneArg(breakdown, feed46_add_delay, delay);
        Py_XDECREF(done);
        return done == NULL ? -1 : 0;
    }
    int some = tries50_compare(delay, feed46_no_time, Py_GT);
    if (some < 0) return -1;
    PyObject *kept = some ? delay : feed46_no_time;
    if (feed46_add_to(breakdown, &held48_delays, 0, kept) < 0
        || eng45_count(breakdown, &held48_delays, 1) < 0)
        return -1;
    PyObject *most = eng45_get(breakdown, &held48_delays, 2);
    int beyond = most == NULL ? -1 : tries50_compare(kept, most, Py_GT);
    if (beyond == 1) slot_set(breakdown, held48_delays.at[2], Py_NewRef(kept));
    return beyond < 0 ? -1 : 0;
}

/* ---- lane47: a GPU event's layers and kernel counted in C (breakdown.IterationBreakdown.add_gpu) ---- */

static eng45_layout lane47_gpu_parts = {"layers kernels"},
    lane47_comm = {"comm_kernels comm_kernel_us"};
static PyObject *lane47_made_layers;

/* ``union.add(start, end)``'s most common case (``add_gpu`` inline): a new interval after the
   latest, in lists, below ``kept`` intervals, appended (1); else ``add`` called (1); -1. */
static int lane47_union_add(PyObject *unit, PyObject *start, PyObject *end, Py_ssize_t kept) {
    int ready = eng45_laid_out(&eng45_union, unit);
    PyObject *starts = ready == 1 ? SLOT_AT(unit, eng45_union.at[0]) : NULL;
    PyObject *ends = ready == 1 ? SLOT_AT(unit, eng45_union.at[1]) : NULL;
    int inline_case = ready < 0 ? -1 : 0;
    if (starts != NULL && ends != NULL && PyList_CheckExact(starts) && PyList_CheckExact(ends)
        && PyList_GET_SIZE(starts) && PyList_GET_SIZE(ends) && PyList_GET_SIZE(starts) < kept) {
        inline_case = tries50_compare(start, PyList_GET_ITEM(ends, PyList_GET_SIZE(ends) - 1), Py_GT);
        inline_case = inline_case == 1 ? tries50_compare(
            start, PyList_GET_ITEM(starts, PyList_GET_SIZE(starts) - 1), Py_GE) : inline_case;
    }
    if (inline_case == 1)
        return PyList_Append(starts, start) < 0 || PyList_Append(ends, end) < 0 ? -1 : 1;
    if (inline_case < 0) return -1;
    PyObject *done = PyObject_CallMethodObjArgs(unit, eng45_add, start, end, NULL);
    Py_XDECREF(done);
    return done == NULL ? -1 : 1;
}

/* ``breakdown.add_gpu(cat, name, start, end)`` (``rules``: ``breakdown.ADD_GPU_RULES``) where
   its layers are a list of unions and its kernels a dict that has the name or room for it;
   else the method called. 0, or -1 with an error. */
static int lane47_add_gpu(PyObject *breakdown, PyObject *rules, PyObject *cat, PyObject *name,
                          PyObject *start, PyObject *end) {
    int ready = eng45_laid_out(&lane47_gpu_parts, breakdown);
    ready = ready == 1 ? eng45_laid_out(&lane47_comm, breakdown) : ready;
    if (ready < 0) return -1;
    if (lane47_made_layers == NULL
        && (lane47_made_layers = PyUnicode_InternFromString("_made_layers")) == NULL)
        return -1;
    if (eng45_add == NULL && (eng45_add = PyUnicode_InternFromString("add")) == NULL)
        return -1;
    PyObject *layers = ready ? SLOT_AT(breakdown, lane47_gpu_parts.at[0]) : NULL;
    PyObject *kernels = ready ? SLOT_AT(breakdown, lane47_gpu_parts.at[1]) : NULL;
    Py_ssize_t kept = PyLong_AsSsize_t(PyTuple_GET_ITEM(rules, 2));
    Py_ssize_t most = PyLong_AsSsize_t(PyTuple_GET_ITEM(rules, 3));
    if (PyErr_Occurred()) return -1;
    int room = kernels != NULL && PyDict_CheckExact(kernels) && layers != NULL
        && PyList_CheckExact(layers) && PyUnicode_CheckExact(name);
    if (room && PyDict_GET_SIZE(kernels) >= most) {
        room = PyDict_Contains(kernels, name);
        if (room < 0) return -1;
    }
    if (!room) {
        PyObject *done = PyObject_CallMethodObjArgs(breakdown, feed46_add_gpu, cat, name, start,
                                                    end, NULL);
        Py_XDECREF(done);
        return done == NULL ? -1 : 0;
    }
    if (PyList_GET_SIZE(layers) == 0) {
        PyObject *made = PyObject_CallMethodNoArgs(breakdown, lane47_made_layers);
        Py_XDECREF(made);
        if (made == NULL) return -1;
        layers = SLOT_AT(breakdown, lane47_gpu_parts.at[0]);
        if (layers == NULL || !PyList_CheckExact(layers)) {
            PyErr_SetString(PyExc_TypeError, "feed_lane: IterationBreakdown's layers a list");
            return -1;
        }
    }
    PyObject *call[2] = {cat, name};
    PyObject *found = PyObject_Vectorcall(PyTuple_GET_ITEM(rules, 0), call, 2, NULL);
    long layer = found == NULL ? -1 : PyLong_AsLong(found);
    Py_XDECREF(found);
    if (layer < 0) return -1;
    Py_INCREF(layers);
    int failed = 0;
    for (Py_ssize_t k = layer; k < PyList_GET_SIZE(layers) && !failed; k++) {
        PyObject *unit = Py_NewRef(PyList_GET_ITEM(layers, k));
        failed = lane47_union_add(unit, start, end, kept) < 0;
        Py_DECREF(unit);
    }
    Py_DECREF(layers);
    PyObject *span = failed ? NULL : PyNumber_Subtract(end, start);
    if (span == NULL) return -1;
    long comm = PyLong_AsLong(PyTuple_GET_ITEM(rules, 4));
    if (layer == comm && (eng45_count(breakdown, &lane47_comm, 0) < 0
                          || feed46_add_to(breakdown, &lane47_comm, 1, span) < 0))
        failed = 1;
    int copy = failed ? -1 : PySet_Contains(PyTuple_GET_ITEM(rules, 1), cat);
    if (copy != 0) {
        Py_DECREF(span);
        return copy < 0 ? -1 : 0;
    }
    /* the kernel counted by name: ``[count, total µs]``, a new name kept interned */
    PyObject *seen = PyDict_GetItemWithError(kernels, name);
    if (seen == NULL && !PyErr_Occurred()) {
        PyObject *shared = Py_NewRef(name);
        PyUnicode_InternInPlace(&shared);
        PyObject *row = PyList_New(2);
        if (row != NULL) {
            PyList_SET_ITEM(row, 0, Py_NewRef(eng45_one));
            PyList_SET_ITEM(row, 1, Py_NewRef(span));
            failed = PyDict_SetItem(kernels, shared, row) < 0;
        }
        failed = row == NULL || failed;
        Py_XDECREF(row);
        Py_DECREF(shared);
    } else if (seen != NULL && PyList_CheckExact(seen) && PyList_GET_SIZE(seen) == 2) {
        PyObject *count = PyNumber_Add(PyList_GET_ITEM(seen, 0), eng45_one);
        PyObject *total = count == NULL ? NULL : PyNumber_Add(PyList_GET_ITEM(seen, 1), span);
        failed = total == NULL || PyList_SetItem(seen, 0, count) < 0
            || PyList_SetItem(seen, 1, total) < 0;
        if (total == NULL) Py_XDECREF(count);
    } else {
        if (seen != NULL) PyErr_SetString(PyExc_TypeError, "feed_lane: a kernel's [count, µs]");
        failed = 1;
    }
    Py_DECREF(span);
    return failed ? -1 : 0;
}

/* GPU work's times and launch: the busy time of its stream and the active time of all
   (``feed46_union``), the record's GPU span, the breakdown's layers (``add_gpu``), a
   kernel's launch delay (``LaunchTimes.delay``, then ``held48_add_delay``): the rest of
   ``Splitter._own_gpu_work`` once it is counted. 0, or -1 with an error. */
static int feed46_gpu_times(feed46_state *s, PyObject *event, PyObject *cat, PyObject *start,
                            PyObject *end, PyObject *corr, int kernel) {
    PyObject *streams = SLOT_AT(s->breakdown, feed46_work.at[0]);
    PyObject *pid = SLOT_AT(event, feed46_thread.at[0]), *tid = SLOT_AT(event, feed46_thread.at[1]);
    PyObject *stream = PyTuple_Pack(2, pid, tid), *added = NULL, *seen;
    if (stream == NULL) return -1;
    PyObject *was = PyDict_GetItemWithError(streams, stream);
    seen = was == NULL && PyErr_Occurred() ? NULL : feed46_union(was, start, end, &added);
    int failed = seen == NULL ? -1 : PyDict_SetItem(streams, stream, seen);
    Py_DECREF(stream);
    Py_XDECREF(seen);
    failed = failed < 0 ? -1 : feed46_add_to(s->record, &feed46_gpu_counts, 2, added);
    Py_XDECREF(added);
    if (failed < 0) return -1;
    seen = feed46_union(SLOT_AT(s->breakdown, feed46_work.at[1]), start, end, &added);
    if (seen == NULL) return -1;
    slot_set(s->breakdown, feed46_work.at[1], seen);
    failed = feed46_add_to(s->record, &feed46_gpu_span, 0, added);
    Py_DECREF(added);
    if (failed < 0 || feed46_extreme(s->record, &feed46_gpu_span, 1, start, Py_LT) < 0
        || feed46_extreme(s->record, &feed46_gpu_span, 2, end, Py_GT) < 0)
        return -1;
    PyObject *name = SLOT_AT(event, feed46_names.at[2]);
    if (name == Py_None || (PyUnicode_Check(name) && PyUnicode_GET_LENGTH(name) == 0))
        name = feed46_empty;
    if (lane47_add_gpu(s->breakdown, s->gpu_rules, cat, name, start, end) < 0) return -1;
    if (!kernel) return 0;
    /* ``LaunchTimes.delay(corr, start, owner)`` */
    PyObject *ends = SLOT_AT(s->launch_times, feed46_launch_ends.at[0]);
    PyObject *early = SLOT_AT(s->launch_times, feed46_launch_ends.at[1]);
    PyObject *launched = PyDict_GetItemWithError(ends, corr);
    if (launched == NULL) {
        if (PyErr_Occurred()) return -1;
        int known = PyDict_Contains(early, corr);
        if (known) return known < 0 ? -1 : 0;
        PyObject *first = PyTuple_Pack(2, s->owner, start);
        failed = first == NULL ? -1 : PyDict_SetItem(early, corr, first);
        Py_XDECREF(first);
        return failed < 0 ? -1 : feed46_bound(early, s->kept_launches);
    }
    PyObject *delay = PyNumber_Subtract(start, launched);
    failed = delay == NULL ? -1 : PyDict_DelItem(ends, corr);
    failed = failed < 0 ? -1 : held48_add_delay(s->breakdown, delay);
    Py_XDECREF(delay);
    return failed;
}

/* GPU work (its category routed by correlation id) whose launch is in the launches' range
   found last, owned by the iteration at hand, not after the latest whose GPU work came
   (``_freeze_gpu_before``), read while the detector wants no evidence and before any op
   held in order: owned as ``Splitter._own_gpu_work`` owns it (1); else 0; -1. */
static int feed46_gpu(feed46_state *s, PyObject *event, PyObject *raw, PyObject *ph,
                      PyObject *ts, PyObject *cat) {
    int is_x = PyUnicode_CheckExact(ph) && PyUnicode_Compare(ph, s->x_phase) == 0;
    int ready = feed46_calm(s, ts, is_x, 1);
    PyObject *args = SLOT_AT(event, feed46_args.at[0]), *dur = SLOT_AT(event, feed46_times.at[1]);
    if (ready != 1 || args == NULL || !PyDict_CheckExact(args) || dur == NULL
        || SLOT_AT(event, feed46_names.at[2]) == NULL || SLOT_AT(event, feed46_thread.at[0]) == NULL
        || SLOT_AT(event, feed46_thread.at[1]) == NULL)
        return ready < 0 ? -1 : 0;
    PyObject *corr = PyDict_GetItemWithError(args, s->correlation);
    if (corr == NULL || !PyLong_CheckExact(corr)) return PyErr_Occurred() ? -1 : 0;
    PyObject *lo = SLOT_AT(s->launches, feed46_hit.at[0]), *hi = SLOT_AT(s->launches, feed46_hit.at[1]);
    PyObject *owner = SLOT_AT(s->launches, feed46_hit.at[2]);
    if (lo == NULL || hi == NULL || owner == NULL || !PyLong_CheckExact(owner)) return 0;
    int in = feed46_both(lo, corr, Py_LE, hi, Py_LE);
    in = in == 1 ? tries50_compare(owner, s->owner, Py_EQ) : in;
    in = in == 1 ? tries50_compare(owner, s->gpu_latest, Py_LE) : in;
    if (in != 1) return in;
    PyObject *streams = SLOT_AT(s->breakdown, feed46_work.at[0]);
    PyObject *ends = SLOT_AT(s->launch_times, feed46_launch_ends.at[0]);
    PyObject *early = SLOT_AT(s->launch_times, feed46_launch_ends.at[1]);
    if (streams == NULL || !PyDict_CheckExact(streams) || SLOT_AT(s->breakdown, feed46_work.at[1]) == NULL
        || ends == NULL || !PyDict_CheckExact(ends) || early == NULL || !PyDict_CheckExact(early))
        return 0;
    int kernel = PySet_Contains(s->kernel_cats, cat);
    int timed = kernel < 0 ? -1 : PyObject_IsTrue(dur);
    if (timed < 0) return -1;
    PyObject *end = PyNumber_Add(ts, timed ? dur : feed46_zero);
    if (end == NULL || feed46_count(s, event, raw) < 0
        || eng45_count(s->record, &feed46_gpu_counts, 0) < 0
        || (kernel && eng45_count(s->record, &feed46_gpu_counts, 1) < 0)
        || feed46_gpu_times(s, event, cat, ts, end, corr, kernel) < 0) {
        Py_XDECREF(end);
        return -1;
    }
    Py_DECREF(end);
    return 1;
}

/* ---- lane47: a run's structural ops read, and held, in feed_lane (engine._feed_fields, _hold_cpu) ---- */

/* What ``feed_lane`` reads of the windows beyond ``eng45_windows`` (whether the latest window
   is decidable), of the held rows (``spill.HeldRows``) and of the held links
   (``spill.HeldLinks``: their count), and the splitter's attributes it reads and sets. */
static eng45_layout lane47_latest = {"closed latest_start starts"}, lane47_rows = {"items exact"},
    lane47_links = {"raws keys"}, lane47_links_more = {"by_ext events"};
static PyObject *lane47_seq, *lane47_thread, *lane47_rows_name, *lane47_held_n,
    *lane47_pending, *lane47_links_name, *lane47_waiting, *lane47_closed, *lane47_held_name;

/* The names above, made at the first call; 0, or -1 with an error. */
static int lane47_names_ready(void) {
    if (lane47_links_name != NULL) return 0;
    lane47_seq = PyUnicode_InternFromString("_seq");
    lane47_thread = PyUnicode_InternFromString("_held_thread");
    lane47_rows_name = PyUnicode_InternFromString("_cpu_rows");
    lane47_held_n = PyUnicode_InternFromString("_cpu_held_n");
    lane47_pending = PyUnicode_InternFromString("_pending");
    if (lane47_seq == NULL || lane47_thread == NULL || lane47_rows_name == NULL
        || lane47_held_n == NULL || lane47_pending == NULL)
        return -1;
    lane47_waiting = PyUnicode_InternFromString("_waiting_count");
    lane47_closed = PyUnicode_InternFromString("closed");
    lane47_held_name = PyUnicode_InternFromString("_held_name"); /* (held48) */
    if (lane47_waiting == NULL || lane47_closed == NULL || lane47_held_name == NULL) return -1;
    lane47_links_name = PyUnicode_InternFromString("_pending_links");
    return lane47_links_name == NULL ? -1 : 0;
}

/* What is held spilled once it reaches the bound (``Splitter._bound_held``), counted as
   ``_held_in_memory`` counts it: the heap's items, the links held and the CPU-side events
   held (``held``: the splitter's ``_cpu_held_n``, as its caller has just set it; NULL: read
   here). 0, or -1 with an error. */
static int lane47_bound(feed46_state *s, PyObject *held_n) {
    PyObject *pending = PyObject_GetAttr(s->splitter, lane47_pending);
    PyObject *links = pending == NULL ? NULL : PyObject_GetAttr(s->splitter, lane47_links_name);
    PyObject *n = links == NULL ? NULL : held_n != NULL ? Py_NewRef(held_n)
        : PyObject_GetAttr(s->splitter, lane47_held_n);
    Py_ssize_t count = n == NULL ? -1 : PyObject_Length(pending);
    PyObject *raws = count < 0 || eng45_laid_out(&lane47_links, links) != 1 ? NULL
        : SLOT_AT(links, lane47_links.at[0]);
    Py_ssize_t linked = raws == NULL ? -1 : PyObject_Length(raws);
    Py_ssize_t held = linked < 0 ? -1 : PyLong_AsSsize_t(n);
    Py_XDECREF(n);
    Py_XDECREF(links);
    Py_XDECREF(pending);
    if (held < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "feed_lane: HeldLinks with raws");
        return -1;
    }
    if (count + linked + held < s->pending_limit) return 0;
    PyObject *done = PyObject_CallNoArgs(s->bound_held);
    Py_XDECREF(done);
    return done == NULL ? -1 : 0;
}

/* Whether a time a float column holds exactly (``engine._FLOAT_INTEGERS``): a float, or an
   int within 2**53 (``*integer`` set); 1, 0, or -1 with an error. */
static int lane47_float_time(PyObject *time, int *integer) {
    if (PyFloat_CheckExact(time)) return 1;
    if (!PyLong_CheckExact(time)) return 0;
    int overflow;
    long long v = PyLong_AsLongLongAndOverflow(time, &overflow);
    if (v == -1 && PyErr_Occurred()) return -1;
    *integer = 1;
    return !overflow && v >= -(1LL << 53) && v <= (1LL << 53);
}

/* What a held op keeps, by its name's role (``serving.ROLES``, or where not remembered
   there, ``serving.role_of``: what ``Splitter._hold_cpu`` asks at the same point, so the
   table is filled as there), as ``_hold_cpu`` tells it: its thread alone (1) where the role
   tells nothing (none, or a GEMM's without its ``Input Dims``) and it is no step number;
   else, without ``Input Dims`` (held48), its thread and name (2: phase evidence or a step
   number, an op held named). 0 (the engine holds it: ``Input Dims`` to keep), or -1 with an
   error. (role53: a name not remembered, a million names of their own once the table is
   full, went to the engine's ``_feed_fields`` and ``_hold_cpu``, each op through two
   frames of Python more.) */
static int lane47_tells_nothing(feed46_state *s, PyObject *name, PyObject *args) {
    PyObject *role = Py_XNewRef(PyDict_GetItemWithError(s->roles, name));
    if (role == NULL) {
        if (PyErr_Occurred()) return -1;
        role = PyObject_CallOneArg(s->role_of, name);
        if (role == NULL) return -1;
    }
    long kind = PyLong_AsLong(role);
    Py_DECREF(role);
    if (kind == -1 && PyErr_Occurred()) return -1;
    int dims = args != Py_None && PyDict_GET_SIZE(args) ? PyDict_Contains(args, s->dims) : 0;
    Py_ssize_t step = dims < 0 ? -1
        : PyUnicode_Tailmatch(name, s->step_prefix, 0, PY_SSIZE_T_MAX, -1);
    if (step < 0) return -1;
    if ((kind == 0 || (kind == s->gemm && !dims)) && !step) return 1;
    return dims ? 0 : 2;
}

/* held48: ``(pid, tid, name)`` of an op held named (``lane47_tells_nothing``'s 2), the name
   the one held named last where equal (``Splitter._held_name``: held one after another with
   one name, one string, pickled once in a batch), a new reference; NULL with an error. */
static PyObject *held48_named(feed46_state *s, PyObject *thread, PyObject *name) {
    PyObject *before = PyObject_GetAttr(s->splitter, lane47_held_name);
    int same = before == NULL ? -1 : tries50_compare(name, before, Py_EQ);
    if (same == 0 && PyObject_SetAttr(s->splitter, lane47_held_name, name) < 0) same = -1;
    PyObject *held = same < 0 ? NULL : PyTuple_Pack(3, PyTuple_GET_ITEM(thread, 0),
                                                    PyTuple_GET_ITEM(thread, 1),
                                                    same ? before : name);
    Py_XDECREF(before);
    return held;
}

/* ``(end, seq, start, held, None, raw)`` appended to the held rows as ``_hold_cpu`` appends
   it (``held``: what the op keeps), the splitter's count of held events raised, and what is
   held spilled once it reaches the bound (``_bound_held``). 0, or -1 with an error. */
static int lane47_append(feed46_state *s, PyObject *end, PyObject *start, PyObject *held,
                         PyObject *raw, int integer) {
    PyObject *seq = PyObject_GetAttr(s->splitter, lane47_seq), *more = NULL, *item = NULL;
    PyObject *rows = PyObject_GetAttr(s->splitter, lane47_rows_name);
    int failed = seq == NULL || rows == NULL ? -1 : eng45_laid_out(&lane47_rows, rows) != 1;
    PyObject *items = failed ? NULL : SLOT_AT(rows, lane47_rows.at[0]);
    if (items == NULL || !PyList_CheckExact(items)) failed = -1;
    if (!failed && (more = PyNumber_Add(seq, eng45_one)) != NULL
        && PyObject_SetAttr(s->splitter, lane47_seq, more) == 0)
        item = PyTuple_Pack(6, end, more, start, held, Py_None, raw);
    failed = item == NULL || PyList_Append(items, item) < 0 ? -1 : 0;
    if (!failed && integer) slot_set(rows, lane47_rows.at[1], Py_NewRef(Py_True));
    Py_XDECREF(item);
    Py_XDECREF(more);
    Py_XDECREF(rows);
    Py_XDECREF(seq);
    if (failed) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "feed_lane: HeldRows with a list of items");
        return -1;
    }
    PyObject *n = PyObject_GetAttr(s->splitter, lane47_held_n);
    more = n == NULL ? NULL : PyNumber_Add(n, eng45_one);
    Py_XDECREF(n);
    failed = more == NULL ? -1 : PyObject_SetAttr(s->splitter, lane47_held_n, more);
    /* (held48: the count just set passed on, not read again) */
    failed = failed < 0 ? -1 : lane47_bound(s, more);
    Py_XDECREF(more);
    return failed;
}

/* A CPU op that ``_read_op`` has read, held as ``_hold_cpu`` holds it where that is its
   common case: its window not decidable yet (``Windows.decidable``, not the cached window)
   and its times held by a float, it links nothing (no correlation id) and keeps its thread
   alone (``lane47_tells_nothing``), or is handed out itself (kept, without its bytes). 1,
   0 (``_feed_fields`` places it), or -1 with an error. */
static int lane47_hold(feed46_state *s, PyObject *event, PyObject *raw, PyObject *ts,
                       PyObject *end, PyObject *cat, PyObject *name, PyObject *thread,
                       PyObject *args) {
    PyObject *lo = eng45_get(s->windows, &eng45_windows, 0);
    PyObject *hi = lo == NULL ? NULL : eng45_get(s->windows, &eng45_windows, 1);
    PyObject *closed = SLOT_AT(s->windows, lane47_latest.at[0]);
    PyObject *latest = SLOT_AT(s->windows, lane47_latest.at[1]);
    if (hi == NULL) return -1;
    if (closed != Py_False || latest == NULL) return 0;
    int cached = feed46_both(lo, ts, Py_LE, end, Py_LE);
    cached = cached == 1 ? tries50_compare(end, hi, Py_LT) : cached;
    int decidable = cached != 0 ? cached : tries50_compare(end, latest, Py_LT);
    if (decidable != 0) return decidable < 0 ? -1 : 0;
    int integer = 0, exact = lane47_float_time(end, &integer);
    exact = exact == 1 ? lane47_float_time(ts, &integer) : exact;
    int ours = exact == 1 ? PySet_Contains(s->cpu_op_cats, cat) : exact;
    if (ours != 1) return ours;
    int kept = s->assigned != Py_None;
    if (kept && raw == Py_None) /* handed out itself */
        return lane47_append(s, end, ts, event, raw, integer) < 0 ? -1 : 1;
    if (args != Py_None && PyDict_GET_SIZE(args)) {
        int linking = PyDict_Contains(args, s->correlation);
        if (linking != 0) return linking < 0 ? -1 : 0;
    }
    ours = lane47_tells_nothing(s, name, args);
    if (ours == 2) {
        PyObject *named = held48_named(s, thread, name);
        int failed = named == NULL ? -1 : lane47_append(s, end, ts, named, kept ? raw : Py_None,
                                                        integer);
        Py_XDECREF(named);
        return failed < 0 ? -1 : 1;
    }
    if (ours != 1) return ours;
    /* the ops of a thread that follow each other hold one tuple (``_hold_cpu``) */
    PyObject *before = PyObject_GetAttr(s->splitter, lane47_thread);
    int same = before == NULL ? -1 : tries50_equal(thread, before);
    if (same == 0 && PyObject_SetAttr(s->splitter, lane47_thread, thread) < 0) same = -1;
    int failed = same < 0 ? -1
        : lane47_append(s, end, ts, same ? before : thread, kept ? raw : Py_None, integer);
    Py_XDECREF(before);
    return failed < 0 ? -1 : 1;
}

/* held48: an op read in C (below, after det46's ``pushed``), the names it reads with, and the
   slots it reads of the stacks (``stack.ThreadStacks``), of a thread's stack
   (``stack._Thread``) and of the thread the order has settled (``order._Thread``). */
static eng45_layout held48_stacks = {"_latest _latest_state _tolerance"},
    held48_stack_counts = {"known last_section"}, held48_stack = {"ends names last_start"},
    held48_settled = {"last_start last_cat"};
static int held48_names_ready(void);
static int held48_read(feed46_state *s, PyObject *thread, PyObject *ts, PyObject *end,
                       PyObject *name, PyObject *cat);

/* A structural op (``ph`` ``X``, its category routed as structure): read (``read_op``,
   ``Splitter._read_op``), then held (``lane47_hold``) or placed by ``_feed_fields`` (as
   ``_READ_STRUCTURE``, read already), as ``_feed_fields`` feeds it (1); 0 where it is no
   ``X`` (the engine feeds it); -1 with an error. What the run took of the iteration at
   hand is stale once an op is read (its boundaries change it): what follows that is no
   structural op goes back to the engine (``read_ops``). */
static int lane47_op(feed46_state *s, PyObject *event, PyObject *raw, PyObject *ph,
                     PyObject *ts, PyObject *cat) {
    int is_x = PyUnicode_CheckExact(ph) && PyUnicode_Compare(ph, s->x_phase) == 0;
    PyObject *dur = SLOT_AT(event, feed46_times.at[1]), *args = SLOT_AT(event, feed46_args.at[0]);
    PyObject *name = SLOT_AT(event, feed46_names.at[2]);
    PyObject *pid = SLOT_AT(event, feed46_thread.at[0]), *tid = SLOT_AT(event, feed46_thread.at[1]);
    if (!is_x || dur == NULL || args == NULL || name == NULL || pid == NULL || tid == NULL
        || (args != Py_None && !PyDict_CheckExact(args)) || (name != Py_None && !PyUnicode_CheckExact(name)))
        return 0;
    int timed = PyObject_IsTrue(dur);
    if (timed < 0) return -1;
    if (name == Py_None || PyUnicode_GET_LENGTH(name) == 0) name = feed46_empty;
    PyObject *end = timed ? PyNumber_Add(ts, dur) : Py_NewRef(ts);
    PyObject *thread = end == NULL ? NULL : PyTuple_Pack(2, pid, tid);
    int done = -1;
    if (thread != NULL) {
        int read = held48_read(s, thread, ts, end, name, cat);
        s->read_ops = 1;
        done = read < 0 ? -1 : lane47_hold(s, event, raw, ts, end, cat, name, thread, args);
    }
    if (done == 0) {
        PyObject *call[11] = {event, raw, s->read_route, ph, ts, cat, name, dur, pid, tid, args};
        PyObject *placed = PyObject_Vectorcall(s->feed_fields, call, 11, NULL);
        done = placed == NULL ? -1 : 1;
        Py_XDECREF(placed);
    }
    Py_XDECREF(thread);
    Py_XDECREF(end);
    return done;
}

/* Whether the launches (``MonotonicOwnerMap``) know ``key`` (an int): in the range found
   last, or in one of its ranges (``lookup``'s bisect, the range found not kept: the engine
   looks up a key known). 1 (or where the ranges are not lists: the engine's), 0, or -1. */
static int lane47_known(feed46_state *s, PyObject *key) {
    PyObject *los = SLOT_AT(s->launches, feed46_ranges.at[0]);
    PyObject *his = SLOT_AT(s->launches, feed46_ranges.at[1]);
    PyObject *lo = SLOT_AT(s->launches, feed46_hit.at[0]), *hi = SLOT_AT(s->launches, feed46_hit.at[1]);
    if (los == NULL || his == NULL || lo == NULL || hi == NULL || !PyList_CheckExact(los)
        || !PyList_CheckExact(his) || PyList_GET_SIZE(his) != PyList_GET_SIZE(los))
        return 1;
    int hit = feed46_both(lo, key, Py_LE, hi, Py_LE);
    if (hit != 0) return hit;
    Py_ssize_t a = 0, b = PyList_GET_SIZE(los);
    while (a < b) { /* ``bisect_right(los, key)`` */
        Py_ssize_t mid = a + (b - a) / 2;
        int below = tries50_compare(key, PyList_GET_ITEM(los, mid), Py_LT);
        if (below < 0) return -1;
        if (below) b = mid;
        else a = mid + 1;
    }
    return a == 0 ? 0 : tries50_compare(key, PyList_GET_ITEM(his, a - 1), Py_LE);
}

/* ``held`` (what the engine keeps of an event waiting for its launch ``key``) and ``raw``
   held as a link (``Splitter._hold_linked``: ``HeldLinks.add``), then what is held bounded
   (``lane47_bound``). 0, or -1 with an error. */
static int lane47_link(feed46_state *s, PyObject *key, PyObject *held, PyObject *raw) {
    PyObject *links = PyObject_GetAttr(s->splitter, lane47_links_name);
    int ready = links == NULL ? -1 : eng45_laid_out(&lane47_links, links);
    ready = ready == 1 ? eng45_laid_out(&lane47_links_more, links) : ready;
    PyObject *columns[4] = {NULL, NULL, NULL, NULL}, *values[4] = {key, Py_False, held, raw};
    if (ready == 1) {
        columns[0] = SLOT_AT(links, lane47_links.at[1]);
        columns[1] = SLOT_AT(links, lane47_links_more.at[0]);
        columns[2] = SLOT_AT(links, lane47_links_more.at[1]);
        columns[3] = SLOT_AT(links, lane47_links.at[0]);
    }
    for (int k = 0; k < 4 && ready == 1; k++)
        ready = columns[k] == NULL || !PyList_CheckExact(columns[k]) ? 0 : 1;
    if (ready == 0)
        PyErr_SetString(PyExc_TypeError, "feed_lane: HeldLinks with lists of its columns");
    for (int k = 0; k < 4 && ready == 1; k++)
        ready = PyList_Append(columns[k], values[k]) < 0 ? -1 : 1;
    Py_XDECREF(links);
    return ready != 1 ? -1 : lane47_bound(s, NULL);
}

/* GPU work (``work``: its fields, ``_gpu_work_fields``' tuple) or a launch flow (``work``
   NULL) whose launch ``key`` (an int) the launches do not know yet (``lane47_known``):
   waiting for it as ``Splitter._wait_for_launch`` has it wait, what it keeps as
   ``_held_event``: held as a link (``lane47_link``) while no iteration is known, or many
   wait, else among the waiting (``_waiting_gpu``). 1, 0 (the engine routes it), or -1. */
static int lane47_wait(feed46_state *s, PyObject *event, PyObject *raw, PyObject *key,
                       PyObject *work) {
    int known = lane47_known(s, key);
    PyObject *starts = SLOT_AT(s->windows, lane47_latest.at[2]);
    if (known != 0 || starts == NULL) return known < 0 ? -1 : 0;
    int some = PyObject_IsTrue(starts);
    PyObject *count = some < 0 ? NULL : PyObject_GetAttr(s->splitter, lane47_waiting);
    long waiting = count == NULL ? -1 : PyLong_AsLong(count);
    int linked = waiting == -1 && PyErr_Occurred() ? -1 : waiting >= s->waiting_limit;
    if (linked == 0 && !some) { /* no iteration yet: linked unless closed */
        PyObject *closed = PyObject_GetAttr(s->splitter, lane47_closed);
        int shut = closed == NULL ? -1 : PyObject_IsTrue(closed);
        Py_XDECREF(closed);
        linked = shut < 0 ? -1 : !shut;
    }
    int kept = s->assigned != Py_None;
    PyObject *held = kept && raw == Py_None ? event : work != NULL ? work : Py_None;
    int failed = linked;
    if (linked == 1) failed = lane47_link(s, key, held, kept ? raw : Py_None);
    else if (linked == 0) {
        PyObject *more = PyNumber_Add(count, eng45_one), *list = NULL;
        PyObject *pair = more == NULL ? NULL : PyTuple_Pack(2, held, raw);
        if (pair != NULL && PyObject_SetAttr(s->splitter, lane47_waiting, more) == 0) {
            list = PyDict_GetItemWithError(s->waiting, key);
            if (list != NULL) Py_INCREF(list);
            else if (!PyErr_Occurred() && (list = PyList_New(0)) != NULL
                     && PyDict_SetItem(s->waiting, key, list) < 0)
                Py_CLEAR(list);
        }
        failed = list == NULL || PyList_Append(list, pair) < 0 ? -1 : 0;
        Py_XDECREF(list);
        Py_XDECREF(pair);
        Py_XDECREF(more);
    }
    Py_XDECREF(count);
    return failed < 0 ? -1 : 1;
}

/* A launch flow that ``feed46_flow`` did not take, waiting (``lane47_wait``) where its id is
   an int the launches do not know: 1, 0, or -1. */
static int lane47_wait_flow(feed46_state *s, PyObject *event, PyObject *raw) {
    PyObject *key = SLOT_AT(event, feed46_times.at[2]);
    if (key == NULL || !PyLong_CheckExact(key)) return 0;
    return lane47_wait(s, event, raw, key, NULL);
}

/* GPU work that ``feed46_gpu`` did not take, read as ``_feed_fields`` reads it (while the
   detector wants no evidence and no op held in order ends its section), waiting
   (``lane47_wait``, its fields as ``_gpu_work_fields`` has them) where its correlation id
   is an int the launches do not know: 1, 0, or -1. */
static int lane47_wait_gpu(feed46_state *s, PyObject *event, PyObject *raw, PyObject *ph,
                           PyObject *ts, PyObject *cat) {
    int is_x = PyUnicode_CheckExact(ph) && PyUnicode_Compare(ph, s->x_phase) == 0;
    int ready = feed46_calm(s, ts, is_x, 1);
    PyObject *args = SLOT_AT(event, feed46_args.at[0]), *dur = SLOT_AT(event, feed46_times.at[1]);
    PyObject *name = SLOT_AT(event, feed46_names.at[2]);
    PyObject *pid = SLOT_AT(event, feed46_thread.at[0]), *tid = SLOT_AT(event, feed46_thread.at[1]);
    if (ready != 1 || args == NULL || !PyDict_CheckExact(args) || dur == NULL || name == NULL
        || pid == NULL || tid == NULL)
        return ready < 0 ? -1 : 0;
    PyObject *corr = PyDict_GetItemWithError(args, s->correlation);
    if (corr == NULL || !PyLong_CheckExact(corr)) return PyErr_Occurred() ? -1 : 0;
    Py_INCREF(corr);
    PyObject *work = PyTuple_Pack(7, cat, ts, dur, pid, tid, name, corr);
    int waits = work == NULL ? -1 : lane47_wait(s, event, raw, corr, work);
    Py_XDECREF(work);
    Py_DECREF(corr);
    return waits;
}

/* The splitter's parts (``(splitter, read_op, feed_fields, bound_held, pending_limit, stacks,
   reads_stacks, add_boundary)``) and the rules (``(structure route, read route, CPU op
   categories, serving.ROLES, GEMM, the dims' key, the step prefix,
   engine._WAITING_IN_MEMORY, breakdown.ADD_GPU_RULES, stack.LIVE_THREADS,
   serving.role_of)``) the ops of a run are read with (held48: the last three parts and the
   rule before the last, ``held48_read``),
   and events held, into ``s``; 1, 0 where a class lacks a slot read (no op is taken, nothing
   held), -1 with an error. */
static int lane47_ready(feed46_state *s, PyObject *held, PyObject *rules) {
    if (!PyTuple_Check(held) || PyTuple_GET_SIZE(held) != 8 || !PyTuple_Check(rules)
        || PyTuple_GET_SIZE(rules) != 11 || !PyAnySet_Check(PyTuple_GET_ITEM(rules, 2))
        || !PyTuple_Check(PyTuple_GET_ITEM(rules, 8)) || PyTuple_GET_SIZE(PyTuple_GET_ITEM(rules, 8)) != 5
        || !PyAnySet_Check(PyTuple_GET_ITEM(PyTuple_GET_ITEM(rules, 8), 1))
        || !PyDict_CheckExact(PyTuple_GET_ITEM(rules, 3))
        || !PyUnicode_Check(PyTuple_GET_ITEM(rules, 6))
        || !PyCallable_Check(PyTuple_GET_ITEM(rules, 10))) {
        PyErr_SetString(PyExc_TypeError, "feed_lane: the ops' parts or rules of other types");
        return -1;
    }
    s->splitter = PyTuple_GET_ITEM(held, 0);
    s->read_op = PyTuple_GET_ITEM(held, 1);
    s->feed_fields = PyTuple_GET_ITEM(held, 2);
    s->bound_held = PyTuple_GET_ITEM(held, 3);
    s->pending_limit = PyLong_AsSsize_t(PyTuple_GET_ITEM(held, 4));
    s->by_structure = PyLong_AsLong(PyTuple_GET_ITEM(rules, 0));
    s->read_route = PyTuple_GET_ITEM(rules, 1);
    s->cpu_op_cats = PyTuple_GET_ITEM(rules, 2);
    s->roles = PyTuple_GET_ITEM(rules, 3);
    s->role_of = PyTuple_GET_ITEM(rules, 10);
    s->gemm = PyLong_AsLong(PyTuple_GET_ITEM(rules, 4));
    s->dims = PyTuple_GET_ITEM(rules, 5);
    s->step_prefix = PyTuple_GET_ITEM(rules, 6);
    s->waiting_limit = PyLong_AsLong(PyTuple_GET_ITEM(rules, 7));
    s->gpu_rules = PyTuple_GET_ITEM(rules, 8);
    /* (held48: ``held48_read``'s parts, and ``stack.LIVE_THREADS``) */
    s->stacks = PyTuple_GET_ITEM(held, 5);
    s->reads_stacks = PyObject_IsTrue(PyTuple_GET_ITEM(held, 6));
    s->add_boundary = PyTuple_GET_ITEM(held, 7);
    s->live_threads = PyLong_AsSsize_t(PyTuple_GET_ITEM(rules, 9));
    if (PyErr_Occurred() || lane47_names_ready() < 0 || held48_names_ready() < 0) return -1;
    int ready = eng45_laid_out(&held48_stacks, s->stacks);
    ready = ready == 1 ? eng45_laid_out(&held48_stack_counts, s->stacks) : ready;
    ready = ready == 1 ? eng45_laid_out(&eng45_windows, s->windows) : ready;
    ready = ready == 1 ? eng45_laid_out(&feed46_ranges, s->launches) : ready;
    ready = ready == 1 ? eng45_laid_out(&feed46_hit, s->launches) : ready;
    return ready == 1 ? eng45_laid_out(&lane47_latest, s->windows) : ready;
}

/* One event of a checked batch: taken (1), not (0: the engine feeds it), -1 with an error. */
static int feed46_take(feed46_state *s, PyObject *event, PyObject *raw) {
    int ready = eng45_laid_out(&feed46_names, event);
    ready = ready == 1 ? eng45_laid_out(&feed46_times, event) : ready;
    ready = ready == 1 ? eng45_laid_out(&feed46_args, event) : ready;
    ready = ready == 1 ? eng45_laid_out(&feed46_thread, event) : ready;
    if (ready != 1) return ready;
    PyObject *ph = SLOT_AT(event, feed46_names.at[0]), *cat = SLOT_AT(event, feed46_names.at[1]);
    PyObject *ts = SLOT_AT(event, feed46_times.at[0]);
    /* (metadata, and an event without a phase or a time: the engine's) */
    if (ph == NULL || cat == NULL || ts == NULL || !PyUnicode_CheckExact(ph) || ts == Py_None
        || PyUnicode_CompareWithASCIIString(ph, "M") == 0)
        return 0;
    PyObject *route = PyDict_GetItemWithError(s->routes, cat);
    if (route == NULL && PyErr_Occurred()) return -1;
    long way = route == NULL ? s->by_window : PyLong_AsLong(route);
    if (way == -1 && PyErr_Occurred()) return -1;
    if (way == s->by_structure) return s->ops_ready ? lane47_op(s, event, raw, ph, ts, cat) : 0;
    if (s->read_ops) return 0;
    /* (lane47: what the cases of the iteration at hand do not take may wait for its launch,
       whatever the iteration at hand) */
    if (way == s->by_flow_id) {
        int flow = PySet_Contains(s->flow_phases, ph);
        int taken = flow == 1 && s->hot_ready ? feed46_flow(s, event, raw) : flow < 0 ? -1 : 0;
        return flow == 1 && taken == 0 && s->ops_ready ? lane47_wait_flow(s, event, raw) : taken;
    }
    if (way == s->by_correlation) {
        int taken = s->hot_ready ? feed46_gpu(s, event, raw, ph, ts, cat) : 0;
        return taken == 0 && s->ops_ready ? lane47_wait_gpu(s, event, raw, ph, ts, cat) : taken;
    }
    return way == s->by_window && s->hot_ready ? feed46_window(s, event, raw, ph, ts, cat) : 0;
}

/* feed_lane(pairs, hot, assigned, parts, rules, gpu_latest) -> (event, raw), or None: the
   next events of ``pairs`` (an iterator of a checked batch's ``(event, raw)``,
   ``validate.SlimEvent`` structs) taken in order, as ``engine.Splitter._feed_checked`` feeds
   each, while each is one of its common cases whole (``feed46_take``), owned by the iteration
   at hand (``hot``: ``(owner, record, breakdown, ...)``): a launch flow, or GPU work (not of
   an iteration after ``gpu_latest``, ``Splitter._gpu_latest``), of the launches' range found
   last; a CPU-side event in the windows' cached window that links nothing, or a runtime
   call. The first it does not take is handed back (the engine feeds it), None once ``pairs``
   is done. ``assigned``: the list of events handed out (None: nothing kept); ``parts``:
   ``(windows, launches, launch_times, waiting_gpu, order, detector, ops' parts)``;
   ``rules``: ``engine._LANE_RULES``. Structural ops are taken too, and GPU work and launch
   flows whose launch is not known yet, whatever the iteration at hand (``lane47_op``,
   ``lane47_wait``; ``rules[10]``, ``parts[6]``: ``lane47_ready``). Where a class lacks a
   slot it reads, it takes nothing. */
static PyObject *feed_lane(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6 || !PyTuple_Check(args[1]) || PyTuple_GET_SIZE(args[1]) < 3
        || !PyTuple_Check(args[3]) || PyTuple_GET_SIZE(args[3]) != 7 || !PyTuple_Check(args[4])
        || PyTuple_GET_SIZE(args[4]) != 11) {
        PyErr_SetString(PyExc_TypeError,
                        "feed_lane(pairs, hot, assigned, parts, rules, gpu_latest)");
        return NULL;
    }
    if (feed46_add_delay == NULL) {
        feed46_zero = PyLong_FromLong(0);
        feed46_no_time = feed46_zero == NULL ? NULL : PyFloat_FromDouble(0.0);
        feed46_empty = feed46_no_time == NULL ? NULL : PyUnicode_FromString("");
        feed46_add_gpu = feed46_empty == NULL ? NULL : PyUnicode_InternFromString("add_gpu");
        feed46_add_delay = feed46_add_gpu == NULL ? NULL
            : PyUnicode_InternFromString("add_launch_delay");
        if (feed46_add_delay == NULL) return NULL;
    }
    PyObject *parts = args[3], *rules = args[4];
    feed46_state s = {
        .owner = PyTuple_GET_ITEM(args[1], 0), .record = PyTuple_GET_ITEM(args[1], 1),
        .breakdown = PyTuple_GET_ITEM(args[1], 2), .gpu_latest = args[5],
        .kernel_cats = PyTuple_GET_ITEM(args[4], 9),
        .assigned = args[2], .windows = PyTuple_GET_ITEM(parts, 0),
        .launches = PyTuple_GET_ITEM(parts, 1), .launch_times = PyTuple_GET_ITEM(parts, 2),
        .waiting = PyTuple_GET_ITEM(parts, 3), .order = PyTuple_GET_ITEM(parts, 4),
        .detector = PyTuple_GET_ITEM(parts, 5), .routes = PyTuple_GET_ITEM(rules, 0),
        .flow_phases = PyTuple_GET_ITEM(rules, 1), .launch_names = PyTuple_GET_ITEM(rules, 2),
        .graph_names = PyTuple_GET_ITEM(rules, 3), .frame_cat = PyTuple_GET_ITEM(rules, 5),
        .x_phase = PyTuple_GET_ITEM(rules, 6), .correlation = PyTuple_GET_ITEM(rules, 7),
        .wants_evidence = -2};
    s.kept_launches = PyLong_AsSsize_t(PyTuple_GET_ITEM(rules, 4));
    PyObject *ways = PyTuple_GET_ITEM(rules, 8);
    if (s.kept_launches == -1 && PyErr_Occurred()) return NULL;
    if (!PyTuple_Check(ways) || PyTuple_GET_SIZE(ways) != 3 || !PyDict_CheckExact(s.routes)
        || !PyAnySet_Check(s.kernel_cats)
        || !PyAnySet_Check(s.flow_phases) || !PyAnySet_Check(s.launch_names)
        || !PyAnySet_Check(s.graph_names) || !PyDict_CheckExact(s.waiting)
        || !PyUnicode_Check(s.x_phase) || (s.assigned != Py_None && !PyList_Check(s.assigned))) {
        PyErr_SetString(PyExc_TypeError, "feed_lane: parts or rules of other types");
        return NULL;
    }
    s.by_flow_id = PyLong_AsLong(PyTuple_GET_ITEM(ways, 0));
    s.by_window = PyLong_AsLong(PyTuple_GET_ITEM(ways, 1));
    s.by_correlation = PyLong_AsLong(PyTuple_GET_ITEM(ways, 2));
    if (PyErr_Occurred()) return NULL;
    PyObject *pairs = args[0], *pair;
    /* nothing taken where a class lacks a slot read (the engine feeds each) */
    if (eng45_one == NULL && (eng45_one = PyLong_FromLong(1)) == NULL) return NULL;
    int ready = PyLong_CheckExact(s.owner) && s.record != Py_None
        && PyLong_AsLong(s.owner) >= 0;
    ready = ready ? eng45_laid_out(&eng45_record, s.record) : 0;
    ready = ready == 1 ? eng45_laid_out(&feed46_launched, s.record) : ready;
    ready = ready == 1 ? eng45_laid_out(&feed46_gpu_counts, s.record) : ready;
    ready = ready == 1 ? eng45_laid_out(&feed46_gpu_span, s.record) : ready;
    ready = ready == 1 ? eng45_laid_out(&feed46_work, s.breakdown) : ready;
    ready = ready == 1 ? eng45_laid_out(&eng45_windows, s.windows) : ready;
    ready = ready == 1 ? eng45_laid_out(&feed46_ranges, s.launches) : ready;
    ready = ready == 1 ? eng45_laid_out(&feed46_hit, s.launches) : ready;
    ready = ready == 1 ? eng45_laid_out(&feed46_launch_ends, s.launch_times) : ready;
    s.hot_ready = ready == 1;
    s.ops_ready = ready < 0 ? -1 : lane47_ready(&s, PyTuple_GET_ITEM(parts, 6),
                                                PyTuple_GET_ITEM(rules, 10));
    if (ready < 0 || s.ops_ready < 0) return NULL;
    /* held here: the slots read may be replaced while the run is taken (``add_gpu`` is code
       of Python) */
    Py_INCREF(s.owner);
    Py_INCREF(s.record);
    Py_INCREF(s.breakdown);
    while ((pair = PyIter_Next(pairs)) != NULL) {
        int taken = 0;
        if ((s.hot_ready || s.ops_ready) && PyTuple_CheckExact(pair) && PyTuple_GET_SIZE(pair) == 2)
            taken = feed46_take(&s, PyTuple_GET_ITEM(pair, 0), PyTuple_GET_ITEM(pair, 1));
        if (taken != 1) {
            if (taken < 0) Py_CLEAR(pair);
            break;
        }
        Py_DECREF(pair);
    }
    Py_DECREF(s.owner);
    Py_DECREF(s.record);
    Py_DECREF(s.breakdown);
    Py_XDECREF(s.flush_below);
    if (pair == NULL && !PyErr_Occurred()) Py_RETURN_NONE;
    return pair;
}

/* ---- det45: a one-op instance's anchor, matched (matcher.anchor_after_alike) ---- */

/* The slots of a ``matcher.RootMatcher`` that ``anchor_after_alike`` reads and sets. */
enum { MATCH_FRAMES, MATCH_ANCHOR, MATCH_CURRENT, MATCH_WAITING, MATCH_TENTATIVE,
       MATCH_TRIGGER, MATCH_MEASURED_ONE, MATCH_SHORTEST, MATCH_OPENING, MATCH_RECENT,
       MATCH_ALIKE, MATCH_STARTS, MATCH_THREAD, MATCH_NAMES, MATCH_SLOTS };
static PyObject *match_slot_names;

/* Whether ``a == b`` (1), not (0), or -1 with an exception (an object is equal to itself, as
   Python's ``==`` finds every symbol, time and count a matcher compares). */
static int equal(PyObject *a, PyObject *b) {
    return tries50_equal(a, b);  /* (without a call where the values tell: tries50) */
}

/* Whether the matched one-op instance ``ended`` measures alike the one measured before
   (``one``: its (symbol, time, GPU work), or None) and the shortest instance is one op:
   1, 0, or -1 with an exception. */
static int measured_alike(PyObject *ended, PyObject *one, PyObject *shortest) {
    if (Py_TYPE(ended) != &NodeType || !PyTuple_CheckExact(one) || PyTuple_GET_SIZE(one) != 3)
        return 0;
    NodeObject *op = (NodeObject *)ended;
    int same = equal(op->sym, PyTuple_GET_ITEM(one, 0));
    if (same != 1) return same;
    PyObject *took = PyNumber_Subtract(op->end, op->start);
    if (took == NULL) return -1;
    same = equal(took, PyTuple_GET_ITEM(one, 1));
    Py_DECREF(took);
    if (same != 1) return same;
    same = equal(op->gpu, PyTuple_GET_ITEM(one, 2));
    if (same != 1) return same;
    PyObject *single = PyLong_FromLong(1);  /* (a small int) */
    same = equal(shortest, single);
    Py_DECREF(single);
    return same;
}

/* Whether ``anchor_after_alike`` takes ``node`` on ``matcher`` (its slots at ``at``): 1, 0
   (nothing done: ``push`` reads it), or -1 with an exception. Reads, changes nothing. */
static int takes_anchor(PyObject *matcher, const Py_ssize_t *at, PyObject *node) {
    for (int i = 0; i < MATCH_SLOTS; i++)
        if (SLOT_AT(matcher, at[i]) == NULL) return 0;  /* (unset: ``push`` says so) */
    PyObject *frames = SLOT_AT(matcher, at[MATCH_FRAMES]);
    PyObject *current = SLOT_AT(matcher, at[MATCH_CURRENT]);
    PyObject *sym = ((NodeObject *)node)->sym;
    int truth = PyObject_IsTrue(frames);
    if (truth != 0) return truth < 0 ? -1 : 0;
    if ((truth = equal(sym, SLOT_AT(matcher, at[MATCH_ANCHOR]))) != 1) return truth;
    if (!PyList_CheckExact(current) || PyList_GET_SIZE(current) != 1) return 0;
    if ((truth = PyObject_IsTrue(SLOT_AT(matcher, at[MATCH_WAITING]))) != 0)
        return truth < 0 ? -1 : 0;
    if ((truth = PyObject_IsTrue(SLOT_AT(matcher, at[MATCH_TENTATIVE]))) != 0)
        return truth < 0 ? -1 : 0;
    if ((truth = equal(sym, SLOT_AT(matcher, at[MATCH_TRIGGER]))) != 0)
        return truth < 0 ? -1 : 0;
    if ((truth = measured_alike(PyList_GET_ITEM(current, 0),
                                SLOT_AT(matcher, at[MATCH_MEASURED_ONE]),
                                SLOT_AT(matcher, at[MATCH_SHORTEST]))) != 1)
        return truth;
    if (((NodeObject *)node)->opener != Py_None) return 0;
    if ((truth = PyObject_IsTrue(SLOT_AT(matcher, at[MATCH_OPENING]))) != 0)
        return truth < 0 ? -1 : 0;
    return PyObject_IsTrue(SLOT_AT(matcher, at[MATCH_RECENT]));  /* (an op read before it) */
}

static PyObject *append_name;

/* The matcher's slot names (``match_slot_names``) and "append", made at the first call: 0, or
   -1 with an exception. */
static int match_names_ready(void) {
    if (match_slot_names == NULL) {
        append_name = PyUnicode_InternFromString("append");
        match_slot_names = Py_BuildValue(
            "(ssssssssssssss)", "frames", "anchor", "current", "waiting", "tentative",
            "trigger", "_measured_one", "shortest", "opening", "recent", "_alike", "starts",
            "thread", "names");
        if (append_name == NULL || match_slot_names == NULL) {
            Py_CLEAR(append_name); Py_CLEAR(match_slot_names);
            return -1;
        }
    }
    return 0;
}

static PyObject *anchor_taken(PyObject *matcher, const Py_ssize_t *at, PyObject *node,
                              PyObject *made);

/* anchor_after_alike(matcher, node, made) -> (boundary,) or None: see the method table. */
static PyObject *anchor_after_alike(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "anchor_after_alike(matcher, node, made)");
        return NULL;
    }
    if (match_names_ready() < 0) return NULL;
    PyObject *matcher = args[0], *node = args[1];
    if (Py_TYPE(node) != &NodeType) {
        PyErr_SetString(PyExc_TypeError, "anchor_after_alike takes a native Node");
        return NULL;
    }
    Py_ssize_t at[MATCH_SLOTS];
    if (slot_offsets(Py_TYPE(matcher), match_slot_names, at) < 0) return NULL;
    int takes = takes_anchor(matcher, at, node);
    if (takes <= 0) return takes < 0 ? NULL : Py_NewRef(Py_None);
    return anchor_taken(matcher, at, node, args[2]);
}

/* ``anchor_after_alike``'s work where ``takes_anchor``: the answer, (boundary,) made by
   ``made`` (a new reference), or NULL with an exception. */
static PyObject *anchor_taken(PyObject *matcher, const Py_ssize_t *at, PyObject *node,
                              PyObject *made) {
    /* taken: as the fallback does it, in its order */
    NodeObject *op = (NodeObject *)node;
    PyObject *recent = SLOT_AT(matcher, at[MATCH_RECENT]);
    Py_ssize_t kept = PyObject_Size(recent);
    if (kept < 0) return NULL;
    PyObject *before = PySequence_GetItem(recent, kept - 1);  /* the op read before it */
    if (before == NULL) return NULL;
    PyObject *opens_after = Py_TYPE(before) == &NodeType
        ? Py_NewRef(((NodeObject *)before)->end) : PyObject_GetAttrString(before, "end");
    Py_DECREF(before);
    if (opens_after == NULL) return NULL;
    PyObject *done = PyObject_CallMethodOneArg(recent, append_name, node), *boundary = NULL;
    if (done == NULL) goto fail;
    Py_DECREF(done);
    PyObject *single = PyLong_FromLong(1);  /* (a small int) */
    PyObject *alike = PyNumber_Add(SLOT_AT(matcher, at[MATCH_ALIKE]), single);
    Py_DECREF(single);
    if (alike == NULL) goto fail;
    slot_set(matcher, at[MATCH_ALIKE], alike);
    done = PyObject_CallMethodOneArg(SLOT_AT(matcher, at[MATCH_STARTS]), append_name, node);
    if (done == NULL) goto fail;
    Py_DECREF(done);
    if (PyList_SetItem(SLOT_AT(matcher, at[MATCH_CURRENT]), 0, Py_NewRef(node)) < 0) goto fail;
    PyObject *name = PyObject_GetItem(SLOT_AT(matcher, at[MATCH_NAMES]), op->sym);
    if (name == NULL) goto fail;
    PyObject *empty = PyUnicode_FromStringAndSize("", 0);
    if (empty == NULL) { Py_DECREF(name); goto fail; }
    PyObject *values[] = {op->start, SLOT_AT(matcher, at[MATCH_THREAD]), name, Py_False,
                          empty, opens_after};
    boundary = PyObject_Vectorcall(made, values, 6, NULL);
    Py_DECREF(empty);
    Py_DECREF(name);
fail:
    Py_DECREF(opens_after);
    if (boundary == NULL) return NULL;
    PyObject *found = PyTuple_Pack(1, boundary);
    Py_DECREF(boundary);
    return found;
}

/* ---- det46: a top-level op of a loop of one-op instances, read in one call (structure.top_op_matched) ---- */

/* The slots ``top_op_matched`` reads and sets: of the stacks (``stack.ThreadStacks``), of the
   thread's open ops (``stack._Thread``) and of the row's skeleton (``skeleton.ThreadSkeleton``),
   found by name once per class (``slot_offsets``). */
enum { STACKS_LATEST, STACKS_LATEST_STATE, STACKS_TOLERANCE, STACKS_LAST_SECTION,
       STACKS_SLOTS };
enum { OPEN_ENDS, OPEN_NAMES, OPEN_LAST_START, OPEN_SLOTS };
enum { ROW_KEY, ROW_SECTION, ROW_STACK, ROW_SLOTS };
static PyObject *stacks_slot_names, *open_slot_names, *row_slot_names, *sym_of_name;

/* The names above, made at the first call: 0, or -1 with an exception. */
static int top_op_names_ready(void) {
    if (sym_of_name != NULL) return match_names_ready();
    stacks_slot_names = Py_BuildValue("(ssss)", "_latest", "_latest_state", "_tolerance",
                                      "last_section");
    open_slot_names = Py_BuildValue("(sss)", "ends", "names", "last_start");
    row_slot_names = Py_BuildValue("(sss)", "key", "section", "stack");
    sym_of_name = PyUnicode_InternFromString("sym_of");
    if (stacks_slot_names == NULL || open_slot_names == NULL || row_slot_names == NULL ||
            sym_of_name == NULL) {
        Py_CLEAR(stacks_slot_names); Py_CLEAR(open_slot_names); Py_CLEAR(row_slot_names);
        Py_CLEAR(sym_of_name);
        return -1;
    }
    return match_names_ready();
}

/* The offsets of one class's slots that ``top_op_matched`` reads, kept here, not among
   ``slot_layouts`` (eight shared by every caller, taken in turn: called at each op beside
   the others' it would push theirs out, and they its). */
typedef struct {
    PyTypeObject *type;  /* (a strong reference) */
    Py_ssize_t at[MATCH_SLOTS];
} OwnLayout;
static OwnLayout stacks_layout, open_layout, row_layout, matcher_layout;

/* The offsets of ``names`` (at most ``MATCH_SLOTS``) in ``type``, into ``at``, from
   ``layout`` (found anew where it was another type's): 0, or -1 with an exception. */
static int own_offsets(OwnLayout *layout, PyTypeObject *type, PyObject *names, Py_ssize_t *at) {
    Py_ssize_t n = PyTuple_GET_SIZE(names);
    if (layout->type != type) {  /* found into ``at`` first: a failure leaves the cache whole */
        if (slot_offsets_found(type, names, at) < 0) return -1;
        memcpy(layout->at, at, (size_t)n * sizeof(Py_ssize_t));
        Py_XSETREF(layout->type, (PyTypeObject *)Py_NewRef((PyObject *)type));
        return 0;
    }
    memcpy(at, layout->at, (size_t)n * sizeof(Py_ssize_t));
    return 0;
}

/* Whether every slot of ``obj`` at ``at`` (``n`` of them) is set. */
static int slots_set(PyObject *obj, const Py_ssize_t *at, int n) {
    for (int i = 0; i < n; i++)
        if (SLOT_AT(obj, at[i]) == NULL) return 0;
    return 1;
}

/* ---- tries50: an open op's end compared as doubles where all four times are floats (pops) ---- */

/* ``pops``' answer where ``top_end``, ``start``, ``end`` and ``tol`` are exact floats (the
   times of a trace with fractions of a microsecond, the tolerance a float): Python compares and
   adds two floats as these doubles do (IEEE 754, no rounding of its own; a NaN compares
   false both ways), without a float made for ``top_end + tol``. -1 where one is not. */
static inline int tries50_float_pops(PyObject *top_end, PyObject *start, PyObject *end,
                                     PyObject *tol) {
    if (!PyFloat_CheckExact(top_end) || !PyFloat_CheckExact(start) ||
            !PyFloat_CheckExact(end) || !PyFloat_CheckExact(tol))
        return -1;
    double top = PyFloat_AS_DOUBLE(top_end);
    return PyFloat_AS_DOUBLE(start) >= top ||
        PyFloat_AS_DOUBLE(end) > top + PyFloat_AS_DOUBLE(tol);
}

/* ---- (det46, continued) ---- */

/* Whether ``ThreadStacks.push`` pops the open op that ends at ``top_end`` for an op from
   ``start`` to ``end``: it finished before it, or partially overlaps it (a sibling). 1, 0, or
   -1 with an exception. */
static int pops(PyObject *top_end, PyObject *start, PyObject *end, PyObject *tol) {
    int floats = tries50_float_pops(top_end, start, end, tol);
    if (floats >= 0) return floats;
    Py_INCREF(top_end);  /* (an item of the list, held while compared) */
    int truth = PyObject_RichCompareBool(start, top_end, Py_GE);
    if (truth == 0) {
        PyObject *reach = PyNumber_Add(top_end, tol);
        truth = reach == NULL ? -1 : PyObject_RichCompareBool(end, reach, Py_GT);
        Py_XDECREF(reach);
    }
    Py_DECREF(top_end);
    return truth;
}

/* ``ThreadStacks.alone_at_top`` of ``stacks`` (its slots at ``at``): 1 (``*open``: the
   thread's open ops, borrowed; their slots at ``open_at``, both lists), 0, or -1 with an
   exception. Reads, changes nothing. */
static int alone_at_top(PyObject *stacks, const Py_ssize_t *at, PyObject *thread,
                        PyObject *start, PyObject *end, PyObject **open, Py_ssize_t *open_at) {
    int truth = equal(thread, SLOT_AT(stacks, at[STACKS_LATEST]));
    if (truth != 1) return truth;
    PyObject *state = SLOT_AT(stacks, at[STACKS_LATEST_STATE]);
    if (own_offsets(&open_layout, Py_TYPE(state), open_slot_names, open_at) < 0) return -1;
    if (!slots_set(state, open_at, OPEN_SLOTS)) return 0;
    truth = tries50_compare(start, SLOT_AT(state, open_at[OPEN_LAST_START]), Py_GE);
    if (truth != 1) return truth;
    PyObject *ends = SLOT_AT(state, open_at[OPEN_ENDS]), *tol = SLOT_AT(stacks, at[STACKS_TOLERANCE]);
    if (!PyList_CheckExact(ends) || !PyList_CheckExact(SLOT_AT(state, open_at[OPEN_NAMES])))
        return 0;
    for (Py_ssize_t i = PyList_GET_SIZE(ends) - 1; i >= 0 && i < PyList_GET_SIZE(ends); i--)
        if ((truth = pops(PyList_GET_ITEM(ends, i), start, end, tol)) != 1) return truth;
    *open = state;
    return 1;
}

/* The symbol of ``name`` in ``symbols.sym_of`` (a new reference), or NULL: none (no
   exception) or an exception. */
static PyObject *symbol_of(PyObject *symbols, PyObject *name) {
    PyObject *sym_of = PyObject_GetAttr(symbols, sym_of_name);
    if (sym_of == NULL) return NULL;
    PyObject *sym = PyDict_CheckExact(sym_of) ? PyDict_GetItemWithError(sym_of, name) : NULL;
    Py_XINCREF(sym);
    Py_DECREF(sym_of);
    return sym;
}

/* The list ``list`` made ``[item]``: 0, or -1 with an exception. */
static int only(PyObject *list, PyObject *item) {
    if (PyList_SetSlice(list, 0, PyList_GET_SIZE(list), NULL) < 0) return -1;
    return PyList_Append(list, item);
}

/* The node of the op, where ``top_op_matched`` takes it (a new reference; its thread's open
   ops in ``*open``, borrowed, their slots at ``open_at``; the matcher's at ``match_at``), or NULL: not taken (no exception) or an exception. Reads,
   changes nothing. */
static PyObject *top_op_taken(PyObject *stacks, const Py_ssize_t *at, PyObject *matcher,
                              PyObject *row, const Py_ssize_t *row_at, PyObject *symbols,
                              PyObject *const *op, PyObject **open, Py_ssize_t *open_at,
                              Py_ssize_t *match_at) {
    PyObject *thread = op[0], *name = op[1], *start = op[2], *end = op[3];
    int truth = alone_at_top(stacks, at, thread, start, end, open, open_at);
    if (truth == 1)
        truth = equal(SLOT_AT(stacks, at[STACKS_LAST_SECTION]), SLOT_AT(row, row_at[ROW_SECTION]));
    if (truth == 1) truth = equal(thread, SLOT_AT(row, row_at[ROW_KEY]));
    if (truth != 1) return NULL;
    PyObject *sym = symbol_of(symbols, name);
    if (sym == NULL) return NULL;
    PyObject *zero = PyLong_FromLong(0);  /* (a small int) */
    PyObject *values[] = {sym, start, end, zero};
    PyObject *node = node_vectorcall((PyObject *)&NodeType, values, 4, NULL);
    Py_DECREF(zero);
    Py_DECREF(sym);
    if (node == NULL) return NULL;
    if (own_offsets(&matcher_layout, Py_TYPE(matcher), match_slot_names, match_at) < 0 ||
            (truth = takes_anchor(matcher, match_at, node)) != 1)
        Py_CLEAR(node);
    return node;
}

/* top_op_matched(stacks, matching, thread, name, start, end) -> (boundary,) or None: see the
   method table. */
static PyObject *top_op_matched(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6 || !PyTuple_CheckExact(args[1]) || PyTuple_GET_SIZE(args[1]) != 4) {
        PyErr_SetString(PyExc_TypeError, "top_op_matched(stacks, (matcher, row, symbols, "
                        "made), thread, name, start, end)");
        return NULL;
    }
    if (top_op_names_ready() < 0) return NULL;
    PyObject *stacks = args[0], *matcher = PyTuple_GET_ITEM(args[1], 0);
    PyObject *row = PyTuple_GET_ITEM(args[1], 1), *symbols = PyTuple_GET_ITEM(args[1], 2);
    Py_ssize_t at[STACKS_SLOTS], open_at[OPEN_SLOTS], row_at[ROW_SLOTS], match_at[MATCH_SLOTS];
    if (own_offsets(&stacks_layout, Py_TYPE(stacks), stacks_slot_names, at) < 0 ||
            own_offsets(&row_layout, Py_TYPE(row), row_slot_names, row_at) < 0)
        return NULL;
    if (!slots_set(stacks, at, STACKS_SLOTS) || !slots_set(row, row_at, ROW_SLOTS) ||
            !PyList_CheckExact(SLOT_AT(row, row_at[ROW_STACK])))
        Py_RETURN_NONE;
    PyObject *open = NULL;
    PyObject *node = top_op_taken(stacks, at, matcher, row, row_at, symbols, args + 2, &open,
                                  open_at, match_at);
    if (node == NULL) return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    /* taken: as the fallback does it, in its order (``ThreadStacks.push``, the row's op,
       ``anchor_after_alike``) */
    slot_set(open, open_at[OPEN_LAST_START], Py_NewRef(args[4]));
    PyObject *found = NULL;
    if (only(SLOT_AT(open, open_at[OPEN_ENDS]), args[5]) == 0 &&
            only(SLOT_AT(open, open_at[OPEN_NAMES]), args[3]) == 0 &&
            only(SLOT_AT(row, row_at[ROW_STACK]), node) == 0) {
        found = anchor_taken(matcher, match_at, node, PyTuple_GET_ITEM(args[1], 3));
    }
    Py_DECREF(node);
    return found;
}

/* ---- det46: an op read in one call once the steps are the loop (structure.step_op_read) ---- */

static PyObject *online_thread_name, *step_runs_name, *online_count_name,
    *online_last_end_name;

/* The names ``step_op_read`` reads, made at the first call: 0, or -1 with an exception. */
static int step_names_ready(void) {
    if (online_last_end_name != NULL) return top_op_names_ready();
    online_thread_name = PyUnicode_InternFromString("_online_thread");
    step_runs_name = PyUnicode_InternFromString("_step_runs");
    online_count_name = PyUnicode_InternFromString("_online_count");
    online_last_end_name = PyUnicode_InternFromString("_online_last_end");
    if (online_thread_name == NULL || step_runs_name == NULL ||
            online_count_name == NULL || online_last_end_name == NULL) {
        Py_CLEAR(online_thread_name); Py_CLEAR(step_runs_name);
        Py_CLEAR(online_count_name); Py_CLEAR(online_last_end_name);
        return -1;
    }
    return top_op_names_ready();
}

/* ``ThreadStacks.push``'s common case, where ``ThreadStacks.pushes_at_once`` (``open``: the
   thread's open ops, their slots at ``open_at``): how many ops are open now, or -1 with an
   exception. */
static Py_ssize_t pushed(PyObject *open, const Py_ssize_t *open_at, PyObject *tol,
                         PyObject *name, PyObject *start, PyObject *end) {
    slot_set(open, open_at[OPEN_LAST_START], Py_NewRef(start));
    PyObject *ends = SLOT_AT(open, open_at[OPEN_ENDS]), *names = SLOT_AT(open, open_at[OPEN_NAMES]);
    Py_ssize_t n = PyList_GET_SIZE(ends);
    for (int popped; n > 0; n--) {
        if ((popped = pops(PyList_GET_ITEM(ends, n - 1), start, end, tol)) < 0) return -1;
        if (popped == 0) break;
    }
    if ((n < PyList_GET_SIZE(ends) &&  /* (none popped: no slice to delete, tries50) */
         (PyList_SetSlice(ends, n, PyList_GET_SIZE(ends), NULL) < 0 ||
          PyList_SetSlice(names, n, PyList_GET_SIZE(names), NULL) < 0)) ||
            PyList_Append(ends, end) < 0 || PyList_Append(names, name) < 0)
        return -1;
    return PyList_GET_SIZE(names);
}

/* ``StructureDetector._observe_stepping``'s work on ``detector`` (``stepping``: it, the
   boundary's maker, the steps' prefix) for an op (``op``: thread, name, start, end) with
   ``depth`` ops open: its boundaries (a new reference), or NULL with an exception. */
static PyObject *stepped(PyObject *stepping, PyObject *const *op, Py_ssize_t depth) {
    PyObject *detector = PyTuple_GET_ITEM(stepping, 0), *made = PyTuple_GET_ITEM(stepping, 1);
    PyObject *step_prefix = PyTuple_GET_ITEM(stepping, 2);
    PyObject *thread = op[0], *name = op[1], *start = op[2], *end = op[3];
    if (!PyUnicode_Check(name) || !PyUnicode_Check(step_prefix)) return PyTuple_New(0);
    Py_ssize_t step = PyUnicode_Tailmatch(name, step_prefix, 0, PY_SSIZE_T_MAX, -1);
    if (step <= 0) return step < 0 ? NULL : PyTuple_New(0);
    PyObject *online = PyObject_GetAttr(detector, online_thread_name);
    if (online == NULL) return NULL;
    int truth = equal(thread, online);
    Py_DECREF(online);
    if (truth != 1) return truth < 0 ? NULL : PyTuple_New(0);
    PyObject *runs = PyObject_GetAttr(detector, step_runs_name);
    if (runs == NULL) return NULL;
    PyObject *steps = PyDict_CheckExact(runs) ? PyDict_GetItemWithError(runs, thread) : NULL;
    if (steps == NULL && (PyErr_Occurred() || !PyDict_CheckExact(runs))) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "_step_runs is a dict");
        Py_DECREF(runs);
        return NULL;
    }
    PyObject *entry = Py_BuildValue("(OOOO)", start, end, name, depth == 1 ? Py_True : Py_False);
    int done = -1;
    if (entry == NULL) goto fail;
    if (steps != NULL && !PyList_CheckExact(steps)) {
        PyErr_SetString(PyExc_TypeError, "a thread's steps are a list");
    } else if (steps == NULL || PyList_GET_SIZE(steps) == 0) {
        PyObject *kept = PyList_New(1);  /* (setdefault's, no list made an op) */
        if (kept != NULL) {
            PyList_SET_ITEM(kept, 0, Py_NewRef(entry));
            done = PyDict_SetItem(runs, thread, kept);
            Py_DECREF(kept);
        }
    } else {
        PyObject *last = PyList_GET_ITEM(steps, PyList_GET_SIZE(steps) - 1);
        PyObject *last_end = PySequence_GetItem(last, 1);
        truth = last_end == NULL ? -1 : PyObject_RichCompareBool(start, last_end, Py_LT);
        Py_XDECREF(last_end);
        if (truth == 1) {  /* nested in (or overlapping) the previous step: not a new step */
            Py_DECREF(entry);
            Py_DECREF(runs);
            return PyTuple_New(0);
        }
        if (truth == 0)  /* (the latest only is kept) */
            done = PyList_SetItem(steps, PyList_GET_SIZE(steps) - 1, Py_NewRef(entry));
    }
fail:
    Py_XDECREF(entry);
    Py_DECREF(runs);
    if (done < 0) return NULL;
    PyObject *count = PyObject_GetAttr(detector, online_count_name), *more = NULL;
    if (count != NULL) {
        PyObject *one = PyLong_FromLong(1);  /* (a small int) */
        more = PyNumber_Add(count, one);
        Py_DECREF(one);
        Py_DECREF(count);
    }
    if (more == NULL || PyObject_SetAttr(detector, online_count_name, more) < 0) {
        Py_XDECREF(more);
        return NULL;
    }
    Py_DECREF(more);
    PyObject *latest = PyObject_GetAttr(detector, online_last_end_name);
    truth = latest == NULL ? -1 : PyObject_RichCompareBool(end, latest, Py_GT);
    Py_XDECREF(latest);
    if (truth == 1) truth = PyObject_SetAttr(detector, online_last_end_name, end) < 0 ? -1 : 1;
    if (truth < 0) return NULL;
    PyObject *empty = PyUnicode_FromStringAndSize("", 0);
    if (empty == NULL) return NULL;
    PyObject *values[] = {start, thread, name, Py_False, empty, Py_None};
    PyObject *boundary = PyObject_Vectorcall(made, values, 6, NULL);
    Py_DECREF(empty);
    if (boundary == NULL) return NULL;
    PyObject *found = PyTuple_Pack(1, boundary);
    Py_DECREF(boundary);
    return found;
}

/* step_op_read(stacks, stepping, thread, name, start, end) -> its boundaries, or None: see
   the method table. */
static PyObject *step_op_read(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6 || !PyTuple_CheckExact(args[1]) || PyTuple_GET_SIZE(args[1]) != 3) {
        PyErr_SetString(PyExc_TypeError, "step_op_read(stacks, (detector, made, prefix), "
                        "thread, name, start, end)");
        return NULL;
    }
    if (step_names_ready() < 0) return NULL;
    PyObject *stacks = args[0];
    Py_ssize_t at[STACKS_SLOTS], open_at[OPEN_SLOTS];
    if (own_offsets(&stacks_layout, Py_TYPE(stacks), stacks_slot_names, at) < 0) return NULL;
    if (!slots_set(stacks, at, STACKS_SLOTS)) Py_RETURN_NONE;
    int truth = equal(args[2], SLOT_AT(stacks, at[STACKS_LATEST]));
    if (truth != 1) return truth < 0 ? NULL : Py_NewRef(Py_None);
    PyObject *open = SLOT_AT(stacks, at[STACKS_LATEST_STATE]);
    if (own_offsets(&open_layout, Py_TYPE(open), open_slot_names, open_at) < 0) return NULL;
    if (!slots_set(open, open_at, OPEN_SLOTS) ||
            !PyList_CheckExact(SLOT_AT(open, open_at[OPEN_ENDS])) ||
            !PyList_CheckExact(SLOT_AT(open, open_at[OPEN_NAMES])))
        Py_RETURN_NONE;
    truth = tries50_compare(args[4], SLOT_AT(open, open_at[OPEN_LAST_START]), Py_GE);
    if (truth != 1) return truth < 0 ? NULL : Py_NewRef(Py_None);
    /* taken: as the fallback does it, in its order (``ThreadStacks.push``, then
       ``_observe_stepping``) */
    Py_ssize_t depth = pushed(open, open_at, SLOT_AT(stacks, at[STACKS_TOLERANCE]), args[3],
                              args[4], args[5]);
    if (depth < 0) return NULL;
    return stepped(args[1], args + 2, depth);
}

/* ---- held48: a structural op read in C (engine.Splitter._read_op, stack.ThreadStacks.push) ---- */

static PyObject *held48_fast_read, *held48_observe, *held48_push, *held48_forget_at,
    *held48_forget;

/* The names above, made at the first call (``lane47_ready``); 0, or -1 with an error. */
static int held48_names_ready(void) {
    static PyObject **const made[] = {&held48_fast_read, &held48_observe, &held48_push,
        &held48_forget_at, &held48_forget};
    static const char *const names[] = {"fast_read", "observe", "push", "_forget_at",
        "_forget_idle_threads"};
    for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++)
        if (*made[k] == NULL && (*made[k] = PyUnicode_InternFromString(names[k])) == NULL)
            return -1;
    return 0;
}

/* The slots of the order (``order.OpOrder``) that ``held48_noted`` reads. */
static eng45_layout held48_order = {"settled_thread settled flush_below"};

/* Slot ``k`` of ``held48_order`` of ``order`` (a new reference), read at its offset (or, an
   order of another class, by name); NULL with an error. */
static PyObject *held48_order_get(PyObject *order, int k) {
    int laid_out = eng45_laid_out(&held48_order, order);
    if (laid_out < 0) return NULL;
    return laid_out ? Py_XNewRef(eng45_get(order, &held48_order, k))
        : PyObject_GetAttr(order, PyTuple_GET_ITEM(held48_order.names_tuple, k));
}

/* Whether the order only notes this op (``OpOrder.arrive``'s common case, as
   ``_read_op`` asks it): an op of the settled thread starting no earlier than its last, nor
   than ``flush_below``; then noted (its start and category). 1, 0, or -1 with an error. */
static int held48_noted(feed46_state *s, PyObject *thread, PyObject *ts, PyObject *cat) {
    PyObject *settled_thread = held48_order_get(s->order, 0);
    int noted = settled_thread == NULL ? -1
        : tries50_equal(thread, settled_thread);
    Py_XDECREF(settled_thread);
    PyObject *settled = noted == 1 ? held48_order_get(s->order, 1) : NULL;
    if (settled == NULL) return noted == 1 ? -1 : noted;
    noted = eng45_laid_out(&held48_settled, settled);
    PyObject *last = noted == 1 ? SLOT_AT(settled, held48_settled.at[0]) : NULL;
    noted = noted == 1 && last == NULL ? 0 : noted;
    noted = noted == 1 ? tries50_compare(ts, last, Py_GE) : noted;
    PyObject *flush = noted == 1 ? held48_order_get(s->order, 2) : NULL;
    noted = noted == 1 ? (flush == NULL ? -1 : tries50_compare(ts, flush, Py_GE)) : noted;
    Py_XDECREF(flush);
    if (noted == 1) {
        slot_set(settled, held48_settled.at[0], Py_NewRef(ts));
        slot_set(settled, held48_settled.at[1], Py_NewRef(cat));
    }
    Py_DECREF(settled);
    return noted;
}

/* ``stacks.push(thread, name, start, end)``: its common case here (an op of the thread read
   last, starting no earlier than its last: det46's ``pushed``), else the method. The names of
   the thread's open ops (a new reference), NULL with an error. ``stacks``' slots are
   ``held48_stacks``' (``eng45_laid_out``). */
static PyObject *held48_pushed(PyObject *stacks, PyObject *thread, PyObject *name,
                               PyObject *start, PyObject *end) {
    PyObject *latest = SLOT_AT(stacks, held48_stacks.at[0]);
    PyObject *state = SLOT_AT(stacks, held48_stacks.at[1]);
    PyObject *tolerance = SLOT_AT(stacks, held48_stacks.at[2]);
    int common = latest == NULL || state == NULL || tolerance == NULL ? 0 : equal(thread, latest);
    common = common == 1 ? eng45_laid_out(&held48_stack, state) : common;
    Py_ssize_t open_at[OPEN_SLOTS] = {0};
    open_at[OPEN_ENDS] = held48_stack.at[0];
    open_at[OPEN_NAMES] = held48_stack.at[1];
    open_at[OPEN_LAST_START] = held48_stack.at[2];
    if (common == 1 && (!slots_set(state, open_at, OPEN_SLOTS)
                        || !PyList_CheckExact(SLOT_AT(state, open_at[OPEN_ENDS]))
                        || !PyList_CheckExact(SLOT_AT(state, open_at[OPEN_NAMES]))))
        common = 0;
    common = common == 1
        ? tries50_compare(start, SLOT_AT(state, open_at[OPEN_LAST_START]), Py_GE) : common;
    if (common < 0) return NULL;
    if (!common) {
        PyObject *call[5] = {stacks, thread, name, start, end};
        return PyObject_VectorcallMethod(held48_push, call, 5 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                         NULL);
    }
    Py_INCREF(state); /* (held: a comparison may run code of Python) */
    PyObject *names = pushed(state, open_at, tolerance, name, start, end) < 0 ? NULL
        : Py_NewRef(SLOT_AT(state, open_at[OPEN_NAMES]));
    Py_DECREF(state);
    return names;
}

/* ``Splitter._read_op(thread, ts, end, name, cat)`` where the order only notes the op
   (``held48_noted``) and the detector reads stacks: read in one call where its mode has one
   (``fast_read``), else pushed (``held48_pushed``) and observed; its boundaries taken
   (``_add_boundary``), and the idle threads forgotten once too many are known. Elsewhere,
   the method. 0, or -1 with an error. */
static int held48_read(feed46_state *s, PyObject *thread, PyObject *ts, PyObject *end,
                       PyObject *name, PyObject *cat) {
    int noted = s->reads_stacks ? held48_noted(s, thread, ts, cat) : 0;
    if (noted == 0) {
        PyObject *call[5] = {thread, ts, end, name, cat};
        PyObject *read = PyObject_Vectorcall(s->read_op, call, 5, NULL);
        Py_XDECREF(read);
        return read == NULL ? -1 : 0;
    }
    if (noted < 0) return -1;
    PyObject *fast = PyObject_GetAttr(s->detector, held48_fast_read), *found = NULL;
    if (fast != NULL && fast != Py_None) {
        if (!PyTuple_CheckExact(fast) || PyTuple_GET_SIZE(fast) != 2)
            PyErr_SetString(PyExc_TypeError, "feed_lane: a detector's fast_read (reader, state)");
        else {
            PyObject *call[6] = {s->stacks, PyTuple_GET_ITEM(fast, 1), thread, name, ts, end};
            found = PyObject_Vectorcall(PyTuple_GET_ITEM(fast, 0), call, 6, NULL);
        }
        if (found == Py_None) Py_CLEAR(found);
        else if (found == NULL) Py_CLEAR(fast);
    }
    if (fast != NULL && found == NULL) {
        PyObject *names = held48_pushed(s->stacks, thread, name, ts, end);
        PyObject *section = names == NULL ? NULL : SLOT_AT(s->stacks, held48_stack_counts.at[1]);
        Py_XINCREF(section);
        PyObject *observe = section == NULL ? NULL : PyObject_GetAttr(s->detector, held48_observe);
        if (observe != NULL) {
            PyObject *call[6] = {thread, names, ts, end, name, section};
            found = PyObject_Vectorcall(observe, call, 6, NULL);
        } else if (names != NULL && section == NULL && !PyErr_Occurred())
            PyErr_SetString(PyExc_AttributeError, "ThreadStacks.last_section");
        Py_XDECREF(observe);
        Py_XDECREF(section);
        Py_XDECREF(names);
    }
    Py_XDECREF(fast);
    int some = found == NULL ? -1 : PyObject_IsTrue(found);
    PyObject *each = some == 1 ? PyObject_GetIter(found) : NULL, *boundary;
    if (some == 1 && each == NULL) some = -1;
    while (each != NULL && (boundary = PyIter_Next(each)) != NULL) {
        PyObject *added = PyObject_CallOneArg(s->add_boundary, boundary);
        Py_DECREF(boundary);
        Py_XDECREF(added);
        if (added == NULL) break;
    }
    Py_XDECREF(each);
    Py_XDECREF(found);
    if (some < 0 || PyErr_Occurred()) return -1;
    /* ``stacks.known > self._forget_at``: never while ``live_threads`` or fewer are known
       (``_forget_at`` is never below it) */
    PyObject *known = SLOT_AT(s->stacks, held48_stack_counts.at[0]);
    Py_ssize_t count = known == NULL ? -1 : PyLong_AsSsize_t(known);
    if (count < 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_AttributeError, "ThreadStacks.known");
        return -1;
    }
    if (count <= s->live_threads) return 0;
    PyObject *bound = PyObject_GetAttr(s->splitter, held48_forget_at);
    int beyond = bound == NULL ? -1 : PyObject_RichCompareBool(known, bound, Py_GT);
    Py_XDECREF(bound);
    PyObject *forgot = beyond == 1 ? PyObject_CallMethodNoArgs(s->splitter, held48_forget) : NULL;
    Py_XDECREF(forgot);
    return beyond < 0 || (beyond == 1 && forgot == NULL) ? -1 : 0;
}

/* ---- learn49: an op read in one call while the detector learns or matches (structure.learning_op_read, matching_op_read) ---- */

/* The slots of a ``skeleton.ThreadSkeleton`` that ``learning_op_read`` reads. */
enum { LEARN49_KEY, LEARN49_SECTION, LEARN49_MAIN, LEARN49_STACK, LEARN49_ROOTS, LEARN49_BUSY,
       LEARN49_SEEN, LEARN49_FRAMES, LEARN49_SLOTS };
static PyObject *learn49_skeleton_slots, *learn49_since_name, *learn49_thread_name,
    *learn49_ended_by_name, *learn49_matcher_path_name;
static OwnLayout learn49_skeleton_layout;
/* The slots of the detector's ``skeleton.Skeletons`` that they read. */
static eng45_layout learn49_skeletons = {"latest symbols"};

/* The names above, made at the first call (and ``held48_read``'s): 0, or -1 with an
   exception. */
static int learn49_names_ready(void) {
    static PyObject **const made[] = {&learn49_since_name, &learn49_thread_name,
        &learn49_ended_by_name, &learn49_matcher_path_name};
    static const char *const names[] = {"since", "thread", "ended_by", "_matcher_path"};
    for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++)
        if (*made[k] == NULL && (*made[k] = PyUnicode_InternFromString(names[k])) == NULL)
            return -1;
    if (learn49_skeleton_slots == NULL &&
            (learn49_skeleton_slots = Py_BuildValue("(ssssssss)", "key", "section", "main",
                                                    "stack", "roots", "busy", "seen",
                                                    "frames")) == NULL)
        return -1;
    return held48_names_ready() < 0 ? -1 : top_op_names_ready();
}

/* Whether the op of ``thread`` at ``start`` may end the loop thread's CPU section (``loop``:
   ``LoopSection``), where ``_observe_learning`` asks ``_from_the_past``: from before its
   latest ops, of another thread, and ``loop.ended_by(start, False)`` (a section that has
   ended already is not ended again: then the op is read on). 1, 0, or -1 with an
   exception. */
static int learn49_from_the_past(PyObject *loop, PyObject *thread, PyObject *start) {
    PyObject *since = PyObject_GetAttr(loop, learn49_since_name);
    int truth = since == NULL ? -1 : tries50_compare(start, since, Py_LT);
    Py_XDECREF(since);
    if (truth != 1) return truth;
    PyObject *loop_thread = PyObject_GetAttr(loop, learn49_thread_name);
    truth = loop_thread == NULL ? -1 : tries50_differ(thread, loop_thread);
    Py_XDECREF(loop_thread);
    if (truth != 1) return truth;
    PyObject *call[3] = {loop, start, Py_False};
    PyObject *ends = PyObject_VectorcallMethod(learn49_ended_by_name, call,
                                               3 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    truth = ends == NULL ? -1 : PyObject_IsTrue(ends);
    Py_XDECREF(ends);
    return truth;
}

/* Slot ``k`` (``latest``, ``symbols``) of the detector's skeletons (``skeleton.Skeletons``:
   ``reading``'s fifth item), a new reference; NULL with an exception. */
static PyObject *learn49_skeletons_get(PyObject *reading, int k) {
    PyObject *skeletons = PyTuple_GET_ITEM(reading, 4);
    int laid_out = eng45_laid_out(&learn49_skeletons, skeletons);
    if (laid_out < 0) return NULL;
    return laid_out ? Py_XNewRef(eng45_get(skeletons, &learn49_skeletons, k))
        : PyObject_GetAttr(skeletons, PyTuple_GET_ITEM(learn49_skeletons.names_tuple, k));
}

/* The skeleton of the thread read last (``Skeletons.latest``, a new reference; None where
   there is none), its slots at ``at``: 1, 0 where it is of another class or a slot read is
   unset (no exception), -1 with an exception. ``reading``: the reader's state. */
static int learn49_latest(PyObject *reading, PyObject **state, Py_ssize_t *at) {
    *state = learn49_skeletons_get(reading, 0);
    if (*state == NULL) return -1;
    if (*state == Py_None) return 1;
    if (own_offsets(&learn49_skeleton_layout, Py_TYPE(*state), learn49_skeleton_slots, at) < 0) {
        PyErr_Clear();
        Py_CLEAR(*state);
        return 0;
    }
    if (slots_set(*state, at, LEARN49_SLOTS)) return 1;
    Py_CLEAR(*state);
    return 0;
}

/* Whether ``state`` (its slots at ``at``) is the skeleton of ``thread``'s ``section``: 1, 0,
   or -1 with an exception. */
static int learn49_of(PyObject *state, const Py_ssize_t *at, PyObject *thread,
                      PyObject *section) {
    int other = tries50_differ(SLOT_AT(state, at[LEARN49_SECTION]), section);
    if (other == 0) other = tries50_differ(SLOT_AT(state, at[LEARN49_KEY]), thread);
    return other < 0 ? -1 : !other;
}

/* ``state``'s open ops (a list, its slots at ``at``) cut to ``depth``, then ``skipped``
   pushed: 1, or -1 with an exception. */
static int learn49_push_skipped(PyObject *state, const Py_ssize_t *at, Py_ssize_t depth,
                                PyObject *skipped) {
    PyObject *stack = Py_NewRef(SLOT_AT(state, at[LEARN49_STACK]));
    /* (held: the ops cut may hold the last references to objects) */
    int done = (depth < PyList_GET_SIZE(stack) &&  /* (none cut: no slice to delete, tries50) */
                PyList_SetSlice(stack, depth, PY_SSIZE_T_MAX, NULL) < 0) ||
        PyList_Append(stack, skipped) < 0 ? -1 : 1;
    Py_DECREF(stack);
    return done;
}

/* Whether ``name`` begins with the steps' ``prefix`` (a ``ProfilerStep``): 1, 0, or -1 with an
   exception; 1 where either is no str (read by Python). */
static int learn49_step(PyObject *name, PyObject *prefix) {
    if (!PyUnicode_Check(name) || !PyUnicode_Check(prefix)) return 1;
    Py_ssize_t step = PyUnicode_Tailmatch(name, prefix, 0, PY_SSIZE_T_MAX, -1);
    return step < 0 ? -1 : step != 0;
}

/* A side thread's top-level op whose name has a symbol already (``op``: thread, name, start,
   end), read into its skeleton ``state`` (its slots at ``at``) as ``Skeletons.add`` reads it
   there, where no Python frame waits for it: a new node on its top level, its time added to
   ``busy``, its symbol to ``seen``, while it holds fewer than ``bound`` top-level ops
   (``MemoryRules.side_thread_roots``), else ``skipped``; the thread's open ops that node
   alone. 1, 0 (nothing done: ``_observe_learning`` reads it), or -1 with an exception. */
static int learn49_side_root(PyObject *reading, PyObject *state, const Py_ssize_t *at,
                             PyObject *const *op, PyObject *bound, PyObject *skipped) {
    PyObject *roots = SLOT_AT(state, at[LEARN49_ROOTS]), *seen = SLOT_AT(state, at[LEARN49_SEEN]);
    PyObject *stack = SLOT_AT(state, at[LEARN49_STACK]);
    Py_ssize_t most = PyLong_AsSsize_t(bound);
    int waits = PyObject_IsTrue(SLOT_AT(state, at[LEARN49_FRAMES]));
    if ((most == -1 && PyErr_Occurred()) || waits < 0) return -1;  /* (below 0: none kept) */
    if (waits || !PyList_CheckExact(roots) || !PySet_CheckExact(seen) || !PyList_CheckExact(stack))
        return 0;
    PyObject *symbols = learn49_skeletons_get(reading, 1);
    PyObject *sym = symbols == NULL ? NULL : symbol_of(symbols, op[1]), *node = NULL;
    Py_XDECREF(symbols);
    if (sym == NULL) return PyErr_Occurred() ? -1 : 0;  /* (a new symbol: ``Symbols.new``) */
    Py_INCREF(state);  /* (held: a comparison or a hash may run code of Python) */
    int done = -1;
    if (PyList_GET_SIZE(roots) < most) {
        PyObject *zero = PyLong_FromLong(0);  /* (a small int) */
        PyObject *values[] = {sym, op[2], op[3], zero};
        node = node_vectorcall((PyObject *)&NodeType, values, 4, NULL);
        Py_DECREF(zero);
        PyObject *took = node == NULL ? NULL : PyNumber_Subtract(op[3], op[2]);
        PyObject *busy = took == NULL ? NULL
            : PyNumber_InPlaceAdd(SLOT_AT(state, at[LEARN49_BUSY]), took);
        Py_XDECREF(took);
        if (busy != NULL) slot_set(state, at[LEARN49_BUSY], busy);
        if (busy != NULL && PyList_Append(roots, node) == 0 && PySet_Add(seen, sym) == 0)
            done = 1;
    } else {
        node = Py_NewRef(skipped);
        done = 1;
    }
    if (done == 1 && ((PyList_GET_SIZE(stack) &&  /* (an empty stack: none cut, tries50) */
                       PyList_SetSlice(stack, 0, PyList_GET_SIZE(stack), NULL) < 0) ||
                      PyList_Append(stack, node) < 0))
        done = -1;
    Py_XDECREF(node);
    Py_DECREF(sym);
    Py_DECREF(state);
    return done;
}

/* ---- learn53: a main thread's top-level op read in C while the detector learns ---- */

static PyObject *learn53_names[9];
enum { LEARN53_THREAD, LEARN53_SINCE, LEARN53_LATEST, LEARN53_AT_THE_BOUND, LEARN53_FORGET_TRIES,
       LEARN53_LEVEL, LEARN53_BUDGET, LEARN53_CREDIT, LEARN53_TRY_ONLINE };

/* The names above, made at the first call: 0, or -1 with an exception. */
static int learn53_names_ready(void) {
    static const char *const names[] = {"thread", "since", "latest", "_at_the_bound",
        "_forget_tries", "_level", "_budget", "credit", "_try_online"};
    for (int k = 0; k < 9; k++)
        if (learn53_names[k] == NULL &&
                (learn53_names[k] = PyUnicode_InternFromString(names[k])) == NULL)
            return -1;
    return 0;
}

/* Whether the online tries are due on ``state``'s top level of ``roots`` ops
   (``_observe_learning``'s last test: grown to ``state.next_try``, or the kind just read seen
   ``least`` to ``eager`` times (``RootCounts.last_count``) where a unit may be believed
   (``may_confirm``)): 1, 0, or -1 with an exception. */
static int learn53_try_due(PyObject *state, PyObject *seen, Py_ssize_t roots, PyObject *least,
                           PyObject *eager) {
    static PyObject *next_try_name, *last_count_name, *may_confirm_name;
    if (next_try_name == NULL && ((next_try_name = PyUnicode_InternFromString("next_try")) == NULL
            || (last_count_name = PyUnicode_InternFromString("last_count")) == NULL
            || (may_confirm_name = PyUnicode_InternFromString("may_confirm")) == NULL))
        return -1;
    PyObject *next_try = PyObject_GetAttr(state, next_try_name);
    PyObject *size = next_try == NULL ? NULL : PyLong_FromSsize_t(roots);
    int due = size == NULL ? -1 : PyObject_RichCompareBool(size, next_try, Py_GE);
    Py_XDECREF(size);
    Py_XDECREF(next_try);
    if (due != 0) return due;
    PyObject *last = PyObject_GetAttr(seen, last_count_name);
    due = last == NULL ? -1 : PyObject_RichCompareBool(least, last, Py_LE);
    if (due == 1) due = PyObject_RichCompareBool(last, eager, Py_LE);
    Py_XDECREF(last);
    if (due != 1) return due;
    PyObject *may = PyObject_GetAttr(seen, may_confirm_name);
    due = may == NULL ? -1 : PyObject_IsTrue(may);
    Py_XDECREF(may);
    return due;
}

/* ``StructureDetector._observe_learning``'s case of a main thread's op at its top level (no
   ``ProfilerStep``; its skeleton the latest, ``state``, its slots at ``at``; not from before
   the loop thread's latest ops where that may end its section), read as it reads it: the
   loop section follows the thread (``loop.thread``, ``since``, ``latest``), the open ops are
   cut, the op read by ``root_op`` (with ``rules``' marks), then what may follow in Python
   asked of the detector where due: ``_at_the_bound`` past ``max_roots`` (its boundaries, if
   any, in ``*found``), ``_forget_tries`` where the top level was sifted, and, once the op has
   earned the tries ``search_work_per_op`` (``SearchBudget.credit``; none under ``--level``),
   ``_try_online`` (its answer in ``*found``). ``learning``'s last item, ``rules``:
   ``(max_roots, search_work_per_op, eager, least, repeat, marks)``
   (``StructureDetector._fast_reader``: ``structure._ROOT_RULES`` the last three). 1
   (``*found`` NULL: no boundary), or -1 with an exception. (100 k numbered names, each its
   own family: the method took some 7 k instructions an op besides ``root_op``, callgrind.) */
static int learn53_main_root(PyObject *learning, PyObject *state, const Py_ssize_t *at,
                             PyObject *const *op, PyObject **found) {
    PyObject *detector = PyTuple_GET_ITEM(learning, 0), *skipped = PyTuple_GET_ITEM(learning, 2);
    PyObject *loop = PyTuple_GET_ITEM(learning, 5), *rules = PyTuple_GET_ITEM(learning, 6);
    PyObject *thread = op[0], *name = op[1], *start = op[2], *end = op[3];
    PyObject **names = learn53_names;
    Py_ssize_t max_roots = PyLong_AsSsize_t(PyTuple_GET_ITEM(rules, 0));
    if ((max_roots == -1 && PyErr_Occurred()) || learn53_names_ready() < 0) return -1;
    /* the loop section follows the thread (``LoopSection.follow``, as the method inlines it) */
    PyObject *loop_thread = PyObject_GetAttr(loop, names[LEARN53_THREAD]);
    int follow = loop_thread == NULL ? -1
        : loop_thread == Py_None ? 1 : tries50_equal(loop_thread, thread);
    Py_XDECREF(loop_thread);
    if (follow == 1) {
        PyObject *latest = PyObject_GetAttr(loop, names[LEARN53_LATEST]);
        follow = latest == NULL || PyObject_SetAttr(loop, names[LEARN53_THREAD], thread) < 0
            || PyObject_SetAttr(loop, names[LEARN53_SINCE], latest) < 0
            || PyObject_SetAttr(loop, names[LEARN53_LATEST], start) < 0 ? -1 : 1;
        Py_XDECREF(latest);
    }
    if (follow < 0) return -1;
    PyObject *stack = SLOT_AT(state, at[LEARN49_STACK]);
    if (!PyList_CheckExact(stack)) {
        PyErr_SetString(PyExc_TypeError, "learning_op_read: a skeleton's stack is a list");
        return -1;
    }
    if (PyList_GET_SIZE(stack) && PyList_SetSlice(stack, 0, PyList_GET_SIZE(stack), NULL) < 0)
        return -1;
    PyObject *roots = Py_NewRef(SLOT_AT(state, at[LEARN49_ROOTS]));
    PyObject *call[8] = {PyTuple_GET_ITEM(learning, 4), state, start, end, name,
                         PyTuple_GET_ITEM(rules, 3), PyTuple_GET_ITEM(rules, 4),
                         PyTuple_GET_ITEM(rules, 5)};
    PyObject *node = root_op(NULL, call, 8), *now = NULL;
    int done = node == NULL ? -1 : PyObject_IsTrue(SLOT_AT(state, at[LEARN49_MAIN]));
    int main = done;
    Py_ssize_t held = done == 1 ? PyObject_Length(SLOT_AT(state, at[LEARN49_ROOTS])) : 0;
    if (held < 0) done = -1;
    if (done == 1 && held > max_roots) {
        now = PyObject_CallMethodOneArg(detector, names[LEARN53_AT_THE_BOUND], state);
        if (now == NULL) done = -1;
        else if (now != Py_None) {
            *found = now;  /* its boundaries */
            now = NULL;
            done = 2;
        }
        Py_CLEAR(now);
    }
    if (done >= 0 && done != 2 && SLOT_AT(state, at[LEARN49_ROOTS]) != roots) {
        now = PyObject_CallMethodNoArgs(detector, names[LEARN53_FORGET_TRIES]);
        done = now == NULL ? -1 : done;
        Py_CLEAR(now);
    }
    Py_DECREF(roots);
    int tried = done >= 0 && done != 2 && node != skipped && main == 1;
    if (tried) {  /* (``_online_allowed``, asked without a call: not under ``--level``) */
        PyObject *level = PyObject_GetAttr(detector, names[LEARN53_LEVEL]);
        int leveled = level == NULL ? -1 : PyObject_IsTrue(level);
        Py_XDECREF(level);
        tried = leveled == 0;
        if (leveled < 0) done = -1;
    }
    if (tried) {  /* the op earns the tries (``SearchBudget.earn``, inline) */
        PyObject *budget = PyObject_GetAttr(detector, names[LEARN53_BUDGET]);
        PyObject *credit = budget == NULL ? NULL : PyObject_GetAttr(budget, names[LEARN53_CREDIT]);
        PyObject *more = credit == NULL ? NULL
            : PyNumber_InPlaceAdd(credit, PyTuple_GET_ITEM(rules, 1));
        if (more == NULL || PyObject_SetAttr(budget, names[LEARN53_CREDIT], more) < 0) done = -1;
        Py_XDECREF(more);
        Py_XDECREF(credit);
        Py_XDECREF(budget);
        held = done < 0 ? -1 : PyObject_Length(SLOT_AT(state, at[LEARN49_ROOTS]));
        int due = held < 0 ? -1 : learn53_try_due(state, SLOT_AT(state, at[LEARN49_SEEN]), held,
                                                  PyTuple_GET_ITEM(rules, 3),
                                                  PyTuple_GET_ITEM(rules, 2));
        if (due == 1) {
            *found = PyObject_CallMethodOneArg(detector, names[LEARN53_TRY_ONLINE], state);
            if (*found == NULL) done = -1;
        } else if (due < 0) {
            done = -1;
        }
    }
    Py_XDECREF(node);
    if (done < 0) Py_CLEAR(*found);
    return done < 0 ? -1 : 1;
}

/* ``StructureDetector._observe_learning``'s cases of a side thread's op (no ``ProfilerStep``,
   read at ``depth`` of ``section``, that cannot end the loop thread's section) whose skeleton
   is the latest: under its top-level op, the case that ends at
   ``ThreadSkeleton.skips_below`` (the op pushed as not kept, as it pushes it); at its top
   level, ``learn49_side_root``'s; and a main thread's op at its top level, the same way
   (``learn53_main_root``: its boundaries, if any, in ``*found``). Answered here: 1, 0
   (nothing done: ``_observe_learning`` reads it), or -1 with an exception. ``learning``:
   the detector, the steps' prefix,
   ``SKIPPED``, ``MemoryRules.side_thread_roots``, the detector's skeletons and its loop
   section (``StructureDetector._fast_reader``'s); ``op``: thread, name, start, end. */
static int learn49_skipped(PyObject *learning, PyObject *const *op, Py_ssize_t depth,
                           PyObject *section, PyObject **found) {
    PyObject *skipped = PyTuple_GET_ITEM(learning, 2);
    PyObject *thread = op[0], *state;
    int truth = learn49_step(op[1], PyTuple_GET_ITEM(learning, 1));
    if (truth != 0) return truth < 0 ? -1 : 0;
    Py_ssize_t at[LEARN49_SLOTS];
    if ((truth = learn49_latest(learning, &state, at)) != 1 || state == Py_None) {
        Py_XDECREF(state);
        return truth < 0 ? -1 : 0;
    }
    truth = learn49_of(state, at, thread, section);
    int main = truth == 1 ? PyObject_IsTrue(SLOT_AT(state, at[LEARN49_MAIN])) : 0;
    /* (a main thread's op below its top level: read by Python) */
    truth = main < 0 ? -1 : main && depth > 0 ? 0 : truth;
    int past = truth == 1 ? learn49_from_the_past(PyTuple_GET_ITEM(learning, 5), thread, op[2])
        : 0;
    truth = past < 0 ? -1 : past ? 0 : truth;
    PyObject *stack = SLOT_AT(state, at[LEARN49_STACK]);
    if (truth == 1 && main)  /* at its top level (learn53) */
        truth = learn53_main_root(learning, state, at, op, found);
    else if (truth == 1 && depth <= 0)
        truth = learn49_side_root(learning, state, at, op, PyTuple_GET_ITEM(learning, 3),
                                  skipped);
    else if (truth == 1 && PyList_CheckExact(stack) && PyList_GET_SIZE(stack) &&
             PyList_GET_ITEM(stack, 0) != Py_None)
        truth = learn49_push_skipped(state, at, depth, skipped);
    else if (truth == 1)
        truth = 0;
    Py_DECREF(state);
    return truth;
}

/* ``StructureDetector._observe_matching``'s cases that read no op of the row matched: an op
   of another thread or section, or (no ``ProfilerStep``) one under an open op that is not
   among the containers around the row (``detector._matcher_path``), then pushed as not kept
   (``Skeletons.on_row``'s case). 1 (answered: no boundary), 0 (nothing done: it reads the
   op), or -1 with an exception. ``matching``, ``op`` and ``depth``: as ``learn49_skipped``'s. */
static int learn49_off_row(PyObject *matching, PyObject *const *op, Py_ssize_t depth,
                           PyObject *section, PyObject **found) {
    PyObject *detector = PyTuple_GET_ITEM(matching, 0), *state, *path = NULL;
    Py_ssize_t at[LEARN49_SLOTS];
    int truth = learn49_latest(matching, &state, at);
    if (truth != 1 || state == Py_None) {
        Py_XDECREF(state);
        return truth < 0 ? -1 : 0;
    }
    truth = learn49_of(state, at, op[0], section);
    if (truth == 0) truth = 1;  /* another thread's, or section's: not on the row */
    else if (truth == 1) {
        truth = depth <= 0 ? 1 : learn49_step(op[1], PyTuple_GET_ITEM(matching, 1));
        PyObject *stack = SLOT_AT(state, at[LEARN49_STACK]);
        if (truth == 0 && PyList_CheckExact(stack)) {
            path = PyObject_GetAttr(detector, learn49_matcher_path_name);
            truth = path == NULL ? -1 : 0;
        }
        int inside = 0;
        for (Py_ssize_t i = 0; path != NULL && truth == 0 && !inside &&
                 i < depth && i < PyList_GET_SIZE(stack); i++) {
            PyObject *node = Py_NewRef(PyList_GET_ITEM(stack, i));
            int in_path = node == Py_None ? 1 : PySequence_Contains(path, node);
            Py_DECREF(node);
            if (in_path < 0) truth = -1;
            inside = in_path == 0;
        }
        truth = truth < 0 ? -1 : !inside ? 0
            : learn49_push_skipped(state, at, depth, PyTuple_GET_ITEM(matching, 2));
    }
    Py_XDECREF(path);
    Py_DECREF(state);
    return truth;
}

/* An op pushed on its thread's stack (``held48_pushed``), then answered by ``answered`` (with
   no boundary: ``()``) or read by the detector's ``observe``: ``learning_op_read`` and
   ``matching_op_read`` (``args``: theirs, their state of ``parts`` items), its boundaries (a new reference), or NULL with an
   exception. */
static PyObject *learn49_read(PyObject *const *args, Py_ssize_t nargs, Py_ssize_t parts,
                              const char *usage,
                              int (*answered)(PyObject *, PyObject *const *, Py_ssize_t,
                                              PyObject *, PyObject **)) {
    if (nargs != 6 || !PyTuple_CheckExact(args[1]) || PyTuple_GET_SIZE(args[1]) != parts) {
        PyErr_SetString(PyExc_TypeError, usage);
        return NULL;
    }
    if (learn49_names_ready() < 0) return NULL;
    PyObject *stacks = args[0], *thread = args[2], *name = args[3];
    int ready = eng45_laid_out(&held48_stacks, stacks);
    ready = ready == 1 ? eng45_laid_out(&held48_stack_counts, stacks) : ready;
    if (ready != 1)  /* stacks of another class: nothing done, read the general way */
        return ready == 0 ? Py_NewRef(Py_None) : NULL;
    PyObject *names = held48_pushed(stacks, thread, name, args[4], args[5]);
    PyObject *section = names == NULL ? NULL : SLOT_AT(stacks, held48_stack_counts.at[1]);
    if (section == NULL) {
        if (names != NULL)
            PyErr_SetString(PyExc_AttributeError, "ThreadStacks.last_section");
        Py_XDECREF(names);
        return NULL;
    }
    Py_INCREF(section);
    PyObject *found = NULL;
    int done = PyList_Check(names)
        ? answered(args[1], args + 2, PyList_GET_SIZE(names) - 1, section, &found) : 0;
    if (done == 1 && found == NULL) found = PyTuple_New(0);
    else if (done == 0) {
        PyObject *observe = PyObject_GetAttr(PyTuple_GET_ITEM(args[1], 0), held48_observe);
        if (observe != NULL) {
            PyObject *call[6] = {thread, names, args[4], args[5], name, section};
            found = PyObject_Vectorcall(observe, call, 6, NULL);
            Py_DECREF(observe);
        }
    }
    Py_DECREF(section);
    Py_DECREF(names);
    return found;
}

/* learning_op_read(stacks, learning, thread, name, start, end) -> its boundaries: see the
   method table. */
static PyObject *learning_op_read(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    return learn49_read(args, nargs, 7, "learning_op_read(stacks, (detector, prefix, skipped, "
                        "side_thread_roots, skeletons, loop_section, main_rules), thread, name, "
                        "start, end)", learn49_skipped);
}

/* matching_op_read(stacks, matching, thread, name, start, end) -> its boundaries: see the
   method table. */
static PyObject *matching_op_read(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    return learn49_read(args, nargs, 7, "matching_op_read(stacks, (detector, prefix, skipped, "
                        "side_thread_roots, skeletons, loop_section, main_rules), "
                        "thread, name, start, end)", learn49_off_row);
}

/* ---- rec45: json_lines: values as orjson writes them, a line each (the JSONL records) ---- */

/* The text of an item of a dict written compact whose key is ``key`` (a str): ``,"key":``, a
   comma first unless ``first``. From ``text->keys`` (``KeyText``, its level -1: not one of
   ``text_key``'s) where the key is plain ASCII and short, else written a part at a time. */
static int compact_string(Text *text, PyObject *str);
static int compact_key(Text *text, PyObject *key, int first) {
    if (text->keys == NULL && (text->keys = PyMem_Calloc(KEY_SLOTS, sizeof(KeyText))) == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    uintptr_t at = (uintptr_t)key >> 4;
    KeyText *slot = &text->keys[(at ^ (at >> 9)) % KEY_SLOTS];
    if (slot->key != key || slot->level != -1) {
        if (PyUnicode_READY(key) < 0) return -1;
        Py_ssize_t n = PyUnicode_GET_LENGTH(key);
        if (!PyUnicode_IS_ASCII(key) || 5 + n >= KEY_TEXT_MAX
            || !ascii_plain(PyUnicode_1BYTE_DATA(key), n)) {  /* (rare) a part at a time */
            int refused;
            if (!first && text_add(text, ",", 1) < 0) return -1;
            if ((refused = compact_string(text, key)) != 0) return refused;
            return text_add(text, ":", 1);
        }
        char *out = slot->text;
        *out++ = ',';
        *out++ = '"';
        memcpy(out, PyUnicode_1BYTE_DATA(key), (size_t)n);
        out += n;
        *out++ = '"';
        *out++ = ':';
        slot->key = key;
        slot->level = -1;
        slot->size = (int)(out - slot->text);
    }
    if (text_room(text, KEY_TEXT_MAX) < 0) return -1;
    memcpy(text->at + text->size, slot->text + first, KEY_TEXT_MAX - 1);
    text->size += slot->size - first;
    return 0;
}

/* A str as orjson writes it: quoted, ``"`` and ``\`` and the controls escaped (``\b``,
   ``\t``, ``\n``, ``\f``, ``\r`` by their letters, the others as ``\u00XX``, lowercase), every
   other character as its UTF-8 (DEL and U+2028 too). 1: a lone surrogate (no UTF-8: orjson
   refuses it). */
static int compact_string(Text *text, PyObject *str) {
    static const char hex[] = "0123456789abcdef";
    /* the letter that escapes a control, where it has one (else ``\u00XX``) */
    static const char CONTROL_LETTER[32] = {['\b'] = 'b', ['\t'] = 't', ['\n'] = 'n',
                                            ['\f'] = 'f', ['\r'] = 'r'};
    if (PyUnicode_READY(str) < 0) return -1;
    Py_ssize_t n;
    const unsigned char *bytes;
    if (PyUnicode_IS_ASCII(str)) {
        n = PyUnicode_GET_LENGTH(str);
        bytes = PyUnicode_1BYTE_DATA(str);
        PyObject **slot = &text->plain[((uintptr_t)str >> 4) % PLAIN_SLOTS];
        int plain = *slot == str;
        if (!plain && (plain = ascii_plain(bytes, n)))
            *slot = str;
        if (plain) {  /* (most: copied as they are) */
            if (text_room(text, n + 2) < 0) return -1;
            char *out = text->at + text->size;
            out[0] = '"';
            memcpy(out + 1, bytes, (size_t)n);
            out[n + 1] = '"';
            text->size += n + 2;
            return 0;
        }
    } else if ((bytes = (const unsigned char *)PyUnicode_AsUTF8AndSize(str, &n)) == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) return -1;
        PyErr_Clear();
        return 1;
    }
    if (text_room(text, 6 * n + 2) < 0) return -1;
    char *out = text->at + text->size, *start = out;
    *out++ = '"';
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = bytes[i];
        if (c >= ' ' && c != '\\' && c != '"') {
            *out++ = (char)c;
            continue;
        }
        *out++ = '\\';
        char letter = c >= ' ' ? (char)c : CONTROL_LETTER[c];  /* (``"`` and ``\``: themselves) */
        if (letter) {
            *out++ = letter;
            continue;
        }
        memcpy(out, "u00", 3);
        out[3] = hex[c >> 4];
        out[4] = hex[c & 0xf];
        out += 5;
    }
    *out++ = '"';
    text->size += out - start;
    return 0;
}

/* A float as orjson writes it: not finite as null; 0.0, whole numbers below 2**53 and the
   multiples of 0.001 below 10**12 (``rounded_us``'s: their shortest repr is their three
   decimals, trailing zeros left out, as no other decimal as short is within an ulp, below
   2**-13 there) written here; the others of 1e-4 to 1e16 (where orjson writes what repr
   does, without an exponent) by ``PyOS_double_to_string``. 1: a float beyond (an exponent:
   orjson writes ``1e16``, repr ``1e+16``). */
static int compact_float(Text *text, double v) {
    if (!isfinite(v)) return text_add(text, "null", 4);
    if (v == 0.0)
        return text_add(text, signbit(v) ? "-0.0" : "0.0", signbit(v) ? 4 : 3);
    double size = fabs(v);
    if (v == floor(v) && size < 9007199254740992.0)
        return text_integer(text, (long long)v, ".0", 2);
    if (size < 1e12) {
        long long milli = llround(v * 1000.0);
        if ((double)milli / 1000.0 == v) {  /* the double nearest to milli / 1000 */
            unsigned long long u = milli < 0 ? 0ULL - (unsigned long long)milli
                                             : (unsigned long long)milli;
            char decimals[4] = {'.', (char)('0' + u / 100 % 10), (char)('0' + u / 10 % 10),
                                (char)('0' + u % 10)};
            int kept = u % 10 ? 4 : u % 100 ? 3 : 2;  /* (u % 1000: not 0, or v is whole) */
            if (u < 1000)  /* below 1: its whole part is a 0 */
                return text_add(text, milli < 0 ? "-0" : "0", milli < 0 ? 2 : 1) < 0 ? -1
                       : text_add(text, decimals, kept);
            return text_integer(text, milli < 0 ? -(long long)(u / 1000) : (long long)(u / 1000),
                                decimals, kept);
        }
    }
    if (size < 1e-4 || size >= 1e16) return 1;
    char *repr = PyOS_double_to_string(v, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
    if (repr == NULL) return -1;
    int result = text_add(text, repr, (Py_ssize_t)strlen(repr));
    PyMem_Free(repr);
    return result;
}

/* A dict written compact (``compact_value``'s answers; a key not a str: 1). */
static int compact_value(Text *text, PyObject *value, int level);
static int compact_dict(Text *text, PyObject *dict, int level) {
    Py_ssize_t pos = 0;
    PyObject *key, *item;
    int result = text_add(text, "{", 1);
    for (int first = 1; result == 0 && PyDict_Next(dict, &pos, &key, &item); first = 0) {
        result = Py_TYPE(key) != &PyUnicode_Type ? 1 : compact_key(text, key, first);
        if (result == 0) result = compact_value(text, item, level + 1);
    }
    return result ? result : text_add(text, "}", 1);
}

/* ``value`` written compact: 0, -1 (an error set), or 1: what orjson may write otherwise or
   refuse (a value not of the exact types written here: dict with str keys, list, tuple, str,
   int of 64 bits, float, bool, None; a float written with an exponent; a lone surrogate;
   nesting deeper than ``LAID_OUT_DEPTH``): the caller answers None. */
static int compact_value(Text *text, PyObject *value, int level) {
    PyTypeObject *type = Py_TYPE(value);
    if (type == &PyFloat_Type) return compact_float(text, PyFloat_AS_DOUBLE(value));
    if (type == &PyLong_Type) {  /* (64 bits: orjson refuses more, or writes up to 2**64) */
        int overflow;
        long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
        return overflow ? 1 : v == -1 && PyErr_Occurred() ? -1 : text_integer(text, v, "", 0);
    }
    if (type == &PyUnicode_Type) return compact_string(text, value);
    if (value == Py_None || type == &PyBool_Type) {
        const char *word = value == Py_None ? "null" : value == Py_True ? "true" : "false";
        return text_add(text, word, (Py_ssize_t)strlen(word));
    }
    if (level >= LAID_OUT_DEPTH) return 1;
    if (type == &PyDict_Type) return compact_dict(text, value, level);
    if (type == &PyList_Type || type == &PyTuple_Type) {
        PyObject **items = PySequence_Fast_ITEMS(value);
        if (text_add(text, "[", 1) < 0) return -1;
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(value); i++) {
            if (i && text_add(text, ",", 1) < 0) return -1;
            int result = compact_value(text, items[i], level + 1);
            if (result) return result;
        }
        return text_add(text, "]", 1);
    }
    return 1;
}

/* The room made at once for the first lines of ``json_lines`` (the text then doubles as it
   grows): a record of a one-op iteration takes some 700 bytes, a boundary's some 90; the
   room of 64 lines, not of every one (a detector that confirms its unit only at the end of
   the input hands out every boundary of the trace at once). */
#define JSON_LINE_BYTES 512
#define JSON_LINES_AT_ONCE 64

static PyObject *json_lines(PyObject *self, PyObject *args) {
    PyObject *values;
    if (!PyArg_ParseTuple(args, "O!", &PyList_Type, &values)) return NULL;
    Text text = {NULL, 0, 0, {NULL}, NULL};
    PyObject *result = NULL;
    Py_ssize_t count = PyList_GET_SIZE(values);
    if (text_room(&text, JSON_LINE_BYTES * (count < JSON_LINES_AT_ONCE ? count : JSON_LINES_AT_ONCE)
                         + 1) < 0)
        return NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(values); i++) {
        PyObject *value = PyList_GET_ITEM(values, i);
        Py_INCREF(value);  /* (a str's UTF-8 made, or a dict read, cannot drop it meanwhile) */
        int made = compact_value(&text, value, 0);
        Py_DECREF(value);
        if (made < 0) goto done;
        if (made > 0) {
            result = Py_NewRef(Py_None);
            goto done;
        }
        if (text_add(&text, "\n", 1) < 0) goto done;
    }
    result = PyBytes_FromStringAndSize(text.at, text.size);
done:
    PyMem_Free(text.at);
    PyMem_Free(text.keys);
    return result;
}

/* ---- rec46: record_lines: records as their JSON lines, from their slots (no dict) ---- */

/* A class's ``records.line_layout``, read once a ``record_lines`` call: ``count`` items, each
   a key (``keys``) and a kind (``kinds``: ``c`` the constant at the same place, ``v`` a slot
   as it is, ``r`` one rounded (``rounded3``, truthy), ``d`` ``round(end - start, 3)`` of two,
   ``w`` the ``d`` written before where a slot is None, else the property of the key's name),
   ``offsets`` the slots read in order, ``extra`` the offset of the dict spread at the end
   (-1: none). */
#define LINE_LAYOUTS_MAX 4
typedef struct {
    PyTypeObject *type;
    PyObject *keys, *constants;
    const char *kinds;
    Py_ssize_t count, extra;
    Py_ssize_t offsets[SLOTS_MAX];
} LineLayout;

/* ``layout`` read from ``spec`` (a ``line_layout`` tuple) for ``type``: 0, or -1 (an error). */
static int line_layout_read(LineLayout *layout, PyTypeObject *type, PyObject *spec) {
    PyObject *keys, *kinds, *slots, *constants;
    int spread;
    if (!PyTuple_Check(spec) || !PyArg_ParseTuple(spec, "O!O!O!O!p", &PyTuple_Type, &keys,
                                                  &PyBytes_Type, &kinds, &PyTuple_Type, &slots,
                                                  &PyTuple_Type, &constants, &spread)) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "record_lines(): a layout");
        return -1;
    }
    Py_ssize_t count = PyTuple_GET_SIZE(keys), reads = 0;
    const char *k = PyBytes_AS_STRING(kinds);
    if (PyBytes_GET_SIZE(kinds) != count || PyTuple_GET_SIZE(constants) != count) {
        PyErr_SetString(PyExc_ValueError, "record_lines(): a kind and a constant a key");
        return -1;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        if (!PyUnicode_CheckExact(PyTuple_GET_ITEM(keys, i)) || !strchr("cvrdw", k[i]) || !k[i]) {
            PyErr_SetString(PyExc_ValueError, "record_lines(): str keys, kinds of \"cvrdw\"");
            return -1;
        }
        if (k[i] == 'w' && !memchr(k, 'd', (size_t)i)) {
            PyErr_SetString(PyExc_ValueError, "record_lines(): a \"w\" after a \"d\"");
            return -1;
        }
        reads += k[i] == 'c' ? 0 : k[i] == 'd' ? 2 : 1;
    }
    if (PyTuple_GET_SIZE(slots) != reads + spread || reads + spread > SLOTS_MAX) {
        PyErr_SetString(PyExc_ValueError, "record_lines(): the slots its kinds read");
        return -1;
    }
    if (!makes_slotted(type, reads + spread, "record_lines")
            || slot_offsets(type, slots, layout->offsets) < 0)
        return -1;
    layout->type = type;
    layout->keys = keys;
    layout->constants = constants;
    layout->kinds = k;
    layout->count = count;
    layout->extra = spread ? layout->offsets[reads] : -1;
    return 0;
}

/* ``value`` (a new reference, or NULL: an error) written compact, then released: 0, -1 or 1
   (``compact_value``'s answers). Floats and ints only (nothing remembered by its address). */
static int compact_made(Text *text, PyObject *value) {
    if (value == NULL) return -1;
    int result = compact_value(text, value, 0);
    Py_DECREF(value);
    return result;
}

/* ``round(end - start, 3)`` written: two floats subtracted here where the difference is its
   own rounding (0, whole, not finite: ``rounded3``'s rule), else as Python computes it. */
static int line_duration(Text *text, PyObject *end, PyObject *start) {
    if (PyFloat_CheckExact(end) && PyFloat_CheckExact(start)) {
        double d = PyFloat_AS_DOUBLE(end) - PyFloat_AS_DOUBLE(start);
        if (d == 0.0 || !isfinite(d) || d == floor(d)) return compact_float(text, d);
    }
    PyObject *difference = PyNumber_Subtract(end, start);
    if (difference == NULL) return -1;
    PyObject *value = rounded3(difference, 0);
    Py_DECREF(difference);
    return compact_made(text, value);
}

/* The JSON line of ``obj`` by ``layout`` (``compact_value``'s answers), or 2 where it is to be
   written from its dict (a slot not set, an ``extra`` not an empty dict): nothing written. */
static int record_line(Text *text, PyObject *obj, const LineLayout *layout) {
    const Py_ssize_t *at = layout->offsets;
    #define SLOT(offset) (*(PyObject **)((char *)obj + (offset)))
    if (layout->extra >= 0) {
        PyObject *extra = SLOT(layout->extra);
        if (extra == NULL || !PyDict_CheckExact(extra) || PyDict_GET_SIZE(extra)) return 2;
    }
    Py_ssize_t begin = text->size, duration = 0, duration_end = 0;
    int result = text_add(text, "{", 1);
    for (Py_ssize_t i = 0; result == 0 && i < layout->count; i++) {
        char kind = layout->kinds[i];
        PyObject *value = kind == 'c' ? PyTuple_GET_ITEM(layout->constants, i) : SLOT(*at);
        if (value == NULL || (kind == 'd' && SLOT(at[1]) == NULL)) {
            text->size = begin;
            return 2;
        }
        at += kind == 'c' ? 0 : kind == 'd' ? 2 : 1;
        if ((result = compact_key(text, PyTuple_GET_ITEM(layout->keys, i), i == 0)) != 0) break;
        if (kind == 'c' || kind == 'v') {
            result = compact_value(text, value, 1);
        } else if (kind == 'r') {
            result = compact_made(text, rounded3(value, 1));
        } else if (kind == 'd') {
            duration = text->size;
            result = line_duration(text, value, SLOT(at[-1]));
            duration_end = text->size;
        } else if (value != Py_None) {  /* 'w': the property */
            result = compact_made(text, PyObject_GetAttr(obj, PyTuple_GET_ITEM(layout->keys, i)));
        } else if ((result = text_room(text, duration_end - duration)) == 0) {
            memcpy(text->at + text->size, text->at + duration, (size_t)(duration_end - duration));
            text->size += duration_end - duration;
        }
    }
    #undef SLOT
    return result ? result : text_add(text, "}\n", 2);
}

/* The layout of ``obj``'s class among ``known`` (``*count`` of them), read from ``layouts``
   where not yet; NULL: none there (or an error, set). */
static const LineLayout *line_layout_of(PyObject *obj, PyObject *layouts, LineLayout *known,
                                        int *count) {
    PyTypeObject *type = Py_TYPE(obj);
    for (int k = 0; k < *count; k++)
        if (known[k].type == type) return &known[k];
    PyObject *spec = PyDict_GetItemWithError(layouts, (PyObject *)type);
    if (spec == NULL || *count == LINE_LAYOUTS_MAX) return NULL;
    if (line_layout_read(&known[*count], type, spec) < 0) return NULL;
    return &known[(*count)++];
}

/* The line of ``obj`` from its ``to_dict(True)``, which ``held`` keeps (the strs written are
   remembered by their address for the rest of the call). */
static int record_dict_line(Text *text, PyObject *obj, PyObject *held) {
    PyObject *d = PyObject_CallMethod(obj, "to_dict", "O", Py_True);
    if (d == NULL) return -1;
    int kept = PyList_Append(held, d);
    Py_DECREF(d);
    if (kept < 0) return -1;
    int result = compact_value(text, d, 0);
    return result ? result : text_add(text, "\n", 1);
}

/* record_lines(records, layouts): ``json_lines([r.to_dict(shared=True) for r in records])``,
   each record of a class of ``layouts`` (class -> ``records.line_layout``) written from its
   slots (no dict made, no frame of Python), any other from its dict; None as json_lines. */
static PyObject *record_lines(PyObject *self, PyObject *args) {
    PyObject *records, *layouts;
    if (!PyArg_ParseTuple(args, "O!O!", &PyList_Type, &records, &PyDict_Type, &layouts))
        return NULL;
    Text text = {NULL, 0, 0, {NULL}, NULL};
    LineLayout known[LINE_LAYOUTS_MAX];
    int count = 0;
    PyObject *result = NULL, *held = PyList_New(0);
    Py_ssize_t n = PyList_GET_SIZE(records);
    if (held == NULL || text_room(&text, JSON_LINE_BYTES * (n < JSON_LINES_AT_ONCE ? n
                                                            : JSON_LINES_AT_ONCE) + 1) < 0)
        goto done;
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(records); k++) {
        PyObject *obj = Py_NewRef(PyList_GET_ITEM(records, k));  /* (held: Python may run) */
        const LineLayout *layout = line_layout_of(obj, layouts, known, &count);
        int made = layout == NULL ? (PyErr_Occurred() ? -1 : 2) : record_line(&text, obj, layout);
        if (made == 2) made = record_dict_line(&text, obj, held);
        Py_DECREF(obj);
        if (made < 0) goto done;
        if (made > 0) {
            result = Py_NewRef(Py_None);
            goto done;
        }
    }
    result = PyBytes_FromStringAndSize(text.at, text.size);
done:
    Py_XDECREF(held);
    PyMem_Free(text.at);
    PyMem_Free(text.keys);
    return result;
}

/* ---- rec46: SlotMaker: new objects of a class with __slots__, its layout read once ---- */

/* slot_maker(cls, names, defaults, factories, given): a callable that makes what
   ``fresh_with_slots(cls, names, defaults, factories, given, *values)`` makes of its values
   (``defaults`` None: what ``one_with_slots(cls, names, *values)`` makes, every slot given
   in order), the slots' offsets and the indices ``given`` read once, here, and the values
   passed on as they came: a ``functools.partial`` of either (``records.made_one``,
   ``records.made_fresh``) allocated a copy of its arguments each call past 5, and each call
   looked the offsets up again. */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyTypeObject *type;
    PyObject *defaults, *factories;  /* tuples, or NULL: every slot given */
    Py_ssize_t given;
    Py_ssize_t offsets[SLOTS_MAX];
    Py_ssize_t at[SLOTS_MAX];  /* the slot of each value given (an index of ``offsets``) */
} SlotMakerObject;

static PyObject *slot_maker_call(SlotMakerObject *maker, PyObject *const *args, size_t nargsf,
                                 PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs != maker->given || (kwnames != NULL && PyTuple_GET_SIZE(kwnames))) {
        PyErr_Format(kwnames != NULL && PyTuple_GET_SIZE(kwnames) ? PyExc_TypeError
                     : PyExc_ValueError, "a maker of %s takes %zd values by position",
                     maker->type->tp_name, maker->given);
        return NULL;
    }
    if (maker->defaults == NULL) return slotted(maker->type, maker->offsets, args, nargs);
    return fresh_slotted(maker->type, maker->offsets, maker->defaults, maker->factories,
                         maker->at, args, nargs);
}

static void slot_maker_dealloc(SlotMakerObject *maker) {
    Py_XDECREF(maker->type);
    Py_XDECREF(maker->defaults);
    Py_XDECREF(maker->factories);
    PyObject_Free(maker);
}

static PyTypeObject SlotMakerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "stream_split._native.SlotMaker",
    .tp_basicsize = sizeof(SlotMakerObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A maker of objects of a class with __slots__ (slot_maker).",
    .tp_vectorcall_offset = offsetof(SlotMakerObject, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_dealloc = (destructor)slot_maker_dealloc,
};

/* The indices ``given`` (a tuple of ints, each below ``n``) into ``at``: 0, or -1 (an error). */
static int slot_maker_given(PyObject *given, Py_ssize_t n, Py_ssize_t *at) {
    for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(given); j++) {
        PyObject *index = PyTuple_GET_ITEM(given, j);
        at[j] = PyLong_Check(index) ? PyLong_AsSsize_t(index) : -1;
        if (at[j] < 0 || at[j] >= n) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "slot_maker() given: slot indices");
            return -1;
        }
    }
    return 0;
}

static PyObject *slot_maker(PyObject *self, PyObject *args) {
    PyObject *cls, *names, *defaults, *factories, *given;
    if (!PyArg_ParseTuple(args, "O!O!OOO", &PyType_Type, &cls, &PyTuple_Type, &names,
                          &defaults, &factories, &given))
        return NULL;
    PyTypeObject *type = (PyTypeObject *)cls;
    Py_ssize_t n = PyTuple_GET_SIZE(names);
    int every = defaults == Py_None;
    if (!makes_slotted(type, n, "slot_maker")) return NULL;
    if (!every && (!PyTuple_Check(defaults) || !PyTuple_Check(factories) || !PyTuple_Check(given)
                   || PyTuple_GET_SIZE(defaults) != n || PyTuple_GET_SIZE(factories) != n
                   || PyTuple_GET_SIZE(given) > n)) {
        PyErr_SetString(PyExc_ValueError, "slot_maker() takes a default and a factory a slot, "
                        "and the indices given (or None, None, None: every slot given)");
        return NULL;
    }
    SlotMakerObject *maker = PyObject_New(SlotMakerObject, &SlotMakerType);
    if (maker == NULL) return NULL;
    maker->vectorcall = (vectorcallfunc)slot_maker_call;
    maker->type = (PyTypeObject *)Py_NewRef(cls);
    maker->defaults = every ? NULL : Py_NewRef(defaults);
    maker->factories = every ? NULL : Py_NewRef(factories);
    maker->given = every ? n : PyTuple_GET_SIZE(given);
    if (slot_offsets_found(type, names, maker->offsets) < 0
            || (!every && slot_maker_given(given, n, maker->at) < 0)) {
        Py_DECREF(maker);
        return NULL;
    }
    return (PyObject *)maker;
}

/* ---- man47: entry_texts: a manifest's entries laid out from their records' slots ---- */

/* What ``entry_texts`` reads of each record: ``count`` items, each a key (``keys``) and a kind
   (``kinds``: ``v`` a slot as it is, ``r`` one rounded (``rounded3``, truthy), ``d``
   ``round(end - start, 3)`` of two, ``w`` the ``d`` before where a slot is None, else the
   property of the key's name, ``n`` the record's name, of the list ``names``), ``offsets``
   the slots read in order, ``extra`` the offset of the dict that must be empty; ``key_texts``
   the text that begins each item (``text_key``'s, a comma first: ``entry_key_texts``; size -1:
   too long, ``text_key`` writes it each time). */
typedef struct {
    PyObject *keys, *names;
    const char *kinds;
    Py_ssize_t count, extra;
    Py_ssize_t offsets[SLOTS_MAX];
    KeyText key_texts[SLOTS_MAX];
} EntryLayout;

/* ``layout->key_texts`` of its keys at ``level``, as ``text_key`` writes them into ``text``
   (empty, and left so): made once a call, each then copied whole, with no look-up by the
   key's address (``text_key``'s table of 512, whose collisions made it write some keys anew
   in every entry: 1,000 a call). 0, or -1 (an error set). */
static int entry_key_texts(EntryLayout *layout, Text *text, Py_ssize_t indent, int level) {
    for (Py_ssize_t i = 0; i < layout->count; i++) {
        KeyText *key = &layout->key_texts[i];
        if (text_key(text, PyTuple_GET_ITEM(layout->keys, i), indent, level, 0) < 0) return -1;
        key->size = text->size < KEY_TEXT_MAX ? (int)text->size : -1;
        if (key->size >= 0) memcpy(key->text, text->at, (size_t)text->size);
        text->size = 0;
    }
    return 0;
}

/* ``layout`` of the records of ``type`` from the arguments: 0, or -1 (an error set). */
static int entry_layout_read(EntryLayout *layout, PyTypeObject *type, PyObject *keys,
                             PyObject *kinds, PyObject *slots) {
    Py_ssize_t count = PyTuple_GET_SIZE(keys), reads = 0;
    const char *k = PyBytes_AS_STRING(kinds);
    if (PyBytes_GET_SIZE(kinds) != count) {
        PyErr_SetString(PyExc_ValueError, "entry_texts(): a kind a key");
        return -1;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        if (!PyUnicode_CheckExact(PyTuple_GET_ITEM(keys, i)) || !k[i] || !strchr("vrdwn", k[i])
                || (k[i] == 'w' && !memchr(k, 'd', (size_t)i))) {
            PyErr_SetString(PyExc_ValueError,
                            "entry_texts(): str keys, kinds of \"vrdwn\", a \"w\" after a \"d\"");
            return -1;
        }
        reads += k[i] == 'n' ? 0 : k[i] == 'd' ? 2 : 1;
    }
    if (PyTuple_GET_SIZE(slots) != reads + 1) {
        PyErr_SetString(PyExc_ValueError, "entry_texts(): the slots its kinds read, then extra's");
        return -1;
    }
    if (!makes_slotted(type, reads + 1, "entry_texts") || slot_offsets(type, slots, layout->offsets) < 0)
        return -1;
    layout->keys = keys;
    layout->kinds = k;
    layout->count = count;
    layout->extra = layout->offsets[reads];
    return 0;
}

/* ``value`` (a new reference, or NULL: an error) written at ``level`` as ``text_value`` writes
   it, then released: 0, -1, or 1 (not written here: the caller answers None). */
static int entry_value_made(Text *text, PyObject *value, Py_ssize_t indent, int level) {
    if (value == NULL) return -1;
    int result = text_value(text, value, indent, level);
    Py_DECREF(value);
    return result;
}

/* The entry of ``obj`` (the ``k``-th record) laid out at ``level`` as ``text_value`` writes
   its dict (its first line begun): 0, -1, or 1 (a record whose entry is not made so, or a
   value ``text_value`` does not write). */
static int entry_text(Text *text, PyObject *obj, Py_ssize_t k, const EntryLayout *layout,
                      Py_ssize_t indent, int level) {
    #define SLOT(offset) (*(PyObject **)((char *)obj + (offset)))
    PyObject *extra = SLOT(layout->extra);
    if (extra == NULL || !PyDict_CheckExact(extra) || PyDict_GET_SIZE(extra)) return 1;
    const Py_ssize_t *at = layout->offsets;
    PyObject *duration = NULL;
    int result = text_add(text, "{", 1);
    for (Py_ssize_t i = 0; result == 0 && i < layout->count; i++) {
        char kind = layout->kinds[i];
        PyObject *key = PyTuple_GET_ITEM(layout->keys, i);
        PyObject *value = kind == 'n' ? PyList_GET_ITEM(layout->names, k) : SLOT(*at);
        if (value == NULL || (kind == 'd' && SLOT(at[1]) == NULL)) {
            result = 1;
            break;
        }
        at += kind == 'n' ? 0 : kind == 'd' ? 2 : 1;
        const KeyText *made = &layout->key_texts[i];
        if (made->size >= 0 && (result = text_room(text, KEY_TEXT_MAX)) == 0) {
            /* (a copy of a size known here, made inline, as ``text_key``'s) */
            memcpy(text->at + text->size, made->text + (i == 0), KEY_TEXT_MAX - 1);
            text->size += made->size - (i == 0);
        } else if (made->size < 0) {
            result = text_key(text, key, indent, level + 1, i == 0);
        }
        if (result) break;
        if (kind == 'v' || kind == 'n') {
            result = text_scalar(text, value, Py_TYPE(value));
            if (result == 2) result = text_value(text, value, indent, level + 1);
        } else if (kind == 'r') {
            result = entry_value_made(text, rounded3(value, 1), indent, level + 1);
        } else if (kind == 'd') {
            PyObject *difference = PyNumber_Subtract(value, SLOT(at[-1]));
            Py_XSETREF(duration, difference == NULL ? NULL : rounded3(difference, 0));
            Py_XDECREF(difference);
            result = duration == NULL ? -1 : text_value(text, duration, indent, level + 1);
        } else if (value != Py_None) {  /* 'w': the property */
            result = entry_value_made(text, PyObject_GetAttr(obj, key), indent, level + 1);
        } else {
            result = duration == NULL ? 1 : text_value(text, duration, indent, level + 1);
        }
    }
    #undef SLOT
    Py_XDECREF(duration);
    if (result) return result;
    if (text_line(text, indent, level) < 0) return -1;
    return text_add(text, "}", 1);
}

/* entry_texts(records, keys, kinds, slots, names, indent, level): the bytes that
   ``laid_out(entries, indent, level, True)`` answers, ``entries`` the dicts that ``records``
   (objects of the first one's class exactly) stand for, item for item as ``EntryLayout``
   reads them (``slots``: what the kinds read, in order, then the dict that must be empty),
   without the dicts. None where a record is not of that class, its dict to check is not
   empty, a slot is not set, or a value is not one that ``laid_out`` writes (the caller makes
   the dicts). */
static PyObject *entry_texts(PyObject *self, PyObject *args) {
    PyObject *records, *keys, *kinds, *slots, *names;
    Py_ssize_t indent;
    int level;
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!ni", &PyList_Type, &records, &PyTuple_Type, &keys,
                          &PyBytes_Type, &kinds, &PyTuple_Type, &slots, &PyList_Type, &names,
                          &indent, &level))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(records);
    if (indent < 0 || indent > 64 || level < 0 || level >= LAID_OUT_DEPTH
            || PyList_GET_SIZE(names) != n) {
        PyErr_SetString(PyExc_ValueError,
                        "entry_texts(): indent 0 to 64, level 0 to 63, a name a record");
        return NULL;
    }
    if (n == 0) return PyBytes_FromStringAndSize(NULL, 0);
    PyTypeObject *type = Py_TYPE(PyList_GET_ITEM(records, 0));
    EntryLayout layout;
    if (entry_layout_read(&layout, type, keys, kinds, slots) < 0) return NULL;
    layout.names = names;
    Text text = {NULL, 0, 0, {NULL}, NULL, NULL};
    PyObject *result = NULL;
    if ((text.bytes = PyBytes_FromStringAndSize(NULL, 0)) == NULL) return NULL;
    if (text_room(&text, LAID_OUT_ITEM_BYTES * n) < 0
            || entry_key_texts(&layout, &text, indent, level + 1) < 0)
        goto done;
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(records) && k < n; k++) {
        PyObject *obj = Py_NewRef(PyList_GET_ITEM(records, k));  /* (held: Python may run) */
        int made = Py_TYPE(obj) != type;
        if (!made && ((k && text_add(&text, ",", 1) < 0) || text_line(&text, indent, level) < 0))
            made = -1;
        if (!made) made = entry_text(&text, obj, k, &layout, indent, level);
        Py_DECREF(obj);
        if (made < 0) goto done;
        if (made > 0) {
            result = Py_NewRef(Py_None);
            goto done;
        }
    }
    if (PyList_GET_SIZE(records) != n) {  /* (changed meanwhile) */
        result = Py_NewRef(Py_None);
        goto done;
    }
    if (_PyBytes_Resize(&text.bytes, text.size) == 0) {
        result = text.bytes;
        text.bytes = NULL;
    }
done:
    Py_XDECREF(text.bytes);
    PyMem_Free(text.keys);
    return result;
}

/* ---- page48: a page of breakdowns packed in one call (breakdown._breakdown_page) ---- */

/* Item ``k`` of a column as ``slot_columns`` makes it: a list, or a 1-tuple of the one value
   every object holds (borrowed). */
static inline PyObject *page48_item(PyObject *column, Py_ssize_t k) {
    return PyTuple_CheckExact(column) ? PyTuple_GET_ITEM(column, 0)
                                      : PyList_GET_ITEM(column, k);
}

/* ``slot_columns(objects, names)`` called here (a new list, or NULL with an error set). */
static PyObject *page48_columns(PyObject *objects, PyObject *names) {
    PyObject *args = PyTuple_Pack(2, objects, names);
    if (args == NULL) return NULL;
    PyObject *columns = slot_columns(NULL, args);
    Py_DECREF(args);
    return columns;
}

/* The states of ``unions`` (``count`` of them, a list) as ``breakdown._flat_states`` gives
   them: where every union's ``starts`` and ``ends`` (slots ``union_names[0]`` and ``[1]``)
   are lists, ``(their counts, every start, every end, the frozen_us column, the frozen
   column)``; else a list of each one's 4 slots' values as a tuple. New reference, or NULL
   with an error set. */
static PyObject *page48_flat_states(PyObject *unions, Py_ssize_t count, PyObject *union_names) {
    if (count == 0) return PyList_New(0);
    PyObject *columns = page48_columns(unions, union_names);
    if (columns == NULL) return NULL;
    PyObject *starts = PyList_GET_ITEM(columns, 0), *ends = PyList_GET_ITEM(columns, 1);
    PyObject *frozen_us = PyList_GET_ITEM(columns, 2), *frozen = PyList_GET_ITEM(columns, 3);
    Py_ssize_t total = 0, total_ends = 0;
    int lists = 1;
    for (Py_ssize_t k = 0; k < count && lists; k++) {
        PyObject *lo = page48_item(starts, k), *hi = page48_item(ends, k);
        lists = PyList_CheckExact(lo) && PyList_CheckExact(hi);
        total += lists ? PyList_GET_SIZE(lo) : 0;
        total_ends += lists ? PyList_GET_SIZE(hi) : 0;
    }
    PyObject *out = NULL;
    if (!lists) {  /* (``zip``'s tuples) */
        out = PyList_New(count);
        for (Py_ssize_t k = 0; out != NULL && k < count; k++) {
            PyObject *state = PyTuple_Pack(4, page48_item(starts, k), page48_item(ends, k),
                                           page48_item(frozen_us, k), page48_item(frozen, k));
            if (state == NULL) Py_CLEAR(out);
            else PyList_SET_ITEM(out, k, state);
        }
        Py_DECREF(columns);
        return out;
    }
    PyObject *counts = PyList_New(count), *all_starts = PyList_New(total);
    PyObject *all_ends = PyList_New(total_ends);
    if (counts == NULL || all_starts == NULL || all_ends == NULL) goto done;
    Py_ssize_t at = 0, at_end = 0;
    for (Py_ssize_t k = 0; k < count; k++) {
        PyObject *lo = page48_item(starts, k), *hi = page48_item(ends, k);
        PyObject *size = PyLong_FromSsize_t(PyList_GET_SIZE(lo));
        if (size == NULL) goto done;
        PyList_SET_ITEM(counts, k, size);
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(lo); i++)
            PyList_SET_ITEM(all_starts, at++, Py_NewRef(PyList_GET_ITEM(lo, i)));
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(hi); i++)
            PyList_SET_ITEM(all_ends, at_end++, Py_NewRef(PyList_GET_ITEM(hi, i)));
    }
    out = PyTuple_Pack(5, counts, all_starts, all_ends, frozen_us, frozen);
done:
    Py_XDECREF(counts);
    Py_XDECREF(all_starts);
    Py_XDECREF(all_ends);
    Py_DECREF(columns);
    return out;
}

/* page48_breakdown_page(breakdowns, names, union_names, layers_at, threads_at, empties):
   ``breakdown._breakdown_page(breakdowns)`` in one call: ``(columns, states)``, ``columns``
   ``slot_columns(breakdowns, names)`` with column ``layers_at`` each one's count of layers
   and ``threads_at`` the tuple of each one's threads (the keys of its dict), each column of
   ``empties`` (a tuple of places) None where no value there is true; ``states``
   ``page48_flat_states`` of their unions (each one's layers, then its threads' unions, one
   breakdown after the other). None, nothing made, where a breakdown's layers are not a list
   or its threads' unions not a dict (the caller packs the page the general way). */
static PyObject *page48_breakdown_page(PyObject *self, PyObject *args) {
    PyObject *breakdowns, *names, *union_names, *empties;
    Py_ssize_t layers_at, threads_at;
    if (!PyArg_ParseTuple(args, "O!O!O!nnO!", &PyList_Type, &breakdowns, &PyTuple_Type, &names,
                          &PyTuple_Type, &union_names, &layers_at, &threads_at, &PyTuple_Type,
                          &empties))
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(names), count = PyList_GET_SIZE(breakdowns);
    if (PyTuple_GET_SIZE(union_names) != 4 || layers_at < 0 || layers_at >= n
            || threads_at < 0 || threads_at >= n || layers_at == threads_at) {
        PyErr_SetString(PyExc_ValueError, "page48_breakdown_page() takes 4 union slots, and "
                                          "two distinct places among the names");
        return NULL;
    }
    PyObject *columns = page48_columns(breakdowns, names);
    if (columns == NULL) return NULL;
    PyObject *layers = PyList_GET_ITEM(columns, layers_at);
    PyObject *threads = PyList_GET_ITEM(columns, threads_at);
    Py_ssize_t total = 0;
    for (Py_ssize_t k = 0; k < count; k++) {
        PyObject *its_layers = page48_item(layers, k), *its_threads = page48_item(threads, k);
        if (!PyList_CheckExact(its_layers) || !PyDict_CheckExact(its_threads)) {
            Py_DECREF(columns);
            Py_RETURN_NONE;
        }
        total += PyList_GET_SIZE(its_layers) + PyDict_GET_SIZE(its_threads);
    }
    PyObject *unions = PyList_New(total), *counts = PyList_New(count);
    PyObject *keys = PyList_New(count), *out = NULL, *states = NULL;
    if (unions == NULL || counts == NULL || keys == NULL) goto done;
    Py_ssize_t at = 0;
    for (Py_ssize_t k = 0; k < count; k++) {  /* the layers first */
        PyObject *its_layers = page48_item(layers, k);
        Py_ssize_t m = PyList_GET_SIZE(its_layers);
        PyObject *size = PyLong_FromSsize_t(m);
        if (size == NULL) goto done;
        PyList_SET_ITEM(counts, k, size);
        for (Py_ssize_t i = 0; i < m; i++)
            PyList_SET_ITEM(unions, at++, Py_NewRef(PyList_GET_ITEM(its_layers, i)));
    }
    for (Py_ssize_t k = 0; k < count; k++) {  /* then the threads' */
        PyObject *its_threads = page48_item(threads, k), *key, *value;
        PyObject *thread_keys = PyTuple_New(PyDict_GET_SIZE(its_threads));
        if (thread_keys == NULL) goto done;
        PyList_SET_ITEM(keys, k, thread_keys);
        Py_ssize_t pos = 0, i = 0;
        while (PyDict_Next(its_threads, &pos, &key, &value)) {
            PyTuple_SET_ITEM(thread_keys, i++, Py_NewRef(key));
            PyList_SET_ITEM(unions, at++, Py_NewRef(value));
        }
    }
    PyList_SetItem(columns, layers_at, Py_NewRef(counts));  /* (steals: the old one let go) */
    PyList_SetItem(columns, threads_at, Py_NewRef(keys));
    for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(empties); j++) {
        Py_ssize_t place = PyLong_AsSsize_t(PyTuple_GET_ITEM(empties, j));
        if (place < 0 || place >= n) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "empties: places");
            goto done;
        }
        PyObject *column = PyList_GET_ITEM(columns, place);
        Py_ssize_t size = PyTuple_CheckExact(column) ? 1 : PyList_GET_SIZE(column);
        int some = 0;
        for (Py_ssize_t k = 0; k < size && !some; k++) {
            some = PyObject_IsTrue(page48_item(column, k));
            if (some < 0) goto done;
        }
        if (!some) PyList_SetItem(columns, place, Py_NewRef(Py_None));
    }
    states = page48_flat_states(unions, total, union_names);
    if (states != NULL) out = PyTuple_Pack(2, columns, states);
done:
    Py_XDECREF(states);
    Py_XDECREF(unions);
    Py_XDECREF(counts);
    Py_XDECREF(keys);
    Py_DECREF(columns);
    return out;
}

/* ---- page48: a folder's entries listed a batch at a time, no DirEntry made (output._files_under) ---- */

#include <dirent.h>

#define PAGE48_DIR "stream_split.page48_dir"

/* What the capsule holds: the folder open, NULL once listed to its end, and its path as
   given (for the errors, as os.scandir's name it). */
typedef struct {
    DIR *dir;
    PyObject *given;
} Page48Dir;

static void page48_dir_close(PyObject *capsule) {
    Page48Dir *opened = (Page48Dir *)PyCapsule_GetPointer(capsule, PAGE48_DIR);
    if (opened == NULL) {
        PyErr_Clear();
        return;
    }
    if (opened->dir != NULL) closedir(opened->dir);
    Py_XDECREF(opened->given);
    PyMem_Free(opened);
}

/* page48_dir_open(path): the folder ``path`` (str or bytes) opened for ``page48_dir_batch``
   (a capsule; closed when it is let go, or at its end); OSError where it cannot be. */
static PyObject *page48_dir_open(PyObject *self, PyObject *args) {
    PyObject *given, *path;
    if (!PyArg_ParseTuple(args, "O", &given) || !PyUnicode_FSConverter(given, &path))
        return NULL;
    DIR *dir = opendir(PyBytes_AS_STRING(path));
    Py_DECREF(path);
    if (dir == NULL)  /* (as os.scandir's: the path as given) */
        return PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, given);
    Page48Dir *opened = PyMem_Malloc(sizeof(Page48Dir));
    PyObject *capsule = opened == NULL ? NULL
                        : PyCapsule_New(opened, PAGE48_DIR, page48_dir_close);
    if (capsule == NULL) {
        closedir(dir);
        PyMem_Free(opened);
        return PyErr_Occurred() ? NULL : PyErr_NoMemory();
    }
    opened->dir = dir;
    opened->given = Py_NewRef(given);
    return capsule;
}

/* page48_dir_batch(opened, most) -> (names, kinds): the names of the next ``most`` (at
   least 1) entries of the folder ``page48_dir_open`` opened, in the order the file system
   lists them (as ``os.scandir`` gives them: ``.`` and ``..`` left out, each decoded as
   ``os.fsdecode`` does), and ``kinds``: None where every one is known to be neither a folder
   nor a link (their type, as ``readdir`` gives it), else a bytes of one letter a name: ``d``
   a folder, ``?`` a link or of a type not given (the caller looks: ``lstat``), ``f`` any
   other. ``([], None)`` at the end (the folder then closed). */
static PyObject *page48_dir_batch(PyObject *self, PyObject *args) {
    PyObject *capsule;
    Py_ssize_t most;
    if (!PyArg_ParseTuple(args, "O!n", &PyCapsule_Type, &capsule, &most)) return NULL;
    if (most < 1) {
        PyErr_SetString(PyExc_ValueError, "page48_dir_batch() lists 1 entry at least");
        return NULL;
    }
    Page48Dir *opened = (Page48Dir *)PyCapsule_GetPointer(capsule, PAGE48_DIR);
    if (opened == NULL) return NULL;
    DIR *dir = opened->dir;
    if (dir == NULL) return Py_BuildValue("([]O)", Py_None);  /* listed to its end */
    PyObject *names = PyList_New(0), *kinds = NULL;
    char *letters = PyMem_Malloc((size_t)most);
    if (names == NULL) goto fail;
    if (letters == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    Py_ssize_t count = 0;
    int plain = 1, ended = 0;
    while (count < most) {
        errno = 0;
        struct dirent *entry = readdir(dir);
        if (entry == NULL) {
            if (errno) {
                PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, opened->given);
                goto fail;
            }
            ended = 1;
            break;
        }
        const char *name = entry->d_name;
        if (name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0')))
            continue;
        PyObject *text = PyUnicode_DecodeFSDefault(name);
        if (text == NULL) goto fail;
        int appended = PyList_Append(names, text);
        Py_DECREF(text);
        if (appended < 0) goto fail;
        char kind = entry->d_type == DT_DIR ? 'd'
                    : entry->d_type == DT_LNK || entry->d_type == DT_UNKNOWN ? '?' : 'f';
        if (kind != 'f') plain = 0;
        letters[count++] = kind;
    }
    if (ended) {  /* (closed now: the capsule holds nothing more) */
        closedir(dir);
        opened->dir = NULL;
    }
    kinds = plain ? Py_NewRef(Py_None) : PyBytes_FromStringAndSize(letters, count);
    PyMem_Free(letters);
    if (kinds == NULL) {
        Py_DECREF(names);
        return NULL;
    }
    PyObject *out = PyTuple_Pack(2, names, kinds);
    Py_DECREF(names);
    Py_DECREF(kinds);
    return out;
fail:
    PyMem_Free(letters);
    Py_XDECREF(names);
    return NULL;
}

/* ---- search49: the unit search's weighted Jaccard index and an instance's bag (search.similarity, search._bag) ---- */

/* ``weighted_jaccard``'s index of ``a`` and ``b`` (dicts) in ``*out``: 1; 0 where a key is
   not an int or a value not a float (the caller then answers None); -1, an error set. */
static int jaccard_of(PyObject *a, PyObject *b, double *out) {
    if (!PyDict_CheckExact(a) || !PyDict_CheckExact(b)) return 0;
    PyObject *keys = PySet_New(a);
    if (keys == NULL) return -1;
    Py_ssize_t at = 0;
    PyObject *key, *value;
    while (PyDict_Next(b, &at, &key, &value)) {
        if (PySet_Add(keys, key) < 0) { Py_DECREF(keys); return -1; }
    }
    double lo = 0.0, hi = 0.0;
    PyObject *walk = PyObject_GetIter(keys);  /* (the set's order; public API on any CPython) */
    Py_DECREF(keys);
    if (walk == NULL) return -1;
    int plain = 1;
    while (plain && (key = PyIter_Next(walk)) != NULL) {
        if (!PyLong_CheckExact(key)) {  /* (symbols are ints: no code of Python runs while */
            Py_DECREF(key);               /* the weights below are borrowed) */
            plain = 0;
            break;
        }
        PyObject *in_a = PyDict_GetItemWithError(a, key);
        PyObject *in_b = in_a == NULL && PyErr_Occurred() ? NULL
            : PyDict_GetItemWithError(b, key);
        plain = !PyErr_Occurred() && (in_a == NULL || PyFloat_CheckExact(in_a)) &&
            (in_b == NULL || PyFloat_CheckExact(in_b));
        Py_DECREF(key);
        if (!plain) break;
        double x = in_a ? PyFloat_AS_DOUBLE(in_a) : 0.0, y = in_b ? PyFloat_AS_DOUBLE(in_b) : 0.0;
        if (x < y) { lo += x; hi += y; } else { lo += y; hi += x; }
    }
    Py_DECREF(walk);
    if (PyErr_Occurred()) return -1;
    if (!plain) return 0;
    *out = hi > 0 ? lo / hi : 1.0;
    return 1;
}

/* ``weighted_jaccard(a, b)``: ``search.similarity`` of two compositions (dicts of exact
   floats), the same sums in the same order: the keys of ``a.keys() | b.keys()`` as that set
   holds them (a set of ``a``'s keys, ``b``'s added one by one, as the view's ``|`` makes it),
   each one's lesser weight added to one sum and its greater to the other. None where a key
   is not an int or a value not a float (``similarity`` then sums them itself). */
static PyObject *weighted_jaccard(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    if (n != 2) {
        PyErr_SetString(PyExc_TypeError, "weighted_jaccard() takes 2 arguments (a, b)");
        return NULL;
    }
    double index;
    int got = jaccard_of(args[0], args[1], &index);
    if (got < 0) return NULL;
    if (got == 0) Py_RETURN_NONE;
    return PyFloat_FromDouble(index);
}

/* likeness52: ``likeness(w, totals, reference, parts, slack)``: ``search._likeness_of`` of an
   instance (its composition ``w``, its ``(time, kernels, ops)`` ``totals``) to the
   representative's ``reference`` (``(composition, time, kernels, ops)``), ``parts`` its
   ``_size_parts`` (a list of ``(index, weight)``) and ``slack`` ``Rules.length_slack``: the
   lesser of their ``weighted_jaccard`` and the size factor of ``_size_ratio``, each step
   the same operation on the same doubles in the same order as the Python (sums left to
   right from 0, ``max``/``min`` keeping the first of equals, ``** 2`` as libm's ``pow``:
   ``likeness_two``).
   None where a value is not a float (an op count, an int below 2**53) or a key not an int:
   ``_likeness_of`` then computes it. One call where the Python made five (the unit search
   asks it of every instance against every representative tried). */
#define LIKENESS_EXACT_INT 9007199254740992.0  /* 2**53: an int is a double exactly below */

/* The exponent of the size factor, through a volatile: Python's ``x ** 2`` is libm's
   ``pow(x, 2.0)``, which may differ from ``x * x`` in the last bit (0.0007898382029692984:
   6.238443868697706e-07 against ...707e-07 here), and a compiler turns ``pow(x, 2.0)``
   with a constant 2.0 into ``x * x``. */
static volatile double likeness_two = 2.0;

static int likeness_number(PyObject *value, double *out) {
    if (PyFloat_CheckExact(value)) {
        *out = PyFloat_AS_DOUBLE(value);
        return 1;
    }
    if (!PyLong_CheckExact(value)) return 0;
    double v = PyLong_AsDouble(value);
    if (v == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    if (fabs(v) >= LIKENESS_EXACT_INT) return 0;
    *out = v;
    return 1;
}

static PyObject *likeness(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    if (n != 5) {
        PyErr_SetString(PyExc_TypeError,
                        "likeness() takes 5 arguments (w, totals, reference, parts, slack)");
        return NULL;
    }
    PyObject *w = args[0], *totals = args[1], *reference = args[2], *parts = args[3];
    double slack, sizes[3], ref_sizes[3];
    if (!PyTuple_CheckExact(totals) || PyTuple_GET_SIZE(totals) != 3 ||
        !PyTuple_CheckExact(reference) || PyTuple_GET_SIZE(reference) != 4 ||
        !PyList_CheckExact(parts) || !PyFloat_CheckExact(args[4]))
        Py_RETURN_NONE;
    slack = PyFloat_AS_DOUBLE(args[4]);
    for (int k = 0; k < 3; k++) {
        if (!likeness_number(PyTuple_GET_ITEM(totals, k), sizes + k) ||
            !likeness_number(PyTuple_GET_ITEM(reference, k + 1), ref_sizes + k))
            Py_RETURN_NONE;
    }
    /* _size_ratio: the weights and each part's weighed share, each summed left to right. */
    Py_ssize_t count = PyList_GET_SIZE(parts);
    double weight = 0.0, share = 0.0;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *part = PyList_GET_ITEM(parts, i);
        if (!PyTuple_CheckExact(part) || PyTuple_GET_SIZE(part) != 2 ||
            !PyLong_CheckExact(PyTuple_GET_ITEM(part, 0)) ||
            !PyFloat_CheckExact(PyTuple_GET_ITEM(part, 1)))
            Py_RETURN_NONE;
        long k = PyLong_AsLong(PyTuple_GET_ITEM(part, 0));
        if (k < 0 || k > 2 || ref_sizes[k] == 0.0) {  /* (never: ``_size_parts`` makes them) */
            PyErr_Clear();
            Py_RETURN_NONE;
        }
        double w = PyFloat_AS_DOUBLE(PyTuple_GET_ITEM(part, 1));
        weight += w;
        share += w * (sizes[k] / ref_sizes[k]);
    }
    double ratio = weight != 0.0 ? share / weight : 0.0;
    /* _size_factor */
    double factor = 0.0;
    if (!(ratio <= 0)) {
        double inverse = 1 / ratio, larger = inverse > ratio ? inverse : ratio;
        double within = slack / larger;
        factor = pow(within < 1.0 ? within : 1.0, likeness_two);
    }
    double index;
    int got = jaccard_of(w, PyTuple_GET_ITEM(reference, 0), &index);
    if (got < 0) return NULL;
    if (got == 0) Py_RETURN_NONE;
    return PyFloat_FromDouble(factor < index ? factor : index);
}

/* The cell of ``instance_bag`` for one symbol: its time, kernels and ops. */
typedef struct { double time, kernels; Py_ssize_t count; } Search49Cell;

/* ``instance_bag``'s bag made from its cells: ``symbols[i]`` -> ``[time, kernels, count]``,
   in the order the symbols first came (each reference of ``symbols`` taken). */
static PyObject *instance_bag_of(PyObject **symbols, Search49Cell *cells, Py_ssize_t kinds) {
    PyObject *bag = PyDict_New();
    for (Py_ssize_t i = 0; bag != NULL && i < kinds; i++) {
        PyObject *cell = Py_BuildValue("[ddn]", cells[i].time, cells[i].kernels,
                                       cells[i].count);
        if (cell == NULL || PyDict_SetItem(bag, symbols[i], cell) < 0) Py_CLEAR(bag);
        Py_XDECREF(cell);
    }
    for (Py_ssize_t i = 0; i < kinds; i++) Py_DECREF(symbols[i]);
    return bag;
}

/* ``instance_bag(row, a, b)``: ``search._bag(row, a, b)``, the same sums in the same order:
   ``(bag, time, kernels, b - a)``, the bag a dict of symbol -> ``[time, kernels, ops]`` in
   the order the symbols first come. None where ``row`` is not a list holding ``a`` to ``b``
   (0 <= a <= b <= its length), or an op of them is not a ``Node`` with an int symbol, whose start and end are
   floats and whose kernels an int within a C long long (``_bag`` then reads them itself). */
static PyObject *instance_bag(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    Py_ssize_t a, b;
    if (n != 3) {
        PyErr_SetString(PyExc_TypeError, "instance_bag() takes 3 arguments (row, a, b)");
        return NULL;
    }
    PyObject *row = args[0];
    a = PyLong_AsSsize_t(args[1]);
    if (a == -1 && PyErr_Occurred()) return NULL;
    b = PyLong_AsSsize_t(args[2]);
    if (b == -1 && PyErr_Occurred()) return NULL;
    if (!PyList_CheckExact(row) || a < 0 || b < a || b > PyList_GET_SIZE(row)) Py_RETURN_NONE;
    for (Py_ssize_t i = a; i < b; i++) {
        NodeObject *node = (NodeObject *)PyList_GET_ITEM(row, i);
        if (Py_TYPE(node) != &NodeType || !PyLong_CheckExact(node->sym) ||
                !PyFloat_CheckExact(node->start) || !PyFloat_CheckExact(node->end) ||
                !PyLong_CheckExact(node->gpu)) Py_RETURN_NONE;  /* (an int symbol: no code
                                                     of Python runs while ``node`` is borrowed) */
        int overflow;
        (void)PyLong_AsLongLongAndOverflow(node->gpu, &overflow);
        if (overflow) Py_RETURN_NONE;
    }
    PyObject *where = PyDict_New();  /* symbol -> its cell's index */
    PyObject **symbols = PyMem_Malloc(sizeof(PyObject *) * (size_t)(b - a + 1));
    Search49Cell *cells = PyMem_Malloc(sizeof(Search49Cell) * (size_t)(b - a + 1));
    if (where == NULL || symbols == NULL || cells == NULL) {
        Py_XDECREF(where); PyMem_Free(symbols); PyMem_Free(cells);
        return PyErr_NoMemory();
    }
    Py_ssize_t kinds = 0;
    double time = 0.0, gpu = 0.0;
    int failed = 0;
    for (Py_ssize_t i = a; i < b && !failed; i++) {
        NodeObject *node = (NodeObject *)PyList_GET_ITEM(row, i);
        double dt = PyFloat_AS_DOUBLE(node->end) - PyFloat_AS_DOUBLE(node->start);
        double kernels = (double)PyLong_AsLongLong(node->gpu);
        PyObject *index = PyDict_GetItemWithError(where, node->sym);
        if (index == NULL) {
            if (PyErr_Occurred()) { failed = 1; break; }
            PyObject *made = PyLong_FromSsize_t(kinds);
            if (made == NULL || PyDict_SetItem(where, node->sym, made) < 0) {
                Py_XDECREF(made);
                failed = 1;
                break;
            }
            Py_DECREF(made);
            symbols[kinds] = Py_NewRef(node->sym);
            cells[kinds] = (Search49Cell){0.0 + dt, 0.0 + kernels, 1};
            kinds++;
        } else {
            Search49Cell *cell = &cells[PyLong_AsSsize_t(index)];
            cell->time += dt;
            cell->kernels += kernels;
            cell->count++;
        }
        time += dt;
        gpu += kernels;
    }
    Py_DECREF(where);
    PyObject *bag = instance_bag_of(symbols, cells, kinds);  /* (the symbols let go) */
    PyMem_Free(symbols);
    PyMem_Free(cells);
    if (failed) { Py_XDECREF(bag); return NULL; }
    if (bag == NULL) return NULL;
    return Py_BuildValue("(Nddn)", bag, time, gpu, b - a);
}

/* ---- tiny49: a boundary's window added in one call (core.owners.Windows.add) ---- */

/* The slots of ``Windows`` (with ``eng45_windows``: its cached window) and of its
   ``StepOpeners`` that ``add_window`` reads (``eng45_laid_out``: found by name once a class). */
static eng45_layout tiny49_windows = {"starts latest_start openers"},
    tiny49_openers = {"any run_thread _floors"};
enum { WIN_STARTS, WIN_LATEST, WIN_OPENERS };
enum { OPEN_ANY, OPEN_RUN, OPEN_FLOORS };
static PyObject *tiny49_add, *tiny49_append;
/* Integers up to this size a float holds exactly (``owners._EXACT_IN_FLOAT``). */
#define TINY49_EXACT_IN_FLOAT (1LL << 53)

/* ``obj.append(value)``: 0, or -1 with an error. */
/* ``add_window``'s names made (once a process): 0, or -1 with an error. */
static int tiny49_names_ready(void) {
    if (tiny49_append == NULL) {
        tiny49_add = PyUnicode_InternFromString("add");
        tiny49_append = tiny49_add == NULL ? NULL : PyUnicode_InternFromString("append");
    }
    return tiny49_append == NULL ? -1 : 0;
}

static int tiny49_appended(PyObject *obj, PyObject *value) {
    PyObject *done = PyObject_CallMethodOneArg(obj, tiny49_append, value);
    Py_XDECREF(done);
    return done == NULL ? -1 : 0;
}

/* Whether ``Windows.add(ts, opens, thread)`` on ``windows`` is its common case: ``ts`` a
   float (or an integer a float holds exactly) at or after the latest start (a float), some
   start before it, and the gap kept as the method keeps it inline (none, and no boundary
   has one: nothing kept; or one in the latest run of ``thread``: its floor appended). 1
   (``*floors`` the floors to append to, or NULL: none), 0, or -1 with an error. */
static int tiny49_common_window(PyObject *windows, PyObject *ts, PyObject *opens,
                                PyObject *thread, PyObject **floors) {
    *floors = NULL;
    int ready = PyFloat_CheckExact(ts);
    if (!ready && PyLong_CheckExact(ts)) {  /* an integer a float holds exactly */
        int overflow;
        long long value = PyLong_AsLongLongAndOverflow(ts, &overflow);
        if (value == -1 && PyErr_Occurred()) return -1;
        ready = !overflow && value >= -TINY49_EXACT_IN_FLOAT && value <= TINY49_EXACT_IN_FLOAT;
    }
    ready = ready ? eng45_laid_out(&tiny49_windows, windows) : 0;
    ready = ready == 1 ? eng45_laid_out(&eng45_windows, windows) : ready;
    if (ready != 1) return ready;
    const Py_ssize_t *at = tiny49_windows.at;
    PyObject *starts = SLOT_AT(windows, at[WIN_STARTS]), *before = SLOT_AT(windows, at[WIN_LATEST]);
    PyObject *openers = SLOT_AT(windows, at[WIN_OPENERS]);
    if (starts == NULL || before == NULL || openers == NULL || !PyFloat_CheckExact(before))
        return 0;
    Py_ssize_t count = PyObject_Length(starts);
    if (count < 0) return -1;
    if (count == 0) return 0;
    if ((ready = PyObject_RichCompareBool(ts, before, Py_GE)) != 1) return ready;
    if ((ready = eng45_laid_out(&tiny49_openers, openers)) != 1) return ready;
    PyObject *any = SLOT_AT(openers, tiny49_openers.at[OPEN_ANY]);
    PyObject *run = SLOT_AT(openers, tiny49_openers.at[OPEN_RUN]);
    PyObject *kept = SLOT_AT(openers, tiny49_openers.at[OPEN_FLOORS]);
    if (any == NULL || run == NULL || kept == NULL) return 0;
    if (opens == Py_None) return any == Py_False;
    int same = kept == Py_None ? 0 : PyObject_RichCompareBool(run, thread, Py_EQ);
    if (same == 1) *floors = kept;
    return same;
}

/* add_window(windows, ts, opens_after, thread) -> int: ``windows.add(ts, opens_after,
   thread)`` (``core.owners.Windows``), its common case (``tiny49_common_window``) in C: the
   start appended, the latest start its value as the starts hold it (a float), the gap's
   floor appended where kept, the window it closes cached; the method elsewhere. The new
   boundary's index. */
static PyObject *add_window(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "add_window(windows, ts, opens_after, thread)");
        return NULL;
    }
    if (tiny49_names_ready() < 0) return NULL;
    PyObject *windows = args[0], *ts = args[1], *floors;
    int common = tiny49_common_window(windows, ts, args[2], args[3], &floors);
    if (common < 0) return NULL;
    if (common == 0)
        return PyObject_CallMethodObjArgs(windows, tiny49_add, ts, args[2], args[3], NULL);
    const Py_ssize_t *at = tiny49_windows.at;
    PyObject *starts = Py_NewRef(SLOT_AT(windows, at[WIN_STARTS]));
    PyObject *before = Py_NewRef(SLOT_AT(windows, at[WIN_LATEST]));
    Py_XINCREF(floors);
    PyObject *owner = NULL;
    Py_ssize_t latest = tiny49_appended(starts, ts) < 0 ? -1 : PyObject_Length(starts) - 1;
    PyObject *last = latest > 0 ? PySequence_GetItem(starts, latest) : NULL;  /* (a float) */
    if (last != NULL && (floors == NULL || tiny49_appended(floors, args[2]) == 0)
        && (owner = PyLong_FromSsize_t(latest - 1)) != NULL) {
        slot_set(windows, at[WIN_LATEST], Py_NewRef(last));
        slot_set(windows, eng45_windows.at[0], Py_NewRef(before));  /* the window it closes */
        slot_set(windows, eng45_windows.at[1], Py_NewRef(ts));
        slot_set(windows, eng45_windows.at[2], owner);
    }
    Py_XDECREF(last);
    Py_DECREF(starts);
    Py_DECREF(before);
    Py_XDECREF(floors);
    return owner == NULL ? NULL : PyLong_FromSsize_t(latest);
}

/* ---- slots50: a boundary's iteration opened in one call (engine.Splitter._add_boundary) ---- */

/* The slots ``open_iteration`` reads and sets of a ``Splitter``, of its ``FoundBoundary`` and
   of a ``pages.PagedList`` it appends to (``eng45_laid_out``: found by name once a class). */
static eng45_layout slots50_lists = {"_windows _iterations _breakdowns"},
    slots50_state = {"_hot _records boundary_records"},
    slots50_thread = {"_last_thread _paged _ignored_last"},
    slots50_found = {"start_ts thread first_op"}, slots50_found_more = {"moves_last opens_after"},
    slots50_paged = {"_len _page_items _hot"}, slots50_paged_items = {"_hot_items needs_trim"};
enum { SP_WINDOWS, SP_ITERATIONS, SP_BREAKDOWNS };
enum { SP_HOT, SP_RECORDS, SP_BOUNDARY_RECORDS };
enum { SP_LAST_THREAD, SP_PAGED, SP_IGNORED };
enum { FOUND_START, FOUND_THREAD, FOUND_FIRST_OP };
enum { FOUND_MOVES, FOUND_OPENS };
enum { PAGED_LEN, PAGED_PAGE_ITEMS, PAGED_HOT };
enum { PAGED_HOT_ITEMS, PAGED_NEEDS_TRIM };
/* The held events: ``Splitter._resolve_pending``'s (``slots50_resolved``). */
static eng45_layout slots50_held = {"_pending _cpu_held _cpu_rows"},
    slots50_held_more = {"_pending_links _spill _cpu_held_n"},
    slots50_kept = {"max_pending _keep _assigned"};
enum { SP_PENDING, SP_CPU_HELD, SP_CPU_ROWS };
enum { SP_LINKS, SP_SPILL, SP_CPU_HELD_N };
enum { SP_MAX_PENDING, SP_KEEP, SP_ASSIGNED };
/* What ``open_iteration``'s ``rules`` hold. */
enum { RULE_ITERATION, RULE_BREAKDOWN, RULE_BOUNDARY, RULE_ARRAY_MIN, RULE_FEW_HELD,
       RULE_UNION_WITH, RULE_STEP_PREFIX, RULES };
static PyObject *slots50_compact_host_name, *slots50_count_name;

/* ``items.append(item)``: a list's, or a ``PagedList``'s first case (its page used last is the
   last page: the item appended to it, its length counted) at offsets; else the method. 0, or
   -1 with an error. */
static int slots50_append(PyObject *items, PyObject *item) {
    if (PyList_CheckExact(items)) return PyList_Append(items, item);
    int ready = eng45_laid_out(&slots50_paged, items);
    ready = ready == 1 ? eng45_laid_out(&slots50_paged_items, items) : ready;
    if (ready < 0) return -1;
    PyObject *n = ready ? SLOT_AT(items, slots50_paged.at[PAGED_LEN]) : NULL;
    PyObject *per = ready ? SLOT_AT(items, slots50_paged.at[PAGED_PAGE_ITEMS]) : NULL;
    PyObject *hot = ready ? SLOT_AT(items, slots50_paged.at[PAGED_HOT]) : NULL;
    PyObject *page = ready ? SLOT_AT(items, slots50_paged_items.at[PAGED_HOT_ITEMS]) : NULL;
    if (n != NULL && per != NULL && hot != NULL && page != NULL && PyLong_CheckExact(n)
            && PyLong_CheckExact(per) && PyLong_CheckExact(hot) && PyList_CheckExact(page)) {
        Py_ssize_t count = PyLong_AsSsize_t(n), size = PyLong_AsSsize_t(per);
        Py_ssize_t number = PyLong_AsSsize_t(hot);
        if (PyErr_Occurred()) return -1;
        if (count >= 0 && size > 0 && number >= 0 && count / size == number) {
            PyObject *more = PyLong_FromSsize_t(count + 1);
            if (more == NULL || PyList_Append(page, item) < 0) {
                Py_XDECREF(more);
                return -1;
            }
            slot_set(items, slots50_paged.at[PAGED_LEN], more);
            return 0;
        }
    }
    return tiny49_appended(items, item);
}

/* ``breakdown.compact_host()`` (``core.breakdown.IterationBreakdown``): nothing where each
   union of its ``cpu_ops`` (a dict) holds fewer than ``least`` intervals in a list (most
   often: the method's loop, without its frame), else the method. 0, or -1 with an error. */
static int slots50_compact_host(PyObject *breakdown, Py_ssize_t least) {
    int ready = eng45_laid_out(&eng45_breakdown, breakdown);
    if (ready < 0) return -1;
    PyObject *unions = ready ? SLOT_AT(breakdown, eng45_breakdown.at[0]) : NULL;
    int short_lists = unions != NULL && PyDict_CheckExact(unions);
    Py_ssize_t pos = 0;
    PyObject *thread, *unit;
    while (short_lists && PyDict_Next(unions, &pos, &thread, &unit)) {
        int inside = eng45_laid_out(&eng45_union, unit);
        if (inside < 0) return -1;
        PyObject *starts = inside ? SLOT_AT(unit, eng45_union.at[0]) : NULL;
        short_lists = starts != NULL && PyList_CheckExact(starts)
            && PyList_GET_SIZE(starts) < least;
    }
    if (short_lists) return 0;
    PyObject *done = PyObject_CallMethodNoArgs(breakdown, slots50_compact_host_name);
    Py_XDECREF(done);
    return done == NULL ? -1 : 0;
}

/* Whether ``_add_boundary`` of ``found`` on ``splitter`` is ``open_iteration``'s case (read
   at offsets into ``at``: the splitter's slots, then the boundary's): a ``FoundBoundary``
   that moves nothing, after the latest start, its thread a pair, the splitter's ``_hot`` a
   4-tuple and no list of its ``_paged`` (a tuple) to trim. 1, 0, or -1 with an error. */
static int slots50_common(PyObject *splitter, PyObject *found, PyObject **at) {
    int ready = eng45_laid_out(&slots50_lists, splitter);
    ready = ready == 1 ? eng45_laid_out(&slots50_state, splitter) : ready;
    ready = ready == 1 ? eng45_laid_out(&slots50_thread, splitter) : ready;
    ready = ready == 1 ? eng45_laid_out(&slots50_found, found) : ready;
    ready = ready == 1 ? eng45_laid_out(&slots50_found_more, found) : ready;
    if (ready != 1) return ready;
    const eng45_layout *layouts[] = {&slots50_lists, &slots50_state, &slots50_thread};
    for (int k = 0; k < 9; k++) {
        if ((at[k] = SLOT_AT(splitter, layouts[k / 3]->at[k % 3])) == NULL) return 0;
    }
    for (int k = 0; k < 5; k++) {
        const eng45_layout *layout = k < 3 ? &slots50_found : &slots50_found_more;
        if ((at[9 + k] = SLOT_AT(found, layout->at[k % 3])) == NULL) return 0;
    }
    PyObject *hot = at[SP_HOT + 3], *paged = at[SP_PAGED + 6], *thread = at[9 + FOUND_THREAD];
    if (at[9 + 3 + FOUND_MOVES] != Py_False || !PyTuple_CheckExact(thread)
            || PyTuple_GET_SIZE(thread) != 2 || !PyTuple_CheckExact(hot)
            || PyTuple_GET_SIZE(hot) != 4 || !PyTuple_CheckExact(paged))
        return 0;
    for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(paged); j++) {
        PyObject *list = PyTuple_GET_ITEM(paged, j);
        if ((ready = eng45_laid_out(&slots50_paged_items, list)) != 1) return ready;
        if (SLOT_AT(list, slots50_paged_items.at[PAGED_NEEDS_TRIM]) != Py_False) return 0;
    }
    PyObject *windows = at[SP_WINDOWS];
    if ((ready = eng45_laid_out(&tiny49_windows, windows)) != 1) return ready;
    PyObject *latest = SLOT_AT(windows, tiny49_windows.at[WIN_LATEST]);
    return latest == NULL ? 0 : PyObject_RichCompareBool(at[9 + FOUND_START], latest, Py_GT);
}

/* The breakdown ``index`` - 2 (``older``, or from ``breakdowns`` where None) compacted. */
static int slots50_compact_older(PyObject *breakdowns, Py_ssize_t index, PyObject *older,
                                 Py_ssize_t least) {
    if (older != Py_None) return slots50_compact_host(older, least);
    PyObject *number = PyLong_FromSsize_t(index - 2);
    older = number == NULL ? NULL : PyObject_GetItem(breakdowns, number);
    Py_XDECREF(number);
    int done = older == NULL ? -1 : slots50_compact_host(older, least);
    Py_XDECREF(older);
    return done;
}

/* The held events a boundary decides, ``Splitter._resolve_pending``'s common case at
   offsets: none waits in the heap, as columns, for a launch or in the spill, and those held
   one at a time (``_FEW_HELD`` or fewer) are all ops (or steps) of the iteration at hand in
   the window the boundary closed: owned by ``own_held_ops`` with the splitter's ``hot``
   (before the boundary's), the count of the most held noted. 1: all decided; 0: the
   method's code decides the rest (what this did it does alike); -1 with an error. */
static int slots50_resolved(PyObject *splitter, PyObject *hot, PyObject *rules) {
    int ready = eng45_laid_out(&slots50_held, splitter);
    ready = ready == 1 ? eng45_laid_out(&slots50_held_more, splitter) : ready;
    ready = ready == 1 ? eng45_laid_out(&slots50_kept, splitter) : ready;
    if (ready != 1) return ready;
    PyObject *at[9];
    const eng45_layout *layouts[] = {&slots50_held, &slots50_held_more, &slots50_kept};
    for (int k = 0; k < 9; k++) {
        if ((at[k] = SLOT_AT(splitter, layouts[k / 3]->at[k % 3])) == NULL) return 0;
    }
    PyObject *pending = at[SP_PENDING], *columns = at[SP_CPU_HELD], *rows = at[SP_CPU_ROWS];
    PyObject *links = at[3 + SP_LINKS], *counted = at[3 + SP_CPU_HELD_N];
    if (!PyList_CheckExact(pending) || PyList_GET_SIZE(pending) || !PyList_CheckExact(columns)
            || PyList_GET_SIZE(columns) || !PyLong_CheckExact(counted))
        return 0;
    if ((ready = eng45_laid_out(&lane47_links, links)) != 1
            || (ready = eng45_laid_out(&lane47_rows, rows)) != 1)
        return ready;
    PyObject *raws = SLOT_AT(links, lane47_links.at[0]), *items = SLOT_AT(rows, lane47_rows.at[0]);
    PyObject *spilled = PyObject_GetAttr(at[3 + SP_SPILL], slots50_count_name);
    if (spilled == NULL) return -1;
    long in_spill = PyLong_CheckExact(spilled) ? PyLong_AsLong(spilled) : -1;
    Py_DECREF(spilled);
    if (in_spill == -1 && PyErr_Occurred()) return -1;
    if (in_spill != 0 || raws == NULL || !PyList_CheckExact(raws) || PyList_GET_SIZE(raws)
            || items == NULL || !PyList_CheckExact(items)
            || PyList_GET_SIZE(items) > PyLong_AsSsize_t(PyTuple_GET_ITEM(rules, RULE_FEW_HELD)))
        return PyErr_Occurred() ? -1 : 0;
    int most = PyObject_RichCompareBool(counted, at[6 + SP_MAX_PENDING], Py_GT);
    if (most == 1) slot_set(splitter, slots50_kept.at[SP_MAX_PENDING], Py_NewRef(counted));
    int keep = most < 0 ? -1 : PyObject_IsTrue(at[6 + SP_KEEP]);
    if (keep < 0) return -1;
    if (PyList_GET_SIZE(items)) {
        Py_INCREF(items);
        PyObject *given[] = {items, SLOT_AT(splitter, slots50_lists.at[SP_WINDOWS]), hot,
            keep ? at[6 + SP_ASSIGNED] : Py_None, PyTuple_GET_ITEM(rules, RULE_UNION_WITH),
            PyTuple_GET_ITEM(rules, RULE_STEP_PREFIX)};
        PyObject *owned = own_held_ops(NULL, given, 6);
        Py_ssize_t done = owned == NULL ? -1 : PyLong_AsSsize_t(owned);
        Py_XDECREF(owned);
        int failed = done < 0 || (done > 0 && PyList_SetSlice(items, 0, done, NULL) < 0);
        int left = failed ? 1 : PyList_GET_SIZE(items) > 0;
        Py_DECREF(items);
        if (failed) return -1;
        if (left) return 0;
        slot_set(rows, lane47_rows.at[1], Py_NewRef(Py_False));
    }
    PyObject *zero = PyLong_FromLong(0);
    if (zero == NULL) return -1;
    slot_set(splitter, slots50_held_more.at[SP_CPU_HELD_N], zero);
    return 1;
}

/* open_iteration(splitter, found, rules) -> True, (index, record, breakdown, before), or
   None: ``engine.Splitter._add_boundary`` of ``found``, its common case (``slots50_common``)
   in one call, ``rules`` (new_iteration, new_breakdown, new_boundary, ARRAY_MIN_INTERVALS,
   _FEW_HELD, union_with, PROFILER_STEP_PREFIX): the window added (``add_window``), the new
   iteration's record and breakdown appended, the breakdown two before compacted, a
   ``Boundary`` record where they are made, then the held events it decides where
   ``slots50_resolved`` decides them all (True: all done). A tuple: the splitter's next
   ``_hot``, for the caller to set once it decided the held events. None: nothing done (the
   method's other cases). */
static PyObject *open_iteration(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyTuple_CheckExact(args[2]) || PyTuple_GET_SIZE(args[2]) != RULES
            || !PyLong_CheckExact(PyTuple_GET_ITEM(args[2], RULE_ARRAY_MIN))
            || !PyLong_CheckExact(PyTuple_GET_ITEM(args[2], RULE_FEW_HELD))
            || !PyUnicode_CheckExact(PyTuple_GET_ITEM(args[2], RULE_STEP_PREFIX))) {
        PyErr_SetString(PyExc_TypeError, "open_iteration(splitter, found, (new_iteration, "
                        "new_breakdown, new_boundary, ARRAY_MIN_INTERVALS, _FEW_HELD, "
                        "union_with, PROFILER_STEP_PREFIX))");
        return NULL;
    }
    if (slots50_count_name == NULL) {
        slots50_compact_host_name = PyUnicode_InternFromString("compact_host");
        slots50_count_name = slots50_compact_host_name == NULL ? NULL
            : PyUnicode_InternFromString("count");
        if (slots50_count_name == NULL) return NULL;
    }
    if (eng45_names_ready() < 0 || tiny49_names_ready() < 0) return NULL;
    PyObject *splitter = args[0], *found = args[1], *rules = args[2], *at[14];
    Py_ssize_t least = PyLong_AsSsize_t(PyTuple_GET_ITEM(rules, RULE_ARRAY_MIN));
    if (least == -1 && PyErr_Occurred()) return NULL;
    int common = slots50_common(splitter, found, at);
    if (common <= 0) return common < 0 ? NULL : Py_NewRef(Py_None);
    PyObject *start = at[9 + FOUND_START], *thread = at[9 + FOUND_THREAD];
    PyObject *first_op = at[9 + FOUND_FIRST_OP];
    PyObject *hot = Py_NewRef(at[3 + SP_HOT]), *held[] = {at[SP_WINDOWS], start,
        at[9 + 3 + FOUND_OPENS], thread};
    Py_INCREF(start); Py_INCREF(thread); Py_INCREF(first_op);
    slot_set(splitter, slots50_thread.at[SP_IGNORED], Py_NewRef(Py_False));
    PyObject *index = add_window(self, held, 4), *record = NULL, *breakdown = NULL, *made = NULL;
    Py_ssize_t number = index == NULL ? -1 : PyLong_AsSsize_t(index);
    if (number < 0 && !PyErr_Occurred())
        PyErr_SetString(PyExc_ValueError, "open_iteration(): a window's index below 0");
    if (number >= 0) {
        slot_set(splitter, slots50_thread.at[SP_LAST_THREAD], Py_NewRef(thread));
        PyObject *values[] = {index, start, first_op};
        record = PyObject_Vectorcall(PyTuple_GET_ITEM(rules, RULE_ITERATION), values, 3, NULL);
        breakdown = record == NULL ? NULL : PyObject_CallNoArgs(
            PyTuple_GET_ITEM(rules, RULE_BREAKDOWN));
    }
    PyObject *before = Py_None, *older = Py_None, *hot_index = PyTuple_GET_ITEM(hot, 0);
    int failed = breakdown == NULL
        || slots50_append(SLOT_AT(splitter, slots50_lists.at[SP_ITERATIONS]), record) < 0
        || slots50_append(SLOT_AT(splitter, slots50_lists.at[SP_BREAKDOWNS]), breakdown) < 0;
    if (!failed && PyLong_CheckExact(hot_index) && PyLong_AsSsize_t(hot_index) == number - 1) {
        before = PyTuple_GET_ITEM(hot, 2);
        older = PyTuple_GET_ITEM(hot, 3);
    }
    failed = failed || PyErr_Occurred() || (number >= 2 && slots50_compact_older(
        SLOT_AT(splitter, slots50_lists.at[SP_BREAKDOWNS]), number, older, least) < 0);
    int wanted = failed ? -1 : PyObject_IsTrue(
        SLOT_AT(splitter, slots50_state.at[SP_BOUNDARY_RECORDS]));
    if (wanted == 1) {
        PyObject *values[] = {index, start, PyTuple_GET_ITEM(thread, 0),
                              PyTuple_GET_ITEM(thread, 1), first_op};
        PyObject *boundary = PyObject_Vectorcall(PyTuple_GET_ITEM(rules, RULE_BOUNDARY), values,
                                                 5, NULL);
        PyObject *records = SLOT_AT(splitter, slots50_state.at[SP_RECORDS]);
        wanted = boundary == NULL || records == NULL ? -1 : slots50_append(records, boundary);
        Py_XDECREF(boundary);
    }
    if (wanted >= 0) made = PyTuple_Pack(4, index, record, breakdown, before);
    int resolved = made == NULL ? -1 : slots50_resolved(splitter, hot, rules);
    if (resolved == 1) {  /* the held events decided: the splitter's next ``_hot`` set */
        slot_set(splitter, slots50_state.at[SP_HOT], made);
        made = Py_NewRef(Py_True);
    } else if (resolved < 0) {
        Py_CLEAR(made);
    }
    Py_XDECREF(index); Py_XDECREF(record); Py_XDECREF(breakdown);
    Py_DECREF(hot); Py_DECREF(start); Py_DECREF(thread); Py_DECREF(first_op);
    return made;
}

static PyMethodDef methods[] = {
    {"frame", frame, METH_VARARGS,
     "frame(buf, start, in_string, depth, escaped[, carryless]) -> (brackets, depths, "
     "end_in_string, end_depth, end_escaped): the brackets outside strings of buf[start:] "
     "(int64 offsets) and the depth after each (int32), as bytearrays; see decode.Framing. "
     "carryless False: the scan without PCLMULQDQ even where the CPU has it (tests)."},
    {"frame_times", frame_times, METH_VARARGS,
     "frame_times(text) -> (ts, dur) float64 bytearrays, or None: a run of plain Python "
     "frames as Kineto writes them (see decode._frame_columns)."},
    {"slices", slices, METH_VARARGS,
     "slices(buf, starts, ends) -> [buf[s:e] for s, e in zip(starts, ends)] (int64 arrays): "
     "each event's original bytes."},
    {"prefixed_runs", prefixed_runs, METH_VARARGS,
     "prefixed_runs(buf, starts, ends, prefix, min_run) -> [(i, j)]: the runs of min_run or "
     "more events in a row beginning with prefix, up to the whitespace between its tokens, "
     "and longer than it (decode._frame_runs)."},
    {"laid_out", laid_out, METH_VARARGS,
     "laid_out(items, indent, level, as_bytes=False) -> str (its ASCII bytes where as_bytes), "
     "or None: each of items (a list) after a line "
     "break and indent * level spaces, joined by commas, as json.dumps(indent=indent) writes "
     "a value at that level (manifest_entries._chunk_text); None where one holds a value of "
     "another type (exactly dict with str keys, list, str, int, float, bool, None are "
     "written), a float that is not finite, or nesting deeper than 64."},
    {"small_pieces", small_pieces, METH_VARARGS,
     "small_pieces(folder_fd, flags, names, data, sizes, lead, lead_crc, trail, tail, "
     "head_size, stored_max) -> (how many were written, their parts' bytes in all): pieces "
     "from the first on, each "
     "the file names[i] created new (os.open's flags) in the folder open as folder_fd, "
     "holding lead, its part of data (sizes[i] bytes, int32, the parts one after another) "
     "as one stored deflate block, trail and the gzip trailer (the CRC-32 of the part taken "
     "on from lead_crc, then of tail; head_size + the part's size + len(tail)); it stops "
     "at a part over stored_max bytes or a name not ASCII (write.PieceWriter._assemble_small)."},
    {"family", family, METH_O,
     "family(name) -> str: name with each run of decimal digits folded into one N; name "
     "itself where it holds none (core.detect.skeleton.family)."},
    {"ascii_without", ascii_without, METH_VARARGS,
     "ascii_without(name, words) -> bool: name is ASCII and holds none of words (lowercase "
     "ASCII) once lowered (core.detect.search.ascii_without)."},
    {"frame_items", frame_items, METH_VARARGS,
     "frame_items(buf, start, end, prefix) -> (ts, dur, prefixed), or None: frame_times of "
     "the frames buf[start:end] holds, read in place, and whether one of its strings begins "
     "with prefix (see decode._frame_columns)."},
    {"frame_fields", frame_fields, METH_VARARGS,
     "frame_fields(buf, start, end) -> (threads, names), or None: each frame's (pid, tid) "
     "and name (\"\" for null) of the run of frames buf[start:end] that frame_items reads, "
     "as msgspec makes them (see decode.FrameRun.threads_and_names)."},
    {"slot_rows", slot_rows, METH_VARARGS,
     "slot_rows(objects, names) -> [tuple]: each object's slots names (a tuple of str), in "
     "order; every object of the first one's class exactly (records.IterationRecord.pack_page)."},
    {"with_slots", with_slots, METH_VARARGS,
     "with_slots(cls, names, rows) -> [object]: for each row (a tuple), a new object of cls "
     "(no __init__ called) whose slots names hold its values (records.IterationRecord."
     "unpack_page)."},
    {"one_with_slots", (PyCFunction)(void (*)(void))one_with_slots, METH_FASTCALL,
     "one_with_slots(cls, names, *values) -> object: with_slots(cls, names, [values])[0], "
     "its values given as arguments (records.made_one)."},
    {"slot_dicts", slot_dicts, METH_VARARGS,
     "slot_dicts(objects, template, names, rounded, columns) -> [dict]: for each object (of "
     "the first one's class exactly), a copy of template whose keys names hold its slots of "
     "those names, keys rounded its slots round(v, 3) where true, and each (key, values) of "
     "columns values[k] (manifest_entries._shared_entries)."},
    {"rounded", rounded, METH_VARARGS,
     "rounded(values, truthy) -> [round(v, 3) for v in values] (a list; truthy: v itself "
     "where it is false; manifest_entries, core.breakdown.final_dicts)."},
    {"column_dicts", column_dicts, METH_VARARGS,
     "column_dicts(template, columns) -> [dict]: for each place k, a copy of template whose "
     "key holds values[k] for each (key, values) of columns (core.breakdown.final_dicts)."},
    {"set_slots", set_slots, METH_VARARGS,
     "set_slots(objects, names, columns) -> None: each object's (of the first one's class "
     "exactly) slot names[i] set to columns[i][k], k its place (core.finish.FinalRecords)."},
    {"joined_runs", joined_runs, METH_VARARGS,
     "joined_runs(pairs, started, base) -> (owners, parts, size), or None where a pair is "
     "not (int above base, bytes): each run of one owner's events in a row joined by ',\\n', "
     "one before them where started[owner - base] was set (set for each, grown as needed) "
     "(write.PieceWriter.add_many)."},
    {"index_names", index_names, METH_VARARGS,
     "index_names(head, first, count, digits, tail) -> [head + '%0<digits>d' % index + tail "
     "for index in range(first, first + count)] (write.PieceFiles._run_names)."},
    /* ---- fin42 ---- */
    {"slot_columns", slot_columns, METH_VARARGS,
     "slot_columns(objects, names, alike=True) -> [column a slot]: every object's (of the "
     "first one's class exactly) value of slot names[i] in a list, or, where alike, (value,) "
     "where each holds that very object (records.pack_page, core.finish.record_columns)."},
    {"with_slot_columns", with_slot_columns, METH_VARARGS,
     "with_slot_columns(cls, names, columns, count) -> [count new objects of cls]: as "
     "with_slots, object k's slot names[i] holding columns[i][k], or columns[i][0] where that "
     "is a 1-tuple (records.unpack_page)."},
    /* ---- par42 ---- */
    {"pair_columns", pair_columns, METH_VARARGS,
     "pair_columns(pairs, metadata) -> bytearray, or None: the int64 owners then places of "
     "decided (owner, place) pairs (a list), -1 for a place of bytes; None where a pair is "
     "not (int, int >= 0), nor (metadata, bytes), within 64 bits (parallel._pair_columns)."},
    /* ---- op42 ---- */
    {"event_rows", event_rows, METH_VARARGS,
     "event_rows(buf, event_type, raw_type) -> [event or None], or None: the events of a JSON "
     "array of events written as arrays of their fields (parallel.EventRow) or null, as "
     "event_type (validate.SlimEvent), read as kineto_events reads them; None where one is "
     "not read here."},
    {"kineto_events", kineto_events, METH_VARARGS,
     "kineto_events(buf, start, end, event_type, raw_type) -> [event], or None: the events of "
     "buf[start:end] as msgspec decodes them into event_type (validate.SlimEvent, Input Dims "
     "as raw_type), where each is written as Kineto writes it: no escape, no exponent (see "
     "decode._decode_stretch)."},
    /* ---- names44 ---- */
    {"add_root", (PyCFunction)(void (*)(void))add_root, METH_FASTCALL,
     "add_root(state, node, marker, least, repeat) -> bool: node (a Node), a new top-level "
     "op of the main thread's skeleton state, appended to its roots, its time added to its "
     "busy, counted by its seen (RootCounts.add: marker, least, repeat as it reads them), its "
     "kid_seen cleared; whether the kinds seen once now outnumber its sift_at "
     "(core.detect.skeleton.add_root)."},
    {"root_op", (PyCFunction)(void (*)(void))root_op, METH_FASTCALL,
     "root_op(skeletons, state, start, end, name, least, repeat[, marks]) -> Node: "
     "skeletons.add(state, None, start, end, name) (core.detect.skeleton.Skeletons.add: a "
     "top-level op read), in one call where state is a main thread's skeleton with no Python "
     "frame waiting (its symbol, its Node, add_root, forget_singles where due, its push); "
     "least, repeat as add_root reads them; with marks (skeleton.NEW_FAMILY_MARKS), a name "
     "that makes a new family gets its symbol here, as Symbols.new gives it "
     "(core.detect.skeleton.root_op)."},
    /* ---- eng45 ---- */
    {"fresh_with_slots", (PyCFunction)(void (*)(void))fresh_with_slots, METH_FASTCALL,
     "fresh_with_slots(cls, names, defaults, factories, given, *values) -> object: a new "
     "object of cls (no __init__ called) whose slots names hold defaults, or a new one from "
     "factories where not None (dict, list: empty), then those at the indices given the "
     "values, in order (records.made_fresh, core.breakdown.new_breakdown)."},
    {"own_held_ops", (PyCFunction)(void (*)(void))own_held_ops, METH_FASTCALL,
     "own_held_ops(items, windows, hot, assigned, union_with[, step_prefix]) -> int: how many "
     "of the held items at the head, ops held as their thread in the window found last, of "
     "the iteration at hand (with step_prefix, its first ProfilerStep#N annotation too), it "
     "owned as engine.Splitter._own_each owns each (stops at the first other)."},
    /* ---- tiny49 ---- */
    {"add_window", (PyCFunction)(void (*)(void))add_window, METH_FASTCALL,
     "add_window(windows, ts, opens_after, thread) -> int: windows.add(ts, opens_after, "
     "thread) (core.owners.Windows), in one call where ts is a float (or an int a float holds exactly) at or after the latest "
     "start and the gap is kept as that method keeps it inline; the method elsewhere."},
    {"open_iteration", (PyCFunction)(void (*)(void))open_iteration, METH_FASTCALL,
     "open_iteration(splitter, found, (new_iteration, new_breakdown, new_boundary, "
     "ARRAY_MIN_INTERVALS, _FEW_HELD, union_with, PROFILER_STEP_PREFIX)) -> True, (index, "
     "record, breakdown, before), or None (nothing done): engine.Splitter._add_boundary's "
     "common case in one call: the window added, the iteration's record and breakdown "
     "appended, the breakdown two before compacted, its Boundary record, and its held events "
     "decided where all are ops of the iteration at hand (True); else the splitter's next "
     "_hot, for the caller to set once it decided them."},
    /* ---- feed46 ---- */
    {"feed_lane", (PyCFunction)(void (*)(void))feed_lane, METH_FASTCALL,
     "feed_lane(pairs, hot, assigned, parts, rules, gpu_latest) -> (event, raw), or None: the "
     "events of the iterator pairs taken in order while each is one of "
     "engine.Splitter._feed_checked's common cases whole (a launch flow or GPU work of a "
     "known launch; a CPU-side event of the cached window that links nothing, or a runtime "
     "call), of the iteration at hand; a structural op, read by the engine's _read_op, then "
     "held or placed as _feed_fields does; GPU work or a launch flow whose launch is not "
     "known, waiting for it; the first other one handed back, None at the end."},
    /* ---- det45 ---- */
    {"step_op_read", (PyCFunction)(void (*)(void))step_op_read, METH_FASTCALL,
     "step_op_read(stacks, stepping, thread, name, start, end) -> its boundaries, or None: "
     "an op read in one call once the steps are the loop (stepping: (detector, made, "
     "prefix), "
     "StructureDetector.fast_read's): pushed on its thread's stack where the push takes its "
     "common case, then read as _observe_stepping reads it; None, nothing done, where the "
     "engine reads it the general way (core.detect.structure.step_op_read)."},
    /* ---- learn49 ---- */
    {"learning_op_read", (PyCFunction)(void (*)(void))learning_op_read, METH_FASTCALL,
     "learning_op_read(stacks, learning, thread, name, start, end) -> its boundaries: an op "
     "read in one call while the structure detector learns (learning: (detector, the steps' "
     "prefix, SKIPPED, MemoryRules.side_thread_roots, the detector's skeletons, its loop "
     "section, the rules of a main thread's top-level op), StructureDetector.fast_read's): "
     "pushed on its thread's stack, then read as _observe_learning reads it; an op of a side "
     "thread under its top-level op (ThreadSkeleton.skips_below's case), or at its top level "
     "(Skeletons.add's case, its name known), without a call of Python; a main thread's "
     "top-level op through root_op, the detector's methods called where due "
     "(core.detect.structure.learning_op_read)."},
    {"matching_op_read", (PyCFunction)(void (*)(void))matching_op_read, METH_FASTCALL,
     "matching_op_read(stacks, matching, thread, name, start, end) -> its boundaries: an op "
     "read in one call once the structure detector matches a unit (matching: as "
     "learning_op_read's, StructureDetector.fast_read's): pushed on its thread's stack, "
     "then read as _observe_matching reads it; an op of another thread or section, or under "
     "an op of the row (Skeletons.on_row's case), without a call of Python "
     "(core.detect.structure.matching_op_read)."},
    {"top_op_matched", (PyCFunction)(void (*)(void))top_op_matched, METH_FASTCALL,
     "top_op_matched(stacks, matching, thread, name, start, end) -> (boundary,), or None: "
     "a top-level op of the row matched against a unit of one op (matching: "
     "StructureDetector.matching), read in one call where it is the anchor that "
     "anchor_after_alike takes: pushed alone on its thread's stack, the row's op, its "
     "boundary; None, nothing done, where the engine reads it the general way "
     "(core.detect.structure.top_op_matched)."},
    {"anchor_after_alike", (PyCFunction)(void (*)(void))anchor_after_alike, METH_FASTCALL,
     "anchor_after_alike(matcher, node, made) -> (boundary,), or None: node (a Node) read by "
     "the RootMatcher matcher, taken in one call where it is the unit's anchor right after "
     "the one op of an instance measured alike the one before (a loop of one-op instances): "
     "counted alike, kept as the latest first op and op read, the instance now, and its "
     "boundary made by made(start, thread, name, False, '', the end of the op read before "
     "it); None where push reads it, nothing done (core.detect.matcher.anchor_after_alike)."},
    {"json_lines", json_lines, METH_VARARGS,
     "json_lines(values) -> bytes, or None: each of values (a list) as orjson.dumps writes it "
     "(a float not finite as null), a line each; None where it may write one otherwise or "
     "refuse it (the caller encodes them: serialize.json_lines)."},
    /* ---- rec46 ---- */
    {"entry_texts", entry_texts, METH_VARARGS,
     "entry_texts(records, keys, kinds, slots, names, indent, level) -> bytes, or None: "
     "laid_out(entries, indent, level, True) of the manifest's entries the records stand for, "
     "written from their slots, no dict made (man47; manifest_entries._record_chunk_text)."},
    {"record_lines", record_lines, METH_VARARGS,
     "record_lines(records, layouts) -> bytes, or None: json_lines([r.to_dict(shared=True) "
     "for r in records]), a record of a class of layouts (records.LINE_LAYOUTS) written from "
     "its slots, no dict made (serialize.record_lines)."},
    {"slot_maker", slot_maker, METH_VARARGS,
     "slot_maker(cls, names, defaults, factories, given) -> a callable of the values given: "
     "fresh_with_slots(cls, names, defaults, factories, given, *values) (defaults None: "
     "one_with_slots(cls, names, *values)), its layout read once (records.made_one)."},
    /* ---- page48 ---- */
    {"page48_breakdown_page", page48_breakdown_page, METH_VARARGS,
     "page48_breakdown_page(breakdowns, names, union_names, layers_at, threads_at, empties) "
     "-> (columns, states), or None: breakdown._breakdown_page(breakdowns) in one call; None "
     "where a breakdown's layers are not a list or its threads not a dict."},
    {"page48_dir_open", page48_dir_open, METH_VARARGS,
     "page48_dir_open(path) -> the folder opened for page48_dir_batch (a capsule)."},
    {"page48_dir_batch", page48_dir_batch, METH_VARARGS,
     "page48_dir_batch(opened, most) -> (names, kinds): the names of the folder's next most "
     "entries as os.scandir lists them, kinds None where none is a folder or a link (else a "
     "letter a name: d a folder, ? a link or a type not given, f another); ([], None) at "
     "the end (output._files_under)."},
    /* ---- tries50 ---- */
    {"compared", (PyCFunction)(void (*)(void))tries50_compared, METH_FASTCALL,
     "compared(a, b, op) -> bool: a op b as the feed lane and the readers' pushes compare it "
     "(op 0 to 5: <, <=, ==, !=, >, >=; 6: ==, 7: != of thread keys), without a call where "
     "both are exact floats, ints of a long long, or tuples of them (6, 7); for the tests."},
    /* ---- search49 ---- */
    {"weighted_jaccard", (PyCFunction)(void (*)(void))weighted_jaccard, METH_FASTCALL,
     "weighted_jaccard(a, b) -> float, or None: search.similarity(a, b) of two dicts of "
     "floats, the same sums in the same order; None where a value is not a float."},
    {"likeness", (PyCFunction)(void (*)(void))likeness, METH_FASTCALL,
     "likeness(w, totals, reference, parts, slack) -> float, or None: search._likeness_of "
     "of an instance (composition w, (time, kernels, ops) totals) to reference, parts its "
     "_size_parts, slack Rules.length_slack; the same doubles as the Python."},
    {"instance_bag", (PyCFunction)(void (*)(void))instance_bag, METH_FASTCALL,
     "instance_bag(row, a, b) -> (bag, time, kernels, ops), or None: search._bag(row, a, b), "
     "the same sums in the same order; None where row is not a list holding a to b or an op "
     "is not a Node of float start and end and int kernels (_bag reads them itself)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_native",
    "Hot passes in native code: the decoder's framing, the manifest's layout, the pieces of "
    "tiny iterations, the detector's op and name folding, the records' pages (each has a "
    "Python fallback).",
    -1, methods,
};

PyMODINIT_FUNC PyInit__native(void) {
    crc_table_make();
    if (PyType_Ready(&NodeType) < 0 || PyType_Ready(&SlotMakerType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddObjectRef(m, "Node", (PyObject *)&NodeType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
