/* The least a compiled walk over py1e's shuffles costs: numpy's draws, inlined, without the swaps.
 *
 * benchmarks/shuffle_walk.py compiles and runs this to learn whether native code could reach py1e's generator
 * state after a node's shuffles much faster than numpy's own C loop (Generator.shuffle). It steps PCG64 exactly as
 * numpy does (a 128-bit LCG, XSL-RR output, 32-bit draws served from the low then the high half of a 64-bit word)
 * and draws one bounded integer per element as numpy's shuffle does (a draw masked to the smallest all-ones mask
 * covering the index, rejected while above it), inlined, with no call per draw and no swap.
 *
 * Arguments: state_high state_low inc_high inc_low has_uint32 uinteger piece pieces (integers in decimal).
 * Prints: seconds state_high state_low has_uint32 uinteger, which the script checks against numpy's state.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef __uint128_t u128;

/* numpy's PCG64 multiplier (PCG_DEFAULT_MULTIPLIER_128). */
static const u128 MULTIPLIER = ((u128)2549297995355413924ULL << 64) | 4865540595714422341ULL;

typedef struct {
    u128 state;
    u128 inc;
    int has_uint32;
    uint32_t uinteger;
} generator;

static inline uint64_t next64(generator *g) {
    g->state = g->state * MULTIPLIER + g->inc;
    uint64_t high = (uint64_t)(g->state >> 64), low = (uint64_t)g->state;
    unsigned rotation = (unsigned)(g->state >> 122);
    uint64_t value = high ^ low;
    return (value >> rotation) | (value << ((-rotation) & 63));
}

static inline uint32_t next32(generator *g) {
    if (g->has_uint32) {
        g->has_uint32 = 0;
        return g->uinteger;
    }
    uint64_t word = next64(g);
    g->has_uint32 = 1;
    g->uinteger = (uint32_t)(word >> 32);
    return (uint32_t)word;
}

static u128 parse(const char *high, const char *low) {
    return ((u128)strtoull(high, NULL, 10) << 64) | strtoull(low, NULL, 10);
}

int main(int argc, char **argv) {
    if (argc != 9) {
        fprintf(stderr, "usage: shuffle_walk state_high state_low inc_high inc_low has_uint32 uinteger piece pieces\n");
        return 2;
    }
    generator g = {parse(argv[1], argv[2]), parse(argv[3], argv[4]), atoi(argv[5]), (uint32_t)strtoul(argv[6], NULL, 10)};
    uint32_t piece = (uint32_t)strtoul(argv[7], NULL, 10);
    long pieces = atol(argv[8]);
    struct timespec start, stop;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (long p = 0; p < pieces; p++) {
        for (uint32_t index = piece - 1; index >= 1; index--) {
            uint32_t mask = index;
            mask |= mask >> 1;
            mask |= mask >> 2;
            mask |= mask >> 4;
            mask |= mask >> 8;
            mask |= mask >> 16;
            while ((next32(&g) & mask) > index) {
            }
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &stop);
    double seconds = (double)(stop.tv_sec - start.tv_sec) + (double)(stop.tv_nsec - start.tv_nsec) * 1e-9;
    printf("%.6f %llu %llu %d %u\n", seconds, (unsigned long long)(g.state >> 64), (unsigned long long)g.state,
           g.has_uint32, g.uinteger);
    return 0;
}
