/* CRC-32C (Castagnoli, v2 batches) and CRC-32 (ISO-HDLC, v0/v1 messages).
 * Software: slicing-by-8 tables built once at import.
 * Hardware: the SSE4.2 crc32 instruction (CRC-32C only), chosen at run time
 * so one wheel runs on every x86-64 CPU. */
#ifndef KCODEC_CRC_IMPL_H
#define KCODEC_CRC_IMPL_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>

static uint32_t kc_table_c[8][256];
static uint32_t kc_table_z[8][256];
static int kc_have_hw_crc32c = 0;

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
    while (n && ((uintptr_t)p & 7)) { crc = (crc >> 8) ^ table[0][(crc ^ *p++) & 0xFF]; n--; }
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
__attribute__((target("sse4.2")))
static inline uint32_t kc_crc32c_hw(uint32_t crc, const uint8_t *p, size_t n) {
    uint64_t c = ~crc & 0xFFFFFFFFu;
    while (n && ((uintptr_t)p & 7)) { c = _mm_crc32_u8((uint32_t)c, *p++); n--; }
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = _mm_crc32_u64(c, w);
        p += 8; n -= 8;
    }
    while (n--) c = _mm_crc32_u8((uint32_t)c, *p++);
    return ~(uint32_t)c;
}
#else
#define KC_HW_CRC 0
#endif

static inline int kc_little_endian(void) { uint16_t x = 1; return *(uint8_t *)&x == 1; }

static inline void kc_crc_init(void) {
    kc_build_table(kc_table_c, 0x82F63B78u);
    kc_build_table(kc_table_z, 0xEDB88320u);
#if KC_HW_CRC
    __builtin_cpu_init();
    kc_have_hw_crc32c = __builtin_cpu_supports("sse4.2");
#endif
}

static inline uint32_t kc_crc32c(uint32_t crc, const uint8_t *p, size_t n) {
#if KC_HW_CRC
    if (kc_have_hw_crc32c) return kc_crc32c_hw(crc, p, n);
#endif
    if (!kc_little_endian()) return kc_crc_sw_bytewise(kc_table_c, crc, p, n);
    return kc_crc_sw(kc_table_c, crc, p, n);
}

static inline uint32_t kc_crc32(uint32_t crc, const uint8_t *p, size_t n) {
    if (!kc_little_endian()) return kc_crc_sw_bytewise(kc_table_z, crc, p, n);
    return kc_crc_sw(kc_table_z, crc, p, n);
}
#endif
