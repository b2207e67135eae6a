/* stream_split._framing: the decoder's framing pass in native code (issue 24).

   ``frame(buf, start, in_string, depth, escaped)`` finds the brackets of ``buf[start:]`` that
   lie outside strings, and the nesting depth after each, given the state at ``start``: the
   same answer as ``decode.Framing``'s numpy passes (that module's docstring says how), which
   stay as the fallback wherever this module is not built. It returns
   ``(brackets, depths, end_in_string, end_depth, end_escaped)``: ``brackets`` a bytearray of
   int64 offsets in ``buf``, ``depths`` a bytearray of int32 (numpy views them without a copy),
   and the state at the end of ``buf``.

   The rules, byte for byte those of the numpy passes (a test compares the two on random
   bytes, valid JSON or not, cut anywhere):
   - ``escaped``: the byte at ``start`` is skipped (an odd run of backslashes ended before it);
   - a quote is real unless an odd run of backslashes (counted from ``start``) is right
     before it, inside a string or not; each real quote enters or leaves a string;
   - ``{``, ``[``, ``}``, ``]`` outside strings are the brackets; a backslash never escapes a
     bracket;
   - ``end_escaped``: the last byte of ``buf`` is a backslash at or after ``start`` and the run
     of backslashes ending ``buf`` (counted over the whole of ``buf``) is odd.

   Strings are skipped with ``memchr`` (no per-byte work for their text), which is where most
   of a trace's bytes are; the bytes between strings go through a table. Nothing here holds
   the interpreter's state: the GIL is released while scanning. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    int64_t *at;
    int32_t *depth;
    Py_ssize_t size, cap;
} Brackets;

static int grow(Brackets *b) {
    Py_ssize_t cap = b->cap ? 2 * b->cap : 4096;
    int64_t *at = PyMem_RawRealloc(b->at, (size_t)cap * sizeof(int64_t));
    if (at == NULL) return -1;
    b->at = at;
    int32_t *depth = PyMem_RawRealloc(b->depth, (size_t)cap * sizeof(int32_t));
    if (depth == NULL) return -1;
    b->depth = depth;
    b->cap = cap;
    return 0;
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

static PyMethodDef methods[] = {
    {"frame", frame, METH_VARARGS,
     "frame(buf, start, in_string, depth, escaped) -> (brackets, depths, end_in_string, "
     "end_depth, end_escaped): the brackets outside strings of buf[start:] (int64 offsets) "
     "and the depth after each (int32), as bytearrays; see decode.Framing."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_framing",
    "The decoder's framing pass in native code (decode.Framing's numpy passes are the "
    "fallback).",
    -1, methods,
};

PyMODINIT_FUNC PyInit__framing(void) {
    return PyModule_Create(&module);
}
