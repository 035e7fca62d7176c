/*
 * The fast path of streamapp.partitioners: the same hashes as hashes.py (the
 * specification), in C, plus a callable "Chooser" object that applies a
 * partitioner's NULL/empty-key rules and does `hash % n` for one key or a
 * whole batch without going back to Python per key.
 *
 * Tests compare every function here with hashes.py on random keys.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>
#include <structmember.h>

enum { ALGO_MURMUR2, ALGO_CRC32, ALGO_FNV1A, ALGO_FNV1A_REFERENCE, ALGO_FNV1A_UNSIGNED, ALGO_KAFKAJS_LEGACY, ALGO_COUNT };

#define MURMUR2_SEED 0x9747b28cu
#define MURMUR2_M 0x5bd1e995u

static uint32_t crc_table[8][256];

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int j = 0; j < 8; j++)
            c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xff];
}

static inline uint32_t load_le32(const unsigned char *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static uint32_t crc32_ieee(const unsigned char *p, Py_ssize_t len) {
    uint32_t c = 0xffffffffu;
    while (len >= 8) {
        uint32_t lo = load_le32(p) ^ c, hi = load_le32(p + 4);
        c = crc_table[7][lo & 0xff] ^ crc_table[6][(lo >> 8) & 0xff] ^ crc_table[5][(lo >> 16) & 0xff] ^
            crc_table[4][lo >> 24] ^ crc_table[3][hi & 0xff] ^ crc_table[2][(hi >> 8) & 0xff] ^
            crc_table[1][(hi >> 16) & 0xff] ^ crc_table[0][hi >> 24];
        p += 8;
        len -= 8;
    }
    while (len-- > 0)
        c = crc_table[0][(c ^ *p++) & 0xff] ^ (c >> 8);
    return c ^ 0xffffffffu;
}

static uint32_t murmur2(const unsigned char *p, Py_ssize_t len) {
    uint32_t h = MURMUR2_SEED ^ (uint32_t)len;
    Py_ssize_t words = len >> 2;
    for (Py_ssize_t i = 0; i < words; i++, p += 4) {
        uint32_t k = load_le32(p) * MURMUR2_M;
        k ^= k >> 24;
        k *= MURMUR2_M;
        h = (h * MURMUR2_M) ^ k;
    }
    switch (len & 3) {
    case 3: h ^= (uint32_t)p[2] << 16; /* fall through */
    case 2: h ^= (uint32_t)p[1] << 8;  /* fall through */
    case 1: h ^= p[0]; h *= MURMUR2_M;
    }
    h ^= h >> 13;
    h *= MURMUR2_M;
    h ^= h >> 15;
    return h;
}

static uint32_t fnv1a_raw(const unsigned char *p, Py_ssize_t len) {
    uint32_t h = 0x811c9dc5u;
    for (Py_ssize_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 0x01000193u;
    return h;
}

static uint32_t fnv1a_abs(const unsigned char *p, Py_ssize_t len) {
    uint32_t h = fnv1a_raw(p, len);
    return (h & 0x80000000u) ? (uint32_t)(0u - h) : h;
}

/* ECMAScript ToInt32/ToUint32 of an integer-valued double below 2**63 in magnitude. */
static inline int32_t js_int32(double x) { return (int32_t)(uint32_t)(int64_t)x; }
static inline uint32_t js_uint32(double x) { return (uint32_t)(int64_t)x; }

static uint32_t kafkajs_legacy(const unsigned char *p, Py_ssize_t len) {
    const double m = (double)MURMUR2_M;
    int32_t h = (int32_t)(MURMUR2_SEED ^ (uint32_t)len);
    double hd;
    for (Py_ssize_t i4 = 0; i4 < len; i4 += 4) {
        uint32_t b0 = p[i4], b1 = i4 + 1 < len ? p[i4 + 1] : 0, b2 = i4 + 2 < len ? p[i4 + 2] : 0,
                 b3 = i4 + 3 < len ? p[i4 + 3] : 0;
        double k = (double)((int64_t)b0 + (int64_t)(b1 << 8) + (int64_t)(b2 << 16) + (int64_t)(int32_t)(b3 << 24));
        k *= m;
        k = (double)(js_int32(k) ^ (int32_t)(js_uint32(k) >> 24));
        k *= m;
        hd = (double)h * m;
        h = js_int32(hd) ^ js_int32(k);
    }
    Py_ssize_t tail = len & ~(Py_ssize_t)3;
    hd = (double)h;
    switch (len & 3) {
    case 3: h ^= (int32_t)((uint32_t)p[tail + 2] << 16); /* fall through */
    case 2: h ^= (int32_t)((uint32_t)p[tail + 1] << 8);  /* fall through */
    case 1: h ^= p[tail]; hd = (double)h * m; break;
    default: hd = (double)h;
    }
    h = js_int32(hd) ^ (int32_t)(js_uint32(hd) >> 13);
    hd = (double)h * m;
    h = js_int32(hd) ^ (int32_t)(js_uint32(hd) >> 15);
    return (uint32_t)h;
}

/* The unsigned value each partitioner takes `% n` of. */
static inline uint32_t key_hash(int algo, const unsigned char *p, Py_ssize_t len) {
    switch (algo) {
    case ALGO_MURMUR2: return murmur2(p, len) & 0x7fffffffu;
    case ALGO_CRC32: return crc32_ieee(p, len);
    case ALGO_FNV1A: return fnv1a_abs(p, len);
    case ALGO_FNV1A_REFERENCE: return fnv1a_raw(p, len) & 0x7fffffffu;
    case ALGO_FNV1A_UNSIGNED: return fnv1a_raw(p, len);
    default: return kafkajs_legacy(p, len) & 0x7fffffffu;
    }
}

typedef struct {
    PyObject_HEAD
    int algo;
    int null_random;
    int empty_random;
    PyObject *randrange;
    vectorcallfunc vectorcall;
} Chooser;

static long parse_partitions(PyObject *obj) {
    if (PyBool_Check(obj)) {
        PyErr_Format(PyExc_ValueError, "num_partitions must be an int between 1 and 2147483647, got %R", obj);
        return -1;
    }
    long n = PyLong_AsLong(obj);
    if (n == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "num_partitions must be an int between 1 and 2147483647, got %R", obj);
        return -1;
    }
    if (n < 1 || n > INT32_MAX) {
        PyErr_Format(PyExc_ValueError, "num_partitions must be between 1 and 2147483647, got %ld", n);
        return -1;
    }
    return n;
}

/* -2: error set; -1: the client picks at random; else the partition. */
static long choose_one(Chooser *self, PyObject *key, long n) {
    const unsigned char *data;
    Py_ssize_t len;
    if (PyBytes_CheckExact(key)) {
        data = (const unsigned char *)PyBytes_AS_STRING(key);
        len = PyBytes_GET_SIZE(key);
        if (len == 0 && self->empty_random)
            return -1;
        return (long)(key_hash(self->algo, data, len) % (uint32_t)n);
    }
    if (key == Py_None)
        return self->null_random ? -1 : (long)(key_hash(self->algo, (const unsigned char *)"", 0) % (uint32_t)n);
    if (PyObject_CheckBuffer(key) && !PyUnicode_Check(key)) {
        Py_buffer view;
        if (PyObject_GetBuffer(key, &view, PyBUF_SIMPLE) < 0)
            return -2;
        long result = (view.len == 0 && self->empty_random)
                          ? -1
                          : (long)(key_hash(self->algo, view.buf, view.len) % (uint32_t)n);
        PyBuffer_Release(&view);
        return result;
    }
    PyErr_Format(PyExc_TypeError, "key must be bytes or None, got %.100s %.200R", Py_TYPE(key)->tp_name, key);
    return -2;
}

static PyObject *random_partition(Chooser *self, long n) {
    return PyObject_CallFunction(self->randrange, "l", n);
}

static PyObject *chooser_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Chooser *self = (Chooser *)callable;
    if (PyVectorcall_NARGS(nargsf) != 2 || (kwnames && PyTuple_GET_SIZE(kwnames))) {
        PyErr_SetString(PyExc_TypeError, "expected (key, num_partitions)");
        return NULL;
    }
    long n = parse_partitions(args[1]);
    if (n < 0)
        return NULL;
    long p = choose_one(self, args[0], n);
    if (p == -2)
        return NULL;
    if (p == -1)
        return random_partition(self, n);
    return PyLong_FromLong(p);
}

static PyObject *chooser_batch(Chooser *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "batch(keys, num_partitions)");
        return NULL;
    }
    long n = parse_partitions(args[1]);
    if (n < 0)
        return NULL;
    PyObject *seq = PySequence_Fast(args[0], "keys must be a sequence of bytes or None");
    if (!seq)
        return NULL;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    PyObject *out = PyList_New(count);
    if (!out) {
        Py_DECREF(seq);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *key = items[i], *value;
        long p;
        if (PyBytes_CheckExact(key) && (PyBytes_GET_SIZE(key) > 0 || !self->empty_random))
            p = (long)(key_hash(self->algo, (const unsigned char *)PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key)) %
                       (uint32_t)n);
        else
            p = choose_one(self, key, n);
        if (p == -2) {
            PyObject *type, *val, *tb;
            PyErr_Fetch(&type, &val, &tb);
            PyErr_Format(PyExc_TypeError, "keys[%zd]: %S", i, val ? val : Py_None);
            Py_XDECREF(type);
            Py_XDECREF(val);
            Py_XDECREF(tb);
            goto fail;
        }
        value = p == -1 ? random_partition(self, n) : PyLong_FromLong(p);
        if (!value)
            goto fail;
        PyList_SET_ITEM(out, i, value);
    }
    Py_DECREF(seq);
    return out;
fail:
    Py_DECREF(seq);
    Py_DECREF(out);
    return NULL;
}

static PyObject *chooser_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"algo", "null_random", "empty_random", "randrange", NULL};
    int algo, null_random, empty_random;
    PyObject *randrange;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "ippO", kwlist, &algo, &null_random, &empty_random, &randrange))
        return NULL;
    if (algo < 0 || algo >= ALGO_COUNT) {
        PyErr_Format(PyExc_ValueError, "unknown algo %d", algo);
        return NULL;
    }
    Chooser *self = (Chooser *)type->tp_alloc(type, 0);
    if (!self)
        return NULL;
    self->algo = algo;
    self->null_random = null_random;
    self->empty_random = empty_random;
    self->randrange = Py_NewRef(randrange);
    self->vectorcall = chooser_vectorcall;
    return (PyObject *)self;
}

static void chooser_dealloc(Chooser *self) {
    PyObject_GC_UnTrack(self);
    Py_CLEAR(self->randrange);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int chooser_traverse(Chooser *self, visitproc visit, void *arg) {
    Py_VISIT(self->randrange);
    return 0;
}

static PyMethodDef chooser_methods[] = {
    {"batch", (PyCFunction)(void (*)(void))chooser_batch, METH_FASTCALL,
     "batch(keys, num_partitions) -> list[int]: the partition of every key."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef chooser_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(Chooser, vectorcall), READONLY, NULL},
    {"algo", T_INT, offsetof(Chooser, algo), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject ChooserType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "streamapp.partitioners._fast.Chooser",
    .tp_doc = "Chooser(algo, null_random, empty_random, randrange): call with (key, num_partitions).",
    .tp_basicsize = sizeof(Chooser),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = chooser_new,
    .tp_dealloc = (destructor)chooser_dealloc,
    .tp_traverse = (traverseproc)chooser_traverse,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(Chooser, vectorcall),
    .tp_methods = chooser_methods,
    .tp_members = chooser_members,
};

static PyObject *hash_function(PyObject *arg, uint32_t (*fn)(const unsigned char *, Py_ssize_t)) {
    Py_buffer view;
    if (PyUnicode_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "data must be bytes, got str %.200R", arg);
        return NULL;
    }
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    uint32_t h = fn(view.buf, view.len);
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(h);
}

static PyObject *py_murmur2(PyObject *m, PyObject *arg) { return hash_function(arg, murmur2); }
static PyObject *py_crc32(PyObject *m, PyObject *arg) { return hash_function(arg, crc32_ieee); }
static PyObject *py_fnv1a(PyObject *m, PyObject *arg) { return hash_function(arg, fnv1a_abs); }
static PyObject *py_fnv1a_raw(PyObject *m, PyObject *arg) { return hash_function(arg, fnv1a_raw); }
static PyObject *py_kafkajs_legacy(PyObject *m, PyObject *arg) { return hash_function(arg, kafkajs_legacy); }

static PyMethodDef module_methods[] = {
    {"murmur2", py_murmur2, METH_O, "Kafka murmur2 as uint32."},
    {"crc32", py_crc32, METH_O, "CRC-32 (IEEE) as uint32."},
    {"fnv1a", py_fnv1a, METH_O, "librdkafka rd_fnv1a (abs of int32 FNV-1a) as uint32."},
    {"fnv1a_raw", py_fnv1a_raw, METH_O, "Plain FNV-1a as uint32."},
    {"kafkajs_legacy_murmur2", py_kafkajs_legacy, METH_O, "kafkajs LegacyPartitioner murmur2 as uint32."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef fast_module = {
    PyModuleDef_HEAD_INIT, "_fast", "C fast path of streamapp.partitioners (see hashes.py for the specification).",
    -1, module_methods,
};

PyMODINIT_FUNC PyInit__fast(void) {
    crc_init();
    if (PyType_Ready(&ChooserType) < 0)
        return NULL;
    PyObject *module = PyModule_Create(&fast_module);
    if (!module)
        return NULL;
    if (PyModule_AddObjectRef(module, "Chooser", (PyObject *)&ChooserType) < 0)
        goto fail;
    static const char *names[] = {"MURMUR2", "CRC32", "FNV1A", "FNV1A_REFERENCE", "FNV1A_UNSIGNED", "KAFKAJS_LEGACY"};
    for (int i = 0; i < ALGO_COUNT; i++)
        if (PyModule_AddIntConstant(module, names[i], i) < 0)
            goto fail;
    return module;
fail:
    Py_DECREF(module);
    return NULL;
}
