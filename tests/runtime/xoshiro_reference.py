#!/usr/bin/env python3
"""Reference outputs for Sampler.RngIsPlatformIndependent (tests/runtime/sampler_test.cpp).

An implementation of the two generators independent of Loom's C++, written from the
algorithms as their authors define them in their reference C code:
  - splitmix64 (Steele, Lea & Flood; Vigna's splitmix64.c): x += 0x9e3779b97f4a7c15, then the
    mix z = (z ^ z>>30) * 0xbf58476d1ce4e5b9; z = (z ^ z>>27) * 0x94d049bb133111eb; z ^ z>>31;
  - xoshiro256** 1.0 (Blackman & Vigna, xoshiro256starstar.c): result = rotl(s1 * 5, 7) * 9,
    then t = s1 << 17; s2 ^= s0; s3 ^= s1; s1 ^= s2; s0 ^= s3; s2 ^= t; s3 = rotl(s3, 45);
    the four state words are the first four splitmix64 outputs from the seed (the seeding the
    authors recommend);
  - a double in [0, 1) from the top 53 bits: (next >> 11) * 2^-53 (the authors' conversion).
Python integers are exact, so these values do not depend on any platform's arithmetic.
Run it to print the constants the test pastes."""
M = (1 << 64) - 1


def rotl(x, k):
    return ((x << k) | (x >> (64 - k))) & M


def splitmix64(seed):
    x = seed & M
    while True:
        x = (x + 0x9E3779B97F4A7C15) & M
        z = x
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
        yield z ^ (z >> 31)


def xoshiro256ss(seed):
    sm = splitmix64(seed)
    s = [next(sm) for _ in range(4)]
    while True:
        result = (rotl((s[1] * 5) & M, 7) * 9) & M
        t = (s[1] << 17) & M
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = rotl(s[3], 45)
        yield result


if __name__ == "__main__":
    sm = splitmix64(0)
    # The published first outputs of splitmix64 from 0: e220a8397b1dcdaf 6e789e6aa1b965f4 ...
    print("splitmix64(0):", " ".join(f"{next(sm):016x}" for _ in range(4)))
    for seed in (0, 12345, M):
        g = xoshiro256ss(seed)
        print(f"xoshiro256** seed {seed}:", ", ".join(f"0x{next(g):016x}ull" for _ in range(6)))
    g = xoshiro256ss(42)
    print("uniform seed 42:", ", ".join(((next(g) >> 11) * 2.0 ** -53).hex() for _ in range(4)))
