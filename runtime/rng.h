/* Implements: deterministic, counter-based random numbers (splitmix64). Every random draw of
 * training (initialisation, gate noise, batch sampling) is a pure function of (seed, stream,
 * counter), so a resumed run draws exactly what the uninterrupted run would have drawn. */
#ifndef RT_RNG_H
#define RT_RNG_H

#include <math.h>
#include <stdint.h>

static inline uint64_t rng_mix(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline uint64_t rng_hash(uint64_t seed, uint64_t a, uint64_t b, uint64_t c)
{
    return rng_mix(rng_mix(rng_mix(rng_mix(seed) ^ a) ^ b) ^ c);
}

/* Uniform in (0, 1). */
static inline double rng_uniform(uint64_t h) { return ((double)(h >> 11) + 0.5) * 0x1.0p-53; }

/* Standard normal from two hashed uniforms (Box-Muller). */
static inline double rng_normal(uint64_t seed, uint64_t a, uint64_t b, uint64_t c)
{
    double u1 = rng_uniform(rng_hash(seed, a, b, 2 * c));
    double u2 = rng_uniform(rng_hash(seed, a, b, 2 * c + 1));
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

#endif
