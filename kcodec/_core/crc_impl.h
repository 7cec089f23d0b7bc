/* CRC-32C (Castagnoli, v2 batches) and CRC-32 (ISO-HDLC, v0/v1 messages).
 * Software: slicing-by-8 tables built once at import.
 * Hardware, chosen at run time so one wheel runs on every x86-64 CPU: the
 * SSE4.2 crc32 instruction for CRC-32C, carry-less multiplication (PCLMULQDQ)
 * for CRC-32, which no instruction computes directly. */
#ifndef KCODEC_CRC_IMPL_H
#define KCODEC_CRC_IMPL_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>

static uint32_t kc_table_c[8][256];
static uint32_t kc_table_z[8][256];
static int kc_have_hw_crc32c = 0;
static int kc_have_hw_crc32 = 0;
static int kc_have_avx = 0;

static inline void kc_build_table(uint32_t table[8][256], uint32_t poly) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ poly : c >> 1;
        table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int s = 1; s < 8; s++)
            table[s][i] = (table[s - 1][i] >> 8) ^ table[0][table[s - 1][i] & 0xFF];
}

static inline uint32_t kc_crc_sw(uint32_t table[8][256], uint32_t crc, const uint8_t *p, size_t n) {
    crc = ~crc;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);   /* little-endian hosts only: see kc_crc_init */
        w ^= crc;
        crc = table[7][w & 0xFF] ^ table[6][(w >> 8) & 0xFF] ^
              table[5][(w >> 16) & 0xFF] ^ table[4][(w >> 24) & 0xFF] ^
              table[3][(w >> 32) & 0xFF] ^ table[2][(w >> 40) & 0xFF] ^
              table[1][(w >> 48) & 0xFF] ^ table[0][w >> 56];
        p += 8; n -= 8;
    }
    while (n--) crc = (crc >> 8) ^ table[0][(crc ^ *p++) & 0xFF];
    return ~crc;
}

static inline uint32_t kc_crc_sw_bytewise(uint32_t table[8][256], uint32_t crc, const uint8_t *p, size_t n) {
    crc = ~crc;
    while (n--) crc = (crc >> 8) ^ table[0][(crc ^ *p++) & 0xFF];
    return ~crc;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>
#define KC_HW_CRC 1
/* The crc32 instruction has a latency of 3 cycles but a throughput of 1, so
 * long inputs are run as three interleaved streams whose CRCs are joined
 * afterwards: CRC registers are linear, so register(A then B) =
 * shift_|B|(register(A)) ^ register(B from 0), and shifting by a fixed length
 * is four table lookups (tables made once from the one-byte step). */
#define KC_LONG 2048
#define KC_SHORT 256
static uint32_t kc_shift_long[4][256];
static uint32_t kc_shift_short[4][256];

static inline void kc_build_shift(uint32_t shift[4][256], size_t zero_bytes) {
    uint32_t column[32];
    for (int bit = 0; bit < 32; bit++) {
        uint32_t reg = 1u << bit;
        for (size_t i = 0; i < zero_bytes; i++) reg = (reg >> 8) ^ kc_table_c[0][reg & 0xFF];
        column[bit] = reg;
    }
    for (int k = 0; k < 4; k++)
        for (uint32_t v = 0; v < 256; v++) {
            uint32_t out = 0;
            for (int i = 0; i < 8; i++) if (v & (1u << i)) out ^= column[8 * k + i];
            shift[k][v] = out;
        }
}

static inline uint32_t kc_shift(uint32_t shift[4][256], uint32_t reg) {
    return shift[0][reg & 0xFF] ^ shift[1][(reg >> 8) & 0xFF] ^
           shift[2][(reg >> 16) & 0xFF] ^ shift[3][reg >> 24];
}

__attribute__((target("sse4.2")))
static inline uint64_t kc_crc32c_hw_3way(uint64_t c, const uint8_t **pp, size_t *np,
                                         size_t len, uint32_t shift[4][256]) {
    const uint8_t *p = *pp;
    size_t n = *np;
    while (n >= 3 * len) {
        uint64_t c1 = 0, c2 = 0, w0, w1, w2;
        const uint8_t *end = p + len;
        do {
            memcpy(&w0, p, 8); memcpy(&w1, p + len, 8); memcpy(&w2, p + 2 * len, 8);
            c = _mm_crc32_u64(c, w0);
            c1 = _mm_crc32_u64(c1, w1);
            c2 = _mm_crc32_u64(c2, w2);
            p += 8;
        } while (p < end);
        c = kc_shift(shift, (uint32_t)c) ^ (uint32_t)c1;
        c = kc_shift(shift, (uint32_t)c) ^ (uint32_t)c2;
        p += 2 * len;
        n -= 3 * len;
    }
    *pp = p;
    *np = n;
    return c;
}

__attribute__((target("sse4.2")))
static inline uint32_t kc_crc32c_hw(uint32_t crc, const uint8_t *p, size_t n) {
    uint64_t c = ~crc & 0xFFFFFFFFu;
    while (n && ((uintptr_t)p & 7)) { c = _mm_crc32_u8((uint32_t)c, *p++); n--; }
    c = kc_crc32c_hw_3way(c, &p, &n, KC_LONG, kc_shift_long);
    c = kc_crc32c_hw_3way(c, &p, &n, KC_SHORT, kc_shift_short);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = _mm_crc32_u64(c, w);
        p += 8; n -= 8;
    }
    while (n--) c = _mm_crc32_u8((uint32_t)c, *p++);
    return ~(uint32_t)c;
}

/* CRC-32 by folding. The input is read as one polynomial over GF(2), its
 * first byte's low bit the highest power (the bit order of CRC-32). Of a
 * 16-byte block A followed by D bits more, only A * x^D mod P matters, and
 * with A = Ahi * x^64 + Alo that is Ahi * (x^(D+64) mod P) + Alo * (x^D mod P):
 * two 64 x 32-bit carry-less products, under 96 bits, xored into the block D
 * bits on. Four blocks are folded side by side (D = 512), then joined into
 * one (D = 384, 256, 128), which folds over the rest 16 bytes at a time; the
 * table finishes the last block and the tail. A product of two 64-bit
 * fields in this bit order comes out one power short: the constants are
 * x^(D+63) and x^(D-1). */
#include <wmmintrin.h>
#define KC_CLMUL_MIN 32
static uint64_t kc_fold_z[4][2];    /* D = 128 (i + 1): {x^(D+63), x^(D-1)} mod P, bit-reflected */

static inline uint64_t kc_reflected_power(unsigned e) {
    uint64_t r = 1;                  /* x^e mod P, P = x^32 + 0x04C11DB7 in the usual bit order */
    while (e--) {
        r <<= 1;
        if (r >> 32) r ^= 0x104C11DB7ull;
    }
    uint64_t out = 0;                /* x^j at bit 63 - j: a 64-bit field in CRC-32's order */
    for (int j = 0; j < 32; j++) if (r >> j & 1) out |= 1ull << (63 - j);
    return out;
}

static inline void kc_build_fold(void) {
    for (unsigned i = 0; i < 4; i++) {
        kc_fold_z[i][0] = kc_reflected_power(128 * (i + 1) + 63);
        kc_fold_z[i][1] = kc_reflected_power(128 * (i + 1) - 1);
    }
}

__attribute__((target("pclmul,sse2")))
static inline __m128i kc_fold(__m128i block, const uint64_t k[2], __m128i next) {
    __m128i kk = _mm_loadu_si128((const __m128i *)k);
    return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(block, kk, 0x00),
                                       _mm_clmulepi64_si128(block, kk, 0x11)), next);
}

__attribute__((target("pclmul,sse2")))
static inline uint32_t kc_crc32_clmul(uint32_t crc, const uint8_t *p, size_t n) {
    /* n >= 16; the register (~crc) enters as the xor of the first 4 bytes */
    __m128i a = _mm_xor_si128(_mm_loadu_si128((const __m128i *)p), _mm_cvtsi32_si128((int)~crc));
    uint8_t last[16];
    if (n >= 128) {
        __m128i b = _mm_loadu_si128((const __m128i *)(p + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(p + 32));
        __m128i d = _mm_loadu_si128((const __m128i *)(p + 48));
        for (p += 64, n -= 64; n >= 64; p += 64, n -= 64) {
            a = kc_fold(a, kc_fold_z[3], _mm_loadu_si128((const __m128i *)p));
            b = kc_fold(b, kc_fold_z[3], _mm_loadu_si128((const __m128i *)(p + 16)));
            c = kc_fold(c, kc_fold_z[3], _mm_loadu_si128((const __m128i *)(p + 32)));
            d = kc_fold(d, kc_fold_z[3], _mm_loadu_si128((const __m128i *)(p + 48)));
        }
        a = kc_fold(a, kc_fold_z[2], kc_fold(b, kc_fold_z[1], kc_fold(c, kc_fold_z[0], d)));
    } else {
        p += 16; n -= 16;
    }
    for (; n >= 16; p += 16, n -= 16)
        a = kc_fold(a, kc_fold_z[0], _mm_loadu_si128((const __m128i *)p));
    _mm_storeu_si128((__m128i *)last, a);
    /* the block's CRC register from zero is the register of all before it */
    return kc_crc_sw(kc_table_z, kc_crc_sw(kc_table_z, 0xFFFFFFFFu, last, 16), p, n);
}

/* ISA-L's CRC assembly returns with the upper halves of the vector registers
 * it used still set (no vzeroupper). On Intel cores every SSE instruction
 * after it then pays until something clears them: the record loop's copies
 * (this build targets baseline x86-64), the codecs', the caller's. Decoding
 * one record per batch ran about 4x slower for it. */
static inline void kc_after_library(void) {
    if (kc_have_avx)
        __asm__ volatile("vzeroupper" ::: "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5",
                         "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13",
                         "xmm14", "xmm15");
}
#else
#define KC_HW_CRC 0
static inline void kc_after_library(void) {}
#endif

static inline int kc_little_endian(void) { uint16_t x = 1; return *(uint8_t *)&x == 1; }

static inline void kc_crc_init(void) {
    kc_build_table(kc_table_c, 0x82F63B78u);
    kc_build_table(kc_table_z, 0xEDB88320u);
#if KC_HW_CRC
    kc_build_shift(kc_shift_long, KC_LONG);
    kc_build_shift(kc_shift_short, KC_SHORT);
    __builtin_cpu_init();
    kc_have_hw_crc32c = __builtin_cpu_supports("sse4.2");
    kc_build_fold();
    kc_have_hw_crc32 = __builtin_cpu_supports("pclmul");
    kc_have_avx = __builtin_cpu_supports("avx");
#endif
}

/* ISA-L's CRCs, where the isal package's extension exports them (crc.pyx looks
 * them up at import). ISA-L picks the widest carry-less multiply the CPU has
 * (VPCLMULQDQ where there is AVX-512) and runs two to seven times as fast as
 * the code above, on 130-byte messages as on megabytes. */
typedef uint32_t (*kc_lib_crc32_fn)(uint32_t crc, const unsigned char *p, uint64_t n);
typedef unsigned int (*kc_lib_crc32c_fn)(unsigned char *p, int n, unsigned int reg);
static kc_lib_crc32_fn kc_lib_crc32 = 0;      /* crc32_gzip_refl: zlib's convention */
static kc_lib_crc32c_fn kc_lib_crc32c = 0;    /* crc32_iscsi: the register, not inverted */
#define KC_LIB_PIECE ((size_t)1 << 30)        /* crc32_iscsi takes an int length */

static inline uint32_t kc_crc32c(uint32_t crc, const uint8_t *p, size_t n) {
    if (kc_lib_crc32c) {
        unsigned int reg = ~crc;
        for (; n > KC_LIB_PIECE; p += KC_LIB_PIECE, n -= KC_LIB_PIECE)
            reg = kc_lib_crc32c((unsigned char *)p, (int)KC_LIB_PIECE, reg);
        reg = kc_lib_crc32c((unsigned char *)p, (int)n, reg);
        kc_after_library();
        return ~reg;
    }
#if KC_HW_CRC
    if (kc_have_hw_crc32c) return kc_crc32c_hw(crc, p, n);
#endif
    if (!kc_little_endian()) return kc_crc_sw_bytewise(kc_table_c, crc, p, n);
    return kc_crc_sw(kc_table_c, crc, p, n);
}

static inline uint32_t kc_crc32(uint32_t crc, const uint8_t *p, size_t n) {
    if (kc_lib_crc32) {
        crc = kc_lib_crc32(crc, p, n);
        kc_after_library();
        return crc;
    }
#if KC_HW_CRC
    if (kc_have_hw_crc32 && n >= KC_CLMUL_MIN) return kc_crc32_clmul(crc, p, n);
#endif
    if (!kc_little_endian()) return kc_crc_sw_bytewise(kc_table_z, crc, p, n);
    return kc_crc_sw(kc_table_z, crc, p, n);
}
#endif
