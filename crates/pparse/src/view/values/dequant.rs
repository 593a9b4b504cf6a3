//! Dequantizing GGML blocks to `f32`, bit for bit as the `gguf` Python
//! package's `gguf.quants.dequantize` does it (numpy `float32` arithmetic:
//! each product and sum rounded once, in the order written here).
//!
//! Block layouts (all little-endian; `d`, `m`, `dmin` are f16):
//!
//! | type | bytes | layout |
//! |---|---|---|
//! | Q4_0 | 18 | `d`, 16 bytes of nibbles: element `j` is the low nibble of byte `j % 16` for `j < 16`, the high one after; value `d·(q − 8)` |
//! | Q4_1 | 20 | `d`, `m`, nibbles as Q4_0; `d·q + m` |
//! | Q5_0 | 22 | `d`, u32 of fifth bits (bit `j` for element `j`), nibbles as Q4_0; `d·(q − 16)` |
//! | Q5_1 | 24 | `d`, `m`, fifth bits, nibbles; `d·q + m` |
//! | Q8_0 | 34 | `d`, 32 i8; `q·d` |
//! | Q2_K | 84 | 16 scale bytes (low nibble scale, high min), 64 bytes of 2-bit codes, `d`, `dmin`; `(d·sc)·q − dmin·m` per 16 elements |
//! | Q3_K | 110 | 32 bytes of high-bit masks, 64 bytes of 2-bit codes, 12 bytes of 6-bit scales, `d`; `(d·(sc − 32))·(q − 4·(1 − hbit))` |
//! | Q4_K | 144 | `d`, `dmin`, 12 bytes of 6-bit scales and mins, 128 bytes of nibbles; `(d·sc)·q − dmin·m` per 32 elements |
//! | Q5_K | 176 | as Q4_K with 32 bytes of fifth bits before the nibbles |
//! | IQ4_NL | 18 | `d`, nibbles as Q4_0, each an index into 16 fixed levels (−127 … 113); `d·level` |
//! | Q6_K | 210 | 128 bytes of low nibbles, 64 of high 2 bits, 16 i8 scales, `d`; `(d·sc)·(q − 32)` per 16 elements |

use super::decode::f16_to_f32;
use crate::offer::ggml::GgmlType;

/// The 16 levels of an IQ4_NL nibble.
const IQ4_NL: [i8; 16] = [
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
];

/// Most elements of one block (the K-quants' 256).
pub(super) const MAX_BLOCK: usize = 256;

/// Whether blocks of `t` can be dequantized.
pub(super) fn supported(t: GgmlType) -> bool {
    matches!(t.0, 2 | 3 | 6 | 7 | 8 | 10..=14 | 20)
}

fn f16(b: &[u8], at: usize) -> f32 {
    f32::from_bits(f16_to_f32(u32::from(u16::from_le_bytes([
        b[at],
        b[at + 1],
    ]))))
}

/// Dequantizes one block `b` of type `t` into `out` (its block's element
/// count of them). False when the type is not supported or `b` is short.
pub(super) fn dequantize(t: GgmlType, b: &[u8], out: &mut [f32; MAX_BLOCK]) -> bool {
    let Some((_, bytes)) = t.block() else {
        return false;
    };
    if !supported(t) || (b.len() as u64) < bytes {
        return false;
    }
    match t.0 {
        2 => {
            let d = f16(b, 0);
            for j in 0..16 {
                let q = b[2 + j];
                out[j] = d * f32::from((q & 0xf) as i8 - 8);
                out[j + 16] = d * f32::from((q >> 4) as i8 - 8);
            }
        }
        3 => {
            let (d, m) = (f16(b, 0), f16(b, 2));
            for j in 0..16 {
                let q = b[4 + j];
                out[j] = d * f32::from(q & 0xf) + m;
                out[j + 16] = d * f32::from(q >> 4) + m;
            }
        }
        6 | 7 => {
            let d = f16(b, 0);
            let (m, at) = if t.0 == 7 {
                (Some(f16(b, 2)), 4)
            } else {
                (None, 2)
            };
            let qh = u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
            let qs = &b[at + 4..at + 20];
            for (j, o) in out.iter_mut().enumerate().take(32) {
                let lo = (qs[j % 16] >> (4 * (j / 16))) & 0xf;
                let q = lo | (((qh >> j) & 1) as u8) << 4;
                *o = match m {
                    Some(m) => d * f32::from(q) + m,
                    None => d * f32::from(q as i8 - 16),
                };
            }
        }
        8 => {
            let d = f16(b, 0);
            for j in 0..32 {
                out[j] = f32::from(b[2 + j] as i8) * d;
            }
        }
        10 => {
            let (sc, qs) = (&b[..16], &b[16..80]);
            let (d, dmin) = (f16(b, 80), f16(b, 82));
            for (e, o) in out.iter_mut().enumerate() {
                let (a, s, k) = (e / 128, (e / 32) % 4, e % 32);
                let q = (qs[a * 32 + k] >> (2 * s)) & 3;
                let scale = sc[e / 16];
                let dl = d * f32::from(scale & 0xf);
                let ml = dmin * f32::from(scale >> 4);
                *o = dl * f32::from(q) - ml;
            }
        }
        11 => {
            let (hmask, qs, sc) = (&b[..32], &b[32..96], &b[96..108]);
            let d = f16(b, 108);
            let mut dl = [0f32; 16];
            for (j, x) in dl.iter_mut().enumerate() {
                let l = (sc[j % 8] >> (4 * (j / 8))) & 0xf;
                let h = (sc[8 + j % 4] >> (2 * (j / 4))) & 3;
                *x = d * f32::from((l | h << 4) as i8 - 32);
            }
            for (e, o) in out.iter_mut().enumerate() {
                let (a, s, k) = (e / 128, (e / 32) % 4, e % 32);
                let lo = ((qs[a * 32 + k] >> (2 * s)) & 3) as i8;
                let hbit = ((hmask[k] >> (e / 32)) & 1) ^ 1;
                *o = dl[e / 16] * f32::from(lo - ((hbit << 2) as i8));
            }
        }
        12 | 13 => {
            let (d, dmin) = (f16(b, 0), f16(b, 2));
            let (scm, rest) = (&b[4..16], &b[16..]);
            let (qh, qs) = if t.0 == 13 {
                (Some(&rest[..32]), &rest[32..160])
            } else {
                (None, &rest[..128])
            };
            let mut dl = [0f32; 8];
            let mut ml = [0f32; 8];
            for j in 0..8 {
                let (sc, m) = if j < 4 {
                    (scm[j] & 63, scm[4 + j] & 63)
                } else {
                    (
                        (scm[8 + j - 4] & 0xf) | ((scm[j - 4] >> 2) & 0x30),
                        (scm[8 + j - 4] >> 4) | ((scm[4 + j - 4] >> 2) & 0x30),
                    )
                };
                dl[j] = d * f32::from(sc);
                ml[j] = dmin * f32::from(m);
            }
            for (e, o) in out.iter_mut().enumerate() {
                let (s, i) = (e / 32, e % 32);
                let mut q = (qs[(s / 2) * 32 + i] >> (4 * (s % 2))) & 0xf;
                if let Some(qh) = qh {
                    q |= ((qh[i] >> s) & 1) << 4;
                }
                *o = dl[s] * f32::from(q) - ml[s];
            }
        }
        14 => {
            let (ql, qh, sc) = (&b[..128], &b[128..192], &b[192..208]);
            let d = f16(b, 208);
            for (e, o) in out.iter_mut().enumerate() {
                let a = e / 128;
                let lo = (ql[a * 64 + e % 64] >> (4 * ((e % 128) / 64))) & 0xf;
                let hi = (qh[a * 32 + e % 32] >> (2 * ((e % 128) / 32))) & 3;
                let q = (lo | hi << 4) as i8 - 32;
                *o = (d * f32::from(sc[e / 16] as i8)) * f32::from(q);
            }
        }
        20 => {
            let d = f16(b, 0);
            for j in 0..16 {
                let q = b[2 + j];
                out[j] = d * f32::from(IQ4_NL[usize::from(q & 0xf)]);
                out[j + 16] = d * f32::from(IQ4_NL[usize::from(q >> 4)]);
            }
        }
        _ => return false,
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn q8_0_and_q4_0() {
        let mut b = vec![0x00, 0x3c]; // d = 1.0
        b.extend((0..32).map(|i| (i as i8 - 16) as u8));
        let mut out = [0f32; MAX_BLOCK];
        assert!(dequantize(GgmlType(8), &b, &mut out));
        assert_eq!(out[0], -16.0);
        assert_eq!(out[31], 15.0);
        let mut b = vec![0x00, 0x40]; // d = 2.0
        b.extend([0x91u8; 16]);
        assert!(dequantize(GgmlType(2), &b, &mut out));
        assert_eq!(out[0], -14.0);
        assert_eq!(out[16], 2.0);
        assert!(!dequantize(GgmlType(2), &b[..10], &mut out));
        assert!(!dequantize(GgmlType(16), &[0; 66], &mut out));
    }
}
